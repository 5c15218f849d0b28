import path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { encodeSirBody, encodeSirHeaders } from '../../../src/extproc/encode-body';

// The reference encoder: proto-loader's own serializer for the same message.
const def = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
  includeDirs: [path.resolve(__dirname, '../../../../proto')],
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});
const service = def['envoy.service.ext_proc.v3.ExternalProcessor'] as any;
const serialize = service.Process.responseSerialize as (v: unknown) => Buffer;
const deserialize = service.Process.responseDeserialize as (b: Buffer) => any;

describe('encodeSirBody', () => {
  it.each([0, 1, 127, 128, 300, 16383, 16384, 70000, 2_100_000])('matches proto-loader byte for byte for a %i-byte body', (n) => {
    const body = Buffer.alloc(n, 0x61);
    for (const eos of [false, true]) {
      const ours = encodeSirBody(body, eos).bytes;
      const theirs = serialize({ streamed_immediate_response: { body_response: { body, end_of_stream: eos } } });
      expect(ours.equals(theirs)).toBe(true);
      const back = deserialize(ours);
      expect(back.streamed_immediate_response.body_response.end_of_stream).toBe(eos);
      expect(Buffer.from(back.streamed_immediate_response.body_response.body).length).toBe(n);
    }
  });
});

describe('encodeSirHeaders', () => {
  const cases: Array<Array<[string, string]>> = [
    [[':status', '200']],
    [
      [':status', '200'],
      ['content-type', 'text/event-stream'],
      ['x-request-id', 'abc-123'],
    ],
    [
      [':status', '503'],
      ['x-long', 'v'.repeat(300)],
      ['x-latin1', 'caf\u00e9'],
    ],
    [[':status', '200'], ...Array.from({ length: 40 }, (_, i): [string, string] => [`x-h${i}`, 'y'.repeat(i * 7)])],
  ];
  it.each(cases.map((c, i) => [i, c] as const))('matches proto-loader byte for byte (case %i)', (_i, headers) => {
    for (const eos of [false, true]) {
      const list = headers.map(([k, v]): [string, Buffer] => [k, Buffer.from(v, 'latin1')]);
      const ours = encodeSirHeaders(list, eos).bytes;
      const theirs = serialize({
        streamed_immediate_response: {
          headers_response: { headers: { headers: list.map(([key, raw_value]) => ({ key, raw_value })) }, end_of_stream: eos },
        },
      });
      expect(ours.equals(theirs)).toBe(true);
      const back = deserialize(ours).streamed_immediate_response.headers_response;
      expect(back.end_of_stream).toBe(eos);
      expect(back.headers.headers.map((h: any) => [h.key, Buffer.from(h.raw_value).toString('latin1')])).toEqual(headers);
    }
  });
});
