// Which engine's variant of the Responses event stream the gateway writes after leg 1 died: the continuation's
// events must read as the rest of the stream the engine itself was sending. vLLM 0.33.0's (events.ts) and
// SGLang 0.5.23's (sglang-events.ts) differ in item ids, field order, fields and the final event's type.
import { randomUUID } from 'node:crypto';
import type { JsonObject } from '../../openai/chat';
import type { ResponsesUsage, TextItemKind } from '../../openai/responses';
import { doneItem, type ItemPlace, itemClosed, itemOpened, textDelta, type Unnumbered } from './events';
import { sglangDoneItem, sglangEnding, sglangItemClosed, sglangItemId, sglangItemOpened, sglangTextDelta } from './sglang-events';

export interface ResponsesDialect {
  readonly engine: 'vllm' | 'sglang';
  newItemId(kind: TextItemKind): string;
  itemOpened(p: ItemPlace): Unnumbered[];
  textDelta(p: ItemPlace, delta: string): Unnumbered;
  itemClosed(p: ItemPlace, text: string): Unnumbered[];
  doneItem(p: ItemPlace, text: string): JsonObject;
  /** The one last event of a continued stream (response.completed, or SGLang's response.incomplete). */
  ending(base: JsonObject, output: JsonObject[], usage: ResponsesUsage | null, incomplete: boolean): Unnumbered;
}

/** vLLM 0.33.0: response.completed whatever the status (serving.py responses_stream_generator). */
function vllmEnding(base: JsonObject, output: JsonObject[], usage: ResponsesUsage | null, incomplete: boolean): Unnumbered {
  const response: JsonObject = {
    ...base,
    status: incomplete ? 'incomplete' : 'completed',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    output,
    usage,
  };
  return { type: 'response.completed', response };
}

export const VLLM_RESPONSES: ResponsesDialect = {
  engine: 'vllm',
  // vLLM names a streamed item with random_uuid(): 32 hex digits (vllm/utils random_uuid).
  newItemId: () => randomUUID().replace(/-/g, ''),
  itemOpened,
  textDelta,
  itemClosed,
  doneItem,
  ending: vllmEnding,
};

export const SGLANG_RESPONSES: ResponsesDialect = {
  engine: 'sglang',
  newItemId: sglangItemId,
  itemOpened: sglangItemOpened,
  textDelta: sglangTextDelta,
  itemClosed: sglangItemClosed,
  doneItem: sglangDoneItem,
  ending: sglangEnding,
};
