// Readers of what leg 2 by ids streams back: vLLM's text-completion chunks and llama-server's /completion
// frames, each turned into one Leg2Frame (text, ids, the finish, the engine's counts). Pure.
//   vLLM CompletionStreamResponse: `choices[0].text`, `.token_ids` (return_token_ids), `.finish_reason`;
//     a last chunk with `choices: []` and `usage` (stream_options.include_usage).
//   llama-server /completion (server-task.cpp to_json_non_oaicompat and the final result's): `content`,
//     `tokens`, `stop`, `stop_type` (`eos`, `word`, `limit`), `tokens_predicted`, `tokens_evaluated`,
//     `truncated`; finish_reason as its OpenAI endpoints map it: `limit` -> length, else stop (server-task.cpp
//     to_json_oaicompat).
import { isObject, type JsonObject } from '../../openai/chat';
import { idList } from './leg1-ledger';

export interface Leg2Frame {
  readonly text: string;
  /** The ids of this frame's tokens (null: the frame named none). */
  readonly ids: readonly number[] | null;
  /** The engine's finish, in the OpenAI vocabulary (null: not yet). */
  readonly finishReason: string | null;
  /** Tokens leg 2 generated so far, as the engine counts them (null: not said). */
  readonly generated: number | null;
  /** Leg 2's prompt tokens as the engine counts them (null: not said). */
  readonly promptTokens: number | null;
  /** vLLM's `stop_reason` on the finish (what stopped it), when the engine wrote one. */
  readonly stop?: { stop_reason: unknown };
}

export type FrameRead = { frame: Leg2Frame } | { error: string } | { ignore: true };

const int = (v: unknown): number | null => (Number.isInteger(v) && (v as number) >= 0 ? (v as number) : null);

export function readVllmCompletionChunk(json: JsonObject): FrameRead {
  if (isObject(json.error)) return { error: 'error-event' };
  const usage = isObject(json.usage) ? json.usage : null;
  const c = Array.isArray(json.choices) && isObject(json.choices[0]) ? json.choices[0] : null;
  if (!c && !usage) return { ignore: true };
  const finish = c && typeof c.finish_reason === 'string' ? c.finish_reason : null;
  return {
    frame: {
      text: c && typeof c.text === 'string' ? c.text : '',
      ids: c ? idList(c.token_ids) : null,
      finishReason: finish,
      generated: usage ? int(usage.completion_tokens) : null,
      promptTokens: usage ? int(usage.prompt_tokens) : null,
      ...(finish !== null && c && 'stop_reason' in c ? { stop: { stop_reason: c.stop_reason } } : {}),
    },
  };
}

export function readLlamaCompletionFrame(json: JsonObject): FrameRead {
  if (isObject(json.error)) return { error: 'error-event' };
  if (typeof json.content !== 'string' && json.stop !== true) return { ignore: true };
  const stopped = json.stop === true;
  return {
    frame: {
      text: typeof json.content === 'string' ? json.content : '',
      ids: idList(json.tokens),
      finishReason: stopped ? (json.stop_type === 'limit' ? 'length' : 'stop') : null,
      generated: int(json.tokens_predicted),
      promptTokens: int(json.tokens_evaluated),
    },
  };
}
