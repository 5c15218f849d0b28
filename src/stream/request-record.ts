// The request's log records: one per decision (transitionRecord) and one at its end (requestEndRecord, the
// article's phase record). Lengths and counts only: prompt and answer text never reach a log.
import { deliveredTokens } from './give-up';
import type { OriginatedResponse } from './originated-response';

/** The article's phase record: where the request stands, on every record. */
function phaseRecord(r: OriginatedResponse): Record<string, unknown> {
  return {
    completion_id: r.tracker.id,
    phase: r.state,
    attempt: r.attempt,
    legs: r.legs,
    replica: r.lastHost ?? null,
    first_delta_sent: r.firstDeltaAt !== null,
    model_revision: r.modelRevision ?? null,
  };
}

export function transitionRecord(r: OriginatedResponse, decision: string, extra: Record<string, unknown>): Record<string, unknown> {
  return { decision, ...phaseRecord(r), ...extra };
}

export function requestEndRecord(r: OriginatedResponse): Record<string, unknown> {
  return {
    event: 'request_end',
    ...phaseRecord(r),
    model: r.tracker.model,
    delivered_output_tokens: deliveredTokens(r),
    delivered_reasoning_chars: r.tracker.reasoning.length,
    delivered_content_chars: r.tracker.content.length,
    recovered_tokens: r.recovered?.totalRecovered ?? 0,
    accounting: r.recovered ? r.countMethod : null,
    // Whose /tokenize counted (null: the estimate), how the prompt was obtained, and why the estimate
    // was used although TOKENIZE_URL is set.
    accounting_dialect: r.recovered?.accounting?.dialect ?? null,
    accounting_prompt: r.recovered ? (r.recovered.accounting?.prompt ?? 'estimate') : null,
    accounting_fallback: r.recovered?.accounting?.fallback ?? null,
    outcome: r.outcome,
    reason: r.reason,
    upstream_status: r.upstreamStatus,
    malformed_events: r.tracker.malformed,
    ttfd_ms: r.firstDeltaAt ? r.firstDeltaAt - r.started : null,
    total_ms: Date.now() - r.started,
  };
}
