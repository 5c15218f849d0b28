// How a request ends without a complete answer. Before the commit point nothing reached the client, headers
// included, so giving up is an HTTP error it can act on (JSON body, `retryable`, `Retry-After`), never `200`
// and then a reset; the engine's own answers (its last 503, an in-band error event) pass through unchanged,
// unless admission refused the retry (then the 503 is the gateway's, saying why). After the commit point it
// is the interruption event: never a silent truncation.
import { type ClientErrorCode, clientErrorBody, clientErrorHeaders } from '../errors';
import { DONE_EVENT, interruptionEvent } from '../recovery/interruption';
import { estimateTokens } from '../recovery/token-estimate';
import type { LegFailure, LegOutcome } from './leg-loop';
import type { OriginatedResponse } from './originated-response';

/** An HTTP error answer from the gateway itself (nothing of the answer was delivered). */
export async function answerError(
  r: OriginatedResponse,
  status: number,
  e: { code: ClientErrorCode; message: string; reason?: string },
  retryAfterMs: number,
): Promise<void> {
  r.move('answered');
  r.delivery.discardAttempt();
  await r.delivery.respond(status, clientErrorHeaders(retryAfterMs), clientErrorBody({ ...e, requestId: r.requestId, retryable: true }));
}

/** A failure before the first delta that will not be re-run (`reason`: why not). */
export async function passFailureThrough(r: OriginatedResponse, out: LegFailure, reason: string, retryAfterMs = 1000): Promise<void> {
  r.setOutcome('failed-before-first-delta', `${out.failure}:${reason}`);
  r.log.warn(
    { decision: 'PASSTHROUGH_FAILURE', failure: out.failure, detail: out.detail, reason },
    'failure before the first delta passed through',
  );
  const refused = reason.startsWith('recovery-');
  if (r.req.structured && r.attemptHadHeaders) {
    // Held structured output is never released incomplete: one valid document or the error.
    r.move('answered');
    r.delivery.discardHeldBody();
    await r.delivery.end(
      interruptionEvent({ requestId: r.requestId, deliveredOutputTokens: 0, reason: `${out.failure}:${reason}`, partialOutput: false }),
    );
    return;
  }
  if (out.engineAnswer && !refused) {
    r.move('answered');
    return await r.delivery.respond(out.engineAnswer.status, out.engineAnswer.headers, out.engineAnswer.body);
  }
  if (r.attemptHadHeaders && (out.failure === 'error-event' || out.failure === 'abort-finish')) {
    r.move('answered');
    if (out.heldToolCall) r.delivery.hold(out.heldToolCall);
    await r.delivery.end(Buffer.concat([out.failingEvent ?? Buffer.alloc(0), DONE_EVENT]));
    return;
  }
  const timeout = out.failure === 'headers-timeout' || out.failure === 'first-delta-timeout';
  const [status, code]: [number, ClientErrorCode] = refused
    ? [503, 'recovery_unavailable']
    : timeout
      ? [504, 'upstream_timeout']
      : [502, 'upstream_failed'];
  const message = refused
    ? `The upstream failed before responding (${out.failure}) and the gateway could not re-run the request now (${reason}).`
    : `The upstream failed before responding (${out.failure}).`;
  await answerError(r, status, { code, message, reason: `${out.failure}:${reason}` }, retryAfterMs);
}

/** Ends a committed stream with the interruption event. A tool call held back at the failure is released first. */
export async function interruptStream(r: OriginatedResponse, reason: string, heldToolCall?: Buffer): Promise<void> {
  r.cancelLeg();
  if (heldToolCall) {
    r.log.info({ decision: 'HELD_TOOL_CALL_RELEASED', bytes: heldToolCall.length }, 'tool call held at the failure');
    await r.delivery.write(heldToolCall);
  }
  r.move('interrupted');
  r.setOutcome('interrupted', reason);
  r.ctx.metrics.interruptionEvent(reason);
  const delivered = deliveredTokens(r);
  r.log.warn({ decision: 'FAILED', reason, delivered_output_tokens: delivered }, 'interruption event sent');
  await r.delivery.end(interruptionEvent({ requestId: r.requestId, deliveredOutputTokens: delivered, reason }));
}

export function deliveredTokens(r: OriginatedResponse): number {
  const c = r.ctx.config;
  return estimateTokens(r.tracker.reasoning + r.tracker.content, c.cjkCharsPerToken, c.otherCharsPerToken);
}

/** Envoy reached no router-tier host. Reference behaviour: 429, not 5xx, so front proxies that retry 5xx do not hammer it. */
export async function routerUnreachable(r: OriginatedResponse, reason: string): Promise<LegOutcome> {
  r.settleSlot('failed');
  const status = r.ctx.config.unreachableStatus;
  await answerError(r, status, { code: 'router_unreachable', message: 'The inference router tier is unreachable.', reason }, 1000);
  r.log.warn({ decision: 'FAILED', reason, status }, 'router tier unreachable');
  r.reason = reason;
  return { type: 'responded' };
}

/** The drain deadline ended the request: the interruption event, or before the first delta a 503. */
export async function endForShutdown(r: OriginatedResponse): Promise<void> {
  if (r.delivery.committed) return await interruptStream(r, 'gateway-shutdown');
  r.setOutcome('failed-before-first-delta', 'gateway-shutdown');
  await answerError(r, 503, { code: 'gateway_shutdown', message: 'The gateway is shutting down.' }, 1000);
}
