// How a request ends, as a value. Pure: the functions here decide from the request's situation which Ending
// it gets (a failure before the first delta that is not re-run, a cancellation), and what an Ending means for
// the request's last state and its `outcome`. OriginatedResponse.finish() records it (the only writer of the
// outcome), report() turns it into the metrics and the request_end record; give-up.ts delivers the endings the
// gateway writes itself.
import type { ClientErrorCode } from '../errors';
import type { REQUEST_OUTCOMES } from '../obs/metric-labels';
import { giveUpDetail } from '../recovery/give-up-detail';
import type { FailureCause, FailureKind, InterruptReason, PassReason, PreCommitReason } from '../recovery/reasons';
import type { CancelCause } from './cancellation';
import type { RequestState } from './request-state';

/** request_end's `outcome` and continuation_gateway_request_outcomes_total's label: derived from the Ending (outcomeOf). */
export type Outcome = (typeof REQUEST_OUTCOMES)[number];

export type Ending =
  /** The answer's finish_reason reached the client: on the first attempt, after a re-run, or via continuation legs. */
  | { kind: 'complete'; after: 'first-attempt' | 'retry' | 'continuation' }
  /** The interruption event and [DONE]; partialOutput false: held structured output, nothing delivered. */
  | { kind: 'interrupted'; reason: InterruptReason | PreCommitReason; partialOutput: boolean }
  /** The gateway's own HTTP error (nothing of the answer was delivered). */
  | {
      kind: 'http-error';
      status: number;
      code: ClientErrorCode;
      reason: PreCommitReason;
      message: string;
      retryAfterMs: number;
      /** Every attempt's cause in words (a give-up before the first delta): the body's `detail`. */
      detail?: string;
    }
  /** The engine's own answer, unchanged: its status and body, or its in-band error event and [DONE]. */
  | { kind: 'engine-answer'; as: 'status' | 'event'; reason: PreCommitReason }
  /** An answer that is no stream (a 4xx, a non-streamed body) relayed as the engine sent it. */
  | { kind: 'passed-through' }
  /** The client disconnected: nothing more is delivered. `detail`: what the ext_proc glue saw (logs only). */
  | { kind: 'client-gone'; detail: string };

/** A failure before the first delta that will not be re-run, and what the attempt had when it failed. */
export interface PreCommitGiveUp {
  failure: FailureKind;
  /** Why it is not re-run. */
  reason: PassReason;
  /** BUFFER_STRUCTURED_OUTPUT: the request's output is held whole until its finish. */
  structured: boolean;
  /** The attempt's 200 event-stream headers are held (sent at the commit point). */
  attemptHadHeaders: boolean;
  /** The engine answered with a status and a body of its own (a 503 before any event). */
  engineAnswer: boolean;
  retryAfterMs: number;
  /** Every attempt's cause, in order, the failing one last; `attempts` were sent. */
  causes: readonly FailureCause[];
  attempts: number;
}

const TIMEOUTS: ReadonlySet<FailureKind> = new Set(['headers-timeout', 'first-delta-timeout', 'first-delta-deadline']);

/**
 * Nothing reached the client: held structured output ends with the interruption event (partial_output false:
 * one valid document or the error); the engine's own answer passes unchanged unless admission refused the
 * re-run (then the 503 is the gateway's, saying why); else the gateway's 502, 504 or 503.
 */
export function endingBeforeCommit(s: PreCommitGiveUp): Ending {
  const reason: PreCommitReason = `${s.failure}:${s.reason}`;
  const refused = s.reason.startsWith('recovery-');
  if (s.structured && s.attemptHadHeaders) return { kind: 'interrupted', reason, partialOutput: false };
  if (s.engineAnswer && !refused) return { kind: 'engine-answer', as: 'status', reason };
  if (s.attemptHadHeaders && (s.failure === 'error-event' || s.failure === 'abort-finish'))
    return { kind: 'engine-answer', as: 'event', reason };
  const [status, code]: [number, ClientErrorCode] = refused
    ? [503, 'recovery_unavailable']
    : TIMEOUTS.has(s.failure)
      ? [504, 'upstream_timeout']
      : [502, 'upstream_failed'];
  // True of the request as a whole: every attempt's cause, not only the last one's.
  const detail = giveUpDetail(s.attempts, s.causes.length > 0 ? s.causes : [s.failure]);
  const message = refused
    ? `The upstream failed before responding (${detail}) and the gateway could not re-run the request now (${s.reason}).`
    : `The upstream failed before responding (${detail}).`;
  return { kind: 'http-error', status, code, reason, message, retryAfterMs: s.retryAfterMs, detail };
}

/** A cancelled request: a client that left gets nothing more (undefined); a shutdown ends it explicitly. */
export function endingForCancel(cause: CancelCause, committed: boolean): Ending | undefined {
  if (cause === 'client-gone') return undefined;
  if (committed) return { kind: 'interrupted', reason: 'gateway-shutdown', partialOutput: true };
  return {
    kind: 'http-error',
    status: 503,
    code: 'gateway_shutdown',
    reason: 'gateway-shutdown',
    message: 'The gateway is shutting down.',
    retryAfterMs: 1000,
  };
}

/** The state an Ending leaves the request in (request-state.ts). */
export function stateFor(e: Ending): RequestState {
  switch (e.kind) {
    case 'complete':
      return 'done';
    case 'interrupted':
      // Held structured output ends with the event although nothing was delivered: an answer without a stream.
      return e.partialOutput ? 'interrupted' : 'answered';
    case 'client-gone':
      return 'gone';
    default:
      return 'answered';
  }
}

/** The request's `outcome` (README, "Logs"): one value per Ending, never set beside it. */
export function outcomeOf(e: Ending): Outcome {
  switch (e.kind) {
    case 'complete':
      return e.after === 'first-attempt' ? 'completed' : e.after === 'retry' ? 'completed-after-retry' : 'completed-after-continuation';
    case 'interrupted':
      if (e.reason === 'gateway-internal-error') return 'error';
      return e.partialOutput ? 'interrupted' : 'failed-before-first-delta';
    case 'http-error':
      return e.reason === 'gateway-internal-error' ? 'error' : 'failed-before-first-delta';
    case 'engine-answer':
      return 'failed-before-first-delta';
    case 'passed-through':
      return 'passed-through-status';
    case 'client-gone':
      return 'client-disconnected';
  }
}

/** request_end's `reason`: the code the client read, or what the glue saw of a client that left. */
export function reasonOf(e: Ending): string | undefined {
  switch (e.kind) {
    case 'interrupted':
    case 'http-error':
    case 'engine-answer':
      return e.reason;
    case 'client-gone':
      return e.detail;
    default:
      return undefined;
  }
}
