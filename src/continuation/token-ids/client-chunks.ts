// Leg 2's text as the client reads it: chat chunks in the shape of the last one leg 1 delivered (its keys and
// their order, its id, model, created and system_fingerprint: the engine's own dialect), with the delta, the
// finish or the usage replaced. Pure.
import type { JsonObject, ReasoningField } from '../../openai/chat';

export interface ChunkShape {
  /** Leg 1's last delivered chunk as the client got it (ids stripped). */
  readonly last: JsonObject;
  /** The field leg 1's reasoning came in (vLLM `reasoning`, llama.cpp and SGLang `reasoning_content`). */
  readonly reasoningField: ReasoningField;
}

function choiceOf(shape: ChunkShape): JsonObject {
  const c = Array.isArray(shape.last.choices) ? shape.last.choices[0] : undefined;
  const base: JsonObject = c && typeof c === 'object' ? { ...(c as JsonObject) } : { index: 0 };
  // Per-token extras of the chunk it was copied from are not this chunk's.
  if ('logprobs' in base) base.logprobs = null;
  return base;
}

function withChoice(shape: ChunkShape, choice: JsonObject): JsonObject {
  const out: JsonObject = { ...shape.last, choices: [choice] };
  delete out.usage;
  delete out.timings;
  return out;
}

export function textChunk(shape: ChunkShape, kind: 'reasoning' | 'content', text: string): JsonObject {
  const delta = kind === 'content' ? { content: text } : { [shape.reasoningField]: text };
  return withChoice(shape, { ...choiceOf(shape), delta, finish_reason: null });
}

/**
 * The finish. `stop`: vLLM's `stop_reason` from leg 2's own finish (what stopped it: null, a stop string or token
 * id), placed right after finish_reason as vLLM's ChatCompletionResponseStreamChoice orders it; absent for engines
 * that write none.
 */
export function finishChunk(shape: ChunkShape, finishReason: string, stop?: { stop_reason: unknown }): JsonObject {
  const choice: JsonObject = {};
  for (const [k, v] of Object.entries({ ...choiceOf(shape), delta: {}, finish_reason: finishReason })) {
    choice[k] = v;
    if (k === 'finish_reason' && stop) choice.stop_reason = stop.stop_reason;
  }
  return withChoice(shape, choice);
}

export function usageChunk(shape: ChunkShape, usage: JsonObject): JsonObject {
  const out: JsonObject = { ...shape.last, choices: [], usage };
  delete out.timings;
  return out;
}

export const sseData = (json: JsonObject): Buffer => Buffer.from(`data: ${JSON.stringify(json)}\n\n`);
