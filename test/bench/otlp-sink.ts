// `npm run bench -- --otel`: where the sidecar's OTLP/HTTP exports go. Counts requests and bytes, answers 200
// with an empty ExportTraceServiceResponse, decodes nothing (the spans' content is the e2e test's business:
// test/e2e/tracing.e2e.test.ts). Runs in the bench process, whose CPU is not the sidecar's.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpSink {
  readonly url: string;
  readonly posts: number;
  readonly bytes: number;
  close(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  let posts = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => {
      bytes += c.length;
    });
    req.on('end', () => {
      posts++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get posts() {
      return posts;
    },
    get bytes() {
      return bytes;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
