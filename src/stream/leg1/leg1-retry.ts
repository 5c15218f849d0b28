// A leg 1 attempt failed before the commit point (nothing of it reached the client): re-run it whole, or give
// up. The planner decides (decidePreCommit: attempts left, the request's first-delta deadline, backoff and
// Retry-After); a re-run waits out its backoff holding no re-prefill slot, then waits for a slot like any
// recovery (it re-prefills the prompt), both within the deadline. The request applies the result.

import type { Decision } from '../../obs/decisions';
import type { JsonObject } from '../../openai/chat';
import { decidePreCommit, parseRetryAfter, retryBackoffMs } from '../../recovery/planner';
import type { PassReason } from '../../recovery/reasons';
import { estimateTokens, promptText } from '../../recovery/token-estimate';
import type { Ending } from '../ending';
import { giveUpBeforeCommit } from '../give-up';
import type { LegFailure } from '../legs/leg-loop';
import type { CancellationView, GiveUpView, Refusal, StepEnv } from '../request-port';

export interface RetryPort extends StepEnv, GiveUpView {
  readonly req: { readonly payload: JsonObject };
  /** FIRST_DELTA_DEADLINE_SECONDS after the request arrived. */
  readonly firstDeltaDue: number;
  readonly cancellation: CancellationView;
  /** A re-prefill slot, waiting at most until `due`; null when granted (the request holds it). */
  admit(promptTokens: number, deliveredTokens: number, due: number): Promise<Refusal>;
  logTransition(decision: Decision, extra: Record<string, unknown>): void;
}

export type RetryStep = { retry: true } | { end: Ending } | { cancelled: true };

export async function retryOrGiveUp(r: RetryPort, out: LegFailure): Promise<RetryStep> {
  r.metrics.legFailure(out.failure, 'prefill');
  const cfg = r.config;
  const attempt = r.attempt;
  const retryAfterMs = parseRetryAfter(out.engineAnswer?.headers['retry-after'], Date.now());
  const d = decidePreCommit({
    failure: out.failure,
    attempt,
    maxAttempts: cfg.maxAttempts,
    remainingMs: r.firstDeltaDue - Date.now(),
    backoffMs: retryBackoffMs(attempt, cfg.retryBackoffMs, cfg.retryBackoffMaxMs),
    retryAfterMs,
    retryAfterMaxMs: cfg.retryAfterMaxMs,
  });
  const giveUp = (reason: PassReason, after?: number): RetryStep => ({ end: giveUpBeforeCommit(r, out, reason, after) });
  if (d.action === 'pass-through') return giveUp(d.reason);
  await r.cancellation.sleep(d.waitMs);
  if (r.cancellation.cancelled) return { cancelled: true };
  const refused = await r.admit(
    estimateTokens(promptText(r.req.payload), cfg.cjkCharsPerToken, cfg.otherCharsPerToken),
    0,
    r.firstDeltaDue,
  );
  if (r.cancellation.cancelled) return { cancelled: true };
  if (refused?.reason === 'deadline') return giveUp('deadline-exceeded');
  if (refused) return giveUp(`recovery-${refused.reason}`, refused.retryAfterMs);
  r.metrics.recovery('retry', 'started');
  const retryAfter = retryAfterMs !== undefined ? { retry_after_ms: retryAfterMs } : {};
  r.logTransition('RETRY', { failure: out.failure, detail: out.detail, backoff_ms: d.waitMs, ...retryAfter });
  return { retry: true };
}
