// The Responses stream events as SGLang 0.5.23 writes them for a text item without tools or a reasoning summary
// (srt/entrypoints/openai/serving_responses.py _responses_stream_generator_non_harmony: _open_reasoning_item,
// _close_reasoning_item, _open_message_item, _close_message_item, _emit_normal_text; the final
// ResponsesLifecycleEvent of response.{status}). Each event is the pydantic model_dump of the openai package's type
// (openai 3.57.0, the fidelity venv's), whose fields are in the type's own order, with `sequence_number` among
// them: the placeholder -1 keeps its place, and the writer's numbering overwrites its value. Ids are
// `rs_`/`msg_` + random_uuid() (32 hex digits); a message part's logprobs are null, the message has
// phase "final_answer", the reasoning item carries `encrypted_content: null`.
import { randomUUID } from 'node:crypto';
import type { JsonObject } from '../../openai/chat';
import type { ResponsesUsage, TextItemKind } from '../../openai/responses';
import type { ItemPlace, Unnumbered } from './events';

const SEQ = -1;

export const sglangItemId = (kind: TextItemKind): string => `${kind === 'message' ? 'msg' : 'rs'}_${randomUUID().replace(/-/g, '')}`;

function part(kind: TextItemKind, text: string): JsonObject {
  return kind === 'message' ? { annotations: [], text, type: 'output_text', logprobs: null } : { text, type: 'reasoning_text' };
}

function item(p: ItemPlace, text: string | null): JsonObject {
  const status = text === null ? 'in_progress' : 'completed';
  const content = text === null ? [] : [part(p.kind, text)];
  return p.kind === 'message'
    ? { id: p.id, content, role: 'assistant', status, type: 'message', phase: 'final_answer' }
    : { id: p.id, summary: [], type: 'reasoning', content, encrypted_content: null, status };
}

export function sglangItemOpened(p: ItemPlace): Unnumbered[] {
  const at = { content_index: p.contentIndex, item_id: p.id, output_index: p.outputIndex };
  return [
    { item: item(p, null), output_index: p.outputIndex, sequence_number: SEQ, type: 'response.output_item.added' },
    { ...at, part: part(p.kind, ''), sequence_number: SEQ, type: 'response.content_part.added' },
  ];
}

export function sglangTextDelta(p: ItemPlace, delta: string): Unnumbered {
  const at = { content_index: p.contentIndex, delta, item_id: p.id };
  return p.kind === 'message'
    ? { ...at, logprobs: [], output_index: p.outputIndex, sequence_number: SEQ, type: 'response.output_text.delta' }
    : { ...at, output_index: p.outputIndex, sequence_number: SEQ, type: 'response.reasoning_text.delta' };
}

export const sglangDoneItem = (p: ItemPlace, text: string): JsonObject => item(p, text);

export function sglangItemClosed(p: ItemPlace, text: string): Unnumbered[] {
  const at = { content_index: p.contentIndex, item_id: p.id };
  const textDone =
    p.kind === 'message'
      ? { ...at, logprobs: [], output_index: p.outputIndex, sequence_number: SEQ, text, type: 'response.output_text.done' }
      : { ...at, output_index: p.outputIndex, sequence_number: SEQ, text, type: 'response.reasoning_text.done' };
  return [
    textDone,
    { ...at, output_index: p.outputIndex, part: part(p.kind, text), sequence_number: SEQ, type: 'response.content_part.done' },
    { item: item(p, text), output_index: p.outputIndex, sequence_number: SEQ, type: 'response.output_item.done' },
  ];
}

/**
 * The last event: `response.completed`, or `response.incomplete` at max_output_tokens (_status_from_finish_reason).
 * ResponsesResponse.from_request sets `text` to {"format":{"type":"text"}} when the request gave none and the
 * output is messages only (_is_text_only); usage is its _serialize_usage shape (with cache_write_tokens: 0).
 */
export function sglangEnding(base: JsonObject, output: JsonObject[], usage: ResponsesUsage | null, incomplete: boolean): Unnumbered {
  const status = incomplete ? 'incomplete' : 'completed';
  const textOnly = output.length > 0 && output.every((i) => i.type === 'message');
  const text = base.text ?? (textOnly ? { format: { type: 'text' } } : null);
  const u = usage && { ...usage, input_tokens_details: { ...usage.input_tokens_details, cache_write_tokens: 0 } };
  const response = {
    ...base,
    output,
    status,
    usage: u,
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    text,
  };
  return { type: `response.${status}`, response, sequence_number: SEQ };
}
