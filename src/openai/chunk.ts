// The fields of a streamed chat.completion.chunk the gateway reads, typed where they are read. An engine's JSON
// is `unknown` until a guard here has looked at it: hand-written guards rather than a schema library, because
// they run once per relayed event and read a handful of fields of a larger object (docs/performance.md,
// "Reading a chunk", measures them against a zod schema of the same fields on the same chunks).
import { isObject, type JsonObject, type ReasoningField } from './chat';

/** What the gateway reads of choice 0 of a chunk (requests with n > 1 are out of scope). */
export interface ChoiceZero {
  /** The reasoning text of the delta, and the field it came in. */
  readonly reasoning: string;
  readonly reasoningField: ReasoningField | null;
  readonly content: string;
  /** The delta's tool calls, when it has any. */
  readonly toolCalls: readonly unknown[] | null;
  readonly finishReason: string | null;
}

const NO_CHOICE: ChoiceZero = Object.freeze({ reasoning: '', reasoningField: null, content: '', toolCalls: null, finishReason: null });

/** The choice with index 0 (an absent index counts as 0). */
export function choiceZero(choices: unknown): JsonObject | undefined {
  if (!Array.isArray(choices)) return undefined;
  for (let i = 0; i < choices.length; i++) {
    const c: unknown = choices[i];
    if (isObject(c) && (c.index ?? 0) === 0) return c;
  }
  return undefined;
}

/** Choice 0's delta and finish_reason, each field checked for its type (anything else reads as absent). */
export function readChoiceZero(chunk: JsonObject): ChoiceZero {
  const choice = choiceZero(chunk.choices);
  if (!choice) return NO_CHOICE;
  const d = choice.delta;
  const finishReason = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
  // A text_completion chunk (/v1/completions) carries its text in the choice itself: content, as the client has it.
  if (!isObject(d) && typeof choice.text === 'string') return { ...NO_CHOICE, content: choice.text, finishReason };
  if (!isObject(d)) return finishReason === null ? NO_CHOICE : { ...NO_CHOICE, finishReason };
  const field: ReasoningField | null =
    typeof d.reasoning_content === 'string' ? 'reasoning_content' : typeof d.reasoning === 'string' ? 'reasoning' : null;
  return {
    reasoning: field === null ? '' : (d[field] as string),
    reasoningField: field,
    content: typeof d.content === 'string' ? d.content : '',
    toolCalls: Array.isArray(d.tool_calls) && d.tool_calls.length > 0 ? d.tool_calls : null,
    finishReason,
  };
}

/** The name and argument fragments of one delta's tool calls (OpenAI streams both in pieces). */
export function toolCallText(calls: readonly unknown[]): string {
  let text = '';
  for (const c of calls) {
    const fn = isObject(c) ? c.function : undefined;
    if (!isObject(fn)) continue;
    if (typeof fn.name === 'string') text += fn.name;
    if (typeof fn.arguments === 'string') text += fn.arguments;
  }
  return text;
}

/**
 * An engine's count when it is one (a finite number, not negative), else undefined: a negative or otherwise
 * impossible count is treated as absent, as if the engine had not reported it, and never reaches the client.
 */
export function usageCount(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined;
}

/** The counts of a usage object, in OpenAI's, vLLM's or SGLang's layout; a count that is no count is undefined. */
export interface UsageCounts {
  readonly prompt?: number;
  readonly completion?: number;
  readonly total?: number;
  /** vLLM: completion_tokens_details.reasoning_tokens; SGLang: top-level reasoning_tokens. */
  readonly reasoning?: number;
  readonly cached?: number;
}

export function usageCounts(u: unknown): UsageCounts | null {
  if (!isObject(u)) return null;
  const details = isObject(u.completion_tokens_details) ? u.completion_tokens_details : undefined;
  const promptDetails = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : undefined;
  return {
    prompt: usageCount(u.prompt_tokens),
    completion: usageCount(u.completion_tokens),
    total: usageCount(u.total_tokens),
    reasoning: usageCount(details?.reasoning_tokens) ?? usageCount(u.reasoning_tokens),
    cached: usageCount(promptDetails?.cached_tokens),
  };
}
