// How a request ends without a complete answer. Before the commit point nothing reached the client, headers
// included, so giving up is an HTTP error it can act on (JSON body, `retryable`, `Retry-After`), never `200`
// and then a reset; the engine's own answers (its last 503, an in-band error event) pass through unchanged,
// unless admission refused the retry (then the 503 is the gateway's, saying why). After the commit point it
// is the interruption event: never a silent truncation. Which Ending applies is decided in ending.ts (pure);
// each function here records it (finish) and then delivers it.
import { type ClientErrorCode, clientErrorBody, clientErrorHeaders } from '../errors';
import { DONE_EVENT, interruptionEvent } from '../recovery/interruption';
import type { InterruptReason, PassReason, PreCommitReason } from '../recovery/reasons';
import { type Ending, endingBeforeCommit, endingForCancel, reasonOf } from './ending';
import type { LegFailure, LegOutcome } from './leg-loop';
import type { GiveUpPort } from './request-port';

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

/** An HTTP error answer from the gateway itself (nothing of the answer was delivered). */
export async function answerError(r: GiveUpPort, e: HttpErrorEnding): Promise<void> {
  if (!r.finish(e)) return;
  r.delivery.discardAttempt();
  await r.delivery.respond(
    e.status,
    clientErrorHeaders(e.retryAfterMs),
    clientErrorBody({ code: e.code, message: e.message, reason: e.reason, detail: e.detail, requestId: r.requestId, retryable: true }),
  );
}

/** A failure before the first delta that will not be re-run (`reason`: why not): its Ending (ending.ts), applied. */
export async function passFailureThrough(r: GiveUpPort, out: LegFailure, reason: PassReason, retryAfterMs = 1000): Promise<void> {
  r.log.warn(
    { decision: 'PASSTHROUGH_FAILURE', failure: out.failure, detail: out.detail, reason },
    'failure before the first delta passed through',
  );
  const ending = endingBeforeCommit({
    failure: out.failure,
    reason,
    structured: r.req.structured,
    attemptHadHeaders: r.attemptHadHeaders,
    engineAnswer: out.engineAnswer !== undefined,
    retryAfterMs,
    causes: r.causes,
    attempts: r.attempt,
  });
  // Every attempt's cause, in order: the last one alone would hide, say, an engine that answered empty first.
  const status =
    ending.kind === 'http-error'
      ? ending.status
      : ending.kind === 'engine-answer' && ending.as === 'status'
        ? out.engineAnswer?.status
        : 200;
  r.log.warn(
    { decision: 'FAILED', reason: reasonOf(ending), status, attempts: r.attempt, causes: r.causes },
    'gave up before the first delta',
  );
  if (ending.kind === 'http-error') return await answerError(r, ending);
  if (!r.finish(ending)) return;
  switch (ending.kind) {
    case 'interrupted':
      r.delivery.discardHeldBody();
      await r.delivery.end(
        interruptionEvent({ requestId: r.requestId, deliveredOutputTokens: 0, reason: ending.reason, partialOutput: false }),
      );
      return;
    case 'engine-answer':
      if (ending.as === 'status' && out.engineAnswer)
        return await r.delivery.respond(out.engineAnswer.status, out.engineAnswer.headers, out.engineAnswer.body);
      if (out.heldToolCall) r.delivery.hold(out.heldToolCall);
      await r.delivery.end(Buffer.concat([out.failingEvent ?? Buffer.alloc(0), DONE_EVENT]));
      return;
    default:
      throw new Error(`unreachable: a failure before the first delta cannot end as ${ending.kind}`);
  }
}

/** Ends a committed stream with the interruption event. A tool call held back at the failure is released first. */
export async function interruptStream(r: GiveUpPort, reason: InterruptReason, heldToolCall?: Buffer): Promise<void> {
  r.cancelLeg();
  if (!r.finish({ kind: 'interrupted', reason, partialOutput: true })) return;
  if (heldToolCall) {
    r.log.info({ decision: 'HELD_TOOL_CALL_RELEASED', bytes: heldToolCall.length }, 'tool call held at the failure');
    await r.delivery.write(heldToolCall);
  }
  const delivered = deliveredTokens(r);
  r.log.warn({ decision: 'FAILED', reason, delivered_output_tokens: delivered, causes: r.causes }, 'interruption event sent');
  await r.delivery.end(interruptionEvent({ requestId: r.requestId, deliveredOutputTokens: delivered, reason }));
}

/** The output the client has: reasoning, content and tool calls (name and arguments, as a prompt counts them). */
export function deliveredTokens(r: Pick<GiveUpPort, 'ctx' | 'tracker'>): number {
  const c = r.ctx.config;
  return r.tracker.deliveredTokenEstimate(c.cjkCharsPerToken, c.otherCharsPerToken);
}

/**
 * Envoy reached no router-tier host. Reference behaviour: 429, not 5xx, so front proxies that retry 5xx do not
 * hammer it. Envoy's %RESPONSE_FLAGS% (`flags`) go to the log only: the client gets the code.
 */
export async function routerUnreachable(
  r: GiveUpPort,
  reason: 'router-tier-unreachable' | 'egress-connect-failed',
  flags?: string,
): Promise<LegOutcome> {
  r.settleSlot({ kind: 'unusable-answer' });
  const status = r.ctx.config.unreachableStatus;
  await answerError(r, gatewayError(status, 'router_unreachable', 'The inference router tier is unreachable.', reason));
  r.log.warn({ decision: 'FAILED', reason, status, upstream_flags: flags ?? null }, 'router tier unreachable');
  return { type: 'responded' };
}

/** The request was cancelled (cancellation.ts): a client that left gets nothing more; a shutdown ends it explicitly. */
export async function endCancelled(r: GiveUpPort): Promise<void> {
  r.cancelLeg();
  const cause = r.cancellation.cause;
  const ending = cause === undefined ? undefined : endingForCancel(cause, r.delivery.committed);
  if (ending?.kind === 'interrupted') return await interruptStream(r, 'gateway-shutdown');
  if (ending?.kind === 'http-error') await answerError(r, ending);
}
