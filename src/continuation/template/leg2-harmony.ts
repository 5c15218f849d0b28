// Leg 2 of a harmony family on an engine that cannot split it (families/engine-rules.ts sglangAppend): the
// engine streams the raw text as `content`; each chunk is rewritten into the reasoning / content deltas the
// client was getting from leg 1, through the gateway's own split (src/recovery/harmony-split.ts).
import type { JsonObject } from '../../openai/chat';
import type { HarmonySplit } from '../../recovery/harmony-split';
import { type ObservedEvent, StreamTracker } from '../../sse/tracker';

export type HarmonyRewrite = { event: ObservedEvent } | { drop: true } | { error: string };

/** Rewrites choice 0's content of one chunk; a chunk left with nothing for the client is dropped. */
export function rewriteHarmonyChunk(o: ObservedEvent, split: HarmonySplit): HarmonyRewrite {
  if (o.kind !== 'chunk' || !o.content) return { event: o };
  const piece = split.feed(o.content);
  if ('error' in piece) return { error: piece.error };
  if (!piece.reasoning && !piece.content && o.finishReason === null && !o.usage && !o.toolCall) return { drop: true };
  const json = {
    ...o.json,
    choices: (o.json.choices as JsonObject[]).map((c) => {
      if ((c?.index ?? 0) !== 0 || !c.delta) return c;
      return { ...c, delta: { ...c.delta, content: piece.content || null, reasoning_content: piece.reasoning || null } };
    }),
  };
  const data = JSON.stringify(json);
  return { event: StreamTracker.read({ raw: Buffer.from(`data: ${data}\n\n`), data }) };
}
