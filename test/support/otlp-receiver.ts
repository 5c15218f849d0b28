// An OTLP/HTTP traces receiver for the tests: POST /v1/traces with the protobuf body an OpenTelemetry exporter
// sends (the sidecar's SDK exporter and Envoy's tracer both send application/x-protobuf), decoded with the
// upstream OTLP .proto files (test/support/otlp-proto/, copied from open-telemetry/opentelemetry-proto v1.9.0,
// Apache-2.0), not with the SDK's own code. Port 0: the kernel picks the port, read back after listen().
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import * as protoLoader from '@grpc/proto-loader';

const PROTO_ROOT = path.resolve(__dirname, '../../../test/support/otlp-proto');

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  kind: string;
  statusCode: string;
  attributes: Record<string, AttributeValue>;
  events: { name: string; attributes: Record<string, AttributeValue> }[];
}

type AttributeValue = string | number | boolean | AttributeValue[];

/** One POST the receiver got: when, its headers (lower-case), and what it answered. */
export interface ReceivedPost {
  at: number;
  headers: http.IncomingHttpHeaders;
  status: number;
}

export interface OtlpReceiverOptions {
  /** Answers for the first POSTs, in order (e.g. 429, then 503 with Retry-After): refused, not decoded. */
  refuseFirst?: { status: number; retryAfter?: string }[];
}

export interface OtlpReceiver {
  /** http://127.0.0.1:<port> (the OTEL_EXPORTER_OTLP_ENDPOINT form: the exporter appends /v1/traces). */
  readonly url: string;
  readonly port: number;
  readonly spans: ReceivedSpan[];
  /** POST requests received, decodable or not. */
  readonly posts: number;
  /** Every POST, in arrival order. */
  readonly received: ReceivedPost[];
  /** Waits until `pred` holds for the spans received (polling), or throws after timeoutMs. */
  waitFor(pred: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

type Deserialize = (b: Buffer) => any;

export function exportRequestDecoder(): Deserialize {
  const def = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    includeDirs: [PROTO_ROOT],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const svc = def['opentelemetry.proto.collector.trace.v1.TraceService'] as unknown as Record<string, { requestDeserialize: Deserialize }>;
  return svc.Export.requestDeserialize;
}

function anyValue(v: any): AttributeValue {
  switch (v?.value) {
    case 'array_value':
      return (v.array_value?.values ?? []).map(anyValue);
    case 'string_value':
      return v.string_value;
    case 'bool_value':
      return v.bool_value;
    case 'int_value':
      return Number(v.int_value);
    case 'double_value':
      return v.double_value;
    default:
      return JSON.stringify(v);
  }
}

function attributes(kvs: any[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, anyValue(kv.value)]));
}

/** The spans of one ExportTraceServiceRequest, flattened. */
export function spansOf(req: any): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of req.resource_spans ?? []) {
    const service = String(attributes(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scope_spans ?? [])
      for (const s of ss.spans ?? [])
        out.push({
          service,
          traceId: Buffer.from(s.trace_id).toString('hex'),
          spanId: Buffer.from(s.span_id).toString('hex'),
          parentSpanId: Buffer.from(s.parent_span_id ?? []).toString('hex'),
          name: s.name,
          kind: s.kind,
          statusCode: s.status?.code ?? 'STATUS_CODE_UNSET',
          attributes: attributes(s.attributes),
          events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: attributes(e.attributes) })),
        });
  }
  return out;
}

export async function startOtlpReceiver(o: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  const decode = exportRequestDecoder();
  const spans: ReceivedSpan[] = [];
  const received: ReceivedPost[] = [];
  const refusals = [...(o.refuseFirst ?? [])];
  let posts = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      posts++;
      const refusal = refusals.shift();
      received.push({ at: Date.now(), headers: req.headers, status: refusal?.status ?? 200 });
      if (refusal) {
        res.writeHead(refusal.status, refusal.retryAfter ? { 'retry-after': refusal.retryAfter } : {}).end();
        return;
      }
      try {
        const raw = Buffer.concat(chunks);
        const body = req.headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(raw) : raw;
        const type = String(req.headers['content-type'] ?? '');
        spans.push(...spansOf(type.includes('json') ? JSON.parse(body.toString('utf8')) : decode(body)));
      } catch {
        res.writeHead(400).end();
        return;
      }
      // An empty ExportTraceServiceResponse: zero bytes in protobuf.
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    spans,
    get posts() {
      return posts;
    },
    received,
    async waitFor(pred, timeoutMs = 15_000) {
      const until = Date.now() + timeoutMs;
      while (!pred(spans)) {
        if (Date.now() > until)
          throw new Error(
            `OTLP receiver: condition not met after ${timeoutMs} ms; spans: ${JSON.stringify(spans.map((s) => [s.service, s.name]))}`,
          );
        await new Promise((r) => setTimeout(r, 50));
      }
      return spans;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
