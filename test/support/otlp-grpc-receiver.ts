// An OTLP/gRPC traces receiver for the tests: opentelemetry.proto.collector.trace.v1.TraceService/Export served
// by grpc-js from the upstream .proto files (test/support/otlp-proto/), as otlp-receiver.ts does for OTLP/HTTP.
// It can refuse its first calls with given gRPC status codes, to see an exporter retry. Port 0, read back.
import * as http2 from 'node:http2';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { type ReceivedSpan, spansOf } from './otlp-receiver';

const PROTO_ROOT = path.resolve(__dirname, '../../../test/support/otlp-proto');

export interface ReceivedCall {
  at: number;
  metadata: Record<string, unknown>;
  /** The status answered: 0 = OK. */
  code: number;
}

export interface OtlpGrpcReceiver {
  /** http://127.0.0.1:<port> (OTEL_EXPORTER_OTLP_ENDPOINT for protocol grpc). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  readonly calls: ReceivedCall[];
  waitFor(pred: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

export async function startOtlpGrpcReceiver(o: { refuseFirst?: grpc.status[] } = {}): Promise<OtlpGrpcReceiver> {
  const def = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as any;
  const spans: ReceivedSpan[] = [];
  const calls: ReceivedCall[] = [];
  const refusals = [...(o.refuseFirst ?? [])];
  const server = new grpc.Server();
  server.addService(pkg.opentelemetry.proto.collector.trace.v1.TraceService.service, {
    Export(call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) {
      const code = refusals.shift() ?? grpc.status.OK;
      calls.push({ at: Date.now(), metadata: call.metadata.getMap(), code });
      if (code !== grpc.status.OK) return cb({ code, details: 'refused by the test' });
      spans.push(...spansOf(call.request));
      cb(null, {});
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    calls,
    async waitFor(pred, timeoutMs = 15_000) {
      const until = Date.now() + timeoutMs;
      while (!pred(spans)) {
        if (Date.now() > until) throw new Error(`OTLP/gRPC receiver: condition not met after ${timeoutMs} ms (${calls.length} calls)`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return spans;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000).unref();
      }),
  };
}

/** One gRPC request as it crossed the wire: its path, grpc-encoding header and first length-prefixed message. */
export interface RawGrpcMessage {
  path: string;
  encoding: string | undefined;
  /** The message's compressed flag (the first byte of the gRPC frame): 1 when the payload is compressed. */
  compressedFlag: number;
  payload: Buffer;
}

/**
 * A bare HTTP/2 endpoint that answers every gRPC call OK with an empty message, keeping the bytes as sent: what
 * a grpc-js server hides (it decompresses first). For checking a client's compression on the wire.
 */
export async function startRawGrpcSink(): Promise<{ url: string; messages: RawGrpcMessage[]; close(): Promise<void> }> {
  const messages: RawGrpcMessage[] = [];
  const server = http2.createServer();
  server.on('stream', (stream, headers) => {
    const parts: Buffer[] = [];
    stream.on('data', (d: Buffer) => parts.push(d));
    stream.on('end', () => {
      const body = Buffer.concat(parts);
      if (body.length >= 5) {
        const length = body.readUInt32BE(1);
        messages.push({
          path: String(headers[':path']),
          encoding: headers['grpc-encoding'] as string | undefined,
          compressedFlag: body[0],
          payload: body.subarray(5, 5 + length),
        });
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.alloc(5)); // an empty ExportTraceServiceResponse, uncompressed
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    messages,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
