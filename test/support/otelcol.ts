// A real OpenTelemetry Collector for the trace tests: the binary scripts/build-otelcol.sh builds from the
// Collector's Go modules (OTLP receiver + debug exporter), its OTLP/HTTP and OTLP/gRPC receivers started on
// 127.0.0.1:0 (it logs the ports it bound),
// its debug exporter's detailed text parsed back into spans (the same shape as otlp-receiver.ts's). What the
// Collector prints is what it decoded from the exporters' protobuf: a span the Collector rejects never shows.
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { provisionGoTool } from './go-tool';
import type { ReceivedSpan } from './otlp-receiver';

/** scripts/build-otelcol.sh: the cached binary, or why there is none (exit 3: no Go, no module proxy). */
export function provisionCollector(root: string): { bin?: string; skip?: string } {
  return provisionGoTool(root, 'build-otelcol.sh', 1_200_000);
}

export interface Collector {
  /** http://127.0.0.1:<port>, the OTLP/HTTP receiver. */
  readonly url: string;
  readonly port: number;
  /** http://127.0.0.1:<port>, the OTLP/gRPC receiver. */
  readonly grpcUrl: string;
  /** Every span the debug exporter printed so far. */
  spans(): ReceivedSpan[];
  waitFor(pred: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  stop(): Promise<void>;
}

const CONFIG = `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
      grpc:
        endpoint: 127.0.0.1:0
exporters:
  debug:
    verbosity: detailed
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
  telemetry:
    metrics:
      level: none
`;

const KIND: Record<string, string> = { Client: 'SPAN_KIND_CLIENT', Server: 'SPAN_KIND_SERVER', Internal: 'SPAN_KIND_INTERNAL' };
const STATUS: Record<string, string> = { Ok: 'STATUS_CODE_OK', Error: 'STATUS_CODE_ERROR', Unset: 'STATUS_CODE_UNSET' };

function value(typed: string): ReceivedSpan['attributes'][string] {
  const m = /^(Str|Int|Double|Bool|Slice)\((.*)\)$/.exec(typed);
  if (!m) return typed;
  if (m[1] === 'Slice') return JSON.parse(m[2]);
  if (m[1] === 'Str') return m[2];
  if (m[1] === 'Bool') return m[2] === 'true';
  return Number(m[2]);
}

/** The debug exporter's `verbosity: detailed` text -> spans. */
export function parseDebugSpans(text: string): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  let service = '';
  let span: ReceivedSpan | null = null;
  let section: 'resource' | 'attributes' | 'event' | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/^\S+\tinfo\t/, ''); // the first line of a block carries the log prefix
    let m: RegExpExecArray | null;
    if (line.startsWith('Resource attributes:')) section = 'resource';
    else if ((m = /^Span #\d+/.exec(line))) {
      span = { service, traceId: '', spanId: '', parentSpanId: '', name: '', kind: '', statusCode: '', attributes: {}, events: [] };
      spans.push(span);
      section = null;
    } else if (span && (m = /^ {4}(Trace ID|Parent ID|ID|Name|Kind|Status code) +: ?(.*)$/.exec(line))) {
      const v = m[2].trim();
      if (m[1] === 'Trace ID') span.traceId = v;
      else if (m[1] === 'Parent ID') span.parentSpanId = v;
      else if (m[1] === 'ID') span.spanId = v;
      else if (m[1] === 'Name') span.name = v;
      else if (m[1] === 'Kind') span.kind = KIND[v] ?? v;
      else span.statusCode = STATUS[v] ?? v;
    } else if (line === 'Attributes:') section = 'attributes';
    else if (/^SpanEvent #\d+/.test(line)) {
      span?.events.push({ name: '', attributes: {} });
      section = 'event';
    } else if ((m = /^ {5}-> ([^:]+): (.*)$/.exec(line))) {
      if (section === 'resource' && m[1] === 'service.name') service = String(value(m[2]));
      else if (section === 'attributes' && span) span.attributes[m[1]] = value(m[2]);
      else if (section === 'event' && span && m[1] === 'Name') span.events[span.events.length - 1].name = m[2];
    } else if ((m = /^ {10}-> ([^:]+): (.*)$/.exec(line)) && section === 'event' && span)
      span.events[span.events.length - 1].attributes[m[1]] = value(m[2]);
    else if (/^ResourceSpans #\d+/.test(line)) {
      span = null;
      service = '';
      section = null;
    }
  }
  return spans;
}

export async function startCollector(bin: string): Promise<Collector> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otelcol-'));
  fs.writeFileSync(path.join(dir, 'config.yaml'), CONFIG);
  const child: ChildProcess = spawn(bin, ['--config', path.join(dir, 'config.yaml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const until = Date.now() + 30_000;
  let port = 0;
  let grpcPort = 0;
  while (!port || !grpcPort) {
    const m = /Starting HTTP server.*"endpoint": "127\.0\.0\.1:(\d+)"/.exec(out);
    const g = /Starting GRPC server.*"endpoint": "127\.0\.0\.1:(\d+)"/.exec(out);
    if (m && g) {
      port = Number(m[1]);
      grpcPort = Number(g[1]);
    } else if (child.exitCode !== null || Date.now() > until) {
      await stop();
      throw new Error(`the Collector did not start:\n${out.slice(-3000)}`);
    } else await new Promise((r) => setTimeout(r, 50));
  }
  const spans = () => parseDebugSpans(out);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    grpcUrl: `http://127.0.0.1:${grpcPort}`,
    spans,
    async waitFor(pred, timeoutMs = 20_000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const s = spans();
        if (pred(s)) return s;
        if (Date.now() > end)
          throw new Error(
            `Collector: condition not met after ${timeoutMs} ms; spans: ${JSON.stringify(s.map((x) => [x.service, x.name]))}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop,
  };
}
