// The messages the sidecar sends for every originated response: one per relayed body chunk, and the response
// headers once per request. Encoded by hand, because going through proto-loader means building a message
// object and converting it (fromObject) each time. Wire format (field numbers from envoy.service.ext_proc.v3
// and envoy.config.core.v3, checked against proto-loader's own encoding in test/unit/extproc/encode-body.test.ts):
//   ProcessingResponse.streamed_immediate_response = 11 (length-delimited)
//     StreamedImmediateResponse.body_response = 2 (length-delimited)
//       StreamedBodyResponse.body = 1 (bytes), end_of_stream = 2 (varint bool)
//     StreamedImmediateResponse.headers_response = 1 (length-delimited)
//       HttpHeaders.headers = 1 (HeaderMap: repeated HeaderValue headers = 1 {key = 1, raw_value = 3}),
//       HttpHeaders.end_of_stream = 3 (varint bool)
// Fields are written exactly as protobufjs writes a message built by proto-loader (booleans included even
// when false), so Envoy receives the bytes it received before this shortcut existed.

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

/** Bytes of a length-delimited field with a one-byte tag (every field number here is below 16). */
function lengthDelimited(payloadLength: number): number {
  return 1 + varintLength(payloadLength) + payloadLength;
}

/** streamed_immediate_response.headers_response: `:status` first, then the headers in order. */
export function encodeSirHeaders(headers: ReadonlyArray<readonly [string, Buffer]>, endOfStream: boolean): EncodedResponse {
  const entries = headers.map(([key, value]) => {
    const keyLength = Buffer.byteLength(key, 'latin1');
    const inner = lengthDelimited(keyLength) + lengthDelimited(value.length);
    return { key, keyLength, value, inner };
  });
  let map = 0;
  for (const e of entries) map += lengthDelimited(e.inner);
  const httpHeaders = lengthDelimited(map) + 2;
  const sir = lengthDelimited(httpHeaders);
  const out = Buffer.allocUnsafe(lengthDelimited(sir));
  let at = 0;
  out[at++] = (11 << 3) | 2;
  at = writeVarint(out, at, sir);
  out[at++] = (1 << 3) | 2;
  at = writeVarint(out, at, httpHeaders);
  out[at++] = (1 << 3) | 2;
  at = writeVarint(out, at, map);
  for (const e of entries) {
    out[at++] = (1 << 3) | 2;
    at = writeVarint(out, at, e.inner);
    out[at++] = (1 << 3) | 2;
    at = writeVarint(out, at, e.keyLength);
    at += out.write(e.key, at, 'latin1');
    out[at++] = (3 << 3) | 2;
    at = writeVarint(out, at, e.value.length);
    at += e.value.copy(out, at);
  }
  out[at++] = (3 << 3) | 0;
  out[at++] = endOfStream ? 1 : 0;
  return new EncodedResponse(out);
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
