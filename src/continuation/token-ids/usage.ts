// Usage on the ids path, exact by construction: the prompt is leg 1's prompt ids, the completion every id the
// client received plus what leg 2 generated (the engine's own count where it gives one). In the engine's shape,
// with `continuation` saying how it was continued (an extra field clients may ignore). Pure.
import type { JsonObject } from '../../openai/chat';

export interface IdsUsageInput {
  readonly engine: 'vllm' | 'llamacpp';
  readonly promptTokens: number;
  readonly deliveredTokens: number;
  readonly leg2Tokens: number;
  readonly legs: number;
  /**
   * Reasoning tokens (delivered + leg 2's), where the engine reports them: vLLM writes
   * completion_tokens_details.reasoning_tokens whenever a reasoning parser runs (chat_completion/serving.py
   * `_make_completion_tokens_details`); known here when leg 1 delivered reasoning. Undefined: not written.
   */
  readonly reasoningTokens?: number;
}

export function idsUsage(u: IdsUsageInput): JsonObject {
  const completion = u.deliveredTokens + u.leg2Tokens;
  const continuation = { legs: u.legs, recovered_tokens: u.deliveredTokens, method: 'token-ids', path: 'token-ids' };
  // The key order each engine writes (llama.cpp server-task.cpp usage_json_oaicompat; vLLM UsageInfo). Leg 2's
  // cache says nothing of the uninterrupted run's: 0 where the engine always writes the field.
  if (u.engine === 'llamacpp')
    return {
      completion_tokens: completion,
      prompt_tokens: u.promptTokens,
      total_tokens: u.promptTokens + completion,
      prompt_tokens_details: { cached_tokens: 0 },
      continuation,
    };
  const details = u.reasoningTokens === undefined ? {} : { completion_tokens_details: { reasoning_tokens: u.reasoningTokens } };
  return {
    prompt_tokens: u.promptTokens,
    total_tokens: u.promptTokens + completion,
    completion_tokens: completion,
    ...details,
    continuation,
  };
}
