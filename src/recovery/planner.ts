// Pure recovery decisions: given what failed, in which phase, and what the client already has, decide
// whether to re-run the request, continue from the delivered prefix, keep waiting, or end the stream.
// No I/O here, so every branch is unit-tested in microseconds.
//
// The boundary is delivery, not generation: before the first delta reaches the client ("committed" in
// grpc-js retrying-call terms) a failed attempt can be re-run whole and nobody can tell; after it, only a
// continuation from the delivered text, or an explicit interruption event.

import type { FailureKind, InterruptReason, PassReason } from './reasons';

export type { FailureKind };

export interface PreCommitInput {
  failure: FailureKind;
  attempt: number; // 1-based number of the attempt that failed
  maxAttempts: number;
  /** Time left before the request's first-delta deadline (FIRST_DELTA_DEADLINE_SECONDS), ms. */
  remainingMs: number;
  /** The backoff before the next attempt (retryBackoffMs). */
  backoffMs: number;
  /** The engine's Retry-After on the failed attempt, ms (parseRetryAfter), if it sent one. */
  retryAfterMs?: number;
  /** RETRY_AFTER_MAX_SECONDS, ms: the longest Retry-After the gateway waits out itself. */
  retryAfterMaxMs: number;
}

export type PreCommitDecision = { action: 'retry'; waitMs: number } | { action: 'pass-through'; reason: PassReason };

/**
 * Before the first delta nothing reached the client, so a failed attempt may be re-run: after a backoff, or
 * after the engine's Retry-After when it names one no longer than RETRY_AFTER_MAX_SECONDS (a longer one is
 * the engine's answer to the client, passed on unchanged), and only while the re-run can still start before
 * the request's deadline: the client gets its answer or an explicit error within that one deadline, however
 * many attempts MAX_ATTEMPTS allows.
 */
export function decidePreCommit(i: PreCommitInput): PreCommitDecision {
  if (i.failure === 'connect') return { action: 'pass-through', reason: 'egress-unreachable' };
  if (i.failure === 'first-delta-deadline') return { action: 'pass-through', reason: 'deadline-exceeded' };
  if (i.attempt >= i.maxAttempts) return { action: 'pass-through', reason: 'attempts-exhausted' };
  if (i.retryAfterMs !== undefined && i.retryAfterMs > i.retryAfterMaxMs) return { action: 'pass-through', reason: 'retry-after-too-long' };
  const waitMs = Math.max(i.backoffMs, i.retryAfterMs ?? 0);
  if (waitMs >= i.remainingMs) return { action: 'pass-through', reason: 'deadline-exceeded' };
  return { action: 'retry', waitMs };
}

/**
 * The wait before re-running attempt `failedAttempt` + 1: exponential (base x 2^(n-1), at most `maxMs`) with
 * "equal jitter" (a uniform draw over the upper half), so that requests failed by the same event do not
 * come back together, and every re-run waits at least half its step.
 */
export function retryBackoffMs(failedAttempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const step = Math.min(maxMs, baseMs * 2 ** Math.max(0, failedAttempt - 1));
  return Math.round(step / 2 + random() * (step / 2));
}

/** An HTTP Retry-After (delay-seconds or an HTTP-date, RFC 9110 section 10.2.3) in ms from `now`; undefined if absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  // An HTTP-date names its day and month ("Tue, 01 Dec 2026 12:00:05 GMT"); Date.parse would also read "-3".
  const at = /^[A-Za-z]{3},? /.test(v) ? Date.parse(v) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export interface PostCommitInput {
  failure: FailureKind;
  /** Which leg failed: 1 = the original answer, 2 = a continuation leg (MAX_CONTINUATIONS of them at most). */
  leg: 1 | 2;
  toolCallDelivered: boolean;
  recoverableText: boolean; // delivered reasoning or content exists
  continuationConfigured: boolean; // CONTINUATION_MODEL set and the request in scope for continuation
  continuationEnabled: boolean; // CONTINUATION_ENABLED
  /**
   * The delivered text outgrew MAX_CONTINUATION_PREFIX_BYTES (StreamTracker.prefixCapped): the gateway kept only
   * part of it, so no continuation can start from it. For leg 2: set only where another leg would follow.
   */
  prefixTooLarge?: boolean;
}

export type PostCommitDecision = { action: 'continue' } | { action: 'interrupt'; reason: InterruptReason };

/** The interruption reason of a stream whose delivered text outgrew MAX_CONTINUATION_PREFIX_BYTES. */
export const PREFIX_TOO_LARGE = 'continuation-prefix-too-large';

