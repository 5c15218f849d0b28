// The event shapes of POST /v1/responses with stream: true as SGLang 0.5.23 streams it for a model without
// harmony: our reading of srt/entrypoints/openai/serving_responses.py (responses_stream_generator_non_harmony and
// _responses_stream_generator_non_harmony) and protocol.py (ResponsesResponse, from_request, _serialize_usage,
// ResponsesLifecycleEvent), with each event as the pydantic model_dump of the openai package's type (openai 3.57.0,
// as pinned in test/fidelity/requirements.txt's venv): fields in the type's order, sequence_number among them;
// `rs_`/`msg_`/`fc_`/`call_` ids; a message has phase and null logprobs in its parts; a reasoning item has
// `content` and `encrypted_content: null`; the last event is response.{status} (response.incomplete at the budget);
// an exception mid-stream is response.failed. The e2e tests of the SGLang dialect rest on this reading.
import { createHash } from 'node:crypto';

type Obj = Record<string, unknown>;
export type TextKind = 'reasoning' | 'message';
export interface ItemAt {
  kind: TextKind | 'function_call';
  id: string;
  index: number;
  text: string;
  callId?: string;
  name?: string;
  /** reasoning.summary asked: the reasoning streams as reasoning_summary_* events (_wants_reasoning_summary). */
  summary?: boolean;
}
const SEQ = -1;

/** `rs_`/`msg_` + random_uuid() (32 hex), `fc_` + 8 hex and `call_` + 24 hex: here derived from the response id. */
export function sglangId(responseId: string, index: number, kind: ItemAt['kind'] | 'call'): string {
  const hex = createHash('md5').update(`${responseId}:${index}`).digest('hex');
  if (kind === 'function_call') return `fc_${hex.slice(0, 8)}`;
  if (kind === 'call') return `call_${hex.slice(0, 24)}`;
  return `${kind === 'message' ? 'msg' : 'rs'}_${hex}`;
}

/** ResponsesResponse.from_request as response.created / in_progress carry it (output empty, status in_progress). */
export function sglangBase(id: string, created: number, model: string, b: any): Obj {
  const effort = b.reasoning?.effort;
  return {
    id,
    object: 'response',
    created_at: created,
    model,
    output: [],
    status: 'in_progress',
    usage: null,
    parallel_tool_calls: b.parallel_tool_calls ?? true,
    tool_choice: b.tool_choice ?? 'auto',
    tools: b.tools ?? [],
    error: null,
    incomplete_details: null,
    instructions: b.instructions ?? null,
    max_output_tokens: b.max_output_tokens ?? null,
    previous_response_id: b.previous_response_id ?? null,
    reasoning: { effort: typeof effort === 'string' ? effort : null, summary: null },
    store: b.store ?? true,
    temperature: b.temperature ?? null,
    text: b.text ?? null,
    top_p: b.top_p ?? null,
    truncation: b.truncation ?? 'disabled',
    user: b.user ?? null,
    metadata: b.metadata ?? {},
  };
}

export const lifecycle = (type: string, response: Obj): Obj => ({ type, response, sequence_number: SEQ });

const part = (kind: TextKind, text: string): Obj =>
  kind === 'message' ? { annotations: [], text, type: 'output_text', logprobs: null } : { text, type: 'reasoning_text' };

/** The item as output_item.added (text null) or output_item.done and the final output carry it. */
export function sglangItem(it: ItemAt, done: boolean): Obj {
  const status = done ? 'completed' : 'in_progress';
  if (it.kind === 'function_call')
    return {
      arguments: done ? it.text : '',
      call_id: it.callId,
      name: it.name,
      type: 'function_call',
      id: it.id,
      async_: null,
      caller: null,
      namespace: null,
      status,
    };
  const content = done ? [part(it.kind, it.text)] : [];
  // _make_reasoning_item: the trace mirrored into `summary` when asked, and kept in `content`.
  const summary = done && it.summary ? [{ text: it.text, type: 'summary_text' }] : [];
  return it.kind === 'message'
    ? { id: it.id, content, role: 'assistant', status, type: 'message', phase: 'final_answer' }
    : { id: it.id, summary, type: 'reasoning', content, encrypted_content: null, status };
}

