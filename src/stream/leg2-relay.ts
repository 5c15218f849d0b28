// Relays the continuation leg: each event is parsed and rewritten (leg1's id, leg1's reasoning field name,
// usage counting the recovered text), leg2's own role chunk is dropped (the client already had one), and
// silence is waited out as the reference gateway does, but never longer than MAX_STALL_SECONDS in total.
import { isRoleOnlyChunk, rewriteLeg2Chunk } from '../recovery/leg2-rewrite';
import { decideOnSilence, type FailureKind } from '../recovery/planner';
import type { Recovered } from '../recovery/token-estimate';
import { StreamTracker } from '../sse/tracker';
import type { LegReader } from '../upstream/leg-reader';
import type { Logger } from '../obs/logger';
import { DONE_EVENT } from '../recovery/interruption';
import type { GatewayContext } from './context';
import type { Delivery } from './delivery';

export interface Leg2RelayInput {
  ctx: GatewayContext;
  log: Logger;
  reader: LegReader;
  delivery: Delivery;
  /** The request's delivered-text tracker (leg1's id and field names; leg2's text is appended). */
  tracker: StreamTracker;
  recovered: Recovered;
  multimodal: boolean;
  clientWantsUsage: boolean;
  /** Reported in usage.continuation (an extra field clients may ignore). */
  accounting: { legs: number; method: 'tokenize' | 'estimate' };
  isGone: () => boolean;
  onFirstByte: () => void;
  /** The first generated token (a delta or a finish): the re-prefill is over. */
  onFirstToken: () => void;
}

export type Leg2Outcome = { type: 'finished' } | { type: 'failed'; failure: FailureKind; detail?: string } | { type: 'gone' };

export async function relayLeg2(i: Leg2RelayInput): Promise<Leg2Outcome> {
  const cfg = i.ctx.config;
  const own = new StreamTracker(); // leg2's own finish/[DONE] state
  const start = Date.now();
  let lastByte = start;
  let stalledMs = 0;
  let first = true;
  try {
    for (;;) {
      const r = await i.reader.next(cfg.stallIdleTimeoutMs);
      if (i.isGone()) return { type: 'gone' };
      if (r.type === 'idle') {
        const now = Date.now();
        stalledMs += cfg.stallIdleTimeoutMs;
        if (own.finished) return await finish(i, own);
        const d = decideOnSilence({
          committed: true, anyBytes: i.reader.anyBytes, leg: 2, recoverable: true, silentForMs: now - lastByte,
          totalStalledMs: stalledMs, stallIdleTimeoutMs: cfg.stallIdleTimeoutMs, maxStallMs: cfg.maxStallMs,
          firstDeltaTimeoutMs: 0, sinceLegStartMs: now - start,
        });
        if (d.action === 'fail') return { type: 'failed', failure: d.failure };
        i.log.warn({ decision: 'WAITING', leg: 2, silent_ms: now - lastByte, stalled_ms: stalledMs }, 'leg2 stalled, no third leg, continuing to wait');
        continue;
      }
      if (r.type === 'end' || r.type === 'reset') {
        if (own.finished) return await finish(i, own);
        return { type: 'failed', failure: r.type === 'end' ? 'eof' : 'reset' };
      }
      if (first) {
        first = false;
        i.onFirstByte();
      }
      lastByte = Date.now();
      const out: Buffer[] = [];
      for (const ev of r.events) {
        const o = StreamTracker.read(ev);
        if (o.kind === 'malformed') {
          i.ctx.metrics.malformedEvent();
          continue;
        }
        if (o.kind === 'error') return await flushThen(i, out, { type: 'failed', failure: 'error-event' });
        if (o.kind === 'chunk' && o.finishReason === 'abort') return await flushThen(i, out, { type: 'failed', failure: 'abort-finish' });
        own.apply(o);
        if (o.kind === 'done') {
          out.push(DONE_EVENT);
          continue;
        }
        if (o.kind !== 'chunk') {
          out.push(ev.raw);
          continue;
        }
        if (isRoleOnlyChunk(o.json)) continue;
        if (o.hasDelta || o.finishReason !== null) i.onFirstToken();
        // leg2 always asks for usage (to correct it); the client only gets it if it asked.
        const usageOnly = o.usage && Array.isArray(o.json.choices) && o.json.choices.length === 0;
        if (usageOnly && !i.clientWantsUsage) continue;
        i.tracker.apply({ ...o, json: { ...o.json, id: undefined } });
        const rewritten = rewriteLeg2Chunk(o.json, {
          responseId: i.tracker.id,
          reasoningField: i.tracker.reasoningField,
          recovered: i.recovered,
          multimodal: i.multimodal,
        });
        if (!i.clientWantsUsage && rewritten.usage) delete rewritten.usage;
        if (rewritten.usage) rewritten.usage.continuation = { legs: i.accounting.legs, recovered_tokens: i.recovered.totalRecovered, method: i.accounting.method };
        out.push(Buffer.from(`data: ${JSON.stringify(rewritten)}\n\n`));
      }
      if (out.length) await i.delivery.write(Buffer.concat(out));
    }
  } finally {
    i.reader.fence();
  }
}

async function flushThen(i: Leg2RelayInput, out: Buffer[], outcome: Leg2Outcome): Promise<Leg2Outcome> {
  if (out.length) await i.delivery.write(Buffer.concat(out));
  return outcome;
}

async function finish(i: Leg2RelayInput, own: StreamTracker): Promise<Leg2Outcome> {
  await i.delivery.end(own.doneSeen ? undefined : DONE_EVENT);
  return { type: 'finished' };
}
