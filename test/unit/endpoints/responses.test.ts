// The pure parts of the Responses stream support (src/endpoints/responses): scope, the chat form continuation
// legs start from, leg 1's events read as tracked state, a continuation's chunks written as the same stream.
// The end-to-end behaviour is test/e2e/responses.e2e.test.ts.
import { SGLANG_RESPONSES, VLLM_RESPONSES } from '../../../src/endpoints/responses/dialect';
import { decideResponsesScope } from '../../../src/endpoints/responses/scope';
import { ResponsesStream } from '../../../src/endpoints/responses/stream';
import { toChatRequest } from '../../../src/endpoints/responses/to-chat';
import type { JsonObject } from '../../../src/openai/chat';
import { SseParser } from '../../../src/sse/parser';
import { StreamTracker } from '../../../src/sse/tracker';

const CFG: Parameters<typeof decideResponsesScope>[1] = { continuationModel: 'm', engine: 'vllm', maxContinuationBodyBytes: 1 << 20 };
const scope = (b: unknown, cfg = CFG) => decideResponsesScope(Buffer.from(JSON.stringify(b)), cfg);

describe('scope', () => {
  const ok = { model: 'x', stream: true, input: 'hi' };
  test('a streamed request with text input is in scope, continuable', () => {
    const s = scope(ok);
    expect(s.inScope).toBe(true);
    if (s.inScope) expect(s.chat.notContinuable).toBeUndefined();
  });
  test.each([
    ['not streamed', { ...ok, stream: false }, 'not-streaming'],
    ['background', { ...ok, background: true }, 'responses-background'],
    ['structured output', { ...ok, text: { format: { type: 'json_schema' } } }, 'structured-output'],
    ['a built-in tool', { ...ok, tools: [{ type: 'web_search_preview' }] }, 'responses-server-tools'],
    ['no input', { model: 'x', stream: true }, 'not-responses-request'],
  ])('%s: passed through', (_c, b, reason) => {
    expect(scope(b)).toMatchObject({ inScope: false, reason });
  });
  test('llama.cpp: passed through (its event stream has not been read)', () => {
    expect(scope(ok, { ...CFG, engine: 'llamacpp' })).toMatchObject({ inScope: false, reason: 'responses-engine-unsupported' });
  });
  test('SGLang: in scope, written in its variant; what it would not stream as the chat leg does is not continued', () => {
    expect(scope(ok, { ...CFG, engine: 'sglang' })).toMatchObject({ inScope: true, dialect: { engine: 'sglang' }, chat: { chat: {} } });
    const tool = { type: 'function', name: 'f', parameters: {} };
    const cases: [JsonObject, string | undefined][] = [
      [{ tools: [tool] }, 'sglang-tools'],
      [{ tools: [tool], tool_choice: 'none' }, undefined],
      [{ reasoning: { summary: 'auto' } }, 'reasoning-summary'],
      [{ include: ['reasoning.encrypted_content'] }, 'encrypted-reasoning'],
      [
        {
          instructions: 'a',
          input: [
            { role: 'system', content: 'b' },
            { role: 'user', content: 'c' },
          ],
        },
        'sglang-system-messages',
      ],
      [
        {
          input: [
            { role: 'user', content: 'a' },
            { role: 'system', content: 'b' },
          ],
        },
        'sglang-system-messages',
      ],
      [
        {
          input: [
            { role: 'assistant', content: 'a' },
            { role: 'assistant', content: 'b' },
          ],
        },
        'sglang-assistant-turns',
      ],
      [{ instructions: 'a', input: 'b' }, undefined],
    ];
    for (const [extra, why] of cases) {
      const s = scope({ ...ok, ...extra }, { ...CFG, engine: 'sglang' });
      expect(s.inScope && s.chat.notContinuable).toBe(why);
    }
  });
});