export function sglangOpened(it: ItemAt): Obj[] {
  const added = { item: sglangItem(it, false), output_index: it.index, sequence_number: SEQ, type: 'response.output_item.added' };
  if (it.kind === 'function_call') return [added];
  if (it.summary) {
    const sum = {
      item_id: it.id,
      output_index: it.index,
      part: { text: '', type: 'summary_text' },
      sequence_number: SEQ,
      summary_index: 0,
    };
    return [added, { ...sum, type: 'response.reasoning_summary_part.added' }];
  }
  const at = { content_index: 0, item_id: it.id, output_index: it.index };
  return [added, { ...at, part: part(it.kind, ''), sequence_number: SEQ, type: 'response.content_part.added' }];
}

export function sglangDelta(it: ItemAt, delta: string): Obj {
  if (it.kind === 'function_call')
    return { delta, item_id: it.id, output_index: it.index, sequence_number: SEQ, type: 'response.function_call_arguments.delta' };
  if (it.summary) {
    const at = { delta, item_id: it.id, output_index: it.index, sequence_number: SEQ, summary_index: 0 };
    return { ...at, type: 'response.reasoning_summary_text.delta' };
  }
  const at = { content_index: 0, delta, item_id: it.id };
  return it.kind === 'message'
    ? { ...at, logprobs: [], output_index: it.index, sequence_number: SEQ, type: 'response.output_text.delta' }
    : { ...at, output_index: it.index, sequence_number: SEQ, type: 'response.reasoning_text.delta' };
}

export function sglangClosed(it: ItemAt): Obj[] {
  const done = { item: sglangItem(it, true), output_index: it.index, sequence_number: SEQ, type: 'response.output_item.done' };
  if (it.kind === 'function_call') {
    const args = { arguments: it.text, item_id: it.id, output_index: it.index, sequence_number: SEQ };
    return [{ ...args, type: 'response.function_call_arguments.done', name: it.name }, done];
  }
  if (it.summary) {
    const at = { item_id: it.id, output_index: it.index };
    return [
      { ...at, sequence_number: SEQ, summary_index: 0, text: it.text, type: 'response.reasoning_summary_text.done' },
      {
        ...at,
        part: { text: it.text, type: 'summary_text' },
        sequence_number: SEQ,
        summary_index: 0,
        type: 'response.reasoning_summary_part.done',
        status: null,
      },
      done,
    ];
  }
  const at = { content_index: 0, item_id: it.id };
  const textDone =
    it.kind === 'message'
      ? { ...at, logprobs: [], output_index: it.index, sequence_number: SEQ, text: it.text, type: 'response.output_text.done' }
      : { ...at, output_index: it.index, sequence_number: SEQ, text: it.text, type: 'response.reasoning_text.done' };
  const partDone = {
    ...at,
    output_index: it.index,
    part: part(it.kind, it.text),
    sequence_number: SEQ,
    type: 'response.content_part.done',
  };
  return [textDone, partDone, done];
}

/** The final response.{status}: _build_response with the streamed items, _serialize_usage's usage. */
export function sglangFinal(
  base: Obj,
  output: Obj[],
  u: { prompt: number; completion: number; reasoning: number },
  incomplete: boolean,
): Obj {
  const status = incomplete ? 'incomplete' : 'completed';
  // from_request: text {"format":{"type":"text"}} when the request gave none and the output is messages only.
  const textOnly = output.length > 0 && output.every((i) => i.type === 'message');
  const usage = {
    input_tokens: u.prompt,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: u.completion,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: u.prompt + u.completion,
  };
  const response = {
    ...base,
    output,
    status,
    usage,
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    text: base.text ?? (textOnly ? { format: { type: 'text' } } : null),
  };
  return lifecycle(`response.${status}`, response);
}

/**
 * responses_stream_generator_non_harmony with tools callable: from a message's output_item.added on, events are
 * held back until a tool call's item opens (the message's phase becomes "commentary") or the stream ends
 * ("final_answer"); their sequence numbers were given when they were made.
 */
export class HeldBack {
  private readonly pending: Obj[] = [];
  constructor(private readonly active: boolean) {}

  /** The events to write now, in order. */
  take(ev: Obj): Obj[] {
    const item = ev.item as Obj | undefined;
    const opens = ev.type === 'response.output_item.added';
    if (!this.active || (this.pending.length === 0 && !(opens && item?.type === 'message'))) return [ev];
    this.pending.push(ev);
    const toolFollows = opens && item?.type === 'function_call';
    const terminal = ev.type === 'response.completed' || ev.type === 'response.incomplete' || ev.type === 'response.failed';
    if (!toolFollows && !terminal) return [];
    const phase = toolFollows ? 'commentary' : 'final_answer';
    const out = this.pending.splice(0);
    for (const e of out) if ((e.item as Obj | undefined)?.type === 'message') (e.item as Obj).phase = phase;
    return out;
  }
}
