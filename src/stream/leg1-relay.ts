// Relays one leg1 attempt to the client: the original event bytes, untouched, from the commit point on;
// held back before it (and, with BUFFER_TOOL_CALLS, while a tool call is incomplete). It decides nothing
// about recovery: it reports how the leg ended (LegOutcome) and the state machine plans from there.
import type { Logger } from '../obs/logger';
import { decideOnSilence, type FailureKind } from '../recovery/planner';
import { StreamTracker, type ObservedEvent } from '../sse/tracker';
import type { LegReader } from '../upstream/leg-reader';
import type { GatewayContext } from './context';
import type { Delivery } from './delivery';

/**
 * The most a request holds back (a buffered tool call, held structured output) before giving up the
 * protection and delivering as it streams: memory per stream stays bounded whatever the engine sends.
 */
export const MAX_HELD_BYTES = 4 * 1024 * 1024;

/** How one leg ended, from the state machine's point of view. */
export type LegOutcome =
  | { type: 'finished' } // finish_reason seen and the stream ended
  | {
      type: 'failed';
      failure: FailureKind;
      detail?: string;
      failingEvent?: Buffer;
      heldToolCall?: Buffer;
      /** The engine's own answer (a 503 before any body), passed on unchanged if no retry follows. */
      engineAnswer?: { status: number; headers: Record<string, string>; body: Buffer };
    }
  | { type: 'responded' } // a non-streaming answer (error status) was passed through
  | { type: 'gone' }; // the client left

/** What the relay may see and do of the request it serves (OriginatedResponse provides it). */
export interface Leg1RelayHost {
  readonly ctx: GatewayContext;
  readonly log: Logger;
  readonly delivery: Delivery;
  readonly tracker: StreamTracker;
  /** Held whole until finish (BUFFER_STRUCTURED_OUTPUT). */
  readonly structured: boolean;
  isGone(): boolean;
  firstDeltaSent(): boolean;
  /** The commit point: the first delta is about to be delivered. */
  commit(): Promise<void>;
  /** The answer is complete; close the stream cleanly. */
  endAfterFinish(how: string): Promise<LegOutcome>;
}

export class Leg1Relay {
  constructor(private readonly host: Leg1RelayHost, private readonly reader: LegReader, private readonly legStart: number) {}

