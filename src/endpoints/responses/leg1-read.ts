// Leg 1 of a Responses stream, read as the gateway's tracked state: each event the engine sends is classified
// as the chat path classifies a chunk (src/sse/tracker.ts ObservedEvent: the text the client now has, a tool
// call, the end of the answer, an error), while the relay forwards the event's bytes untouched. Along the way
// the stream's own state is kept (state.ts): ids, sequence numbers, the open item and its text.
import { isObject, type JsonObject } from '../../openai/chat';
import { asResponsesEvent, type ResponsesEvent, type TextItemKind } from '../../openai/responses';
import type { SseEvent } from '../../sse/parser';
import { type ObservedEvent, StreamTracker } from '../../sse/tracker';
import type { ResponsesState } from './state';

const NO_JSON: JsonObject = Object.freeze({});

/** An ObservedEvent of a Responses event (a plain object of the interface the tracker reads). */
function observed(
  json: JsonObject,
  parts: { reasoning?: string; content?: string; toolCall?: boolean; toolText?: string; finishReason?: string | null },
): ObservedEvent {
  const reasoning = parts.reasoning ?? '';
  const content = parts.content ?? '';
  const toolCall = parts.toolCall ?? false;
  return {
    kind: 'chunk',
    json,
    hasDelta: reasoning !== '' || content !== '' || toolCall,
    reasoning,
    content,
    toolCall,
    finishReason: parts.finishReason ?? null,
    usage: false,
    reasoningField: reasoning !== '' ? 'reasoning' : null,
    // The tracker counts tool-call text from `function.arguments` (src/openai/chunk.ts toolCallText).
    toolCalls: toolCall ? [{ function: { arguments: parts.toolText ?? '' } }] : null,
  };
}

const isTextKind = (t: unknown): t is TextItemKind => t === 'message' || t === 'reasoning';
const num = (v: unknown, fallback: number): number => (typeof v === 'number' && Number.isInteger(v) ? v : fallback);

/** Reads one leg 1 event: what the tracker learns of it, and the stream state it updates. */
export function readLeg1Event(state: ResponsesState, ev: SseEvent): ObservedEvent {
  const chat = StreamTracker.read(ev);
  // Comments, [DONE] and data that is no JSON are what they are whatever the endpoint.
  if (chat.kind === 'other' || chat.kind === 'done' || chat.kind === 'malformed') return chat;
  const e = asResponsesEvent(chat.json);
  if (e === null) return chat.kind === 'error' ? chat : observed(NO_JSON, {});
  const o = classify(state, e);
  // A failing event is not relayed after the first delta (the continuation takes its place): its number is not used.
  if (o.kind !== 'error' && typeof e.sequence_number === 'number') state.lastSeq = e.sequence_number;
  return o;
}

function classify(state: ResponsesState, e: ResponsesEvent): ObservedEvent {
  switch (e.type) {
    case 'response.created':
      if (isObject(e.response)) state.reset(e.response);
      state.lastSeq = num(e.sequence_number, 0);
      return observed(responseIds(e.response), {});
    case 'response.output_item.added':
      return itemAdded(state, e);
    case 'response.content_part.added':
      if (state.open && e.item_id === state.open.id) state.open = { ...state.open, contentIndex: num(e.content_index, 0) };
      return observed(NO_JSON, {});
    case 'response.output_text.delta':
    case 'response.reasoning_text.delta':
    // SGLang 0.5.23 with reasoning.summary: the reasoning streams as summary text (serving_responses.py
    // _wants_reasoning_summary); such a request is not continued (sglang-scope.ts), but the client has text.
    case 'response.reasoning_summary_text.delta':
      return textDelta(state, e);
    case 'response.function_call_arguments.delta':
      return observed(NO_JSON, { toolCall: true, toolText: typeof e.delta === 'string' ? e.delta : '' });
    case 'response.output_item.done':
      return itemDone(state, e);
    case 'response.completed':
    case 'response.incomplete':
      return observed(NO_JSON, { finishReason: finishOf(e) });
    case 'response.failed':
    case 'error':
      return { ...observed(e, {}), kind: 'error' };
    default:
      return observed(NO_JSON, {});
  }
}

/** What the tracker keeps of the response (its id and model), in the fields it reads. */
function responseIds(response: unknown): JsonObject {
  if (!isObject(response)) return NO_JSON;
  return { id: response.id, model: response.model };
}

/** A new output item: a text item is where continued text goes; any other (a tool call) cannot be continued. */
function itemAdded(state: ResponsesState, e: ResponsesEvent): ObservedEvent {
  const item = isObject(e.item) ? e.item : NO_JSON;
  const outputIndex = num(e.output_index, state.nextOutputIndex);
  if (isTextKind(item.type) && typeof item.id === 'string') {
    state.openItem({ kind: item.type, id: item.id, outputIndex, contentIndex: 0 });
    return observed(NO_JSON, {});
  }
  state.open = null;
  state.nextOutputIndex = Math.max(state.nextOutputIndex, outputIndex + 1);
  const name = typeof item.name === 'string' ? item.name : '';
  return observed(NO_JSON, { toolCall: true, toolText: name });
}

function textDelta(state: ResponsesState, e: ResponsesEvent): ObservedEvent {
  const delta = typeof e.delta === 'string' ? e.delta : '';
  const reasoning = e.type !== 'response.output_text.delta';
  if (state.open && state.open.id === e.item_id) state.addText(delta);
  return observed(NO_JSON, reasoning ? { reasoning: delta } : { content: delta });
}

function itemDone(state: ResponsesState, e: ResponsesEvent): ObservedEvent {
  if (isObject(e.item)) state.doneItems.push(e.item);
  if (state.open && isObject(e.item) && e.item.id === state.open.id) state.open = null;
  return observed(NO_JSON, {});
}

/** The answer's end as a chat finish_reason: `length` when the response stopped at max_output_tokens. */
function finishOf(e: ResponsesEvent): string {
  const status = isObject(e.response) ? e.response.status : undefined;
  return e.type === 'response.incomplete' || status === 'incomplete' ? 'length' : 'stop';
}
