// The OTLP/HTTP traces exporter: spans serialized by the SDK's own ProtobufTraceSerializer
// (@opentelemetry/otlp-transformer, the encoding @opentelemetry/exporter-trace-otlp-proto uses) and POSTed with
// undici, the sidecar's HTTP client. Not that exporter package itself: its transport loads `http` with a dynamic
// import(), which a CommonJS VM without --experimental-vm-modules (jest, where the end-to-end tests run the
// sidecar in-process) rejects, so no span would ever leave. A failed export is dropped (the batch processor goes
// on), never retried without bound. Spec: https://opentelemetry.io/docs/specs/otlp/#otlphttp
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Agent, request } from 'undici';

export class OtlpProtobufExporter implements SpanExporter {
  private readonly agent = new Agent({ connections: 2, keepAliveTimeout: 4000 });
  private readonly pending = new Set<Promise<void>>();
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly headers: Record<string, string>,
    private readonly timeoutMs: number,
  ) {}

  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    if (this.stopped) return done({ code: ExportResultCode.FAILED, error: new Error('exporter shut down') });
    const body = ProtobufTraceSerializer.serializeRequest(spans);
    if (!body) return done({ code: ExportResultCode.FAILED, error: new Error('spans not serializable') });
    const p = this.post(Buffer.from(body)).then(done, (e: unknown) =>
      done({ code: ExportResultCode.FAILED, error: e instanceof Error ? e : new Error(String(e)) }),
    );
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p));
  }

  private async post(body: Buffer): Promise<ExportResult> {
    const res = await request(this.url, {
      method: 'POST',
      dispatcher: this.agent,
      headers: { ...this.headers, 'content-type': 'application/x-protobuf' },
      body,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
    });
    await res.body.dump();
    return res.statusCode >= 200 && res.statusCode < 300
      ? { code: ExportResultCode.SUCCESS }
      : { code: ExportResultCode.FAILED, error: new Error(`OTLP export answered ${res.statusCode}`) };
  }

  async forceFlush(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    await this.forceFlush();
    await this.agent.close();
  }
}
