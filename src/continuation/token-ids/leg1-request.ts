// What leg 1 is asked so that its token ids come back with the stream (a continuation by ids needs them), per
// engine, and why a request is not asked. Pure.
//   vLLM: `return_token_ids: true`. The first chunk then carries the prompt's ids (top-level `prompt_token_ids`)
//     and every chunk its delta's ids (`choices[].token_ids`), an empty text delta included (vLLM
//     entrypoints/openai/chat_completion/protocol.py and serving.py, PR #22587; /work/shared/engine-token-ids.md).
//   llama-server: its OpenAI chat stream has no `tokens` field; a chunk's `logprobs.content[].id` is the id of
//     the token it carries when `logprobs` is on (tools/server/server-task.cpp probs_vector_to_json,
//     to_json_oaicompat_chat; `top_logprobs` sets n_probs, 0 sends none: server-common.cpp L1381-1390), and
//     `timings_per_token` puts `timings.predicted_n` (tokens generated so far) on every chunk
//     (server-context.cpp send_partial_response, server-common.cpp L76): the count that shows an id the stream
//     never carried (a token ending mid-character, or one the chat parser held back: server-context.cpp
//     process_token). llama.cpp as node-llama-cpp 3.21.1 bundles it (80fb11a).
// SGLang's streamed chat gives no ids (a 400 with `return_token_ids` and `stream`: serving_chat.py): never asked.
import type { Engine } from '../../families/types';
import { isObject, type JsonObject } from '../../openai/chat';

/** The fields the gateway adds to leg 1, and those the client asked itself (kept in what it receives). */
export interface Leg1IdsAsk {
  readonly engine: 'vllm' | 'llamacpp';
  readonly fields: Readonly<JsonObject>;
  /** The client asked for these itself: they stay in its stream. */
  readonly clientAsked: { readonly tokenIds: boolean; readonly logprobs: boolean; readonly timings: boolean };
}

export type Leg1IdsDecision = { ask: Leg1IdsAsk } | { off: string };

const STRUCTURED_FIELDS = [
  'guided_json',
  'guided_regex',
  'guided_choice',
  'guided_grammar',
  'structured_outputs',
  'grammar',
  'json_schema',
];

/** Why a continuation by ids cannot serve this request, whatever the engine (null: it can). */
function refusedForAnyEngine(p: JsonObject): string | null {
  const n = p.n;
  if (n !== undefined && n !== null && n !== 1) return 'n-greater-than-1';
  if (p.use_beam_search === true) return 'beam-search';
  // The grammar's state at the cut is not carried by a prompt of ids (as Dynamo keeps migration off for guided decoding).
  const rf = isObject(p.response_format) ? p.response_format.type : undefined;
  if (rf === 'json_object' || rf === 'json_schema') return 'structured-output';
  if (STRUCTURED_FIELDS.some((f) => p[f] !== undefined && p[f] !== null)) return 'structured-output';
  return null;
}

export function leg1IdsDecision(engine: Engine, enabled: boolean, payload: JsonObject): Leg1IdsDecision {
  if (!enabled) return { off: 'disabled' };
  if (engine === 'sglang') return { off: 'engine-streams-no-ids' };
  const refused = refusedForAnyEngine(payload);
  if (refused) return { off: refused };
  if (engine === 'vllm') {
    const asked = payload.return_token_ids === true;
    return { ask: { engine, fields: { return_token_ids: true }, clientAsked: { tokenIds: asked, logprobs: true, timings: true } } };
  }
  // llama-server refuses logprobs with tools on a stream (server-common.cpp L1383-1385).
  if (Array.isArray(payload.tools) && payload.tools.length > 0) return { off: 'llamacpp-logprobs-with-tools' };
  const logprobs = payload.logprobs === true;
  const timings = payload.timings_per_token === true;
  const fields: JsonObject = { timings_per_token: true };
  // The client's own top_logprobs stands (its chunks must look as it asked); 0 carries no ids, a gap found later.
  if (!logprobs) Object.assign(fields, { logprobs: true, top_logprobs: 1 });
  return { ask: { engine, fields, clientAsked: { tokenIds: false, logprobs, timings } } };
}

/** Leg 1's body with the fields added (the client's own values kept where it set them). */
export function leg1Body(payload: JsonObject, ask: Leg1IdsAsk): Buffer {
  return Buffer.from(JSON.stringify({ ...payload, ...ask.fields }));
}
