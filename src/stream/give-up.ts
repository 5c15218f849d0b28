// How a request ends without a complete answer, as Endings the request then records and delivers (finish()).
// Before the commit point nothing reached the client, headers included, so giving up is an HTTP error it can
// act on (JSON body, `retryable`, `Retry-After`), never `200` and then a reset; the engine's own answers (its
// last 503, an in-band error event) pass through unchanged, unless admission refused the retry (then the 503
// is the gateway's, saying why). After the commit point it is the interruption event: never a silent
// truncation. Which Ending applies is decided in ending.ts (pure); these add the give-up's log records.
import type { ClientErrorCode } from '../errors';
import type { Logger } from '../obs/logger';
import type { FailureCause, InterruptReason, PassReason, PreCommitReason } from '../recovery/reasons';
import { type Ending, endingBeforeCommit, reasonOf } from './ending';
import type { LegFailure } from './legs/leg-loop';
import type { GiveUpView } from './request-port';

export type HttpErrorEnding = Extract<Ending, { kind: 'http-error' }>;

/** The gateway's own HTTP error, as an Ending. */
export function gatewayError(
  status: number,
  code: ClientErrorCode,
  message: string,
  reason: PreCommitReason,
  retryAfterMs = 1000,
): HttpErrorEnding {
  return { kind: 'http-error', status, code, message, reason, retryAfterMs };
}

/** A bug ended the request: the interruption event after the commit point, a 500 before it. */
export function internalError(committed: boolean): Ending {
  if (committed) return interruption('gateway-internal-error');
  return gatewayError(500, 'gateway_error', 'The gateway failed unexpectedly.', 'gateway-internal-error');
}

/** A committed stream's interruption event (a tool call held back at the failure is released first). */
export function interruption(reason: InterruptReason, heldToolCall?: Buffer): Ending {
  return { kind: 'interrupted', reason, partialOutput: true, heldToolCall };
}

/** A failure before the first delta that will not be re-run (`reason`: why not): its Ending (ending.ts). */
export function giveUpBeforeCommit(r: GiveUpView, out: LegFailure, reason: PassReason, retryAfterMs = 1000): Ending {
  r.log.warn(
    { decision: 'PASSTHROUGH_FAILURE', failure: out.failure, detail: out.detail, reason },
    'failure before the first delta passed through',
  );
  const ending = endingBeforeCommit({
    failure: out.failure,
    reason,
    structured: r.structured,
    attemptHadHeaders: r.attemptHadHeaders,
    engineAnswer: out.engineAnswer,
    failingEvent: out.failingEvent,
    heldToolCall: out.heldToolCall,
    retryAfterMs,
    causes: r.causes,
    attempts: r.attempt,
  });
  // Every attempt's cause, in order: the last one alone would hide, say, an engine that answered empty first.
  const status =
    ending.kind === 'http-error' ? ending.status : ending.kind === 'engine-answer' && ending.as === 'status' ? ending.answer.status : 200;
  r.log.warn(
    { decision: 'FAILED', reason: reasonOf(ending), status, attempts: r.attempt, causes: r.causes },
    'gave up before the first delta',
  );
  return ending;
}

/**
 * Envoy reached no router-tier host. Reference behaviour: 429, not 5xx, so front proxies that retry 5xx do not
 * hammer it. Envoy's %RESPONSE_FLAGS% (`flags`) go to the log only: the client gets the code.
 */
export function routerUnreachable(
  r: Pick<GiveUpView, 'config' | 'log' | 'attempt' | 'causes'>,
  reason: 'router-tier-unreachable' | 'egress-connect-failed',
  flags?: string,
): HttpErrorEnding {
  const status = r.config.unreachableStatus;
  r.log.warn(
    { decision: 'FAILED', reason, status, upstream_flags: flags ?? null, attempts: r.attempt, causes: r.causes },
    'router tier unreachable',
  );
  return gatewayError(status, 'router_unreachable', 'The inference router tier is unreachable.', reason);
}

/** The records of an interruption after the commit point, as it is delivered. */
export function logInterruption(log: Logger, e: Ending, deliveredOutputTokens: number, causes: readonly FailureCause[]): void {
  if (e.kind !== 'interrupted' || !e.partialOutput) return;
  if (e.heldToolCall) log.info({ decision: 'HELD_TOOL_CALL_RELEASED', bytes: e.heldToolCall.length }, 'tool call held at the failure');
  log.warn({ decision: 'FAILED', reason: e.reason, delivered_output_tokens: deliveredOutputTokens, causes }, 'interruption event sent');
}
