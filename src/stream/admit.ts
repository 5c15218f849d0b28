// Asking for a re-prefill slot on behalf of one request (src/recovery/admission.ts decides): the retry-cost
// limit first, then the authority's answer, waiting for it if needed. While a committed stream waits, it gets
// SSE comments (clients ignore them) so that nothing between the client and us takes the silence for a dead
// connection. Logs and counts every refusal with the phase only the request knows. A cancelled request (client
// gone, shutdown) is refused at once, and its cancellation ends the wait.

import type { Logger } from '../obs/logger';
import type { RefusalReason, ReprefillSlot } from '../recovery/admission';
import { reprefillTooCostly } from '../recovery/planner';
import type { RequestCancellation } from './cancellation';
import type { GatewayContext } from './context';
import type { Delivery } from './delivery';

/** Sent to a committed stream while its recovery waits for a re-prefill slot. */
const RECOVERY_WAIT_COMMENT = Buffer.from(': waiting for recovery capacity\n\n');
const KEEPALIVE_MS = 5000;

export interface AdmissionRequester {
  readonly ctx: GatewayContext;
  readonly log: Logger;
  readonly delivery: Delivery;
  readonly cancellation: Pick<RequestCancellation, 'cancelled' | 'signal'>;
}

export type AdmitResult = { slot: ReprefillSlot } | { reason: RefusalReason | 'too-costly'; retryAfterMs?: number };

export async function admitRecovery(
  r: AdmissionRequester,
  promptTokens: number,
  deliveredTokens: number,
  onWait: (cancel: () => void) => void,
): Promise<AdmitResult> {
  if (r.cancellation.cancelled) return { reason: 'cancelled' };
  const phase = r.delivery.committed ? 'decode' : 'prefill';
  const refused = (reason: RefusalReason | 'too-costly', extra: Record<string, unknown>) => {
    r.ctx.metrics.recoveryRefused(reason, phase);
    r.log.warn({ decision: 'RECOVERY_REFUSED', reason, phase, ...extra }, 'recovery not started');
  };
  const max = r.ctx.config.maxRecoveryPromptTokens;
  if (reprefillTooCostly(promptTokens, deliveredTokens, max)) {
    refused('too-costly', { reprefill_tokens: promptTokens + deliveredTokens, max_recovery_prompt_tokens: max });
    return { reason: 'too-costly' };
  }
  const ticket = r.ctx.admission.request(r.cancellation.signal);
  onWait(ticket.cancel);
  const keepalive = r.delivery.committed ? setInterval(() => void r.delivery.write(RECOVERY_WAIT_COMMENT), KEEPALIVE_MS) : undefined;
  const a = await ticket.result;
  clearInterval(keepalive);
  if (!a.admitted) {
    if (a.reason !== 'cancelled') refused(a.reason, { waited_ms: a.waitedMs });
    return { reason: a.reason, retryAfterMs: a.retryAfterMs };
  }
  if (r.cancellation.cancelled) {
    // Granted in the same turn as the cancellation: handed straight back.
    a.slot.settle('neutral');
    return { reason: 'cancelled' };
  }
  if (a.waitedMs > 0)
    r.log.info({ decision: 'RECOVERY_ADMITTED', phase, waited_ms: a.waitedMs }, 'recovery admitted after waiting for a re-prefill slot');
  return { slot: a.slot };
}
