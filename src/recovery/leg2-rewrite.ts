// Rewrites one parsed leg2 chunk so the client keeps seeing leg1's stream (reference usage.py
// rewrite_leg2_line): leg2 is a new request, so the engine gives it a new completion id; it may land on
// another engine kind that names the reasoning field differently; and its usage must be corrected.
import { isObject, type JsonObject, type ReasoningField } from '../openai/chat';
import type { RecoveredTokens } from './token-estimate';
import { correctUsage } from './usage';

export interface Leg2RewriteOptions {
  /** Leg1's id; null when leg1 showed none (then ids pass unchanged). */
  responseId: string | null;
  /** Leg1's `created`; null when leg1 showed none (then leg 2's passes unchanged). */
  created?: number | null;
  /** False: the endpoint's usage has no reasoning count (completions); none is added. Default true. */
  countsReasoning?: boolean;
  /** The reasoning field name leg1 used; null when leg1 showed no reasoning (then names pass unchanged). */
  reasoningField: ReasoningField | null;
  recovered: RecoveredTokens;
  multimodal: boolean;
}

const OTHER: Record<ReasoningField, ReasoningField> = { reasoning_content: 'reasoning', reasoning: 'reasoning_content' };

/** Pure: returns a new chunk (copying only what changes); the input is never mutated. */
export function rewriteLeg2Chunk(chunk: JsonObject, opts: Leg2RewriteOptions): JsonObject {
  if (!isObject(chunk)) return chunk;
  const out: JsonObject = { ...chunk };

  // Reference: only a chunk that has an id gets leg1's id.
  if (opts.responseId && out.id) out.id = opts.responseId;
  // One stream, one creation time: leg 2 was created later, and every chunk of an uninterrupted stream has the same.
  if (typeof opts.created === 'number' && typeof out.created === 'number') out.created = opts.created;

  if (opts.reasoningField && Array.isArray(chunk.choices)) {
    const want = opts.reasoningField;
    const other = OTHER[want];
    out.choices = chunk.choices.map((choice: JsonObject) => {
      const delta = isObject(choice) ? choice.delta : undefined;
      if (!isObject(delta) || !(other in delta)) return choice;
      const { [other]: value, ...rest } = delta;
      // Both names in one delta does not happen; if it did, a non-empty target is kept (nothing lost).
      const newDelta = rest[want] ? rest : { ...rest, [want]: value };
      return { ...choice, delta: newDelta };
    });
  }

  if (out.usage) out.usage = correctUsage(out.usage, opts.recovered, opts.multimodal, opts.countsReasoning ?? true);
  return out;
}

const empty = (v: unknown): boolean => v == null || v === '' || (Array.isArray(v) && v.length === 0);

/**
 * A usage that counts nothing generated: vLLM's role chunk carries one with continuous usage stats
 * (chat_completion/serving.py L624-634 in 0.33.0: the prompt, completion_tokens 0).
 */
const countsNothingGenerated = (u: unknown): boolean => empty(u) || (isObject(u) && u.completion_tokens === 0);

/**
 * A chunk that only announces the assistant role: every choice has a delta with `role` and nothing else
 * non-empty, no finish_reason, no logprobs, and the chunk has no usage or one that counts no generated token.
 * Leg2 opens with one; the client already got leg1's, so the caller drops it (its usage, corrected, would say
 * what the client last saw). Anything carrying data is never role-only (dropping must never lose text).
 */
export function isRoleOnlyChunk(chunk: unknown): boolean {
  if (!isObject(chunk) || !countsNothingGenerated(chunk.usage)) return false;
  const choices = chunk.choices;
  if (!Array.isArray(choices) || choices.length === 0) return false;
  return choices.every((c: JsonObject) => {
    if (!isObject(c) || !empty(c.finish_reason) || !empty(c.logprobs)) return false;
    const d = c.delta;
    if (!isObject(d) || empty(d.role)) return false;
    return Object.entries(d).every(([k, v]) => k === 'role' || empty(v));
  });
}
