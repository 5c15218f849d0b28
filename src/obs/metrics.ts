// The sidecar's Prometheus metrics (prom-client), one registry per Sidecar instance (tests run several in one
// process). The data path only calls the named methods below; the admin server renders registry.metrics().
// Names follow Prometheus conventions: snake_case, `_total` counters, `_seconds` durations.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** What the gauges read at scrape time (RecoveryBudget keeps the live numbers). */
export interface LiveState {
  readonly activeStreams: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'scope' | 'reason'>;
  private readonly legFailures: Counter<'reason' | 'phase'>;
  private readonly recoveries: Counter<'kind' | 'outcome'>;
  private readonly legs: Counter;
  private readonly interruptionEvents: Counter<'reason'>;
  private readonly refusals: Counter<'reason' | 'phase'>;
  private readonly malformed: Counter;
  private readonly overflows: Counter;
  private readonly recoveredTokens: Counter;
  private readonly firstDelta: Histogram;
  private readonly recoveryLatency: Histogram;
  private recoveryLatencySum = 0;

  constructor(live?: () => LiveState, draining?: () => boolean) {
    const registers = [this.registry];
    this.requests = new Counter({
      name: 'gateway_requests_total',
      help: 'Chat requests by scope decision (originated, or passthrough with its reason).',
      labelNames: ['scope', 'reason'],
      registers,
    });
    this.legFailures = new Counter({
      name: 'gateway_interruptions_total',
      help: 'Upstream failures of a leg1 attempt, by failure kind and phase (prefill: before the first delta, decode: after).',
      labelNames: ['reason', 'phase'],
      registers,
    });
    this.recoveries = new Counter({
      name: 'gateway_recoveries_total',
      help: 'Recoveries by kind (retry, continuation) and outcome (started, succeeded, failed).',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    this.legs = new Counter({ name: 'gateway_legs_total', help: 'Upstream legs opened (leg1 attempts and continuation legs).', registers });
    this.interruptionEvents = new Counter({
      name: 'gateway_interruption_events_total',
      help: 'Interruption events sent to clients, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.refusals = new Counter({
      name: 'gateway_recovery_refusals_total',
      help: 'Recoveries not started, by reason (brake-open, queue-timeout, too-costly) and phase (prefill: a retry, decode: a continuation).',
      labelNames: ['reason', 'phase'],
      registers,
    });
    this.malformed = new Counter({ name: 'gateway_malformed_events_total', help: 'Malformed SSE events skipped.', registers });
    this.overflows = new Counter({
      name: 'gateway_hold_limit_total',
      help: 'Held output (tool call, structured output) over MAX_HELD_BYTES, delivered unbuffered.',
      labelNames: ['what'],
      registers,
    });
    this.recoveredTokens = new Counter({
      name: 'gateway_recovered_tokens_total',
      help: 'Delivered tokens carried into continuation legs (the recovered prefix).',
      registers,
    });
    this.firstDelta = new Histogram({
      name: 'gateway_time_to_first_delta_seconds',
      help: 'Request start to the first delta delivered to the client.',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    });
    this.recoveryLatency = new Histogram({
      name: 'gateway_recovery_latency_seconds',
      help: 'Failure detected to the first byte of the continuation leg.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    new Gauge({
      name: 'gateway_active_streams',
      help: 'Originated streams in progress.',
      registers,
      collect() {
        this.set(live?.().activeStreams ?? 0);
      },
    });
    new Gauge({
      name: 'gateway_draining',
      help: '1 while the sidecar drains (shutdown), else 0.',
      registers,
      collect() {
        this.set(draining?.() ? 1 : 0);
      },
    });
  }

  /** Scope decision: 'originated', or 'passthrough:<reason>'. */
  scope(decision: string): void {
    const i = decision.indexOf(':');
    if (i < 0) this.requests.inc({ scope: decision, reason: '' });
    else this.requests.inc({ scope: decision.slice(0, i), reason: decision.slice(i + 1) });
  }

  /** A leg 1 attempt failed (reset, stall, ...), before (prefill) or after (decode) the first delta. */
  legFailure(reason: string, phase: 'prefill' | 'decode'): void {
    this.legFailures.inc({ reason, phase });
  }

  recovery(kind: 'retry' | 'continuation', outcome: 'started' | 'succeeded' | 'failed'): void {
    this.recoveries.inc({ kind, outcome });
  }

  /** The interruption event was sent to a client. */
  interruptionEvent(reason: string): void {
    this.interruptionEvents.inc({ reason });
  }

  recoveryRefused(reason: string, phase: 'prefill' | 'decode'): void {
    this.refusals.inc({ reason, phase });
  }

  malformedEvent(): void {
    this.malformed.inc();
  }

  bufferOverflow(what: 'tool-call' | 'structured-output'): void {
    this.overflows.inc({ what });
  }

  observeFirstDelta(seconds: number): void {
    this.firstDelta.observe(seconds);
  }

  observeRecoveryLatency(seconds: number): void {
    this.recoveryLatency.observe(seconds);
    this.recoveryLatencySum += seconds;
  }

  /** Once per originated request, at its end: legs opened, recovered tokens, and how a retry ended. */
  requestEnded(e: { legs: number; recoveredTokens: number; retried: boolean; firstDeltaSent: boolean }): void {
    if (e.legs > 0) this.legs.inc(e.legs);
    if (e.recoveredTokens > 0) this.recoveredTokens.inc(e.recoveredTokens);
    if (e.retried) this.recoveries.inc({ kind: 'retry', outcome: e.firstDeltaSent ? 'succeeded' : 'failed' });
  }

  /** Sum of gateway_recovery_latency_seconds, synchronously (tests compare it before and after a run). */
  recoveryLatencySumSeconds(): number {
    return this.recoveryLatencySum;
  }

  /** The Prometheus text exposition of this sidecar's registry. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
