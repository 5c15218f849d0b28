// Usage correction for leg2's usage chunk (reference usage.py correct_usage). The interrupted leg1 never
// reports usage, and leg2's own usage counts only what leg2 generated, so forwarded as is the client would
// see a completion far too short for the text it received. Exactly two legs exist (never a third), so:
//
//   completion_tokens = leg2.completion_tokens + recovered.reasoning + recovered.content
//   reasoning_tokens  = leg2.reasoning_tokens  + recovered.reasoning   (completion includes reasoning)
//   prompt_tokens     = the ORIGINAL request's prompt, counted by the engine (template) or estimated
//                     = max(0, leg2.prompt_tokens - prefix tokens)     (engine-counted prefix: SGLang, multimodal)
//                     = max(0, leg2.prompt_tokens - recovered.total)   (multimodal, estimate only)
//   total_tokens      = prompt_tokens + completion_tokens
//   cached_tokens     = min(leg2.cached_tokens, prompt_tokens - 1), never below 0
//
// Text-only: leg2's prompt also holds the recovered prefix, so it is not the client's prompt; the reference
// uses the character estimate of the original request instead. With TOKENIZE_URL the engine counts: either
// the original request through its chat template, or the prefix leg2 was given (leg2's prompt is the
// original prompt, generation prompt included, plus exactly those tokens), which leg2's prompt_tokens
// minus the prefix count turns into the original prompt as an uninterrupted run reports it. Multimodal: images have no characters to
// estimate (the reference saw ~12 estimated for a 60k-token image prompt), so leg2's real count is used
// minus the estimate of the prefix it contains. cached_tokens was measured against leg2's larger prompt;
// it is kept strictly below prompt_tokens so the bill never shows a fully cached (or over-cached) prompt.
import { isObject, type JsonObject } from '../openai/chat';
import { usageCount, usageCounts } from '../openai/chunk';
import type { CountedTokens, RecoveredTokens } from './token-estimate';

export { usageCount };

const num = (v: unknown): number => usageCount(v) ?? 0;

/**
 * The count a continuation starts from when the engine streamed its own running usage (continuous usage stats,
 * vLLM's and SGLang's; after a continuation leg, that leg's corrected usage), else `counted` (the tokenizer,
 * /tokenize or the estimate) as it is.
 *   `current`: the usage came with the last delivered chunk. It then counts everything the client has, exactly:
 *   the prompt, every generated token (the ones the client saw nothing of included) and, where the engine
 *   reports it, the reasoning among them; an engine that reports no reasoning count leaves `counted`'s (never
 *   more than the generated tokens). Not current (text arrived after it): only its prompt, which does not change
 *   during a generation, replaces `counted`'s; the delivered tokens are `counted`'s.
 * A negative or missing prompt or completion count is no count: `counted` stands.
 */
export function fromRunningUsage(usage: unknown, current: boolean, counted: CountedTokens): CountedTokens {
  const u = usageCounts(usage);
  const prompt = u?.prompt;
  const completion = u?.completion;
  if (!u || prompt === undefined) return counted;
  if (!current || completion === undefined)
    return { ...counted, promptTokens: prompt, accounting: { ...counted.accounting, prompt: 'engine-usage' } };
  const reasoningTokens = Math.min(u.reasoning ?? counted.reasoningTokens, completion);
  return {
    promptTokens: prompt,
    reasoningTokens,
    contentTokens: completion - reasoningTokens,
    totalRecovered: completion,
    method: 'engine-usage',
    accounting: { method: 'engine-usage', dialect: null, prompt: 'engine-usage' },
  };
}

/**
 * Returns a new usage object. Unlike the reference, which rebuilds usage from five known keys, every other
 * key leg2 reported is kept as is: the client should see the shape its engine emits (vLLM's
 * completion_tokens_details, prompt_tokens_details: null, ...), only with corrected numbers.
 */
export function correctUsage(usage: unknown, recovered: RecoveredTokens, multimodal: boolean, countsReasoning = true): JsonObject {
  const leg2 = isObject(usage) ? usage : {};
  // The engine's own running count of the original prompt is exact, multimodal or not.
  const engineCounted = recovered.accounting?.prompt === 'engine-usage';
  const fromLeg2 =
    !engineCounted && recovered.prefixTokens !== undefined && (multimodal || recovered.accounting?.prompt === 'leg2-minus-prefix');
  // Without a usable leg 2 prompt count, the original request's own count (or estimate) stands, as text-only.
  const leg2Prompt = usageCount(leg2.prompt_tokens);
  const promptTokens =
    fromLeg2 && leg2Prompt !== undefined
      ? Math.max(0, leg2Prompt - (recovered.prefixTokens as number))
      : multimodal && !engineCounted && leg2Prompt !== undefined
        ? Math.max(0, leg2Prompt - recovered.totalRecovered)
        : Math.max(0, recovered.promptTokens);
  const completionTokens = num(leg2.completion_tokens) + recovered.totalRecovered;
  const out: JsonObject = {
    ...leg2,
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
  // A completion's usage counts no reasoning (vLLM's has no such field): none is invented.
  if (!countsReasoning) return withCachedClamped(out, leg2, promptTokens);

  // Reasoning count, in whichever shape the engine uses: SGLang puts it at the top level, vLLM (and
  // OpenAI) in completion_tokens_details. With neither present, the top-level key is added, as the
  // reference (SGLang-only) always does.
  const details = isObject(leg2.completion_tokens_details) ? leg2.completion_tokens_details : null;
  if (details) {
    out.completion_tokens_details = { ...details, reasoning_tokens: num(details.reasoning_tokens) + recovered.reasoningTokens };
  } else if (leg2.completion_tokens_details === null && typeof leg2.reasoning_tokens === 'number' && recovered.reasoningTokens > 0) {
    // SGLang (0.5.23, UsageProcessor.calculate_token_usage) repeats the count there only when it is not 0: a
    // leg 2 that reasoned no more says null, an uninterrupted run that reasoned says the count.
    out.completion_tokens_details = { reasoning_tokens: num(leg2.reasoning_tokens) + recovered.reasoningTokens };
  }
  if (typeof leg2.reasoning_tokens === 'number' || !details) {
    out.reasoning_tokens = num(leg2.reasoning_tokens) + recovered.reasoningTokens;
  }

  return withCachedClamped(out, leg2, promptTokens);
}

/** `out` with leg 2's cached_tokens kept below the corrected prompt. */
function withCachedClamped(out: JsonObject, leg2: JsonObject, promptTokens: number): JsonObject {
  // Reference: only a non-empty prompt_tokens_details is touched, and only a cached_tokens that is set.
  const promptDetails = leg2.prompt_tokens_details;
  if (isObject(promptDetails) && Object.keys(promptDetails).length > 0) {
    const copy = { ...promptDetails };
    // The reference clamps to prompt_tokens - 1, which is -1 when prompt_tokens is 0; we stop at 0.
    if (typeof copy.cached_tokens === 'number' && usageCount(copy.cached_tokens) === undefined) delete copy.cached_tokens;
    else if (typeof copy.cached_tokens === 'number') copy.cached_tokens = Math.max(0, Math.min(copy.cached_tokens, promptTokens - 1));
    out.prompt_tokens_details = copy;
  }
  return out;
}
