// The request's log records: one per decision (transitionRecord) and one at its end (requestEndRecord, the
// phase record of docs/background.md, rule 8), built from snapshots the request takes of itself: lengths and
// counts only, prompt and answer text never reach a log. reportRequestEnd() writes the end: metrics and record.
import type { Decision } from '../obs/decisions';
import type { Logger } from '../obs/logger';
import type { Metrics } from '../obs/metrics';
import type { RequestTrace } from '../obs/tracing';
import type { FailureCause, FailureKind } from '../recovery/reasons';
import type { RecoveredTokens } from '../recovery/token-estimate';
import type { StreamTracker } from '../sse/tracker';
import type { CancelCause } from './cancellation';
import { type Ending, type Outcome, outcomeOf, reasonOf } from './ending';
import type { CountMethod } from './request-port';
import type { RequestState } from './request-state';

/** Where the request stands (docs/background.md, rule 8): on every record. */
export interface PhaseSnapshot {
  completionId: string | null;
  state: RequestState;
  cancelled: CancelCause | null;
  attempt: number;
  legs: number;
  replica: string | null;
  firstDeltaSent: boolean;
  modelRevision: string | null;
}

/** What the request_end record says besides the phase. */
export interface EndSnapshot {
  tracker: Pick<StreamTracker, 'model' | 'reasoningChars' | 'contentChars' | 'prefixCapped' | 'malformed'>;
  deliveredOutputTokens: number;
  recovered: RecoveredTokens | null;
  countMethod: CountMethod;
  outcome: Outcome;
  reason: string | undefined;
  /** What each failed attempt and leg died of, in order. */
  causes: readonly string[];
  upstreamStatus: number | null;
  ttfdMs: number | null;
  totalMs: number;
}

function phaseRecord(p: PhaseSnapshot): Record<string, unknown> {
  return {
    completion_id: p.completionId,
    phase: p.state,
    cancelled: p.cancelled,
    attempt: p.attempt,
    legs: p.legs,
    replica: p.replica,
    first_delta_sent: p.firstDeltaSent,
    model_revision: p.modelRevision,
  };
}

/** The phase snapshot of a request, from what it holds. */
export function phaseOf(
  state: RequestState,
  facts: Readonly<RequestFacts>,
  tracker: Pick<StreamTracker, 'id'>,
  sender: { readonly legs: number; readonly lastHost: string | undefined },
  cancelled: CancelCause | undefined,
  modelRevision: string | undefined,
): PhaseSnapshot {
  return {
    completionId: tracker.id,
    state,
    cancelled: cancelled ?? null,
    attempt: facts.attempt,
    legs: sender.legs,
    replica: sender.lastHost ?? null,
    firstDeltaSent: facts.committedAt !== null,
    modelRevision: modelRevision ?? null,
  };
}

export function transitionRecord(p: PhaseSnapshot, decision: Decision, extra: Record<string, unknown>): Record<string, unknown> {
  return { decision, ...phaseRecord(p), ...extra };
}

export function requestEndRecord(p: PhaseSnapshot, e: EndSnapshot): Record<string, unknown> {
  const r = e.recovered;
  return {
    event: 'request_end',
    ...phaseRecord(p),
    model: e.tracker.model,
    delivered_output_tokens: e.deliveredOutputTokens,
    delivered_reasoning_chars: e.tracker.reasoningChars,
    delivered_content_chars: e.tracker.contentChars,
    prefix_capped: e.tracker.prefixCapped,
    recovered_tokens: r?.totalRecovered ?? 0,
    accounting: r ? e.countMethod : null,
    // Whose /tokenize counted (null: the estimate), how the prompt was obtained, and why the estimate
    // was used although TOKENIZE_URL is set.
    accounting_dialect: r?.accounting?.dialect ?? null,
    accounting_prompt: r ? (r.accounting?.prompt ?? 'estimate') : null,
    accounting_fallback: r?.accounting?.fallback ?? null,
    outcome: e.outcome,
    reason: e.reason,
    causes: e.causes,
    upstream_status: e.upstreamStatus,
    malformed_events: e.tracker.malformed,
    ttfd_ms: e.ttfdMs,
    total_ms: e.totalMs,
  };
}

/** What a request records of itself as it goes: its own data (originated-response.ts), read by its records. */
export interface RequestFacts {
  readonly started: number;
  /** Leg 1 attempts sent so far. */
  attempt: number;
  /** When the first delta went out. */
  committedAt: number | null;
  /** The status of the last leg 1 response head. */
  upstreamStatus: number | null;
  /** What each failed attempt and leg died of, in order: a give-up names them all. */
  readonly causes: FailureCause[];
  /** The last continuation leg sent: what it recovers, how that was counted; `unverified`: any leg 2 was the guess. */
  sent: { recovered: RecoveredTokens; method: CountMethod; unverified: boolean } | undefined;
  /** When the failure the recovery in flight answers was seen (ms since the epoch). */
  failedAt: number;
  /** How the previous leg 1 attempt failed before its first token (the brake's `repeat` evidence). */
  previousFailure: FailureKind | undefined;
  /** Leg 1's model revision from its response header (MODEL_REVISION_HEADER). */
  leg1HeaderRevision: string | undefined;
}

export function newFacts(): RequestFacts {
  return {
    started: Date.now(),
    attempt: 0,
    committedAt: null,
    upstreamStatus: null,
    causes: [],
    sent: undefined,
    failedAt: 0,
    previousFailure: undefined,
    leg1HeaderRevision: undefined,
  };
}

/** What the request knows of itself when it ends. */
export interface RequestEnd {
  phase: PhaseSnapshot;
  /** Undefined only through a bug: counted as such, never as a success. */
  ending: Ending | undefined;
  tracker: EndSnapshot['tracker'] & Pick<StreamTracker, 'id' | 'finishReason' | 'lastUsage'>;
  facts: Readonly<RequestFacts>;
  /** The output the client has (token estimate). */
  delivered: number;
}

/** The end of a request, once: its metrics, its request_end record and its span. */
export function reportRequestEnd(m: Metrics, log: Logger, trace: RequestTrace, r: RequestEnd): void {
  const f = r.facts;
  let ending = r.ending;
  if (!ending) {
    log.error({ phase: r.phase.state }, 'request ended without an ending');
    ending = { kind: 'interrupted', reason: 'gateway-internal-error', partialOutput: r.phase.firstDeltaSent };
  }
  const totalMs = Date.now() - f.started;
  const outcome = outcomeOf(ending);
  const reason = reasonOf(ending);
  if (ending.kind === 'interrupted') m.interruptionEvent(ending.reason);
  m.requestEnded({
    legs: r.phase.legs,
    recoveredTokens: f.sent?.recovered.totalRecovered ?? 0,
    retried: f.attempt > 1,
    firstDeltaSent: f.committedAt !== null,
  });
  m.requestOutcome(outcome, f.sent === undefined ? 'none' : f.sent.unverified ? 'unverified' : 'verified', totalMs / 1000);
  const record = requestEndRecord(r.phase, {
    tracker: r.tracker,
    deliveredOutputTokens: r.delivered,
    recovered: f.sent?.recovered ?? null,
    countMethod: f.sent?.method ?? 'estimate',
    outcome,
    reason,
    causes: f.causes,
    upstreamStatus: f.upstreamStatus,
    ttfdMs: f.committedAt === null ? null : f.committedAt - f.started,
    totalMs,
  });
  log.info(record, 'request_end');
  const { attempt, committedAt: firstDeltaAt, started } = f;
  trace.end({ outcome, reason, attempt, legs: r.phase.legs, firstDeltaAt, started, tracker: r.tracker });
}
