// The fake engine over real HTTP: stream and JSON shapes per dialect, limits, tools, side endpoints.
import { request } from 'undici';
import { answerFor, promptTokenCount } from '../../../../tools/fake-engine/answer';
import { resetFaults } from '../../../../tools/fake-engine/faults';
import { type FakeEngine, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';

const messages = [{ role: 'user', content: 'Why is the sky blue?' }];
const streamBody = (extra: Record<string, unknown> = {}) => ({
  model: 'kimi-test',
  stream: true,
  stream_options: { include_usage: true },
  messages,
  ...extra,
});

let sg: FakeEngine;
let vl: FakeEngine;
beforeAll(async () => {
  sg = await startFakeEngine({ name: 'sg', dialect: 'sglang', tokenIntervalMs: 0 });
  vl = await startFakeEngine({ name: 'vl', dialect: 'vllm', tokenIntervalMs: 0 });
});
afterAll(async () => {
  await Promise.all([sg.close(), vl.close()]);
});
beforeEach(() => resetFaults());

function joined(chunks: any[], field: string): string {
  return chunks.map((c) => c.choices?.[0]?.delta?.[field] ?? '').join('');
}

describe('streaming shape', () => {
  it('sglang: role chunk, reasoning_content, content, finish with matched_stop, usage, [DONE]', async () => {
    const r = await postJson(`${sg.url}/v1/chat/completions`, streamBody());
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/text\/event-stream/);
    expect(r.headers['x-fake-replica']).toBe('sg');
    expect(r.data[r.data.length - 1]).toBe('[DONE]');
    const chunks = sseChunks(r);
    const a = answerFor(messages);
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks[0]).toMatchObject({ object: 'chat.completion.chunk', model: 'kimi-test' });
    expect(chunks[0].id).toMatch(/^chatcmpl-sg-\d+$/);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(joined(chunks, 'reasoning_content')).toBe(a.reasoningTokens.join(''));
    expect(joined(chunks, 'content')).toBe(a.contentTokens.join(''));
    const reasoningChunk = chunks[1].choices[0];
    expect(reasoningChunk.delta.content).toBeNull();
    const finish = chunks[chunks.length - 2];
    expect(finish.choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    expect(finish.choices[0]).toHaveProperty('matched_stop');
    const usage = chunks[chunks.length - 1];
    expect(usage.choices).toEqual([]);
    const n = a.reasoningTokens.length + a.contentTokens.length;
    expect(usage.usage).toEqual({
      prompt_tokens: promptTokenCount(messages),
      completion_tokens: n,
      total_tokens: promptTokenCount(messages) + n,
      prompt_tokens_details: { cached_tokens: 0 },
      reasoning_tokens: a.reasoningTokens.length,
      // SGLang 0.5.23 repeats a non-zero count where OpenAI puts it (usage_processor.py L95-130).
      completion_tokens_details: { reasoning_tokens: a.reasoningTokens.length },
    });
    expect(chunks.length).toBe(1 + n + 2);
  });

  it('vllm: reasoning field, stop_reason, completion_tokens_details', async () => {
    const r = await postJson(`${vl.url}/v1/chat/completions`, streamBody());
    const chunks = sseChunks(r);
    const a = answerFor(messages);
    expect(joined(chunks, 'reasoning')).toBe(a.reasoningTokens.join(''));
    expect(joined(chunks, 'reasoning_content')).toBe('');
    expect(joined(chunks, 'content')).toBe(a.contentTokens.join(''));
    expect(chunks[chunks.length - 2].choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop', stop_reason: null });
    expect(chunks[chunks.length - 1].usage).toMatchObject({
      completion_tokens_details: { reasoning_tokens: a.reasoningTokens.length },
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(chunks[chunks.length - 1].usage.reasoning_tokens).toBeUndefined();
  });

  it("continuous usage stats: every token chunk counts so far, reasoning in the dialect's place; vLLM's role chunk too", async () => {
    const a = answerFor(messages);
    const prompt = promptTokenCount(messages);
    const opts = { include_usage: true, continuous_usage_stats: true };
    const v = sseChunks(await postJson(`${vl.url}/v1/chat/completions`, streamBody({ stream_options: opts })));
    expect(v[0].usage).toEqual({
      prompt_tokens: prompt,
      completion_tokens: 0,
      total_tokens: prompt,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
    const tokens = v.filter((c) => c.choices?.[0]?.delta?.reasoning || c.choices?.[0]?.delta?.content);
    expect(tokens.map((c) => c.usage.completion_tokens)).toEqual(tokens.map((_c, i) => i + 1));
    expect(tokens.map((c) => c.usage.completion_tokens_details.reasoning_tokens)).toEqual(
      tokens.map((_c, i) => Math.min(i + 1, a.reasoningTokens.length)),
    );
    expect(v[v.length - 1].usage.completion_tokens_details).toEqual(tokens[tokens.length - 1].usage.completion_tokens_details);
    // SGLang streams it without include_usage, not on the role chunk, reasoning at the top level (and repeated
    // under completion_tokens_details once there is some).
    const s = sseChunks(await postJson(`${sg.url}/v1/chat/completions`, streamBody({ stream_options: { continuous_usage_stats: true } })));
    expect(s[0].usage).toBeNull();
    expect(s[1].usage).toMatchObject({ completion_tokens: 1, reasoning_tokens: 1, completion_tokens_details: { reasoning_tokens: 1 } });
    const last = s.filter((c) => c.choices?.[0]?.delta?.content).at(-1);
    expect(last.usage).toMatchObject({
      completion_tokens: a.reasoningTokens.length + a.contentTokens.length,
      reasoning_tokens: a.reasoningTokens.length,
    });
  });

  it('is identical across replicas except for the id', async () => {
    const [a, b] = await Promise.all([
      postJson(`${sg.url}/v1/chat/completions`, streamBody()),
      postJson(`${vl.url}/v1/chat/completions`, streamBody()),
    ]);
    const text = (r: typeof a, f: string) => joined(sseChunks(r), f);
    expect(text(a, 'reasoning_content')).toBe(text(b, 'reasoning'));
    expect(text(a, 'content')).toBe(text(b, 'content'));
    expect(sseChunks(a)[0].id).not.toBe(sseChunks(b)[0].id);
  });

  it('omits usage without include_usage, and honours x-fake-answer-tokens', async () => {
    const r = await postJson(
      `${sg.url}/v1/chat/completions`,
      { ...streamBody(), stream_options: undefined },
      {
        'x-fake-answer-tokens': '30,40',
      },
    );
    const chunks = sseChunks(r);
    expect(chunks.length).toBe(1 + 70 + 1);
    expect(chunks.every((c) => c.usage === null)).toBe(true);
  });

  it('drops reasoning when thinking is disabled', async () => {
    for (const kw of [{ thinking: false }, { enable_thinking: false }]) {
      const r = await postJson(`${sg.url}/v1/chat/completions`, streamBody({ chat_template_kwargs: kw }));
      const chunks = sseChunks(r);
      expect(joined(chunks, 'reasoning_content')).toBe('');
      expect(joined(chunks, 'content')).toBe(answerFor(messages).contentTokens.join(''));
      expect(chunks[chunks.length - 1].usage.reasoning_tokens).toBe(0);
      expect(chunks[chunks.length - 1].usage.completion_tokens_details).toBeNull();
    }
  });

  it('cuts at max_tokens / max_completion_tokens with finish_reason length', async () => {
    for (const limit of [{ max_tokens: 5 }, { max_completion_tokens: 25 }]) {
      const n = Object.values(limit)[0];
      const chunks = sseChunks(await postJson(`${vl.url}/v1/chat/completions`, streamBody(limit)));
      expect(chunks.length).toBe(1 + n + 2);
      expect(chunks[chunks.length - 2].choices[0].finish_reason).toBe('length');
      expect(chunks[chunks.length - 1].usage.completion_tokens).toBe(n);
    }
  });

  it('streams a tool call after the reasoning', async () => {
    const tools = [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
        },
      },
    ];
    const r = await postJson(`${sg.url}/v1/chat/completions`, streamBody({ tools }));
    const chunks = sseChunks(r);
    const a = answerFor(messages);
    expect(joined(chunks, 'reasoning_content')).toBe(a.reasoningTokens.join(''));
    expect(joined(chunks, 'content')).toBe('');
    const calls = chunks.flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(calls[0].id).toMatch(/^call_/);
    expect(calls.length).toBeGreaterThan(2);
    const args = JSON.parse(calls.map((c: any) => c.function.arguments).join(''));
    expect(Object.keys(args)).toEqual(['city', 'days']);
    expect(chunks[chunks.length - 2].choices[0].finish_reason).toBe('tool_calls');

    const none = sseChunks(await postJson(`${sg.url}/v1/chat/completions`, streamBody({ tools, tool_choice: 'none' })));
    expect(joined(none, 'content')).toBe(a.contentTokens.join(''));
  });
});

describe('non-streaming', () => {
  it('returns a whole chat.completion per dialect', async () => {
    const a = answerFor(messages);
    const s = JSON.parse((await postJson(`${sg.url}/v1/chat/completions`, { model: 'm', messages })).text);
    expect(s.object).toBe('chat.completion');
    expect(s.choices[0].message).toMatchObject({
      role: 'assistant',
      content: a.contentTokens.join(''),
      reasoning_content: a.reasoningTokens.join(''),
    });
    expect(s.choices[0].finish_reason).toBe('stop');
    expect(s.usage.reasoning_tokens).toBe(a.reasoningTokens.length);
    const v = JSON.parse((await postJson(`${vl.url}/v1/chat/completions`, { model: 'm', messages })).text);
    expect(v.choices[0].message.reasoning).toBe(a.reasoningTokens.join(''));
    expect(v.usage.completion_tokens_details.reasoning_tokens).toBe(a.reasoningTokens.length);
  });
});

describe('vllm request ids', () => {
  it('uses x-request-id for the id and rejects a duplicate in flight', async () => {
    const h = { 'x-request-id': 'abc123', 'x-fake-token-ms': '20' };
    const first = postJson(`${vl.url}/v1/chat/completions`, streamBody(), h);
    await new Promise((r) => setTimeout(r, 50));
    const dup = await postJson(`${vl.url}/v1/chat/completions`, streamBody(), h);
    expect(dup.status).toBe(400);
    const done = await first;
    expect(sseChunks(done)[0].id).toBe('chatcmpl-abc123');
    const again = await postJson(`${vl.url}/v1/chat/completions`, streamBody(), { 'x-request-id': 'abc123' });
    expect(again.status).toBe(200);
  });
});

describe('side endpoints', () => {
  it('health, models, tokenize, 404', async () => {
    const health = await request(`${sg.url}/health`);
    expect(health.statusCode).toBe(200);
    await health.body.dump();
    const models = await request(`${vl.url}/v1/models`);
    expect(((await models.body.json()) as any).data[0].object).toBe('model');

    const text = answerFor(messages).contentTokens.join('');
    const sgTok = JSON.parse((await postJson(`${sg.url}/tokenize`, { model: 'm', prompt: text })).text);
    expect(sgTok.count).toBe(answerFor(messages).contentTokens.length);
    expect(sgTok.tokens).toHaveLength(sgTok.count);
    expect(sgTok.max_model_len).toBeUndefined();
    const sgText = JSON.parse((await postJson(`${sg.url}/tokenize`, { model: 'm', text })).text);
    expect(sgText.tokens).toEqual(sgTok.tokens);
    const vlTok = JSON.parse((await postJson(`${vl.url}/tokenize`, { model: 'm', prompt: text })).text);
    expect(vlTok).toMatchObject({ tokens: sgTok.tokens, count: sgTok.count });
    expect(vlTok.max_model_len).toBeGreaterThan(0);
    const msgTok = JSON.parse((await postJson(`${vl.url}/tokenize`, { model: 'm', messages })).text);
    expect(msgTok.count).toBe(promptTokenCount(messages));

    const missing = await postJson(`${sg.url}/v1/embeddings`, {});
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.text).error.code).toBe(404);
  });

  it('records requests without logging anything', async () => {
    const before = sg.requests.length;
    await postJson(`${sg.url}/v1/chat/completions`, streamBody(), { 'x-fake-answer-tokens': '2,3' });
    const seen = sg.requests[before];
    for (let i = 0; i < 100 && seen.closedAt === undefined; i++) await new Promise((r) => setTimeout(r, 5));
    expect(seen).toMatchObject({ replica: 'sg', path: '/v1/chat/completions', continuation: false, tokensSent: 5, clientAborted: false });
    expect(seen.body.messages).toEqual(messages);
    expect(seen.closedAt).toBeGreaterThanOrEqual(seen.startedAt);
  });
});
