// The hottest message the sidecar sends: one response body chunk. Encoded by hand, because going through
// proto-loader means building a message object and converting it (fromObject) for every relayed chunk.
// Wire format (field numbers from envoy.service.ext_proc.v3, checked against proto-loader's own encoding
// in test/unit/encode-body.test.ts):
//   ProcessingResponse.streamed_immediate_response = 11 (length-delimited)
//     StreamedImmediateResponse.body_response = 2 (length-delimited)
//       StreamedBodyResponse.body = 1 (bytes), end_of_stream = 2 (varint bool)
// Both fields are always written, as protobufjs does for a message built by proto-loader, so Envoy receives
// exactly the bytes it received before this shortcut existed.

/** A pre-encoded ProcessingResponse: the service's serializer passes it through untouched. */
export class EncodedResponse {
  constructor(readonly bytes: Buffer) {}
}

function varintLength(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

export function encodeSirBody(body: Buffer, endOfStream: boolean): EncodedResponse {
  const sbr = 1 + varintLength(body.length) + body.length + 2;
  const sir = 1 + varintLength(sbr) + sbr;
  const total = 1 + varintLength(sir) + sir;
  const out = Buffer.allocUnsafe(total);
  let at = 0;
  out[at++] = (11 << 3) | 2;
  at = writeVarint(out, at, sir);
  out[at++] = (2 << 3) | 2;
  at = writeVarint(out, at, sbr);
  out[at++] = (1 << 3) | 2;
  at = writeVarint(out, at, body.length);
  at += body.copy(out, at);
  out[at++] = (2 << 3) | 0;
  out[at++] = endOfStream ? 1 : 0;
  return new EncodedResponse(out);
}