  async run(): Promise<LegOutcome> {
    const { reader, legStart } = this;
    const h = this.host;
    const cfg = h.ctx.config;
    let lastByte = legStart;
    let stalledMs = 0;
    let toolHold: { raw: Buffer[]; obs: ObservedEvent[]; bytes: number } | null = null;
    const periodMs = (): number => {
      if (!h.delivery.committed && cfg.firstDeltaTimeoutMs > 0) return Math.max(1, Math.min(cfg.stallIdleTimeoutMs, cfg.firstDeltaTimeoutMs - (Date.now() - legStart)));
      return cfg.stallIdleTimeoutMs;
    };
    try {
      for (;;) {
        const r = await reader.next(periodMs());
        if (h.isGone()) return { type: 'gone' };
        if (r.type === 'idle') {
          const now = Date.now();
          stalledMs += now - Math.max(lastByte, now - periodMs());
          if (h.tracker.finished) return await h.endAfterFinish('stall-after-finish');
          const d = decideOnSilence({
            committed: h.delivery.committed,
            anyBytes: reader.anyBytes,
            leg: 1,
            recoverable: h.tracker.recoverable,
            silentForMs: now - lastByte,
            totalStalledMs: stalledMs,
            stallIdleTimeoutMs: cfg.stallIdleTimeoutMs,
            maxStallMs: cfg.maxStallMs,
            firstDeltaTimeoutMs: cfg.firstDeltaTimeoutMs,
            sinceLegStartMs: now - legStart,
          });
          if (d.action === 'fail') return { type: 'failed', failure: d.failure, heldToolCall: toolHold ? Buffer.concat(toolHold.raw) : undefined };
          h.log.warn({ decision: 'WAITING', leg: 1, silent_ms: now - lastByte, tool_call_seen: h.tracker.toolCallsSeen, first_delta_sent: h.firstDeltaSent() }, 'leg1 silent but not actionable, continuing to wait');
          continue;
        }
        if (r.type === 'end' || r.type === 'reset') {
          if (h.tracker.finished) return await h.endAfterFinish(r.type === 'end' ? 'eof' : 'reset-after-finish');
          const detail = r.type === 'reset' ? errorCode(r.error) : reader.partialBytes ? `eof-mid-event(${reader.partialBytes}B)` : 'clean-eof';
          return { type: 'failed', failure: r.type === 'end' ? 'eof' : 'reset', detail, heldToolCall: toolHold ? Buffer.concat(toolHold.raw) : undefined };
        }
        lastByte = Date.now();
        const out: Buffer[] = [];
        for (const ev of r.events) {
          const o = StreamTracker.read(ev);
          if (o.kind === 'malformed') {
            h.tracker.malformed++;
            h.ctx.metrics.malformedEvent();
            h.log.warn({ decision: 'MALFORMED_EVENT', bytes: ev.raw.length }, 'malformed SSE event skipped');
            continue;
          }
          const failure: FailureKind | null = o.kind === 'error' ? 'error-event' : o.kind === 'chunk' && o.finishReason === 'abort' ? 'abort-finish' : null;
          if (failure) {
            const heldToolCall = toolHold ? Buffer.concat(toolHold.raw) : undefined;
            return await this.flushThen(out, { type: 'failed', failure, failingEvent: ev.raw, heldToolCall });
          }
          if (toolHold) {
            toolHold.raw.push(ev.raw);
            toolHold.obs.push(o);
            toolHold.bytes += ev.raw.length;
            if (toolHold.bytes > MAX_HELD_BYTES) {
              // Bounded memory: a tool call this large is released as it is and no longer protected.
              h.ctx.metrics.bufferOverflow('tool-call');
              h.log.warn({ decision: 'HOLD_LIMIT', what: 'tool-call', bytes: toolHold.bytes }, 'held tool call too large: released unbuffered');
            }
            if (o.finishReason !== null || o.kind === 'done' || toolHold.bytes > MAX_HELD_BYTES) {
              await this.deliverEvents(Buffer.concat(toolHold.raw), toolHold.obs, out);
              toolHold = null;
            }
            continue;
          }
          if (o.toolCall && this.bufferToolCalls) {
            // BUFFER_TOOL_CALLS: a tool call cannot be continued part-way, so it is held until complete;
            // if the leg dies meanwhile, the continuation starts from the state before it.
            toolHold = { raw: [ev.raw], obs: [o], bytes: ev.raw.length };
            if (o.finishReason !== null) {
              await this.deliverEvents(ev.raw, toolHold.obs, out);
              toolHold = null;
            }
            continue;
          }
          await this.deliverEvents(ev.raw, [o], out);
        }
        if (out.length) {
          const full = h.delivery.write(out.length === 1 ? out[0] : Buffer.concat(out));
          if (full) await full;
        }
      }
    } finally {
      reader.fence();
    }
  }

  private get bufferToolCalls(): boolean {
    const h = this.host;
    // Holding only buys something when a continuation can follow (reference: BUFFER_TOOL_CALLS needs
    // CONTINUATION_ENABLED=true; otherwise plain pass-through).
    return h.ctx.config.bufferToolCalls && h.ctx.config.continuationEnabled;
  }

  /**
   * Hands events to the client side: before the commit point they are held by Delivery, and the commit
   * happens at the first delta (or, for held structured output, at the finish).
   */
  private async deliverEvents(raw: Buffer, obs: ObservedEvent[], out: Buffer[]): Promise<void> {
    const h = this.host;
    for (const o of obs) h.tracker.apply(o);
    if (h.delivery.committed) {
      out.push(raw);
      return;
    }
    h.delivery.hold(raw);
    const complete = obs.some((o) => o.finishReason !== null || o.kind === 'done');
    const delta = obs.some((o) => o.hasDelta || o.usage);
    const overflow = h.delivery.heldBytes > MAX_HELD_BYTES;
    if (overflow) {
      // Bounded memory: held structured output this large is delivered as it streams from here on.
      h.ctx.metrics.bufferOverflow('structured-output');
      h.log.warn({ decision: 'HOLD_LIMIT', what: 'structured-output', bytes: h.delivery.heldBytes }, 'held output too large: delivered unbuffered');
    }
    if (h.structured ? complete || overflow : delta || complete) await h.commit();
  }

  private async flushThen(out: Buffer[], outcome: LegOutcome): Promise<LegOutcome> {
    const h = this.host;
    if (out.length) await h.delivery.write(Buffer.concat(out));
    return outcome;
  }
}

function errorCode(e: unknown): string {
  const err = e as { code?: string; message?: string };
  return err?.code ?? err?.message ?? 'reset';
}
