// Leg 2's hooks on the leg loop: each event is parsed and rewritten (leg 1's id, leg 1's reasoning field
// name, usage counting the recovered text), leg 2's own role chunk is dropped (the client already had one),
// and silence is waited out as the reference gateway does, but never longer than MAX_STALL_SECONDS in total.

import type { Delivered, Phase } from '../families/types';
import type { Logger } from '../obs/logger';
import type { JsonObject } from '../openai/chat';
import { withIdempotentToolCallIds } from '../openai/tool-call-ids';
import { HarmonySplit } from '../recovery/harmony-split';
import { DONE_EVENT } from '../recovery/interruption';
import { isRoleOnlyChunk, rewriteLeg2Chunk } from '../recovery/leg2-rewrite';
import { revisionFromChunk, revisionsDiffer } from '../recovery/model-revision';
import { decideOnSilence } from '../recovery/planner';
import { RestartGuard } from '../recovery/restart-guard';
import type { Accounting, RecoveredTokens } from '../recovery/token-estimate';
import { type ObservedEvent, StreamTracker } from '../sse/tracker';
import type { LegReader } from '../upstream/leg-reader';
import type { GatewayContext } from './context';
import type { Delivery } from './delivery';
import { type LegFailure, type LegOutcome, readLeg } from './leg-loop';
import { rewriteHarmonyChunk } from './leg2-harmony';

export interface Leg2Host {
  readonly ctx: GatewayContext;
  readonly log: Logger;
  readonly delivery: Delivery;
  /** The request's delivered-text tracker (leg 1's id and field names; leg 2's text is appended). */
  readonly tracker: StreamTracker;
  readonly recovered: RecoveredTokens;
  readonly multimodal: boolean;
  readonly clientWantsUsage: boolean;
  /** Reported in usage.continuation (an extra field clients may ignore). */
  readonly accounting: { legs: number } & Accounting;
  isGone(): boolean;
  onFirstBytes(): void;
  /** The first generated token (a delta or a finish): the re-prefill is over. */
  onFirstToken(): void;
  /** Leg 1's model revision, checked against leg 2's first system_fingerprint (when no header named leg 2's). */
  readonly expectedRevision: string | undefined;
  /** Derive tool_call ids from this key (src/openai/tool-call-ids.ts). */
  readonly toolCallKey: string | undefined;
  /** What the client had when leg 2 started, and where it was cut. */
  readonly delivered: Delivered;
  readonly phase: Phase;
  /** Who splits leg 2's text: the engine, or the gateway's harmony split (src/families/types.ts Leg2Shape). */
  readonly split: 'engine' | 'harmony';
}

const COUNTS = ['prompt_tokens', 'completion_tokens', 'total_tokens'] as const;

/** `usage` with each count raised to `seen`'s where it was lower. */
function atLeast(usage: JsonObject, seen: JsonObject): JsonObject {
  const out = { ...usage };
  for (const k of COUNTS) if (typeof seen[k] === 'number' && typeof out[k] === 'number' && out[k] < seen[k]) out[k] = seen[k];
  return out;
}

