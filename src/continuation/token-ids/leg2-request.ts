// Leg 2 by token ids: the prompt is leg 1's prompt ids followed by the ids of every token the client has, sent
// to the engine's text-completion endpoint, which runs no chat template and no parser (the raw text comes back,
// markers included, and the gateway splits it: raw-split.ts). Same sampling parameters, seed included; the
// budget is what is left of the client's, exact from the id count. Pure.
//   vLLM `/v1/completions`: `prompt` may be a list of ints; `return_token_ids` streams `choices[].token_ids`
//     (entrypoints/openai/completion/protocol.py, serving.py; /work/shared/engine-token-ids.md).
//   llama-server `/completion`: `prompt` may be a token array (tokenized as given, no BOS added:
//     server-common.cpp tokenize_input_subprompt); each streamed frame carries `content`, `tokens` and
//     `tokens_predicted` (server-task.cpp to_json_non_oaicompat).
import type { JsonObject } from '../../openai/chat';

/** The sampling fields both engines read the same way, carried from the client's request as they are. */
const SAMPLING = [
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'seed',
  'stop',
  'frequency_penalty',
  'presence_penalty',
  'repetition_penalty',
  'logit_bias',
  'stop_token_ids',
  'ignore_eos',
  'min_tokens',
  'typical_p',
  'bad_words',
  'allowed_token_ids',
  'skip_special_tokens',
  'spaces_between_special_tokens',
  'include_stop_str_in_output',
  'priority',
] as const;

/** llama-server's own sampling names (its chat endpoint copies unknown fields into the same params). */
const LLAMA_SAMPLING = [
  'repeat_penalty',
  'repeat_last_n',
  'mirostat',
  'mirostat_tau',
  'mirostat_eta',
  'dry_multiplier',
  'xtc_probability',
  'xtc_threshold',
  'samplers',
  'n_probs',
] as const;

const BUDGET_FIELDS = ['max_tokens', 'max_completion_tokens'] as const;

export type IdsLeg2Plan =
  | { kind: 'send'; path: string; body: JsonObject; remaining: number | null; promptIds: number }
  // A budget used up, or one that cannot be read as a number (the limit would be unknown), as on the text path.
  | { kind: 'skip'; reason: 'budget-exhausted' };

export interface IdsLeg2Input {
  readonly engine: 'vllm' | 'llamacpp';
  readonly original: JsonObject;
  readonly promptIds: readonly number[];
  readonly generatedIds: readonly number[];
}

const budgetValue = (v: unknown): number => (typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN);

/** What is left of the client's budget after the ids it has (null: the client set none, none is invented). */
export function remainingBudget(original: JsonObject, generated: number): number | null | 'exhausted' | 'unreadable' {
  const field = BUDGET_FIELDS.find((f) => original[f] != null);
  if (!field) return null;
  const total = budgetValue(original[field]);
  if (!Number.isFinite(total)) return 'unreadable';
  const left = total - generated;
  return left > 0 ? left : 'exhausted';
}

export function planIdsLeg2(input: IdsLeg2Input): IdsLeg2Plan {
  const { original, engine } = input;
  const remaining = remainingBudget(original, input.generatedIds.length);
  if (remaining === 'exhausted') return { kind: 'skip', reason: 'budget-exhausted' };
  if (remaining === 'unreadable') return { kind: 'skip', reason: 'budget-exhausted' };
  const prompt = [...input.promptIds, ...input.generatedIds];
  const body: JsonObject = {};
  if (original.model !== undefined) body.model = original.model;
  body.prompt = prompt;
  for (const f of SAMPLING) if (original[f] !== undefined) body[f] = original[f];
  if (engine === 'vllm') {
    if (remaining !== null) body.max_tokens = remaining;
    body.stream = true;
    body.stream_options = { include_usage: true };
    body.return_token_ids = true;
    return { kind: 'send', path: '/v1/completions', body, remaining, promptIds: input.promptIds.length };
  }
  for (const f of LLAMA_SAMPLING) if (original[f] !== undefined) body[f] = original[f];
  // No limit means the engine's own (-1); the chat endpoint maps max_tokens to n_predict the same way.
  body.n_predict = remaining ?? -1;
  body.stream = true;
  body.return_tokens = true;
  return { kind: 'send', path: '/completion', body, remaining, promptIds: input.promptIds.length };
}
