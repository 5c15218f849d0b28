// Asking for a re-prefill slot on behalf of one request (src/recovery/admission.ts decides): the retry-cost
// limit first, then the authority's answer, waiting for it if needed, at most until `due` (a retry's
// first-delta deadline: then `deadline`). Logs and counts every refusal with the phase only the request knows.
// A cancelled request (client gone, shutdown) is refused at once, and its cancellation ends the wait. What a
// committed stream's client gets while it waits (keepalive comments) is the request's to send. RecoverySlot
// holds the slot a request was granted until its leg settles it, once.

import type { Logger } from '../obs/logger';
import type { Metrics } from '../obs/metrics';
import type { RecoveryAdmission, RefusalReason, ReprefillSlot } from '../recovery/admission';
import { reprefillTooCostly } from '../recovery/planner';
import { type SlotEnd, slotEvidence } from '../recovery/slot-evidence';
import type { GatewayContext } from './context';
import type { CancellationView, Refusal } from './request-port';

export interface AdmissionRequester {
  readonly admission: RecoveryAdmission;
  readonly maxRecoveryPromptTokens: number;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The request passed its commit point: a refusal is counted for `decode`, else `prefill`. */
  readonly committed: boolean;
  readonly cancellation: Pick<CancellationView, 'cancelled' | 'signal'>;
}

export type AdmitResult = { slot: ReprefillSlot } | { reason: RefusalReason | 'too-costly' | 'deadline'; retryAfterMs?: number };

export async function admitRecovery(
  r: AdmissionRequester,
  promptTokens: number,
  deliveredTokens: number,
  due?: number,
): Promise<AdmitResult> {
  let late = false;
  let timer: NodeJS.Timeout | undefined;
  const a = await askForSlot(r, promptTokens, deliveredTokens, (cancel) => {
    if (due !== undefined)
      timer = setTimeout(
        () => {
          late = true;
          cancel();
        },
        Math.max(0, due - Date.now()),
      );
  });
  clearTimeout(timer);
  if (late && 'reason' in a && a.reason === 'cancelled') return { reason: 'deadline' };
  return a;
}

async function askForSlot(
  r: AdmissionRequester,
  promptTokens: number,
  deliveredTokens: number,
  onWait: (cancel: () => void) => void,
): Promise<AdmitResult> {
  if (r.cancellation.cancelled) return { reason: 'cancelled' };
  const phase = r.committed ? 'decode' : 'prefill';
  const refused = (reason: RefusalReason | 'too-costly', extra: Record<string, unknown>) => {
    r.metrics.recoveryRefused(reason, phase);
    r.log.warn({ decision: 'RECOVERY_REFUSED', reason, phase, ...extra }, 'recovery not started');
  };
  const max = r.maxRecoveryPromptTokens;
  if (reprefillTooCostly(promptTokens, deliveredTokens, max)) {
    refused('too-costly', { reprefill_tokens: promptTokens + deliveredTokens, max_recovery_prompt_tokens: max });
    return { reason: 'too-costly' };
  }
  const ticket = r.admission.request(r.cancellation.signal);
  onWait(ticket.cancel);
  const a = await ticket.result;
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

const KEEPALIVE_MS = 5000;

/** Sent to a committed stream while its recovery waits for a re-prefill slot (clients ignore SSE comments). */
export const RECOVERY_WAIT_COMMENT = Buffer.from(': waiting for recovery capacity\n\n');

/** The re-prefill slot of a request's recovery leg in flight (a retry or a continuation), until its first token. */
export class RecoverySlot {
  private slot: ReprefillSlot | null = null;

  private readonly requester: Omit<AdmissionRequester, 'committed'>;

  constructor(
    ctx: Pick<GatewayContext, 'admission' | 'metrics' | 'config'>,
    log: Logger,
    cancellation: AdmissionRequester['cancellation'],
  ) {
    const { admission, metrics } = ctx;
    this.requester = { admission, metrics, log, cancellation, maxRecoveryPromptTokens: ctx.config.maxRecoveryPromptTokens };
  }

  /**
   * Asks for a slot (null: granted and held), waiting at most until `due`. `keepalive`: called every 5 s while
   * waiting (a committed stream's client gets an SSE comment, so nothing between takes the silence for a dead
   * connection).
   */
  async admit(
    promptTokens: number,
    deliveredTokens: number,
    o: { committed: boolean; due?: number; keepalive?: () => void },
  ): Promise<Refusal> {
    const timer = o.keepalive ? setInterval(o.keepalive, KEEPALIVE_MS) : undefined;
    try {
      const a = await admitRecovery({ ...this.requester, committed: o.committed }, promptTokens, deliveredTokens, o.due);
      if ('reason' in a) return a;
      this.slot = a.slot;
      return null;
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * How the leg in flight ended for its slot (first token, failure before it, cancelled): the evidence
   * slotEvidence() reads from that fact. Later calls for the same leg do nothing.
   */
  settle(end: SlotEnd): void {
    const slot = this.slot;
    this.slot = null;
    slot?.settle(slotEvidence(end));
  }
}
