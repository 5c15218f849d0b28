// A continuation leg's chat chunks, written as the Responses stream the client was reading: each delta goes
// into the open item with the next sequence_number (a reasoning item gives way to a message when the answer
// moves on, as vLLM does in simple_streaming_events.py), and the leg's end closes the open item and writes the
// one response.completed, with the response id, the items the client saw and the usage of all legs.
import type { JsonObject } from '../../openai/chat';
import { usageCounts } from '../../openai/chunk';
import type { ResponsesUsage, TextItemKind } from '../../openai/responses';
import type { ObservedEvent } from '../../sse/tracker';
import type { ItemPlace, Unnumbered } from './events';
import type { ResponsesState } from './state';

/** Why a continuation's chunk cannot be written into the stream (the leg then fails as unexpected output). */
export type WriteRefusal = 'tool-call' | 'reasoning-after-text' | 'text-too-large';

/** One continuation chunk as Responses events (possibly none), or why it cannot be written. */
export function writeLeg2Chunk(state: ResponsesState, o: ObservedEvent, usage: JsonObject | undefined): string | WriteRefusal {
  if (o.toolCall) return 'tool-call';
  if (usage) state.usage = usage;
  if (o.finishReason !== null) state.finishReason = o.finishReason;
  const events: Unnumbered[] = [];
  if (o.reasoning !== '') {
    if (state.open?.kind === 'message') return 'reasoning-after-text';
    events.push(...textInto(state, 'reasoning', o.reasoning));
  }
  if (o.content !== '') events.push(...textInto(state, 'message', o.content));
  if (state.textCapped) return 'text-too-large';
  return events.length === 0 ? '' : state.numbered(events);
}

/** The delta into an item of `kind`: the open one, or a new one after closing the open reasoning item. */
function textInto(state: ResponsesState, kind: TextItemKind, text: string): Unnumbered[] {
  const events: Unnumbered[] = [];
  if (state.open?.kind !== kind) {
    if (state.open) events.push(...closeOpen(state));
    const place: ItemPlace = { kind, id: state.dialect.newItemId(kind), outputIndex: state.nextOutputIndex, contentIndex: 0 };
    state.openItem(place);
    events.push(...state.dialect.itemOpened(place));
  }
  const open = state.open as ItemPlace;
  state.addText(text);
  events.push(state.dialect.textDelta(open, text));
  return events;
}

function closeOpen(state: ResponsesState): Unnumbered[] {
  const open = state.open;
  if (!open) return [];
  state.open = null;
  state.doneItems.push(state.dialect.doneItem(open, open.text));
  return state.dialect.itemClosed(open, open.text);
}

/** The end of the answer: the open item closes, and the one last event (the engine's: see dialect.ts). */
export function writeCompletion(state: ResponsesState): string {
  const events = closeOpen(state);
  const incomplete = state.finishReason === 'length';
  const usage = state.usage ? responsesUsage(state.usage) : null;
  events.push(state.dialect.ending(state.base ?? {}, [...state.doneItems], usage, incomplete));
  return state.numbered(events);
}

/** Chat usage (all legs, corrected) in the Responses' form. */
export function responsesUsage(chat: JsonObject): ResponsesUsage {
  const c = usageCounts(chat);
  const input = c?.prompt ?? 0;
  const output = c?.completion ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: c?.cached ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: c?.reasoning ?? 0 },
    total_tokens: c?.total ?? input + output,
  };
}
