// The request's log records: one per decision (transitionRecord) and one at its end (requestEndRecord, the
// phase record of docs/background.md, rule 8). Pure functions of snapshots the request takes of itself:
// lengths and counts only, prompt and answer text never reach a log.
import type { Decision } from '../obs/decisions';
import type { RecoveredTokens } from '../recovery/token-estimate';
import type { StreamTracker } from '../sse/tracker';
import type { CancelCause } from './cancellation';
import type { Outcome } from './ending';
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
