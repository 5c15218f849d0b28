// POST /v1/responses with stream: true, as vLLM 0.33.0 streams it for a model without harmony (our reading of
// entrypoints/openai/responses/serving.py responses_stream_generator and simple_streaming_events.py; the SSE
// framing of api_router.py `event: <type>\ndata: <json>\n\n`, no [DONE]): response.created and
// response.in_progress, then per item output_item.added + content_part.added with its first delta, its deltas,
// and its .done / content_part.done / output_item.done when the next item starts or the answer ends; last the one
// response.completed with the output and the usage. Every event carries sequence_number, one more each time.
// The answer is the chat plan of the same messages (construct_input_messages: instructions as a system message,
// a string input as a user message), so a continuation through the chat path continues the same text.
//
// Where this differs from vLLM, deliberately: ids are derived from the request (vLLM's are random_uuid()), so
// that two runs of one test can be compared; and response.completed lists the streamed items under their
// streamed ids (vLLM 0.33.0's build_response_output_items mints new `rs_`/`msg_` ids for the completed response).
// With the SGLang dialect the same run writes SGLang 0.5.23's variant of the events (responses-sglang.ts).
import { createHash } from 'node:crypto';
import type { TokenDelta } from './dialect';
import type { Exchange } from './exchange';
import type { Fault } from './faults';
import { type Plan, reasoningTokenCount } from './plan';
import {
  HeldBack,
  lifecycle,
  sglangBase,
  sglangClosed,
  sglangDelta,
  sglangFinal,
  sglangId,
  sglangItem,
  sglangOpened,
} from './responses-sglang';
import { contentText } from './tokens';

/** The chat request the Responses request renders as (vLLM's construct_input_messages). */
export function responsesAsChat(body: any): any {
  if (!body || typeof body !== 'object') return body;
  const messages: any[] = [];
  if (typeof body.instructions === 'string' && body.instructions) messages.push({ role: 'system', content: body.instructions });
  if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
  else if (Array.isArray(body.input))
    for (const item of body.input)
      if (item && typeof item.role === 'string') messages.push({ role: item.role, content: contentText(item.content) });
  const tools = Array.isArray(body.tools) ? body.tools.map(({ type: _t, ...fn }: any) => ({ type: 'function', function: fn })) : undefined;
  const toolChoice =
    body.tool_choice?.type === 'function' ? { type: 'function', function: { name: body.tool_choice.name } } : body.tool_choice;
  return { model: body.model, messages, stream: body.stream, max_tokens: body.max_output_tokens, tools, tool_choice: toolChoice };
}

export interface ResponsesSettings {
  id: string;
  created: number;
  model: string;
  plan: Plan;
  fault?: Fault;
  intervalMs: number;
  /** The request body (its settings are echoed in the response object). */
  body: any;
  /** Whose variant of the events: vLLM's (here) or SGLang's (responses-sglang.ts). */
  dialect: 'vllm' | 'sglang';
}

type Kind = 'reasoning' | 'message' | 'function_call';
interface Item {
  kind: Kind;
  id: string;
  index: number;
  text: string;
  callId?: string;
  name?: string;
  summary?: boolean;
}

export class ResponsesRun {
  private seq = 0;
  private index = 0;
  private faultDone = false;
  private item: Item | null = null;
  private readonly done: Record<string, unknown>[] = [];
  private readonly base: Record<string, unknown>;
  private readonly sglang: boolean;
  private readonly held: HeldBack;

  constructor(
    private readonly ex: Exchange,
    private readonly s: ResponsesSettings,
  ) {
    const b = s.body;
    this.sglang = s.dialect === 'sglang';
    // SGLang holds message items back while tools can be called (tools given, tool_choice not "none").
    this.held = new HeldBack(this.sglang && Array.isArray(b.tools) && b.tools.length > 0 && b.tool_choice !== 'none');
    this.base = this.sglang
      ? sglangBase(s.id, s.created, s.model, b)
      : {
          id: s.id,
          created_at: s.created,
          incomplete_details: null,
          instructions: b.instructions ?? null,
          metadata: b.metadata ?? null,
          model: s.model,
          object: 'response',
          output: [],
          parallel_tool_calls: b.parallel_tool_calls ?? true,
          temperature: b.temperature ?? 1,
          tool_choice: b.tool_choice ?? 'auto',
          tools: b.tools ?? [],
          top_p: b.top_p ?? 1,
          background: false,
          max_output_tokens: b.max_output_tokens ?? null,
          previous_response_id: null,
          status: 'in_progress',
          usage: null,
        };
  }

