import * as protoLoader from '@grpc/proto-loader';
import path from 'node:path';
import { encodeSirBody } from '../../src/extproc/encode-body';

// The reference encoder: proto-loader's own serializer for the same message.
const def = protoLoader.loadSync('envoy/service/ext_proc/v3/external_processor.proto', {
  includeDirs: [path.resolve(__dirname, '../../../proto')],
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
