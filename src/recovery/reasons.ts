// Every reason a client can read, in one place: the interruption event's `reason`, the `reason` of the
// gateway's own HTTP errors, and usage.continuation.fallback. Each is a closed set of stable codes (README,
// "The interruption contract"); what is not a code (an exception's text, Envoy's %RESPONSE_FLAGS%, an
// address) goes to the log records only.
import type { RefusalReason } from './admission';

/** How a leg failed (src/recovery/planner.ts decides what follows; src/stream/legs/leg-loop.ts detects it). */
export type FailureKind =
  | 'reset' // connection reset / aborted mid-body
  | 'eof' // clean end of body without finish_reason
  | 'error-event' // in-band {"error": ...}
  | 'abort-finish' // finish_reason "abort"
  | 'malformed-finish' // a finish_reason that is none of the engines' strings (src/sse/finish-reason.ts)
  | 'stall' // no bytes for STALL_IDLE_TIMEOUT_SECONDS while something is recoverable
  | 'stall-limit' // silent for MAX_STALL_SECONDS in total
  | 'first-delta-timeout' // FIRST_DELTA_TIMEOUT_SECONDS elapsed without a delta (one attempt)
  | 'first-delta-deadline' // FIRST_DELTA_DEADLINE_SECONDS elapsed without a delta (the whole request)
  | 'headers-timeout' // no response headers within UPSTREAM_HEADERS_TIMEOUT_SECONDS
  | 'overloaded' // the replica or router answered 503 before any body: nothing was generated
  | 'server-error' // the replica or router answered 500, 502 or 504 before any body: nothing was delivered
  | 'model-revision-mismatch' // the continuation came from another model revision than leg 1
  | 'restarted' // the continuation began the answer again instead of continuing it (restart-guard.ts)
  | 'unexpected-output' // the continuation's raw text left the channels the gateway splits (harmony-split.ts)
  | 'connect'; // could not reach the egress listener

/** How a leg that produced no response headers failed (src/upstream/client.ts LegOpenError). */
export type LegOpenFailure = 'connect' | 'headers-timeout' | 'aborted' | 'reset';

/**
 * What one attempt or leg of a request died of (src/recovery/give-up-detail.ts): its failure, `empty-answer` for
 * a 200 whose body ended before any event, `status-N` for a continuation leg answered N. A give-up's FAILED and
 * request_end records list them in order (`causes`), and its client body's `detail` names them.
 */
export type FailureCause = FailureKind | LegOpenFailure | 'empty-answer' | `status-${number}`;

/** Why admission did not start a recovery leg (src/stream/admit.ts). */
export type RecoveryRefusal = RefusalReason | 'too-costly' | 'deadline';

/** Why a committed stream ended with the interruption event instead of its answer. */
export type InterruptReason =
  // Leg 1 failed after the commit point and no continuation may follow (src/recovery/planner.ts decidePostCommit).
  | 'tool-call-delivered'
  | 'nothing-recoverable'
  | 'continuation-unsupported'
  // The continuation's prompt could not be shown to be the uninterrupted one plus the delivered text (the
  // served template, the engine's own rendering, or a date change said otherwise): not sent.
  | 'continuation-unverified'
  | 'continuation-disabled'
  // A Responses request whose input the gateway cannot rebuild as chat messages (previous_response_id, tool
  // calls or other items in the input: src/endpoints/responses/to-chat.ts).
  | 'responses-input-unsupported'
  // The delivered text outgrew MAX_CONTINUATION_PREFIX_BYTES: relayed to its end, never continued.
  | 'continuation-prefix-too-large'
  // The continuation was planned but not sent (src/recovery/continuation-request.ts SkipReason).
  | 'budget-exhausted'
  | 'tool-call-seen'
  | 'no-recoverable-content'
  | `recovery-${RecoveryRefusal}`
  | 'model-revision-mismatch'
  // The continuation leg failed.
  | `leg2-failed-to-start:${LegOpenFailure}`
  | `leg2-status-${number}`
  | `leg2-${FailureKind}`
  | 'leg2-failed'
  // The gateway itself.
  | 'gateway-shutdown'
  | 'gateway-internal-error';

/** Why a failure before the first delta was not re-run (src/recovery/planner.ts decidePreCommit, admission). */
export type PassReason =
  | 'egress-unreachable'
  | 'deadline-exceeded'
  | 'attempts-exhausted'
  | 'retry-after-too-long'
  | `recovery-${RecoveryRefusal}`;

/**
 * The `reason` of an answer before the first delta: the failure and why it was not re-run, or what the
 * gateway answered itself.
 */
export type PreCommitReason =
  | `${FailureKind}:${PassReason}`
  | 'router-tier-unreachable'
  | 'egress-connect-failed'
  // A 200 without an event stream (a 502): not re-run, the replica may have generated a whole answer.
  | 'not-event-stream'
  | 'gateway-shutdown'
  | 'gateway-internal-error';

/**
 * Why a count is not the most exact one configured: TOKENIZER failed (`tokenizer-failed`: /tokenize or the
 * estimate counted), or /tokenize did (the estimate counted). The values usage.continuation.fallback takes.
 */
export type TokenizeFallback =
  | 'tokenizer-failed'
  | 'tokenize-timeout'
  | 'tokenize-unreachable'
  | 'tokenize-error-status'
  | 'tokenize-bad-answer';