describe('the chat form (vLLM construct_input_messages)', () => {
  test('instructions as a system message, a string input as a user message, the budget and function tools', () => {
    const tools = [{ type: 'function', name: 'f', parameters: { type: 'object' } }];
    const c = toChatRequest({ model: 'x', input: 'hi', instructions: 'sys', max_output_tokens: 50, tools, tool_choice: 'auto' });
    expect(c.notContinuable).toBeUndefined();
    if (c.notContinuable !== undefined) return;
    expect(c.chat.messages).toEqual([
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'hi' },
    ]);
    expect(c.chat).toMatchObject({ max_tokens: 50, stream: true, stream_options: { include_usage: true }, tool_choice: 'auto' });
    expect(c.chat.tools).toEqual([{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }]);
  });
  test('input messages with one text part', () => {
    const c = toChatRequest({ input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'a' }] }] });
    expect(c.notContinuable === undefined && c.chat.messages).toEqual([{ role: 'user', content: 'a' }]);
  });
  test.each([
    ['previous_response_id', { input: 'hi', previous_response_id: 'resp_1' }, 'previous-response-id'],
    ['a function call output', { input: [{ type: 'function_call_output', call_id: 'c', output: '1' }] }, 'input-item:function_call_output'],
    ['an image', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input-item:message'],
  ])('%s: not continuable', (_c, req, why) => {
    expect(toChatRequest(req as never)).toEqual({ notContinuable: why });
  });
});