export function decidePostCommit(i: PostCommitInput): PostCommitDecision {
  if (i.leg === 2) {
    if (i.prefixTooLarge) return { action: 'interrupt', reason: PREFIX_TOO_LARGE };
    return { action: 'interrupt', reason: i.failure === 'model-revision-mismatch' ? i.failure : `leg2-${i.failure}` };
  }
  if (i.toolCallDelivered) return { action: 'interrupt', reason: 'tool-call-delivered' };
  if (!i.recoverableText) return { action: 'interrupt', reason: 'nothing-recoverable' };
  if (!i.continuationConfigured) return { action: 'interrupt', reason: 'continuation-unsupported' };
  if (!i.continuationEnabled) return { action: 'interrupt', reason: 'continuation-disabled' };
  // Checked last: a stream that could not be continued anyway keeps its reason.
  if (i.prefixTooLarge) return { action: 'interrupt', reason: PREFIX_TOO_LARGE };
  return { action: 'continue' };
}

/**
 * The cost of a retry (docs/background.md, rule 7): a recovery re-prefills the prompt plus, for a continuation,
 * the delivered text. Past MAX_RECOVERY_PROMPT_TOKENS (0 = no limit) it is not started: the stream ends
 * explicitly at once instead of putting a huge prefill on replicas that are already absorbing a crash.
 */
export function reprefillTooCostly(promptTokens: number, deliveredTokens: number, maxRecoveryPromptTokens: number): boolean {
  return maxRecoveryPromptTokens > 0 && promptTokens + deliveredTokens > maxRecoveryPromptTokens;
}

export interface SilenceInput {
  committed: boolean;
  anyBytes: boolean; // this leg sent at least one byte
  leg: 1 | 2;
  recoverable: boolean; // committed text without a tool call
  silentForMs: number; // since the last byte (or since the leg started)
  totalStalledMs: number; // accumulated silence on this leg
  stallIdleTimeoutMs: number;
  maxStallMs: number;
  firstDeltaTimeoutMs: number; // 0 = disabled
  sinceLegStartMs: number;
  /** Before the first delta: ms left before the request's deadline (FIRST_DELTA_DEADLINE_SECONDS); absent = none. */
  untilDeadlineMs?: number | null;
  /** CONTINUATION_ENABLED=false: a stall is detected and reported, and the leg relayed on. */
  dryRun?: boolean;
}

/** `skip`: a failure a continuation would follow, which the dry run only reports; the leg is waited on. */
export type SilenceDecision = { action: 'wait' } | { action: 'fail'; failure: FailureKind } | { action: 'skip'; failure: 'stall' };

/**
 * Called each time a leg has been silent for one timer period. Mirrors the reference gateway: leg1 idle
 * only counts as a stall when a continuation could follow (text delivered, no tool call); otherwise keep
 * waiting. Unlike the reference: a continuation leg silent after its first bytes is a stall too, and
 * MAX_STALL_SECONDS bounds every wait. The dry run never changes a stream: its leg 1 stall is a `skip`
 * (logged), and leg 1 is relayed for as long as it lives.
 */
export function decideOnSilence(i: SilenceInput): SilenceDecision {
  if (i.totalStalledMs >= i.maxStallMs) return { action: 'fail', failure: 'stall-limit' };
  if (!i.committed) {
    if (i.untilDeadlineMs != null && i.untilDeadlineMs <= 0) return { action: 'fail', failure: 'first-delta-deadline' };
    if (i.firstDeltaTimeoutMs > 0 && i.sinceLegStartMs >= i.firstDeltaTimeoutMs) return { action: 'fail', failure: 'first-delta-timeout' };
    return { action: 'wait' };
  }
  if (i.leg === 1 && i.anyBytes && i.recoverable && i.silentForMs >= i.stallIdleTimeoutMs)
    return i.dryRun ? { action: 'skip', failure: 'stall' } : { action: 'fail', failure: 'stall' };
  // A continuation leg that has started answering and goes silent is stalled too, by the same timer: the client
  // sits in a frozen answer otherwise (before its first byte it is still re-prefilling: wait, up to the max).
  if (i.leg === 2 && i.anyBytes && i.silentForMs >= i.stallIdleTimeoutMs) return { action: 'fail', failure: 'stall' };
  return { action: 'wait' };
}

/** What leg 1's latest output tells the commit point, before it (src/stream/leg1/leg1-relay.ts). */
export interface HoldInput {
  /** BUFFER_STRUCTURED_OUTPUT: a json_* answer is held whole until its finish. */
  structured: boolean;
  /** The output so far holds a delta (or usage). */
  delta: boolean;
  /** ... a finish_reason or [DONE]. */
  complete: boolean;
  /** ... more bytes than a request may hold (MAX_HELD_BYTES). */
  overflow: boolean;
}

/** Whether leg 1's output is still held back: false at the commit point (the first delta; held structured output's finish). */
export function holdsUntilCommit(s: HoldInput): boolean {
  return s.structured ? !(s.complete || s.overflow) : !(s.delta || s.complete);
}
