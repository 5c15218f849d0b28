// POST /v1/responses streams through the real Envoy and sidecar (issue 35 item 2): a replica that dies after the
// first delta is continued through the engine's chat path and the client reads the same Responses event stream
// as an uninterrupted run (one response.completed, sequence numbers without a gap, the same response and item ids,
// usage counting both legs); where the request cannot be continued, the stream ends with response.failed (the
// interruption registry's error), never a cut. Both engine dialects: the fake engine serves the Responses stream
// as we read vLLM 0.33.0 (tools/fake-engine/responses.ts) and SGLang 0.5.23 (tools/fake-engine/responses-sglang.ts)
// to stream it, and the gateway writes the continuation in the same engine's variant: the event shapes rest on
// those readings.
import OpenAI from 'openai';
import { request } from 'undici';
import { resetFaults } from '../../tools/fake-engine/faults';
import { newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { seenFor } from './helpers';

const REASONING = 8;
const CONTENT = 10;
const SIZE = { 'x-fake-answer-tokens': `${REASONING},${CONTENT}` };
/** The faults the fake engine's Responses stream injects at a token (tools/fake-engine/responses.ts). */
const FAULTS = ['crash', 'fin', 'eof', 'stall', 'error'] as const;

interface ResponsesResult {
  status: number;
  raw: string;
  events: any[];
  transportError: string | null;
}

function body(extra: Record<string, unknown> = {}): any {
  return { model: 'test-model', stream: true, input: 'Tell me about continuation.', instructions: 'Be brief.', ...extra };
}

async function postResponses(url: string, b: unknown, headers: Record<string, string> = {}): Promise<ResponsesResult> {
  const res = await request(`${url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(b),
  });
  let raw = '';
  let transportError: string | null = null;
  try {
    for await (const chunk of res.body) raw += chunk.toString('utf8');
  } catch (e) {
    transportError = (e as Error).message;
  }
  const events: any[] = [];
  for (const block of raw.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n');
    const name = block.split('\n').find((l) => l.startsWith('event: '));
    if (!data) continue;
    const ev = JSON.parse(data);
    // The SSE event name is the event's type, as vLLM frames it.
    expect(name).toBe(`event: ${ev.type}`);
    events.push(ev);
  }
  return { status: res.statusCode, raw, events, transportError };
}

/**
 * The stream with its ids named by first appearance (`id#0`, `id#1`, ...): ids the engine or the gateway mint
 * differ run to run, but each must stand for the same response or item everywhere it appears.
 */
function normalized(raw: string): string {
  const names = new Map<string, string>();
  return raw.replace(/"(id|item_id)":"([^"]+)"/g, (_m, key: string, id: string) => {
    if (!names.has(id)) names.set(id, `id#${names.size}`);
    return `"${key}":"${names.get(id)}"`;
  });
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/** One well-formed stream: sequence numbers 0..n-1, one terminal event, nothing after it, no [DONE]. */
function expectWellFormed(r: ResponsesResult, terminal: 'response.completed' | 'response.incomplete' | 'response.failed'): any {
  expect(r.transportError).toBeNull();
  expect(r.status).toBe(200);
  expect(r.events.map((e) => e.sequence_number)).toEqual(r.events.map((_e, i) => i));
  expect(r.events.filter((e) => TERMINAL.has(e.type)).map((e) => e.type)).toEqual([terminal]);
  expect(r.events.at(-1).type).toBe(terminal);
  expect(r.raw).not.toContain('[DONE]');
  const ids = new Set(r.events.filter((e) => e.response).map((e) => e.response.id));
  expect(ids.size).toBe(1);
  return r.events.at(-1).response;
}

const textOf = (r: ResponsesResult, type: string): string =>
  r.events
    .filter((e) => e.type === type)
    .map((e) => e.delta)
    .join('');

describe.each(['vllm', 'sglang'] as const)('/v1/responses streams on %s', (dialect) => {
  let stack: TestStack;
  let ref: ResponsesResult;
  beforeAll(async () => {
    stack = await startTestStack({
      replicas: 3,
      engine: { dialect, tokenizer: dialect },
      // Exact usage: the engine's own count of the recovered text (README, "Exact usage").
      env: {
        CONTINUATION_ENGINE: dialect,
        MAX_ATTEMPTS: '2',
        // A stall before the first delta is re-run after this; one after it continued after the stall timer. 5 s: at
        // 2 s a burst of 100 on two cores shared with other suites gave up before the first delta (a 504, twice).
        FIRST_DELTA_TIMEOUT_SECONDS: '5',
        STALL_IDLE_TIMEOUT_SECONDS: '1',
        RECOVERY_BUDGET_PERCENT: '100',
        TOKENIZE_URL: '{engine0}/tokenize',
        // Engines, sidecar and up to 100 clients share this one Node process: give /tokenize room.
        TOKENIZE_TIMEOUT_MS: '10000',
      },
    });
    ref = await postResponses(stack.url, body(), SIZE);
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('the uninterrupted stream is the engine’s own, relayed as it came', () => {
    const completed = expectWellFormed(ref, 'response.completed');
    expect(textOf(ref, 'response.reasoning_text.delta').length).toBeGreaterThan(0);
    expect(textOf(ref, 'response.output_text.delta').length).toBeGreaterThan(0);
    expect(completed.output.map((o: any) => o.type)).toEqual(['reasoning', 'message']);
    expect(completed.usage.output_tokens).toBe(REASONING + CONTENT);
  });

  test('with the gateway absent the engine sends the same bytes (same request id)', async () => {
    const id = newRequestId('resp');
    const via = await postResponses(stack.url, body(), { ...SIZE, 'x-request-id': id });
    const direct = await postResponses(stack.engines[0].url, body(), { ...SIZE, 'x-request-id': id });
    expectWellFormed(via, 'response.completed');
    // SGLang names the response itself (the fake engine: a counter), not after x-request-id: equal but for ids.
    if (dialect === 'vllm') expect(via.raw).toBe(direct.raw);
    else expect(normalized(via.raw)).toBe(normalized(direct.raw));
  });

  // A fault at token 0 comes before the first delta (the attempt is re-run whole); every later one cuts a committed
  // stream, which a continuation leg through the chat path completes.
  const TOKENS = Array.from({ length: REASONING + CONTENT + 1 }, (_v, k) => k);
  test.each(FAULTS.flatMap((f) => TOKENS.map((k) => [f, k] as const)))('%s at token %i: the same stream, continued', async (fault, k) => {
    const id = newRequestId('resp');
    const r = await postResponses(stack.url, body(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': `${fault}@${k}` });
    const completed = expectWellFormed(r, 'response.completed');
    expect(normalized(r.raw)).toBe(normalized(ref.raw));
    expect(completed.usage).toEqual(ref.events.at(-1).response.usage);
    const seen = seenFor(stack, id);
    const continued = seen.filter((s) => s.path === '/v1/chat/completions');
    if (k === 0) expect(seen.map((s) => s.path)).toEqual(['/v1/responses', '/v1/responses']);
    else {
      expect(seen[0].path).toBe('/v1/responses');
      expect(continued).toHaveLength(1);
      expect(continued[0].body.continue_final_message).toBe(true);
    }
    expect((await stack.waitForEnd(id)).outcome).toBe(k === 0 ? 'completed-after-retry' : 'completed-after-continuation');
  });

  test('max_output_tokens reached: the continued stream ends incomplete, as the uninterrupted one', async () => {
    const b = body({ max_output_tokens: 12 });
    const clean = await postResponses(stack.url, b, SIZE);
    // vLLM ends with response.completed whatever the status, SGLang with response.{status}.
    const end = dialect === 'vllm' ? 'response.completed' : 'response.incomplete';
    expect(expectWellFormed(clean, end)).toMatchObject({
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
    });
    const r = await postResponses(stack.url, b, { ...SIZE, 'x-fake-fault': 'crash@10;-' });
    expectWellFormed(r, end);
    expect(normalized(r.raw)).toBe(normalized(clean.raw));
  });

  test('a burst of 100 streams cut at once, each at its own token: every one the uninterrupted stream', async () => {
    // One script per stream (a header value is one script: `;-` steps leave the continuation leg unharmed).
    const runs = Array.from({ length: 100 }, (_v, i) =>
      postResponses(stack.url, body(), {
        ...SIZE,
        'x-request-id': newRequestId('burst'),
        'x-fake-fault': `crash@${1 + (i % 17)}${';-'.repeat(i + 1)}`,
      }),
    );
    const results = await Promise.all(runs);
    for (const r of results) {
      expectWellFormed(r, 'response.completed');
      expect(normalized(r.raw)).toBe(normalized(ref.raw));
    }
  });

  test('a replica dies under ~100 streams at once: every stream of it continued, every stream the uninterrupted one', async () => {
    // 3.6 s per stream: the last stream starts (on a busy machine, seconds after the first) while the first still run.
    const slow = { ...SIZE, 'x-fake-token-ms': '200' };
    const ids = new Set(Array.from({ length: 99 }, () => newRequestId('replica')));
    const runs = [...ids].map((id) => postResponses(stack.url, body(), { ...slow, 'x-request-id': id }));
    // A leg of the burst: the client's request id, with -aN for a re-run attempt (a busy machine may re-run some).
    const ours = (q: { headers: Record<string, string> }) => ids.has((q.headers['x-request-id'] ?? '').replace(/-a\d+$/, ''));
    const started = () =>
      new Set(
        stack.engines
          .flatMap((e) => e.requests)
          .filter((q) => ours(q) && q.tokensSent >= 3)
          .map((q) => q.headers['x-request-id'].replace(/-a\d+$/, '')),
      );
    // Every stream past its first delta (3 tokens written) before the replica goes down.
    while (started().size < ids.size) await new Promise((r) => setTimeout(r, 20));
    // The replica serving the most of them dies (Envoy may have ejected a replica the earlier crash tests hit).
    const running = (e: (typeof stack.engines)[number]) => e.requests.filter((q) => ours(q) && q.tokensSent < REASONING + CONTENT).length;
    const victim = stack.engines.reduce((a, b) => (running(b) > running(a) ? b : a));
    victim.failFor(1000);
    const results = await Promise.all(runs);
    for (const r of results) {
      expectWellFormed(r, 'response.completed');
      expect(normalized(r.raw)).toBe(normalized(ref.raw));
    }
    // The dead replica's streams were continued through the chat path on another replica (on a busy machine a
    // starved stream elsewhere may be taken for a stall and continued too: that is the gateway's job as well).
    const onA = [...ids].filter((id) => {
      const legs = seenFor(stack, id);
      return (
        legs.some((s) => s.path === '/v1/chat/completions') &&
        legs.filter((s) => s.path === '/v1/responses').at(-1)?.replica === victim.name
      );
    });
    expect(onA.length).toBeGreaterThan(0);
    for (const id of onA) expect(seenFor(stack, id).at(-1)?.replica).not.toBe(victim.name);
  });

  test.each([
    ['previous_response_id (history only the engine holds)', { previous_response_id: 'resp_earlier' }],
    ['a function call output in the input', { input: [{ type: 'function_call_output', call_id: 'call_1', output: '42' }] }],
  ])('%s: a cut ends with response.failed, never a silent end', async (_c, extra) => {
    const id = newRequestId('resp');
    const r = await postResponses(stack.url, body(extra), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@5' });
    const failed = expectWellFormed(r, 'response.failed');
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({
      code: 'upstream_decode_interrupted',
      reason: 'responses-input-unsupported',
      partial_output: true,
      retryable: false,
    });
    // What the client had: the cut item, marked incomplete, with its text so far.
    expect(failed.output.at(-1)).toMatchObject({ status: 'incomplete' });
    expect(seenFor(stack, id).map((s) => s.path)).toEqual(['/v1/responses']);
  });

  test('a tool call before the cut: response.failed (tool-call-delivered)', async () => {
    const tools = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }];
    const b = body({ tools, tool_choice: { type: 'function', name: 'get_weather' } });
    const r = await postResponses(stack.url, b, { ...SIZE, 'x-fake-fault': 'crash@12' });
    const failed = expectWellFormed(r, 'response.failed');
    expect(failed.error.reason).toBe('tool-call-delivered');
  });

  test('the openai SDK’s Responses stream reads rescued and interrupted streams', async () => {
    const client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'test-key', maxRetries: 0 });
    const read = async (extra: Record<string, unknown>, fault: string) => {
      const types: string[] = [];
      let text = '';
      const stream = await client.responses.create({ ...body(extra), stream: true } as any, {
        headers: { ...SIZE, 'x-fake-fault': fault },
      });
      for await (const ev of stream as any) {
        types.push(ev.type);
        if (ev.type === 'response.output_text.delta') text += ev.delta;
      }
      return { types, text };
    };
    const rescued = await read({}, 'crash@13');
    expect(rescued.types.at(-1)).toBe('response.completed');
    expect(rescued.text).toBe(textOf(ref, 'response.output_text.delta'));
    // The SDK yields response.failed as an event: no exception (README, "The interruption contract").
    const failed = await read({ previous_response_id: 'resp_earlier' }, 'crash@13;-');
    expect(failed.types.at(-1)).toBe('response.failed');
    expect(rescued.text.startsWith(failed.text)).toBe(true);
  });
});

describe('/v1/responses on SGLang: what its variant does not let the gateway continue ends with response.failed', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ replicas: 2, engine: { dialect: 'sglang' }, env: { CONTINUATION_ENGINE: 'sglang' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  const tools = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: {} } }];
  test.each([
    // Tools callable: SGLang holds the message item back until the end (its phase is known only then).
    ['tools given (the message held back)', { tools }, 'sglang-tools'],
    // The reasoning streamed as reasoning_summary_* events.
    ['reasoning.summary asked', { reasoning: { summary: 'auto' } }, 'reasoning-summary'],
    // SGLang coalesces instructions and system input items into one system message; the chat path would not.
    [
      'two system messages',
      {
        input: [
          { role: 'system', content: 'Be kind.' },
          { role: 'user', content: 'Hi.' },
        ],
      },
      'sglang-system-messages',
    ],
  ])('%s: a cut after the first delta ends with response.failed, never a cut', async (_c, extra, detail) => {
    const id = newRequestId('resp');
    const r = await postResponses(stack.url, body(extra), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@5' });
    const failed = expectWellFormed(r, 'response.failed');
    expect(failed.error).toMatchObject({ code: 'upstream_decode_interrupted', reason: 'responses-input-unsupported' });
    expect(seenFor(stack, id).map((s) => s.path)).toEqual(['/v1/responses']);
    expect(stack.records({ decision: 'SKIPPED', reason: 'responses-input-unsupported', detail })).not.toHaveLength(0);
  });

  test('reasoning.summary: the client had summary deltas; a cut in them ends with response.failed', async () => {
    const extra = { reasoning: { summary: 'auto' } };
    const clean = await postResponses(stack.url, body(extra), SIZE);
    expectWellFormed(clean, 'response.completed');
    expect(textOf(clean, 'response.reasoning_text.delta')).toBe('');
    const summary = textOf(clean, 'response.reasoning_summary_text.delta');
    expect(summary.length).toBeGreaterThan(0);
    const r = await postResponses(stack.url, body(extra), { ...SIZE, 'x-fake-fault': 'crash@3' });
    expectWellFormed(r, 'response.failed');
    const had = textOf(r, 'response.reasoning_summary_text.delta');
    expect(had.length).toBeGreaterThan(0);
    expect(summary.startsWith(had)).toBe(true);
  });

  test('tools given, the cut in the held-back message: the client had the reasoning only, response.failed', async () => {
    const clean = await postResponses(stack.url, body({ tools, tool_choice: 'auto' }), SIZE);
    expectWellFormed(clean, 'response.completed');
    const r = await postResponses(stack.url, body({ tools, tool_choice: 'auto' }), { ...SIZE, 'x-fake-fault': 'crash@12' });
    const failed = expectWellFormed(r, 'response.failed');
    expect(textOf(r, 'response.output_text.delta')).toBe('');
    expect(textOf(r, 'response.reasoning_text.delta')).toBe(textOf(clean, 'response.reasoning_text.delta'));
    expect(failed.output.map((o: any) => o.type)).toEqual(['reasoning']);
  });
});

describe('/v1/responses with CONTINUATION_ENABLED=false: response.failed hands the client its next request', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      replicas: 2,
      engine: { dialect: 'vllm', tokenizer: 'vllm' },
      env: { CONTINUATION_ENGINE: 'vllm', CONTINUATION_ENABLED: 'false' },
    });
  });
  afterAll(async () => stack?.stop());

  test('posted as it is, the next request (the chat leg) gives the rest of the answer', async () => {
    const ref = await postResponses(stack.url, body(), SIZE);
    const r = await postResponses(stack.url, body(), { ...SIZE, 'x-fake-fault': 'crash@12' });
    const failed = expectWellFormed(r, 'response.failed');
    expect(failed.error).toMatchObject({ code: 'upstream_decode_interrupted', reason: 'continuation-disabled' });
    const next = failed.error.next_request;
    expect(next).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
    const rest = await postChat(stack.url, next.body, SIZE);
    expect(rest.finishReasons).toEqual(['stop']);
    const delivered = textOf(r, 'response.output_text.delta');
    expect(delivered.length).toBeGreaterThan(0);
    expect(delivered + rest.content).toBe(textOf(ref, 'response.output_text.delta'));
  });
});