  /** Numbered where made (an SGLang event keeps its sequence_number field's place); SGLang may hold it back. */
  private event(e: Record<string, unknown>): void {
    const ev = { ...e, sequence_number: this.seq++ };
    for (const out of this.held.take(ev)) this.ex.write(`event: ${out.type}\ndata: ${JSON.stringify(out)}\n\n`);
  }

  start(): void {
    this.ex.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const life = (type: string) => (this.sglang ? lifecycle(type, this.base) : { type, response: this.base });
    this.event(life('response.created'));
    this.event(life('response.in_progress'));
    this.ex.later(this.s.intervalMs, () => this.step());
  }

  private step(): void {
    if (this.ex.closed) return;
    const { plan, fault } = this.s;
    if (fault && !this.faultDone && this.index === Math.min(fault.at, plan.deltas.length)) {
      this.faultDone = true;
      if (!this.applyFault(fault)) return;
    }
    if (this.index >= plan.deltas.length) return this.finish();
    this.write(plan.deltas[this.index]);
    this.index++;
    this.ex.record.tokensSent = this.index;
    this.ex.whenDrained(() => this.ex.later(this.s.intervalMs, () => this.step()));
  }

  /** True: the stream goes on. */
  private applyFault(f: Fault): boolean {
    if (f.kind === 'crash') this.ex.killSocket('reset');
    else if (f.kind === 'fin') this.ex.killSocket('fin');
    else if (f.kind === 'eof') this.ex.end();
    else if (f.kind === 'stall') {
      if (f.ms !== undefined) this.ex.later(f.ms, () => this.step());
    } else if (f.kind === 'error' && this.sglang) {
      // SGLang's exception path: response.failed with an empty output and error server_error.
      const failed = { ...this.base, status: 'failed', error: { code: 'server_error', message: 'fake-engine injected error' } };
      this.event(lifecycle('response.failed', failed));
      this.ex.end();
    } else if (f.kind === 'error') {
      // vLLM's GenerationError in the stream: an `error` event (serving.py _convert_generation_error_to_streaming_response).
      this.event({ type: 'error', code: 'internal_error', message: 'fake-engine injected error', param: null });
      this.ex.end();
    } else return true;
    return false;
  }

  private write(d: TokenDelta): void {
    if (d.kind === 'silent') return;
    if (d.kind === 'split') {
      this.text('reasoning', d.reasoning);
      this.text('message', d.content);
    } else if (d.kind === 'reasoning') this.text('reasoning', d.text);
    else if (d.kind === 'content') this.text('message', d.text);
    else if (d.kind === 'tool-start') {
      this.open('function_call', { callId: d.id, name: d.name });
    } else if (this.item && this.sglang) {
      this.item.text += d.text;
      this.event(sglangDelta(this.item, d.text));
    } else if (this.item) {
      this.item.text += d.text;
      this.event({ type: 'response.function_call_arguments.delta', item_id: this.item.id, output_index: this.item.index, delta: d.text });
    }
  }

  private text(kind: 'reasoning' | 'message', text: string): void {
    if (!text) return;
    if (this.item?.kind !== kind) this.open(kind, {});
    const it = this.item as Item;
    it.text += text;
    if (this.sglang) return this.event(sglangDelta(it, text));
    const place = { content_index: 0, output_index: it.index, item_id: it.id, delta: text };
    if (kind === 'message') this.event({ type: 'response.output_text.delta', ...place, logprobs: [] });
    else this.event({ type: 'response.reasoning_text.delta', ...place });
  }

