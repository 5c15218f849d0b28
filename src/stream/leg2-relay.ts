// Leg 2's hooks on the leg loop: each event is parsed and rewritten (leg 1's id, leg 1's reasoning field
// name, usage counting the recovered text), leg 2's own role chunk is dropped (the client already had one),
// and silence is waited out as the reference gateway does, but never longer than MAX_STALL_SECONDS in total.

import type { Logger } from '../obs/logger';
import { withIdempotentToolCallIds } from '../openai/tool-call-ids';
import { DONE_EVENT } from '../recovery/interruption';
import { isRoleOnlyChunk, rewriteLeg2Chunk } from '../recovery/leg2-rewrite';
import { revisionFromChunk, revisionsDiffer } from '../recovery/model-revision';
import { decideOnSilence } from '../recovery/planner';
import type { Accounting, RecoveredTokens } from '../recovery/token-estimate';
import { StreamTracker } from '../sse/tracker';
import type { LegReader } from '../upstream/leg-reader';
import type { GatewayContext } from './context';
import type { Delivery } from './delivery';
import { type LegOutcome, readLeg } from './leg-loop';

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
}

export function relayLeg2(h: Leg2Host, reader: LegReader): Promise<LegOutcome> {
  const cfg = h.ctx.config;
  const own = new StreamTracker(); // leg 2's own finish/[DONE] state
  let revisionChecked = h.expectedRevision === undefined;
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
      await h.delivery.end(own.doneSeen ? undefined : DONE_EVENT);
      return { type: 'finished' };
    },
    failed: (failure, detail) => ({ type: 'failed', failure, detail }),
    onFirstBytes: () => h.onFirstBytes(),
    onEvent: (o, raw, out) => {
      own.apply(o);
      if (o.kind === 'done') return void out.push(DONE_EVENT);
      if (o.kind !== 'chunk') return void out.push(raw);
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
      // Leg 2 always asks for usage (to correct it); the client only gets it if it asked.
      const usageOnly = o.usage && Array.isArray(o.json.choices) && o.json.choices.length === 0;
      if (usageOnly && !h.clientWantsUsage) return;
      h.tracker.apply({ ...o, json: { ...o.json, id: undefined } });
      let rewritten = rewriteLeg2Chunk(o.json, {
        responseId: h.tracker.id,
        reasoningField: h.tracker.reasoningField,
        recovered: h.recovered,
        multimodal: h.multimodal,
      });
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
      out.push(Buffer.from(`data: ${JSON.stringify(rewritten)}\n\n`));
    },
    write: (out) => h.delivery.write(out.length === 1 ? out[0] : Buffer.concat(out)),
  });
}