const sse = (type: string, fields: Record<string, unknown>, seq: number) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...fields, sequence_number: seq })}\n\n`;

/** Leg 1 up to a cut inside the reasoning item: created, in_progress, the item, two deltas. */
function leg1(stream: ResponsesStream): StreamTracker {
  const text =
    sse('response.created', { response: { id: 'resp_1', model: 'm', status: 'in_progress', output: [], usage: null } }, 0) +
    sse('response.in_progress', { response: { id: 'resp_1' } }, 1) +
    sse('response.output_item.added', { output_index: 0, item: { id: 'rs1', type: 'reasoning' } }, 2) +
    sse('response.content_part.added', { output_index: 0, item_id: 'rs1', content_index: 0 }, 3) +
    sse('response.reasoning_text.delta', { output_index: 0, item_id: 'rs1', content_index: 0, delta: 'Think' }, 4) +
    sse('response.reasoning_text.delta', { output_index: 0, item_id: 'rs1', content_index: 0, delta: 'ing' }, 5);
  const tracker = new StreamTracker();
  for (const ev of new SseParser().push(Buffer.from(text))) tracker.apply(stream.read(ev));
  return tracker;
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  StreamTracker.read({ raw: Buffer.alloc(0), data: JSON.stringify({ id: 'c', choices: [{ index: 0, delta, finish_reason: finish }] }) });

const events = (b: Buffer | string) =>
  String(b)
    .split('\n\n')
    .filter((x) => x.startsWith('event: '))
    .map((x) => JSON.parse(x.split('\n')[1].slice(6)));

describe('leg 1 read, a continuation written', () => {
  test('leg 1 tells the tracker its text; the continuation goes on in the same item, then a new message, numbered on', () => {
    const s = new ResponsesStream(1 << 20, undefined, VLLM_RESPONSES);
    const t = leg1(s);
    expect(t.reasoning).toBe('Thinking');
    expect(t.id).toBe('resp_1');
    expect(t.recoverable).toBe(true);
    const a = events(s.leg2Chunk(chunk({ reasoning: '.' }), undefined) as Buffer);
    expect(a).toEqual([
      { type: 'response.reasoning_text.delta', content_index: 0, output_index: 0, item_id: 'rs1', delta: '.', sequence_number: 6 },
    ]);
    const b = events(s.leg2Chunk(chunk({ content: 'Hi' }), undefined) as Buffer);
    expect(b.map((e) => e.type)).toEqual([
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
    ]);
    expect(b[0].text).toBe('Thinking.');
    expect(b[3]).toMatchObject({ output_index: 1, item: { type: 'message' } });
    const usage = { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12, completion_tokens_details: { reasoning_tokens: 3 } };
    expect(s.leg2Chunk(chunk({}, 'stop'), usage)).toEqual(Buffer.alloc(0));
    const end = events(s.leg2Done());
    expect(end.map((e) => e.sequence_number)).toEqual([13, 14, 15, 16]);
    const completed = end.at(-1).response;
    expect(completed).toMatchObject({ id: 'resp_1', status: 'completed', incomplete_details: null });
    expect(completed.output.map((o: { id: string }) => o.id)).toEqual(['rs1', b[3].item.id]);
    expect(completed.usage).toEqual({
      input_tokens: 5,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 3 },
      total_tokens: 12,
    });
  });

  test('what the stream cannot carry is refused: a tool call, reasoning after the answer text', () => {
    const s = new ResponsesStream(1 << 20, undefined, VLLM_RESPONSES);
    leg1(s);
    expect(s.leg2Chunk(chunk({ tool_calls: [{ index: 0, function: { name: 'f' } }] }), undefined)).toBe('tool-call');
    s.leg2Chunk(chunk({ content: 'x' }), undefined);
    expect(s.leg2Chunk(chunk({ reasoning: 'y' }), undefined)).toBe('reasoning-after-text');
  });

  test('response.failed: the interruption error, the cut item incomplete, the next sequence number', () => {
    const s = new ResponsesStream(1 << 20, 'previous-response-id', VLLM_RESPONSES);
    leg1(s);
    const [failed] = events(s.failed({ requestId: 'r1', deliveredOutputTokens: 2, reason: 'responses-input-unsupported' }));
    expect(failed).toMatchObject({ type: 'response.failed', sequence_number: 6 });
    expect(failed.response).toMatchObject({ id: 'resp_1', status: 'failed', usage: null });
    expect(failed.response.error).toMatchObject({
      code: 'upstream_decode_interrupted',
      reason: 'responses-input-unsupported',
      request_id: 'r1',
    });
    expect(failed.response.output).toEqual([
      { id: 'rs1', type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'Thinking' }], status: 'incomplete' },
    ]);
  });
});

describe('SGLang 0.5.23: the continuation in its variant of the events', () => {
  // Golden lines: orjson.dumps(event.model_dump()) of the openai 3.57.0 types SGLang's serving_responses.py builds
  // (run in the fidelity venv, /work/main/.venv-fidelity; ids and sequence numbers as below): byte for byte.
  const GOLDEN = [
    '{"content_index":0,"item_id":"rs1","output_index":0,"sequence_number":6,"text":"Thinking","type":"response.reasoning_text.done"}',
    '{"content_index":0,"item_id":"rs1","output_index":0,"part":{"text":"Thinking","type":"reasoning_text"},"sequence_number":7,"type":"response.content_part.done"}',
    '{"item":{"id":"rs1","summary":[],"type":"reasoning","content":[{"text":"Thinking","type":"reasoning_text"}],"encrypted_content":null,"status":"completed"},"output_index":0,"sequence_number":8,"type":"response.output_item.done"}',
    '{"item":{"id":"msg_X","content":[],"role":"assistant","status":"in_progress","type":"message","phase":"final_answer"},"output_index":1,"sequence_number":9,"type":"response.output_item.added"}',
    '{"content_index":0,"item_id":"msg_X","output_index":1,"part":{"annotations":[],"text":"","type":"output_text","logprobs":null},"sequence_number":10,"type":"response.content_part.added"}',
    '{"content_index":0,"delta":"hi","item_id":"msg_X","logprobs":[],"output_index":1,"sequence_number":11,"type":"response.output_text.delta"}',
  ];
  const lines = (b: Buffer | string) =>
    String(b)
      .split('\n\n')
      .filter((x) => x.startsWith('event: '))
      .map((x) =>
        x
          .split('\n')[1]
          .slice(6)
          .replace(/msg_[0-9a-f]{32}/g, 'msg_X'),
      );

  test('the events are the pydantic dumps SGLang writes, in their field order; the last one response.incomplete at the budget', () => {
    const s = new ResponsesStream(1 << 20, undefined, SGLANG_RESPONSES);
    leg1(s);
    expect(lines(s.leg2Chunk(chunk({ content: 'hi' }), undefined) as Buffer)).toEqual(GOLDEN);
    const usage = { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7, reasoning_tokens: 2 };
    s.leg2Chunk(chunk({}, 'length'), usage);
    const end = events(s.leg2Done()).at(-1);
    expect(end.type).toBe('response.incomplete');
    expect(Object.keys(end)).toEqual(['type', 'response', 'sequence_number']);
    expect(end.response).toMatchObject({
      id: 'resp_1',
      status: 'incomplete',
      error: null,
      incomplete_details: { reason: 'max_output_tokens' },
      // _is_text_only: a reasoning item in the output leaves `text` unset.
      text: null,
      usage: { input_tokens: 3, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 4, total_tokens: 7 },
    });
    expect(end.response.output.map((o: { type: string }) => o.type)).toEqual(['reasoning', 'message']);
  });
});
