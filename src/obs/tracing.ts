// OpenTelemetry traces, off unless an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, read by src/config/otel-env.ts; OTEL_TRACES_EXPORTER=none and
// OTEL_SDK_DISABLED=true turn it off whatever the endpoint). Off, nothing of the SDK is loaded: every request
// gets the shared no-op trace below, and each hook costs one call that does nothing. On, tracing-sdk.ts (loaded
// with require() only then) builds one request span per client request, joined to the client's traceparent, with
// a child span per leg whose context goes out as the leg's own traceparent (the engine's spans join it).
//
// The hooks carry names, counts, statuses and failure kinds only: never prompt or answer text, headers or
// addresses beyond the replica name the request records already log (src/stream/request-record.ts).

/** What the request span reads at its end (OriginatedResponse satisfies it). */
export interface RequestEndView {
  readonly outcome: string;
  readonly reason: string | undefined;
  readonly attempt: number;
  readonly legs: number;
  readonly firstDeltaAt: number | null;
  readonly started: number;
  /**
   * The stream as the client got it (src/sse/tracker.ts): its id and model, the last finish_reason, and the
   * last usage it carried (after a continuation, the corrected one: what an uninterrupted run reports).
   */
  readonly tracker: {
    readonly id: string | null;
    readonly model: string | null;
    readonly finishReason: string | null;
    readonly lastUsage: Readonly<Record<string, unknown>> | null;
  };
}

export interface LegStart {
  /** Legs sent so far by the request, this one included. */
  readonly sent: number;
  readonly attempt: number;
  readonly continuation: boolean;
}

/** One client request's trace; the core calls these hooks, in this order, for each leg it sends. */
export interface RequestTrace {
  /** A leg is being sent: its span starts. Returns the trace headers the leg carries (undefined: the client's). */
  legStarted(leg: LegStart): Record<string, string> | undefined;
  /** The leg's response head arrived (its status, and the replica Envoy's egress named), or it could not open. */
  legAnswered(status: number, replica: string | undefined): void;
  legFailedToOpen(kind: string): void;
  /** The leg's first token (the first delta or finish of leg 1, a continuation leg's first delta). */
  legFirstToken(): void;
  /** How the leg's read ended: `finished`, `failed` (with the failure kind), `responded`, `gone`. */
  legEnded(type: string, failure?: string): void;
  /** A decision the request logs (logTransition: ATTEMPT, RETRY, FIRST_DELTA = the commit point, TRIGGERED, ...). */
  decision(name: string, extra: Record<string, unknown>): void;
  /** The request ended (request_end): ends the leg still open and the request span. */
  end(r: RequestEndView): void;
}

export interface Tracing {
  readonly enabled: boolean;
  /** `model`: the client's `model` field (a name, no text of the request). */
  request(clientHeaders: Record<string, string>, model: string | undefined, maxTokens: unknown): RequestTrace;
  /** Exports what is queued (bounded by timeoutMs), then stops. */
  shutdown(): Promise<void>;
}

/** The context propagators OTEL_PROPAGATORS may name (`none` = an empty list). */
export type Propagator = 'tracecontext' | 'baggage' | 'b3' | 'b3multi';

/** server.address / server.port as the spans give them (from configuration: src/config/otel-env.ts). */
export interface ServerAddress {
  readonly address: string;
  readonly port?: number;
}

export interface TracingConfig {
  /** OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: the official exporter for it (tracing-exporter.ts). */
  readonly protocol: 'http/protobuf' | 'grpc';
  /** Where spans go: the OTLP/HTTP traces URL (…/v1/traces), or the gRPC endpoint (http://host:4317). */
  readonly tracesUrl: string;
  readonly serviceName: string;
  /** BatchSpanProcessor's queue bound: spans beyond it are dropped, never buffered without limit. */
  readonly maxQueueSize: number;
  /** BatchSpanProcessor's delay between two exports (OTEL_BSP_SCHEDULE_DELAY). */
  readonly scheduleDelayMs: number;
  /** OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, sent with every export (an API key: never logged). */
  readonly headers: Record<string, string>;
  /** OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT: one export's deadline, its retries included. */
  readonly timeoutMs: number;
  readonly compression: 'gzip' | 'none';
  /** OTEL_PROPAGATORS: how the client's context is read and each leg's written (empty: neither). */
  readonly propagators: readonly Propagator[];
  /** gen_ai.provider.name: the engine CONTINUATION_ENGINE names. */
  readonly providerName: string;
  /** server.address / server.port; undefined = left out. */
  readonly serverAddress: ServerAddress | undefined;
}

const NO_REQUEST_TRACE: RequestTrace = {
  legStarted: () => undefined,
  legAnswered: () => undefined,
  legFailedToOpen: () => undefined,
  legFirstToken: () => undefined,
  legEnded: () => undefined,
  decision: () => undefined,
  end: () => undefined,
};

export const NO_TRACING: Tracing = {
  enabled: false,
  request: () => NO_REQUEST_TRACE,
  shutdown: async () => undefined,
};

/** The tracing of this process: the no-op one unless `cfg` (an OTLP endpoint) is set. */
export function createTracing(cfg: TracingConfig | undefined): Tracing {
  if (!cfg) return NO_TRACING;
  // Loaded here only: with tracing off, no @opentelemetry module is ever required (test/unit/obs/tracing.test.ts).
  const { SdkTracing } = require('./tracing-sdk') as typeof import('./tracing-sdk');
  return new SdkTracing(cfg);
}
