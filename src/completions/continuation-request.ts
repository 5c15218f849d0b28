// A completions stream's continuation leg: the same request with the delivered text appended to its prompt, the
// budget that is left, streamed with usage. A text completion is a raw continuation of its prompt (no chat
// template, no reasoning parser between the model's text and the client), so the engine's prompt for leg 2 is the
// original prompt followed by exactly the text the client has; nothing per model family is needed. What stays
// approximate is what stays approximate for chat: the delivered text is tokenized again, and where the model's
// tokens ran across the cut the retokenized prompt can differ from the tokens it generated.
// Pure: the request is a function of the original and what was delivered.
import type { JsonObject } from '../openai/chat';
import type { CompletionRequest } from '../openai/completions';
import type { Leg2Plan } from '../recovery/continuation-request';
import { classifyCase } from '../recovery/interrupted-case';
import type { Leg2Design } from '../recovery/leg2-design';
import type { RecoveredTokens } from '../recovery/token-estimate';

/**
 * The engines' `max_tokens` when a completions request sets none: 16 in vLLM (completion/protocol.py,
 * CompletionRequest.max_tokens) and SGLang (entrypoints/openai/protocol.py, CompletionRequest.max_tokens), as in
 * OpenAI's API. Unlike chat, where no limit means the model's context, an unset budget is a budget: leg 2 gets what is
 * left of it, or an uninterrupted run would have stopped sooner than the stitched one.
 */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

/** What leg 2 of a completion is, in the terms the continuation steps log and relay (one part: the text). */
export function completionsDesign(delivered: string): Leg2Design {
  return {
    source: 'generic',
    familyName: 'completions',
    phase: 'content',
    thinking: false,
    shape: { message: { content: delivered }, split: 'engine' },
    raw: delivered,
    rawAsArrived: true,
    verifiedBy: null,
    readsClock: false,
  };
}

// Engines accept an integer or its decimal string (pydantic lax mode); anything else gives NaN.
const budgetValue = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN);

/** The budget the original request gave the whole answer (the engines' default when it set none). */
export function completionsBudget(original: CompletionRequest): number {
  return original.max_tokens == null ? COMPLETIONS_DEFAULT_MAX_TOKENS : budgetValue(original.max_tokens);
}

/**
 * Leg 2's request, or why there is none. `content`: the text the client has (every `text` of choice 0 so far);
 * `recovered`: how many tokens it counts (the budget spent).
 */
export function planCompletionsContinuation(original: CompletionRequest, content: string, recovered: RecoveredTokens): Leg2Plan {
  const kase = classifyCase(false, '', content);
  if (kase === 'no-recoverable-content') return { kind: 'skip', reason: kase };
  const remaining = completionsBudget(original) - recovered.totalRecovered;
  if (!(remaining > 0)) return { kind: 'skip', reason: 'budget-exhausted', recovered };
  const body: JsonObject = {
    ...original,
    prompt: original.prompt + content,
    max_tokens: remaining,
    stream: true,
    // The client's keys kept (continuous_usage_stats: leg 2's chunks keep leg 1's shape); usage forced, because the
    // correction needs leg 2's own count.
    stream_options: { ...(original.stream_options ?? {}), include_usage: true },
  };
  return { kind: 'send', body, recovered, case: kase, budgetFields: ['max_tokens'], design: completionsDesign(content) };
}
