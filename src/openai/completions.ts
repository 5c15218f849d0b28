// The OpenAI (legacy) completions shapes the gateway reads: `POST /v1/completions`, a prompt string continued as
// plain text, streamed as `text_completion` chunks whose choice carries `text` instead of chat's `delta`. Only what
// the gateway relies on is typed; every other field travels as it came. Which requests are in scope is decided
// here from the parsed body (src/request/scope.ts calls it): a continuation of a completion is the same request
// with the delivered text appended to the prompt, which holds only for one text prompt generating one choice
// whose output the client gets as it is.
import { z } from 'zod';
import { smallInt } from '../obs/log-values';
import { isObject, type JsonObject } from './chat';

/** A completions request body, as the scope decision accepted it (a `prompt` string). */
export interface CompletionRequest {
  model?: string;
  stream?: boolean;
  prompt: string;
  stream_options?: { include_usage?: boolean } & JsonObject;
  max_tokens?: number | string | null;
  [field: string]: unknown;
}

/** Why a completions request is not continued (passed through unchanged). */
export type CompletionsSkipReason =
  | 'not-completions-request'
  | 'completions-prompt-not-text'
  | 'completions-echo'
  | 'completions-logprobs'
  | 'completions-suffix'
  | 'multiple-choices'
  | 'structured-output';

export type CompletionsScope = { ok: true; payload: CompletionRequest } | { ok: false; reason: CompletionsSkipReason; detail?: string };

// Validation only (the parsed body is what is kept): a prompt that is a string, or a list (of prompts, or of
// token ids), which is valid for the engines but not continued here.
const CompletionRequestShape = z.looseObject({ prompt: z.union([z.string(), z.array(z.unknown())]) });

// Constrained decoding: the grammar state is lost with the replica, as for chat (src/request/scope.ts). The
// completions endpoints take the same fields (vLLM: response_format, structured_outputs, guided_*; SGLang:
// response_format, regex, ebnf, json_schema).
const CONSTRAINT_FIELDS = [
  'response_format',
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'structured_outputs',
  'regex',
  'ebnf',
  'json_schema',
  'structural_tag',
];

const isSet = (v: unknown): boolean => v !== undefined && v !== null && v !== false && v !== '';

/**
 * The completions part of the scope decision, after the body parsed as JSON and `stream` was checked. Out of scope:
 * `echo` (the prompt is streamed back first: leg 2's prompt would be echoed too), `logprobs` (offsets and tokens
 * of leg 2 would count from its longer prompt), `suffix` (an insertion, not a continuation), `n` or `best_of`
 * above 1 (only choice 0 is tracked), a prompt that is a list (several prompts, or token ids), structured output.
 */
export function completionsScope(payload: JsonObject): CompletionsScope {
  const shape = CompletionRequestShape.safeParse(payload);
  if (!shape.success) return { ok: false, reason: 'not-completions-request', detail: shape.error.issues[0]?.code ?? 'invalid' };
  if (typeof payload.prompt !== 'string') return { ok: false, reason: 'completions-prompt-not-text' };
  if (isSet(payload.echo)) return { ok: false, reason: 'completions-echo' };
  if (payload.logprobs != null) return { ok: false, reason: 'completions-logprobs' };
  if (isSet(payload.suffix)) return { ok: false, reason: 'completions-suffix' };
  for (const f of ['n', 'best_of'] as const)
    if (payload[f] != null && payload[f] !== 1) return { ok: false, reason: 'multiple-choices', detail: `${f}=${smallInt(payload[f])}` };
  const structuredBy = CONSTRAINT_FIELDS.find((f) => payload[f] != null && !(f === 'response_format' && isPlainText(payload[f])));
  if (structuredBy) return { ok: false, reason: 'structured-output', detail: structuredBy };
  return { ok: true, payload: payload as CompletionRequest };
}

/** `response_format: {type: "text"}` constrains nothing. */
const isPlainText = (v: unknown): boolean => isObject(v) && v.type === 'text';

/** The text of choice 0 of a streamed `text_completion` chunk; '' when it has none. */
export function completionChoiceText(choice: JsonObject): string {
  return typeof choice.text === 'string' ? choice.text : '';
}