  private open(kind: Kind, extra: { callId?: string; name?: string }): void {
    this.close();
    const index = this.done.length;
    const id = this.sglang ? sglangId(this.s.id, index, kind) : createHash('md5').update(`${this.s.id}:${index}`).digest('hex');
    this.item = { kind, id, index, text: '', ...extra };
    if (this.sglang) {
      this.item.summary = kind === 'reasoning' && this.s.body.reasoning?.summary != null;
      if (kind === 'function_call') this.item.callId = sglangId(this.s.id, index, 'call');
      for (const e of sglangOpened(this.item)) this.event(e);
      return;
    }
    if (kind === 'function_call') {
      const item = { id, type: 'function_call', call_id: extra.callId, name: extra.name, arguments: '', status: 'in_progress' };
      return this.event({ type: 'response.output_item.added', output_index: index, item });
    }
    const item =
      kind === 'message'
        ? { id, type: 'message', role: 'assistant', content: [], status: 'in_progress' }
        : { id, type: 'reasoning', summary: [], status: 'in_progress' };
    this.event({ type: 'response.output_item.added', output_index: index, item });
    this.event({ type: 'response.content_part.added', output_index: index, item_id: id, content_index: 0, part: part(kind, '', true) });
  }

  private close(): void {
    const it = this.item;
    if (!it) return;
    this.item = null;
    if (this.sglang) {
      for (const e of sglangClosed(it)) this.event(e);
      this.done.push(sglangItem(it, true));
      return;
    }
    const place = { item_id: it.id, output_index: it.index, content_index: 0 };
    if (it.kind === 'function_call') {
      const item = { id: it.id, type: 'function_call', call_id: it.callId, name: it.name, arguments: it.text, status: 'completed' };
      this.event({
        type: 'response.function_call_arguments.done',
        item_id: it.id,
        output_index: it.index,
        arguments: it.text,
        name: it.name,
      });
      this.event({ type: 'response.output_item.done', output_index: it.index, item });
      this.done.push(item);
      return;
    }
    if (it.kind === 'message') this.event({ type: 'response.output_text.done', ...place, text: it.text, logprobs: [] });
    else this.event({ type: 'response.reasoning_text.done', ...place, text: it.text });
    this.event({ type: 'response.content_part.done', ...place, part: part(it.kind, it.text) });
    const item =
      it.kind === 'message'
        ? { id: it.id, type: 'message', role: 'assistant', content: [part('message', it.text)], status: 'completed' }
        : { id: it.id, type: 'reasoning', summary: [], content: [part('reasoning', it.text)], status: 'completed' };
    this.event({ type: 'response.output_item.done', output_index: it.index, item });
    this.done.push(item);
  }

  private finish(): void {
    this.close();
    const { plan } = this.s;
    const reasoning = plan.reasoningTokens ?? reasoningTokenCount(plan.deltas);
    const incomplete = plan.finish === 'length';
    if (this.sglang) {
      const u = { prompt: plan.promptTokens, completion: plan.deltas.length, reasoning };
      this.event(sglangFinal(this.base, this.sglangOutput(), u, incomplete));
      return this.ex.end();
    }
    const usage = {
      input_tokens: plan.promptTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: plan.deltas.length,
      output_tokens_details: { reasoning_tokens: reasoning },
      total_tokens: plan.promptTokens + plan.deltas.length,
    };
    const response = {
      ...this.base,
      status: incomplete ? 'incomplete' : 'completed',
      incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
      output: this.done,
      usage,
    };
    this.event({ type: 'response.completed', response });
    this.ex.end();
  }

  /** SGLang's final output: once a tool call came, every message in it is phase "commentary" (_emit_tool_calls). */
  private sglangOutput(): Record<string, unknown>[] {
    if (!this.done.some((i) => i.type === 'function_call')) return this.done;
    return this.done.map((i) => (i.type === 'message' ? { ...i, phase: 'commentary' } : i));
  }
}

/** vLLM sets a message part's logprobs where it opens it (`[]`) and leaves them unset in the finished part. */
function part(kind: 'reasoning' | 'message', text: string, opening = false): Record<string, unknown> {
  if (kind === 'reasoning') return { type: 'reasoning_text', text };
  return opening ? { type: 'output_text', text, annotations: [], logprobs: [] } : { type: 'output_text', text, annotations: [] };
}
