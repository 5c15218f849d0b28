// How a request ends, as a value. Pure: the functions here decide from the request's situation which Ending
// it gets (a failure before the first delta that is not re-run, a cancellation), and what an Ending means for
// the request's last state, its `outcome` and the last bytes the client gets (finalResponse). An Ending
// carries what it delivers (the engine's answer, the failing event, a held tool call).
// OriginatedResponse.finish() records it (the only writer of the outcome) and delivers it, once; its report
// turns it into the metrics and the request_end record.
import type { ResponsesStream } from '../endpoints/responses/stream';
import { type ClientErrorCode, clientErrorBody, clientErrorHeaders } from '../errors';
import type { REQUEST_OUTCOMES } from '../obs/metric-labels';
import { giveUpDetail } from '../recovery/give-up-detail';
import { DONE_EVENT, interruptionEvent } from '../recovery/interruption';
import type { NextRequest } from '../recovery/next-request';
import type { FailureCause, FailureKind, InterruptReason, PassReason, PreCommitReason } from '../recovery/reasons';
import type { LegResponse } from '../upstream/client';
import type { CancelCause } from './cancellation';
import type { ResponseHead } from './held-output';
import type { RequestState } from './request-state';

/** An engine's own answer to an attempt (a 503 before any event): passed on unchanged if no retry follows. */
export interface EngineAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** request_end's `outcome` and continuation_gateway_request_outcomes_total's label: derived from the Ending (outcomeOf). */
export type Outcome = (typeof REQUEST_OUTCOMES)[number];

export type Ending =
  /** The answer's finish_reason reached the client: on the first attempt, after a re-run, or via continuation legs. */
  | { kind: 'complete'; after: 'first-attempt' | 'retry' | 'continuation' }
  /**
   * The interruption event and [DONE]; partialOutput false: held structured output, nothing delivered. A tool
   * call held back at the failure (BUFFER_TOOL_CALLS) is released before it.
   */
  | { kind: 'interrupted'; reason: InterruptReason | PreCommitReason; partialOutput: boolean; heldToolCall?: Buffer }
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
  /** The engine's own answer, unchanged: its status and body ... */
  | { kind: 'engine-answer'; as: 'status'; reason: PreCommitReason; answer: EngineAnswer }
  /** ... or its in-band error event (after a tool call held back, if any) and [DONE]. */
  | { kind: 'engine-answer'; as: 'event'; reason: PreCommitReason; events: Buffer }
  /** An answer that is no stream (a 4xx, a non-streamed body) relayed as the engine sent it. */
  | { kind: 'passed-through'; answer: LegResponse }
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
  engineAnswer?: EngineAnswer;
  /** The engine's in-band error or abort event that ended the attempt. */
  failingEvent?: Buffer;
  /** A tool call held back (BUFFER_TOOL_CALLS) when the attempt failed. */
  heldToolCall?: Buffer;
  retryAfterMs: number;
  /** Every attempt's cause, in order, the failing one last; `attempts` were sent. */
  causes: readonly FailureCause[];
  attempts: number;
}

const NO_BYTES = Buffer.alloc(0);

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
  if (s.engineAnswer && !refused) return { kind: 'engine-answer', as: 'status', reason, answer: s.engineAnswer };
  if (s.attemptHadHeaders && (s.failure === 'error-event' || s.failure === 'abort-finish'))
    return {
      kind: 'engine-answer',
      as: 'event',
      reason,
      events: Buffer.concat([s.heldToolCall ?? NO_BYTES, s.failingEvent ?? NO_BYTES, DONE_EVENT]),
    };
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

/** What the request knows at the moment it delivers an Ending. */
export interface EndFacts {
  requestId: string | undefined;
  /** The output the client has (token estimate): the interruption event says how much. */
  deliveredOutputTokens: number;
  /** The client already got a [DONE]. */
  doneSeen: boolean;
  /** A Responses stream: no [DONE], and an interruption is its response.failed event (src/endpoints/responses). */
  responses?: Pick<ResponsesStream, 'failed'>;
  /** The interruption event's ready continuation request, when there is one (src/recovery/next-request.ts). */
  nextRequest?: NextRequest;
}

/**
 * The last of the response: the engine's answer relayed as it comes (`verbatim`), or the final bytes after
 * what is held (`head`: a response of its own, replacing the held headers and events; `dropHeldBody`: the
 * held events are not sent). Nothing for a client that left.
 */
export type FinalResponse = { verbatim: LegResponse } | { head?: ResponseHead; dropHeldBody?: boolean; tail: Buffer } | null;

/** The engine's failing event without the [DONE] a chat stream ends with: a Responses stream has none. */
function withoutDone(events: Buffer): Buffer {
  const tail = events.subarray(events.length - DONE_EVENT.length);
  return tail.equals(DONE_EVENT) ? events.subarray(0, events.length - DONE_EVENT.length) : events;
}

export function finalResponse(e: Ending, f: EndFacts): FinalResponse {
  switch (e.kind) {
    case 'complete':
      return { tail: f.doneSeen || f.responses ? NO_BYTES : DONE_EVENT };
    case 'interrupted':
      if (f.responses && e.partialOutput) {
        const info = {
          requestId: f.requestId,
          deliveredOutputTokens: f.deliveredOutputTokens,
          reason: e.reason,
          nextRequest: f.nextRequest,
        };
        return { tail: f.responses.failed(info) };
      }
      if (!e.partialOutput)
        return {
          dropHeldBody: true,
          tail: interruptionEvent({ requestId: f.requestId, deliveredOutputTokens: 0, reason: e.reason, partialOutput: false }),
        };
      return {
        tail: Buffer.concat([
          e.heldToolCall ?? NO_BYTES,
          interruptionEvent({
            requestId: f.requestId,
            deliveredOutputTokens: f.deliveredOutputTokens,
            reason: e.reason,
            nextRequest: f.nextRequest,
          }),
        ]),
      };
    case 'http-error':
      return {
        head: { status: e.status, headers: clientErrorHeaders(e.retryAfterMs) },
        tail: clientErrorBody({
          code: e.code,
          message: e.message,
          reason: e.reason,
          detail: e.detail,
          requestId: f.requestId,
          retryable: true,
        }),
      };
    case 'engine-answer':
      if (e.as === 'status') return { head: { status: e.answer.status, headers: e.answer.headers }, tail: e.answer.body };
      return { tail: f.responses ? withoutDone(e.events) : e.events };
    case 'passed-through':
      return { verbatim: e.answer };
    case 'client-gone':
      return null;
  }
}
