// A TracingConfig as src/config/otel-env.ts builds it from the defaults, for tests and benches that make a
// tracer directly (the sidecar's own is built from its environment).
import type { TracingConfig } from '../../src/obs/tracing';

export function testTracingConfig(tracesUrl: string, over: Partial<TracingConfig> = {}): TracingConfig {
  return {
    protocol: 'http/protobuf',
    tracesUrl,
    serviceName: 'test',
    maxQueueSize: 2048,
    scheduleDelayMs: 50,
    headers: {},
    timeoutMs: 10_000,
    compression: 'none',
    propagators: ['tracecontext', 'baggage'],
    providerName: 'sglang',
    serverAddress: undefined,
    ...over,
  };
}