export function relayLeg2(h: Leg2Host, reader: LegReader): Promise<LegOutcome> {
  const cfg = h.ctx.config;
  const own = new StreamTracker(); // leg 2's own finish/[DONE] state
  let revisionChecked = h.expectedRevision === undefined;
  const harmony = h.split === 'harmony' ? new HarmonySplit(h.phase) : undefined;
  // Leg 2's first words are held back (bytes and what they would add to the tracker) until the guard has seen
  // enough of them to tell a continuation from a restart of the answer.
  const guard = new RestartGuard(h.delivered, h.phase);
  const held: Array<{ o: ObservedEvent | null; bytes: Buffer }> = [];
  const emit = (o: ObservedEvent | null, bytes: Buffer, out: Buffer[]) => {
    if (guard.state === 'pending') return void held.push({ o, bytes });
    for (const x of held.splice(0)) {
      if (x.o) h.tracker.apply(x.o);
      out.push(x.bytes);
    }
    if (o) h.tracker.apply(o);
    out.push(bytes);
  };
  const restarted = (): LegFailure => {
    h.log.warn({ decision: 'LEG2_RESTARTED', phase: h.phase }, 'the continuation began the answer again: not appended');
    return { type: 'failed', failure: 'restarted' };
  };
  return readLeg(reader, {
    ctx: h.ctx,
    log: h.log,
    leg: 2,
    isGone: () => h.isGone(),
    idlePeriodMs: () => cfg.stallIdleTimeoutMs,
    onSilence: (s) =>
      decideOnSilence({
        ...s,
        committed: true,
        leg: 2,
        recoverable: true,
        stallIdleTimeoutMs: cfg.stallIdleTimeoutMs,
        maxStallMs: cfg.maxStallMs,
        firstDeltaTimeoutMs: 0,
      }),
    finished: () => own.finished,
    endAfterFinish: async () => {
      if (guard.finish() === 'restart') return restarted();
      if (held.length > 0) {
        const out: Buffer[] = [];
        emit(null, Buffer.alloc(0), out);
        await h.delivery.write(Buffer.concat(out));
      }
      await h.delivery.end(own.doneSeen ? undefined : DONE_EVENT);
      return { type: 'finished' };
    },
    failed: (failure, detail) => ({ type: 'failed', failure, detail }),
    onFirstBytes: () => h.onFirstBytes(),
    onEvent: (event, raw, out) => {
      own.apply(event);
      if (event.kind === 'done') return void emit(null, DONE_EVENT, out);
      if (event.kind !== 'chunk') return void emit(null, raw, out);
      let o = event;
      if (harmony) {
        const r = rewriteHarmonyChunk(o, harmony);
        if ('error' in r) {
          h.log.warn({ decision: 'LEG2_UNEXPECTED_OUTPUT', detail: r.error }, 'the continuation left the channels the gateway splits');
          return { type: 'failed', failure: 'unexpected-output' };
        }
        if ('drop' in r) return;
        o = r.event;
      }
      if (!revisionChecked) {
        revisionChecked = true;
        const got = revisionFromChunk(o.json);
        if (revisionsDiffer(h.expectedRevision, got)) {
          h.log.warn(
            { decision: 'REVISION_MISMATCH', model_revision: h.expectedRevision, leg2_model_revision: got },
            'continuation from another model revision: not stitched',
          );
          return { type: 'failed', failure: 'model-revision-mismatch' };
        }
      }
      if (isRoleOnlyChunk(o.json)) return;
      if (o.hasDelta || o.finishReason !== null) h.onFirstToken();
      if (guard.observe(o.reasoning, o.content) === 'restart' || (o.finishReason !== null && guard.finish() === 'restart'))
        return restarted();
      // Leg 2 always asks for usage (to correct it); the client only gets it if it asked.
      const usageOnly = o.usage && Array.isArray(o.json.choices) && o.json.choices.length === 0;
      if (usageOnly && !h.clientWantsUsage) return;
      let rewritten = rewriteLeg2Chunk(o.json, {
        responseId: h.tracker.id,
        reasoningField: h.tracker.reasoningField,
        recovered: h.recovered,
        multimodal: h.multimodal,
      });
      // Running usage (continuous_usage_stats) never goes below what the client already saw.
      if (rewritten.usage && h.tracker.lastUsage) rewritten.usage = atLeast(rewritten.usage, h.tracker.lastUsage);
      // The tracker keeps the corrected usage: a further continuation leg counts from it.
      const tracked: ObservedEvent = { ...o, json: { ...o.json, id: undefined, usage: rewritten.usage ?? o.json.usage } };
      if (h.toolCallKey && o.toolCall) rewritten = withIdempotentToolCallIds(rewritten, h.toolCallKey) ?? rewritten;
      if (!h.clientWantsUsage && rewritten.usage) delete rewritten.usage;
      if (rewritten.usage) {
        const a = h.accounting;
        rewritten.usage.continuation = {
          legs: a.legs,
          recovered_tokens: h.recovered.totalRecovered,
          method: a.method,
          dialect: a.dialect,
          prompt: a.prompt,
          ...(a.fallback ? { fallback: a.fallback } : {}),
        };
      }
      emit(tracked, Buffer.from(`data: ${JSON.stringify(rewritten)}\n\n`), out);
    },
    write: (out) => h.delivery.write(out.length === 1 ? out[0] : Buffer.concat(out)),
  });
}
