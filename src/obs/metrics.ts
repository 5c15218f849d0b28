// The sidecar's Prometheus metrics (prom-client), one registry per Sidecar instance (tests run several in one
// process). The data path only calls the named methods below; the admin server renders registry.metrics().
// Names follow Prometheus conventions: snake_case, `_total` counters, `_seconds` durations, and every one of the
// sidecar's own starts with `continuation_gateway_` (test/unit/obs/metrics-series.test.ts checks it). Every labelled
// series with a known label value starts at 0 (./metric-labels.ts). The latency histograms follow the
// OpenTelemetry GenAI server metrics (gen_ai.server.time_to_first_token, gen_ai.server.request.duration:
// https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-metrics/), their names and bucket boundaries.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import {
  CONTINUATION_VERIFICATION,
  type ContinuationVerification,
  INTERRUPTION_REASONS,
  LEG_FAILURE_REASONS,
  PASSTHROUGH_REASONS,
  PHASES,
  REFUSAL_REASONS,
  REQUEST_OUTCOMES,
} from './metric-labels';

/** What the gauges read at scrape time (src/recovery/admission.ts AdmissionAuthority keeps the live numbers). */
export interface LiveState {
  readonly activeStreams: number;
}

export class Metrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'scope' | 'reason'> = new Counter({
    name: 'continuation_gateway_requests_total',
    help: 'Chat requests by scope decision (originated, or passthrough with its reason).',
    labelNames: ['scope', 'reason'],
    registers: [this.registry],
  });
  // `outcome` first: prom-client writes labels in the order inc() is given them, so
  // `outcomes_total{outcome="completed-after-continuation"` still prefixes the line (the README's grep).
  private readonly outcomes: Counter<'outcome' | 'continuation'> = new Counter({
    name: 'continuation_gateway_request_outcomes_total',
    help: "Originated (in-scope) requests ended, by request_end's outcome and whether a continuation leg was sent and checked (continuation: none, verified, unverified = the generic guess): one increment per request_end record.",
    labelNames: ['outcome', 'continuation'],
    registers: [this.registry],
  });
  private readonly legFailures: Counter<'reason' | 'phase'> = new Counter({
    name: 'continuation_gateway_leg_failures_total',
    help: 'Upstream failures of a leg1 attempt, by failure kind and phase (prefill: before the first delta, decode: after).',
    labelNames: ['reason', 'phase'],
    registers: [this.registry],
  });
  private readonly recoveries: Counter<'kind' | 'outcome'> = new Counter({
    name: 'continuation_gateway_recoveries_total',
    help: 'Recoveries by kind (retry, continuation) and outcome (started, succeeded, failed).',
    labelNames: ['kind', 'outcome'],
    registers: [this.registry],
  });
  private readonly unverified: Counter<'outcome'> = new Counter({
    name: 'continuation_gateway_unverified_continuations_total',
    help: 'Continuation legs nothing checks (the generic guess: no family entry, no CHAT_TEMPLATE), by outcome: sent (CONTINUATION_UNVERIFIED=allow) or refused (=refuse, the stream ended with continuation-unverified).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly legs: Counter = new Counter({
    name: 'continuation_gateway_legs_total',
    help: 'Upstream legs opened (leg1 attempts and continuation legs).',
    registers: [this.registry],
  });
  private readonly interruptionEvents: Counter<'reason'> = new Counter({
    name: 'continuation_gateway_interruption_events_total',
    help: 'Interruption events sent to clients, by reason.',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  private readonly refusals: Counter<'reason' | 'phase'> = new Counter({
    name: 'continuation_gateway_recovery_refusals_total',
    help: 'Recoveries not started, by reason (brake-open, queue-timeout, too-costly) and phase (prefill: a retry, decode: a continuation).',
    labelNames: ['reason', 'phase'],
    registers: [this.registry],
  });
  private readonly malformed: Counter = new Counter({
    name: 'continuation_gateway_malformed_events_total',
    help: 'Malformed SSE events skipped.',
    registers: [this.registry],
  });
  private readonly afterFinish: Counter<'after'> = new Counter({
    name: 'continuation_gateway_dropped_after_finish_total',
    help: "Engine events dropped after a leg's finish_reason (after=finish: content, a second finish, an error) or its [DONE] (after=done).",
    labelNames: ['after'],
    registers: [this.registry],
  });
  private readonly commentsDropped: Counter = new Counter({
    name: 'continuation_gateway_engine_comments_dropped_total',
    help: 'Engine keep-alive comments dropped: a leg relays at most one per 5 s.',
    registers: [this.registry],
  });
  private readonly overflows: Counter = new Counter({
    name: 'continuation_gateway_hold_limit_total',
    help: 'Held output (tool call, structured output) over MAX_HELD_BYTES, delivered unbuffered.',
    labelNames: ['what'],
    registers: [this.registry],
  });
  private readonly recoveredTokens: Counter = new Counter({
    name: 'continuation_gateway_recovered_tokens_total',
    help: 'Delivered tokens carried into continuation legs (the recovered prefix).',
    registers: [this.registry],
  });
  private readonly firstToken: Histogram = new Histogram({
    name: 'continuation_gateway_time_to_first_token_seconds',
    help: 'Request start to the first delta delivered to the client (gen_ai.server.time_to_first_token).',
    // GenAI's recommended boundaries for gen_ai.server.time_to_first_token, plus the long prefills' tail.
    buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  private readonly requestDuration: Histogram<'outcome'> = new Histogram({
    name: 'continuation_gateway_request_duration_seconds',
    help: 'Originated request start to its end, by outcome (gen_ai.server.request.duration).',
    labelNames: ['outcome'],
    // GenAI's recommended boundaries for gen_ai.server.request.duration, plus the stall bound's tail.
    buckets: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68, 655.36],
    registers: [this.registry],
  });
  private readonly recoveryLatency: Histogram = new Histogram({
    name: 'continuation_gateway_recovery_latency_seconds',
    help: 'Failure detected to the first byte of the continuation leg.',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  private recoveryLatencySum = 0;
  private readonly continuationPrepare: Histogram<'source'> = new Histogram({
    name: 'continuation_gateway_continuation_prepare_seconds',
    help: "A continuation leg's design before it is sent: the family table's rules, or the served template's renders and verification (the engine's check, a network call, excluded); by source.",
    labelNames: ['source'],
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25],
    registers: [this.registry],
  });
  private readonly continuationCount: Histogram<'method'> = new Histogram({
    name: 'continuation_gateway_continuation_count_seconds',
    help: 'Counting what a continuation recovers (usage, leg 2 budget): in process (tokenizer), via /tokenize, or estimated; by the method that counted.',
    labelNames: ['method'],
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25],
    registers: [this.registry],
  });

  constructor(live?: () => LiveState, draining?: () => boolean) {
    const registers = [this.registry];
    new Gauge({
      name: 'continuation_gateway_build_info',
      help: 'Always 1; the labels say which build runs (version: package.json) on which Node.js.',
      labelNames: ['version', 'node_version'],
      aggregator: 'first', // WORKERS > 1: every worker reports the same build
      registers,
    }).set({ version: packageVersion(), node_version: process.version }, 1);
    // process_* (CPU, memory, open fds, start time) and nodejs_* (event-loop lag, heap, GC) of this process.
    collectDefaultMetrics({ register: this.registry });
    this.initialiseAtZero();
    new Gauge({
      name: 'continuation_gateway_active_streams',
      help: 'Originated streams in progress.',
      registers,
      collect() {
        this.set(live?.().activeStreams ?? 0);
      },
    });
    new Gauge({
      name: 'continuation_gateway_draining',
      help: '1 while the sidecar drains (shutdown), else 0.',
      registers,
      collect() {
        this.set(draining?.() ? 1 : 0);
      },
    });
  }

  private initialiseAtZero(): void {
    this.requests.inc({ scope: 'originated', reason: '' }, 0);
    for (const reason of PASSTHROUGH_REASONS) this.requests.inc({ scope: 'passthrough', reason }, 0);
    for (const outcome of REQUEST_OUTCOMES) {
      for (const continuation of CONTINUATION_VERIFICATION) this.outcomes.inc({ outcome, continuation }, 0);
      this.requestDuration.zero({ outcome });
    }
    for (const reason of LEG_FAILURE_REASONS) for (const phase of PHASES) this.legFailures.inc({ reason, phase }, 0);
    for (const kind of ['retry', 'continuation'] as const)
      for (const outcome of ['started', 'succeeded', 'failed'] as const) this.recoveries.inc({ kind, outcome }, 0);
    for (const outcome of ['sent', 'refused'] as const) this.unverified.inc({ outcome }, 0);
    for (const reason of INTERRUPTION_REASONS) this.interruptionEvents.inc({ reason }, 0);
    for (const reason of REFUSAL_REASONS) for (const phase of PHASES) this.refusals.inc({ reason, phase }, 0);
    for (const what of ['tool-call', 'structured-output']) this.overflows.inc({ what }, 0);
    for (const after of ['finish', 'done']) this.afterFinish.inc({ after }, 0);
    this.commentsDropped.inc(0);
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

  /** A continuation leg nothing checks (the generic guess) was sent, or refused by CONTINUATION_UNVERIFIED=refuse. */
  unverifiedContinuation(outcome: 'sent' | 'refused'): void {
    this.unverified.inc({ outcome });
  }

  /** The interruption event was sent to a client. */
  interruptionEvent(reason: string): void {
    this.interruptionEvents.inc({ reason });
  }

  recoveryRefused(reason: string, phase: 'prefill' | 'decode'): void {
    this.refusals.inc({ reason, phase });
  }

  /** `n` malformed events (the parser's skipped empty `data:` events come counted at the leg's end). */
  malformedEvent(n = 1): void {
    if (n > 0) this.malformed.inc(n);
  }

  /** An engine event after the leg's finish_reason or [DONE], dropped (src/sse/finish-gate.ts). */
  droppedAfterFinish(after: 'finish' | 'done'): void {
    this.afterFinish.inc({ after });
  }

  /** Engine comments dropped (coalesced keep-alives, src/sse/keep-alives.ts). */
  engineCommentsDropped(n: number): void {
    if (n > 0) this.commentsDropped.inc(n);
  }

  bufferOverflow(what: 'tool-call' | 'structured-output'): void {
    this.overflows.inc({ what });
  }

  observeFirstDelta(seconds: number): void {
    this.firstToken.observe(seconds);
  }

  /** One request_end record was written (src/stream/request-record.ts): its outcome and duration. */
  requestOutcome(outcome: string, continuation: ContinuationVerification, seconds: number): void {
    this.outcomes.inc({ outcome, continuation });
    this.requestDuration.observe({ outcome }, seconds);
  }

  /** The design of one continuation leg (src/continuation/template/leg2-prepare.ts): table, template or generic. */
  observeContinuationPrepare(source: 'table' | 'template' | 'generic', seconds: number): void {
    this.continuationPrepare.observe({ source }, seconds);
  }

  /** Counting one continuation (src/continuation/template/leg2-prepare.ts), by the method that counted. */
  observeContinuationCount(method: string, seconds: number): void {
    this.continuationCount.observe({ method }, seconds);
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

  /** Sum of continuation_gateway_recovery_latency_seconds, synchronously (tests compare it before and after a run). */
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

/** The version in package.json (the one place it is stated), read once; 'unknown' if it cannot be read. */
let version: string | undefined;
function packageVersion(): string {
  if (version === undefined) {
    try {
      // dist/src/obs/metrics.js and src/obs/metrics.ts both sit three levels below the package root.
      version = String(JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8')).version);
    } catch {
      version = 'unknown';
    }
  }
  return version;
}
