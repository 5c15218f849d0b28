// Leg 1's hooks on the leg loop: the original event bytes, untouched, from the commit point on; held back
// before it (and, with BUFFER_TOOL_CALLS, while a tool call is incomplete). It decides nothing about
// recovery: the loop reports how the leg ended and the state machine plans from there.

import type { Logger } from '../obs/logger';
import { withIdempotentToolCallIds } from '../openai/tool-call-ids';
import { decideOnSilence, type FailureKind } from '../recovery/planner';
import type { ObservedEvent, StreamTracker } from '../sse/tracker';
import type { LegReader } from '../upstream/leg-reader';
import type { GatewayContext } from './context';
import type { Delivery } from './delivery';
import { type LegFailure, type LegOutcome, readLeg } from './leg-loop';

/**
 * The most a request holds back (a buffered tool call, held structured output) before giving up the
 * protection and delivering as it streams: memory per stream stays bounded whatever the engine sends.
 */
export const MAX_HELD_BYTES = 4 * 1024 * 1024;

/** What the relay may see and do of the request it serves (OriginatedResponse provides it). */
export interface Leg1Host {
  readonly ctx: GatewayContext;
  readonly log: Logger;
  readonly delivery: Delivery;
  readonly tracker: StreamTracker;
  /** Held whole until finish (BUFFER_STRUCTURED_OUTPUT). */
  readonly structured: boolean;
  /** Derive tool_call ids from this key (src/openai/tool-call-ids.ts); the chunks that carry ids are re-encoded. */
  readonly toolCallKey: string | undefined;
  /** When this attempt's first delta is due (FIRST_DELTA_TIMEOUT_SECONDS), or null (no per-attempt limit). */
  readonly firstDeltaDeadline: number | null;
  /** When the request's first delta is due, whatever the attempt (FIRST_DELTA_DEADLINE_SECONDS). */
  readonly requestDeadline: number;
  isGone(): boolean;
  /** The commit point: the first delta is about to be delivered. */
  commit(): Promise<void>;
  /**
   * The attempt produced its first token: a retry's re-prefill is over. Usually the commit point too, but held
   * structured output commits only at its finish, long after the prefill.
   */
  onFirstToken(): void;
  /** The answer is complete; close the stream cleanly. */
  endAfterFinish(how: string): Promise<LegOutcome>;
  /** CONTINUATION_ENABLED=false: a stall a continuation would have followed; leg 1 is relayed on. */
  onDryRunTrigger(failure: FailureKind, silentMs: number): void;
}

export function relayLeg1(h: Leg1Host, reader: LegReader): Promise<LegOutcome> {
  const cfg = h.ctx.config;
  // BUFFER_TOOL_CALLS: a tool call cannot be continued part-way, so it is held until complete; if the leg dies
  // meanwhile, the continuation starts from the state before it. Holding only buys something when a
  // continuation can follow (reference: it needs CONTINUATION_ENABLED=true).
  const bufferToolCalls = cfg.bufferToolCalls && cfg.continuationEnabled;
  let toolHold: { raw: Buffer[]; obs: ObservedEvent[]; bytes: number } | null = null;
  // The deadlines before the first delta end at the attempt's first token (for held structured output long
  // before the commit point): what follows is a generation in progress, not a wait for one.
  let tokenSeen = false;
  const firstDue = () => (h.firstDeltaDeadline === null ? h.requestDeadline : Math.min(h.firstDeltaDeadline, h.requestDeadline));

  /** Before the commit point events are held by Delivery; the commit happens at the first delta (or, for held structured output, at the finish). */
  const deliver = async (raw: Buffer, obs: ObservedEvent[], out: Buffer[]): Promise<void> => {
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
      h.ctx.metrics.bufferOverflow('structured-output');
      h.log.warn(
        { decision: 'HOLD_LIMIT', what: 'structured-output', bytes: h.delivery.heldBytes },
        'held output too large: delivered unbuffered',
      );
    }
    if (delta || complete) {
      tokenSeen = true;
      h.onFirstToken();
    }
    if (h.structured ? complete || overflow : delta || complete) await h.commit();
  };

  return readLeg(reader, {
    ctx: h.ctx,
    log: h.log,
    leg: 1,
    isGone: () => h.isGone(),
    idlePeriodMs: () => {
      // Before the first token the next silence check is due no later than the first-delta deadlines.
      if (h.delivery.committed || tokenSeen) return cfg.stallIdleTimeoutMs;
      return Math.max(1, Math.min(cfg.stallIdleTimeoutMs, firstDue() - Date.now()));
    },
    onSilence: (s) =>
      decideOnSilence({
        ...s,
        committed: h.delivery.committed,
        leg: 1,
        recoverable: h.tracker.recoverable,
        stallIdleTimeoutMs: cfg.stallIdleTimeoutMs,
        maxStallMs: cfg.maxStallMs,
        firstDeltaTimeoutMs: tokenSeen ? 0 : cfg.firstDeltaTimeoutMs,
        untilDeadlineMs: tokenSeen ? null : h.requestDeadline - Date.now(),
        // The dry run never changes a stream: a stall is reported, and leg 1 relayed for as long as it lives.
        dryRun: !cfg.continuationEnabled,
      }),
    onSkipped: (failure, silentMs) => h.onDryRunTrigger(failure, silentMs),
    finished: () => h.tracker.finished,
    endAfterFinish: (how) => h.endAfterFinish(how),
    failed: (failure, detail, failingEvent): LegFailure => ({
      type: 'failed',
      failure,
      detail,
      failingEvent,
      heldToolCall: toolHold ? Buffer.concat(toolHold.raw) : undefined,
    }),
    onMalformed: () => h.tracker.malformed++,
    onEvent: async (o, raw, out) => {
      if (h.toolCallKey && o.toolCall) {
        const rewritten = withIdempotentToolCallIds(o.json, h.toolCallKey);
        if (rewritten) raw = Buffer.from(`data: ${JSON.stringify(rewritten)}\n\n`);
      }
      if (toolHold) {
        toolHold.raw.push(raw);
        toolHold.obs.push(o);
        toolHold.bytes += raw.length;
        const tooLarge = toolHold.bytes > MAX_HELD_BYTES;
        if (tooLarge) {
          // Bounded memory: a tool call this large is released as it is and no longer protected.
          h.ctx.metrics.bufferOverflow('tool-call');
          h.log.warn({ decision: 'HOLD_LIMIT', what: 'tool-call', bytes: toolHold.bytes }, 'held tool call too large: released unbuffered');
        }
        if (o.finishReason !== null || o.kind === 'done' || tooLarge) {
          const held = toolHold;
          toolHold = null;
          await deliver(Buffer.concat(held.raw), held.obs, out);
        }
        return;
      }
      if (o.toolCall && bufferToolCalls && o.finishReason === null) {
        toolHold = { raw: [raw], obs: [o], bytes: raw.length };
        return;
      }
      await deliver(raw, [o], out);
    },
    write: (out) => h.delivery.write(out.length === 1 ? out[0] : Buffer.concat(out)),
  });
}
