// Pure recovery decisions: given what failed, in which phase, and what the client already has, decide
// whether to re-run the request, continue from the delivered prefix, keep waiting, or end the stream.
// No I/O here, so every branch is unit-tested in microseconds.
//
// The boundary is delivery, not generation: before the first delta reaches the client ("committed" in
// grpc-js retrying-call terms) a failed attempt can be re-run whole and nobody can tell; after it, only a
// continuation from the delivered text, or an explicit interruption event.

export type FailureKind =
  | 'reset' // connection reset / aborted mid-body
  | 'eof' // clean end of body without finish_reason
  | 'error-event' // in-band {"error": ...}
  | 'abort-finish' // finish_reason "abort"
  | 'stall' // no bytes for STALL_IDLE_TIMEOUT_SECONDS while something is recoverable
  | 'stall-limit' // silent for MAX_STALL_SECONDS in total
  | 'first-delta-timeout' // FIRST_DELTA_TIMEOUT_SECONDS elapsed without a delta
  | 'headers-timeout' // no response headers within UPSTREAM_HEADERS_TIMEOUT_SECONDS
  | 'overloaded' // the replica or router answered 503 before any body: nothing was generated
  | 'model-revision-mismatch' // the continuation came from another model revision than leg 1
  | 'connect'; // could not reach the egress listener

export interface PreCommitInput {
  failure: FailureKind;
  attempt: number; // 1-based number of the attempt that failed
  maxAttempts: number;
}

export type PreCommitDecision = { action: 'retry' } | { action: 'pass-through'; reason: string };

export function decidePreCommit(i: PreCommitInput): PreCommitDecision {
  if (i.failure === 'connect') return { action: 'pass-through', reason: 'egress-unreachable' };
  if (i.attempt >= i.maxAttempts) return { action: 'pass-through', reason: 'attempts-exhausted' };
  return { action: 'retry' };
}

export interface PostCommitInput {
  failure: FailureKind;
  /** Which leg failed: 1 = the original answer, 2 = the continuation (there is never a third). */
  leg: 1 | 2;
  toolCallDelivered: boolean;
  recoverableText: boolean; // delivered reasoning or content exists
  continuationConfigured: boolean; // CONTINUATION_MODEL set and the request in scope for continuation
  continuationEnabled: boolean; // CONTINUATION_ENABLED
}

export type PostCommitDecision = { action: 'continue' } | { action: 'interrupt'; reason: string };

export function decidePostCommit(i: PostCommitInput): PostCommitDecision {
  if (i.leg === 2) return { action: 'interrupt', reason: i.failure === 'model-revision-mismatch' ? i.failure : `leg2-${i.failure}` };
  if (i.toolCallDelivered) return { action: 'interrupt', reason: 'tool-call-delivered' };
  if (!i.recoverableText) return { action: 'interrupt', reason: 'nothing-recoverable' };
  if (!i.continuationConfigured) return { action: 'interrupt', reason: 'continuation-unsupported' };
  if (!i.continuationEnabled) return { action: 'interrupt', reason: 'continuation-disabled' };
  return { action: 'continue' };
}

/**
 * The article's "routing based on retry cost": a recovery re-prefills the prompt plus, for a continuation,
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
}

export type SilenceDecision = { action: 'wait' } | { action: 'fail'; failure: FailureKind };

/**
 * Called each time a leg has been silent for one timer period. Mirrors the reference gateway: leg1 idle
 * only counts as a stall when a continuation could follow (text delivered, no tool call); otherwise, and
 * always on leg2, keep waiting. New: never forever, MAX_STALL_SECONDS bounds every wait.
 */
export function decideOnSilence(i: SilenceInput): SilenceDecision {
  if (i.totalStalledMs >= i.maxStallMs) return { action: 'fail', failure: 'stall-limit' };
  if (!i.committed) {
    if (i.firstDeltaTimeoutMs > 0 && i.sinceLegStartMs >= i.firstDeltaTimeoutMs) return { action: 'fail', failure: 'first-delta-timeout' };
    return { action: 'wait' };
  }
  if (i.leg === 1 && i.anyBytes && i.recoverable && i.silentForMs >= i.stallIdleTimeoutMs) return { action: 'fail', failure: 'stall' };
  return { action: 'wait' };
}
