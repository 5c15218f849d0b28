// Builds the leg2 request body (reference server.py attempt_continuation): the original request plus a
// final assistant message holding the delivered text, sent as a continuation of that message. Leg2 is a
// new generation conditioned on what the client already has, not a migration of the replica's state.
import { isObject, type JsonObject } from '../openai/chat';
import { type CaseKind, classifyCase, familyFor, needsThinkingDisabled } from './prefix-builders';
import { estimateRecoveredTokens, type RecoveredTokens } from './token-estimate';

export type Leg2Plan =
  | { kind: 'send'; body: JsonObject; recovered: RecoveredTokens; case: CaseKind; budgetFields: string[] }
  | { kind: 'skip'; reason: 'budget-exhausted' | 'tool-call-seen' | 'no-recoverable-content'; recovered?: RecoveredTokens };

// Same order as the reference: when a client sets both, max_tokens' value is the one reduced.
const BUDGET_FIELDS = ['max_tokens', 'max_completion_tokens'] as const;

// Engines accept an integer or its decimal string (pydantic lax mode); anything else gives NaN.
const budgetValue = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN);

export function planContinuationRequest(
  original: JsonObject,
  state: { reasoning: string; content: string; toolCallsSeen: boolean },
  cfg: { continuationModel: string; engine: 'sglang' | 'vllm'; rates: { cjk: number; other: number }; recovered?: RecoveredTokens },
): Leg2Plan {
  // The two exclusions the reference makes before attempting (guarded()): a tool call the client has
  // seen cannot be continued (continue_final_message has no "tool call in progress" state), and with no
  // reasoning or content there is nothing to continue from.
  const kase = classifyCase(state.toolCallsSeen, state.reasoning, state.content);
  if (kase === 'tool-call-seen' || kase === 'no-recoverable-content') return { kind: 'skip', reason: kase };

  // An exact count (TOKENIZE_URL) when the caller has one, else the reference's character estimate.
  const recovered = cfg.recovered ?? estimateRecoveredTokens(original, state.reasoning, state.content, cfg.rates);

  // Only the budget fields the client set are reduced; none is invented when the client set none (no
  // limit means no limit on leg2 either). Both get the same remaining value, as in the reference, so the
  // engine cannot read a different limit from either. A budget that is used up, or that we cannot read
  // as a number (conservative: we would not know the limit), means no leg2.
  const budgetFields = BUDGET_FIELDS.filter((f) => original[f] != null);
  let remaining: number | undefined;
  if (budgetFields.length > 0) {
    remaining = budgetValue(original[budgetFields[0]]) - recovered.totalRecovered;
    if (!(remaining > 0)) return { kind: 'skip', reason: 'budget-exhausted', recovered };
  }

  const prefix = familyFor(cfg.continuationModel).build(state.reasoning, state.content);
  // Shallow copy, as the reference's dict(original): `original` is never mutated, nested values are shared.
  const body: JsonObject = {
    ...original,
    messages: [...(Array.isArray(original.messages) ? original.messages : []), { role: 'assistant', content: prefix }],
  };
  for (const f of budgetFields) body[f] = remaining;

  body.continue_final_message = true;
  // SGLang ignores it, vLLM needs it explicitly with continue_final_message: sent for both engines. No
  // other engine-specific field is set (see the report: the reference's vLLM-aware version was not found).
  body.add_generation_prompt = false;
  body.stream = true;
  // The reference replaces stream_options with {include_usage: true}. We keep the client's other keys
  // (e.g. vLLM's continuous_usage_stats) so leg2's chunks have the shape leg1's had; include_usage is
  // forced because the correction needs leg2's real usage (the multimodal formula reads its prompt_tokens).
  body.stream_options = { ...(isObject(original.stream_options) ? original.stream_options : {}), include_usage: true };

  // Content has started, so thinking is over: ask the template not to think again. The key is the
  // reference's `thinking` (Kimi templates). We deliberately do NOT add `enable_thinking`: Qwen3/GLM
  // templates keyed on it would then append an empty <think></think> to the generation prompt, ahead of
  // a prefix that already holds the closed think block. Unlike the reference, which replaces the whole
  // object, the client's other chat_template_kwargs are kept.
  if (needsThinkingDisabled(state.content)) {
    body.chat_template_kwargs = {
      ...(isObject(original.chat_template_kwargs) ? original.chat_template_kwargs : {}),
      thinking: false,
    };
  }

  return { kind: 'send', body, recovered, case: kase, budgetFields: [...budgetFields] };
}
