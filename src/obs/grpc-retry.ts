// Retries of OTLP/gRPC exports, which @opentelemetry/exporter-trace-otlp-grpc 0.223.1 does not make (see
// tracing-exporter.ts). The OTLP spec (https://opentelemetry.io/docs/specs/otlp/#failures): an export failed
// with CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE or DATA_LOSS may be retried;
// RESOURCE_EXHAUSTED only when the server sends RetryInfo, which this does not read, so it is not. The schedule
// is the one the SDK's own HTTP transport uses (otlp-exporter-base 0.223.1, retrying-transport.js): at most 5
// retries, 1 s growing x1.5 up to 5 s, +-20 % jitter, never past the export's deadline.
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/** gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html) the OTLP spec calls retryable. */
const RETRYABLE_GRPC_CODES = new Set([1, 4, 10, 11, 14, 15]);
const MAX_RETRIES = 5;
const INITIAL_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 5000;
const MULTIPLIER = 1.5;
const JITTER = 0.2;

/**
 * How long to wait before retry `retry` (1, 2, ...) of an export that failed with `error`, or undefined when it
 * is not retried: not a retryable gRPC status, retries used up, or the wait would end past the deadline
 * (`remainingMs` from now). `random` in [0, 1).
 */
export function grpcRetryDelayMs(error: unknown, retry: number, remainingMs: number, random: number): number | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'number' || !RETRYABLE_GRPC_CODES.has(code) || retry > MAX_RETRIES) return undefined;
  const base = Math.min(INITIAL_BACKOFF_MS * MULTIPLIER ** (retry - 1), MAX_BACKOFF_MS);
  const delay = Math.max(0, Math.min(base * (1 + (random * 2 - 1) * JITTER), MAX_BACKOFF_MS));
  return delay < remainingMs ? delay : undefined;
}

/** A SpanExporter that retries its inner gRPC exporter's transient failures (grpcRetryDelayMs). */
export class GrpcRetryingExporter implements SpanExporter {
  private readonly waits = new Set<{ timer: NodeJS.Timeout; settle: () => void }>();
  private stopped = false;

  constructor(
    private readonly inner: SpanExporter,
    private readonly timeoutMs: number,
  ) {}

  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    const deadline = Date.now() + this.timeoutMs;
    const attempt = (retry: number) =>
      this.inner.export(spans, (r) => {
        const delay =
          r.code === ExportResultCode.SUCCESS || this.stopped
            ? undefined
            : grpcRetryDelayMs(r.error, retry, deadline - Date.now(), Math.random());
        if (delay === undefined) return done(r);
        // Shutdown ends the wait: the last result stands (the batch processor is stopping anyway).
        const wait = { timer: setTimeout(() => this.waits.delete(wait) && attempt(retry + 1), delay), settle: () => done(r) };
        this.waits.add(wait);
      });
    attempt(1);
  }

  async forceFlush(): Promise<void> {
    await this.inner.forceFlush?.();
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const w of this.waits) {
      clearTimeout(w.timer);
      w.settle();
    }
    this.waits.clear();
    await this.inner.shutdown();
  }
}
