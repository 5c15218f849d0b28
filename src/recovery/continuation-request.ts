// Builds the leg2 request body (reference server.py attempt_continuation): the original request plus a
// final assistant message holding the delivered text, sent as a continuation of that message. Leg2 is a
// new generation conditioned on what the client already has, not a migration of the replica's state.
//
// How that final message looks is the model family's and the engine's business (src/families/): for the
// engine's prompt to be the uninterrupted prompt followed by the text the model had generated, it carries
// the raw text after the generation prompt (SGLang), or the parts the template renders back into it (vLLM,
// llama.cpp). Where no request can do that, there is no leg 2: the stream ends explicitly.
import { isObject, type JsonObject } from '../openai/chat';
import type { PromptDiff } from '../templates/prompt-diff';
import { type CaseKind, classifyCase } from './interrupted-case';
import { type ContinuationTarget, type Designed, designLeg2, type Leg2Design } from './leg2-design';
import { estimateRecoveredTokens, type RecoveredTokens } from './token-estimate';

export { designLeg2, type Leg2Design } from './leg2-design';

export type SkipReason =
  | 'budget-exhausted'
  | 'tool-call-seen'
  | 'no-recoverable-content'
  | 'continuation-unsupported'
  | 'continuation-unverified';

export type Leg2Plan =
  | { kind: 'send'; body: JsonObject; recovered: RecoveredTokens; case: CaseKind; budgetFields: string[]; design: Leg2Design }
  | {
      kind: 'skip';
      reason: SkipReason;
      recovered?: RecoveredTokens;
      detail?: string;
      design?: Partial<Leg2Design>;
      /** continuation-unverified: where the prompts parted (offsets and lengths, never text). */
      diff?: PromptDiff;
    };

interface State {
  reasoning: string;
  content: string;
  toolCallsSeen: boolean;
}

// Same order as the reference: when a client sets both, max_tokens' value is the one reduced.
const BUDGET_FIELDS = ['max_tokens', 'max_completion_tokens'] as const;

// Engines accept an integer or its decimal string (pydantic lax mode); anything else gives NaN.
const budgetValue = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN);

export function planContinuationRequest(
  original: JsonObject,
  state: State,
  cfg: ContinuationTarget & {
    rates: { cjk: number; other: number };
    recovered?: RecoveredTokens;
    /** The design already made (and checked) for this cut; designed here when absent. */
    designed?: Designed;
  },
): Leg2Plan {
  // The two exclusions the reference makes before attempting (guarded()): a tool call the client has
  // seen cannot be continued (continue_final_message has no "tool call in progress" state), and with no
  // reasoning or content there is nothing to continue from.
  const kase = classifyCase(state.toolCallsSeen, state.reasoning, state.content);
  if (kase === 'tool-call-seen' || kase === 'no-recoverable-content') return { kind: 'skip', reason: kase };

  const designed = cfg.designed ?? designLeg2(original, state, cfg);
  if ('unsupported' in designed)
    return { kind: 'skip', reason: designed.reason, detail: designed.unsupported, design: designed.design, diff: designed.diff };
  const { design } = designed;

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

  // Shallow copy, as the reference's dict(original): `original` is never mutated, nested values are shared.
  // chat_template_kwargs and reasoning_effort stay the client's: they shape the generation prompt, which leg 2
  // must reproduce (the reference turns `thinking` off once content has started, which changes Kimi-K3's and
  // DeepSeek's generation prompts; docs/families.md).
  const messages = Array.isArray(original.messages) ? original.messages : [];
  const body: JsonObject = {
    ...original,
    ...design.shape.fields,
    messages: [...messages, { role: 'assistant', ...design.shape.message }],
  };
  for (const f of budgetFields) body[f] = remaining;

  body.continue_final_message = true;
  // vLLM and llama.cpp refuse continue_final_message with add_generation_prompt true (their default); SGLang
  // has no such field and drops it.
  body.add_generation_prompt = false;
  body.stream = true;
  // The reference replaces stream_options with {include_usage: true}. We keep the client's other keys
  // (e.g. vLLM's continuous_usage_stats) so leg2's chunks have the shape leg1's had; include_usage is
  // forced because the correction needs leg2's real usage (the multimodal formula reads its prompt_tokens).
  body.stream_options = { ...(isObject(original.stream_options) ? original.stream_options : {}), include_usage: true };

  return { kind: 'send', body, recovered, case: kase, budgetFields: [...budgetFields], design };
}
