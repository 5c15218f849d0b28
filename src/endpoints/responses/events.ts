// The Responses stream events the gateway writes itself, as vLLM 0.33.0 builds them for a text item
// (entrypoints/openai/responses/simple_streaming_events.py: _events_add_content_reasoning_item,
// _events_add_content_output_text_item, _event_output_text_delta, _event_reasoning_delta,
// _events_output_text_done, _events_reasoning_done). Pure: each returns the event without its
// sequence_number, which the writer assigns (one more than the last the client got).
import type { JsonObject } from '../../openai/chat';
import type { TextItemKind } from '../../openai/responses';

/** An event before its sequence number is assigned. */
export type Unnumbered = { type: string } & JsonObject;

/** The output item the stream is writing text into. */
export interface ItemPlace {
  readonly kind: TextItemKind;
  readonly id: string;
  readonly outputIndex: number;
  readonly contentIndex: number;
}

const partType = (kind: TextItemKind): string => (kind === 'message' ? 'output_text' : 'reasoning_text');

/**
 * A text part (the reasoning item's has no annotations). vLLM sets a message part's logprobs only where it opens
 * (content_part.added: `[]`); the finished part leaves them unset.
 */
function part(kind: TextItemKind, text: string, opening = false): JsonObject {
  if (kind === 'reasoning') return { type: 'reasoning_text', text };
  return opening ? { type: 'output_text', text, annotations: [], logprobs: [] } : { type: 'output_text', text, annotations: [] };
}

/** output_item.added and content_part.added: a new item opens (vLLM opens one with its first delta). */
export function itemOpened(p: ItemPlace): Unnumbered[] {
  const item =
    p.kind === 'message'
      ? { id: p.id, type: 'message', role: 'assistant', content: [], status: 'in_progress' }
      : { id: p.id, type: 'reasoning', summary: [], status: 'in_progress' };
  return [
    { type: 'response.output_item.added', output_index: p.outputIndex, item },
    {
      type: 'response.content_part.added',
      output_index: p.outputIndex,
      item_id: p.id,
      content_index: p.contentIndex,
      part: part(p.kind, '', true),
    },
  ];
}

/** One delta of text into the open item. */
export function textDelta(p: ItemPlace, delta: string): Unnumbered {
  const base = { content_index: p.contentIndex, output_index: p.outputIndex, item_id: p.id, delta };
  return p.kind === 'message'
    ? { type: 'response.output_text.delta', ...base, logprobs: [] }
    : { type: 'response.reasoning_text.delta', ...base };
}

/** The finished item as output_item.done and response.completed's output list carry it. */
export function doneItem(p: ItemPlace, text: string): JsonObject {
  return p.kind === 'message'
    ? { id: p.id, type: 'message', role: 'assistant', content: [part('message', text)], status: 'completed' }
    : { id: p.id, type: 'reasoning', summary: [], content: [part('reasoning', text)], status: 'completed' };
}

/** The text's .done, content_part.done and output_item.done: the open item closes with its whole text. */
export function itemClosed(p: ItemPlace, text: string): Unnumbered[] {
  const place = { item_id: p.id, output_index: p.outputIndex, content_index: p.contentIndex };
  const textDone =
    p.kind === 'message'
      ? { type: 'response.output_text.done', ...place, text, logprobs: [] }
      : { type: 'response.reasoning_text.done', ...place, text };
  return [
    textDone,
    { type: 'response.content_part.done', ...place, part: part(p.kind, text) },
    { type: 'response.output_item.done', output_index: p.outputIndex, item: doneItem(p, text) },
  ];
}

/** The part type a content_part event names for an item kind (the reader checks it). */
export function partTypeOf(kind: TextItemKind): string {
  return partType(kind);
}
