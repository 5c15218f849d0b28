// The span exporter for OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: OpenTelemetry's own OTLP exporters, configured
// from the values src/config/otel-env.ts validated (passed explicitly: the exporters would otherwise read the
// same variables again, without telling a bad value apart).
//
// http/protobuf: @opentelemetry/exporter-trace-otlp-proto. Its transport retries an export answered 429, 502,
// 503 or 504, or cut by a network error, with exponential backoff and jitter (5 retries, 1 s x 1.5 up to 5 s,
// +-20 %), honouring Retry-After, all within the export's timeout: node_modules/@opentelemetry/
// otlp-exporter-base/build/src/retrying-transport.js and is-export-retryable.js, version 0.223.1.
//
// grpc: @opentelemetry/exporter-trace-otlp-grpc. Its transport (otlp-grpc-exporter-base 0.223.1,
// grpc-exporter-transport.js; 0.301.2 alike) answers every gRPC error as a final failure, so nothing would be
// retried; the OTLP spec says transient errors MUST be (grpc-retry.ts adds it, with the same schedule).
import { Metadata } from '@grpc/grpc-js';
import { OTLPTraceExporter as GrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { GrpcRetryingExporter } from './grpc-retry';
import type { TracingConfig } from './tracing';

type Compression = NonNullable<ConstructorParameters<typeof ProtoTraceExporter>[0]>['compression'];

export function createSpanExporter(cfg: TracingConfig): SpanExporter {
  const compression = cfg.compression as Compression;
  if (cfg.protocol === 'http/protobuf')
    return new ProtoTraceExporter({ url: cfg.tracesUrl, headers: cfg.headers, timeoutMillis: cfg.timeoutMs, compression });
  const metadata = new Metadata();
  for (const [k, v] of Object.entries(cfg.headers)) metadata.set(k, v);
  const grpc = new GrpcTraceExporter({ url: cfg.tracesUrl, metadata, timeoutMillis: cfg.timeoutMs, compression });
  return new GrpcRetryingExporter(grpc, cfg.timeoutMs);
}
