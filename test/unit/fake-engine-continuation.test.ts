// Continuation legs: whatever cut point and prefix family, leg 1 + leg 2 must equal the uninterrupted
// answer byte for byte, and a wrong prefix must fail loudly.
import { answerFor, promptTokenCount } from '../../src/fake-engine/answer';
import { resetFaults } from '../../src/fake-engine/faults';
import { type Dialect, type FakeEngine, type PrefixFamily, startFakeEngine } from '../../src/fake-engine/server';
import { postJson, sseChunks } from '../../src/fake-engine/sse-client';
import { tokenize } from '../../src/fake-engine/tokens';

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Explain continuation 你好 🙂' },
];
const SIZE = { 'x-fake-answer-tokens': '30,40' };
const full = answerFor(messages, { reasoning: 30, content: 40 });
const FULL_R = full.reasoningTokens.join('');
const FULL_C = full.contentTokens.join('');

function buildPrefix(family: PrefixFamily, reasoning: string, content: string, openTag = true): string {
  // Same construction as the reference gateway (reconstruct.py).
  if (family === 'kimi-k3') {
    const open = openTag ? '<|open|>think<|sep|>' : '';
    return content ? `${open}${reasoning}<|close|>think<|sep|><|open|>response<|sep|>${content}` : `${open}${reasoning}`;
  }
  const open = openTag ? '<think>' : '';
  return content ? `${open}${reasoning}</think>${content}` : `${open}${reasoning}`;
}

function continuationBody(prefix: string, content: string, extra: Record<string, unknown> = {}) {
  return {
    model: 'kimi-k3',
    stream: true,
    stream_options: { include_usage: true },
    messages: [...messages, { role: 'assistant', content: prefix }],
    continue_final_message: true,
    add_generation_prompt: false,
    ...(content ? { chat_template_kwargs: { thinking: false } } : {}),
    ...extra,
  };
}

const engines: Record<string, FakeEngine> = {};
beforeAll(async () => {
  for (const dialect of ['sglang', 'vllm'] as Dialect[]) {
    for (const family of ['generic', 'kimi-k3'] as PrefixFamily[]) {
      engines[`${dialect}/${family}`] = await startFakeEngine({ name: `${dialect}-${family}`, dialect, family, tokenIntervalMs: 0 });
    }
  }
});
afterAll(async () => {
  await Promise.all(Object.values(engines).map((e) => e.close()));
});
beforeEach(() => resetFaults());

const cuts: [string, number, number][] = [
  ['inside reasoning (1 token)', 1, 0],
  ['inside reasoning', 17, 0],
  ['reasoning complete, content not started', 30, 0],
  ['first content token', 30, 1],
  ['inside content', 30, 23],
  ['one content token left', 30, 39],
];

describe.each(['sglang', 'vllm'] as Dialect[])('%s', (dialect) => {
  const rField = dialect === 'sglang' ? 'reasoning_content' : 'reasoning';
  describe.each(['generic', 'kimi-k3'] as PrefixFamily[])('%s prefix', (family) => {
    const engine = () => engines[`${dialect}/${family}`];

    it.each(cuts)('continues %s byte-identically', async (_label, r, c) => {
      for (const openTag of [true, false]) {
        const reasoning = full.reasoningTokens.slice(0, r).join('');
        const content = full.contentTokens.slice(0, c).join('');
        const prefix = buildPrefix(family, reasoning, content, openTag);
        const res = await postJson(`${engine().url}/v1/chat/completions`, continuationBody(prefix, content), SIZE);
        expect(res.status).toBe(200);
        const chunks = sseChunks(res);
        expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
        const r2 = chunks.map((ch) => ch.choices[0]?.delta?.[rField] ?? '').join('');
        const c2 = chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join('');
        expect(Buffer.from(reasoning + r2)).toEqual(Buffer.from(FULL_R));
        expect(Buffer.from(content + c2)).toEqual(Buffer.from(FULL_C));
        expect(res.data[res.data.length - 1]).toBe('[DONE]');
        const emitted = 70 - r - c;
        expect(chunks[chunks.length - 1].usage).toMatchObject({
          prompt_tokens: promptTokenCount(messages) + tokenize(prefix).length,
          completion_tokens: emitted,
        });
        expect(chunks.length).toBe(1 + emitted + 2);
        const seen = engine().requests[engine().requests.length - 1];
        expect(seen.continuation).toBe(true);
      }
    });

    it('rejects a prefix that is not this answer', async () => {
      const bad = [
        buildPrefix(family, 'Nope, different', ''),
        buildPrefix(family, full.reasoningTokens.slice(0, 20).join(''), full.contentTokens.slice(0, 3).join('')),
        buildPrefix(family, FULL_R, 'Different content'),
      ];
      for (const prefix of bad) {
        const res = await postJson(`${engine().url}/v1/chat/completions`, continuationBody(prefix, ''), SIZE);
        expect(res.status).toBe(400);
        expect(JSON.parse(res.text)).toEqual({
          error: { message: "fake-engine: continuation prefix does not match this engine's answer", type: 'BadRequestError', code: 400 },
        });
      }
    });

    it('rejects thinking disabled while the reasoning is incomplete', async () => {
      const prefix = buildPrefix(family, full.reasoningTokens.slice(0, 10).join(''), '');
      const body = { ...continuationBody(prefix, ''), chat_template_kwargs: { thinking: false } };
      const res = await postJson(`${engine().url}/v1/chat/completions`, body, SIZE);
      expect(res.status).toBe(400);
    });
  });
});

describe('thinking-off originals', () => {
  it('continue content when the original never reasoned', async () => {
    const e = engines['sglang/generic'];
    const content = full.contentTokens.slice(0, 12).join('');
    for (const prefix of [content, `<think></think>${content}`]) {
      const res = await postJson(`${e.url}/v1/chat/completions`, continuationBody(prefix, content), SIZE);
      expect(res.status).toBe(200);
      const chunks = sseChunks(res);
      expect(chunks.map((ch) => ch.choices[0]?.delta?.reasoning_content ?? '').join('')).toBe('');
      expect(content + chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join('')).toBe(FULL_C);
    }
  });
});

describe('add_generation_prompt', () => {
  const prefix = buildPrefix('generic', full.reasoningTokens.slice(0, 5).join(''), '');
  it('vllm refuses continue_final_message unless add_generation_prompt is false', async () => {
    const e = engines['vllm/generic'];
    for (const agp of [undefined, true]) {
      const res = await postJson(`${e.url}/v1/chat/completions`, continuationBody(prefix, '', { add_generation_prompt: agp }), SIZE);
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).error.message).toMatch(/continue_final_message and add_generation_prompt cannot both be true/);
    }
  });
  it('sglang ignores it', async () => {
    const res = await postJson(
      `${engines['sglang/generic'].url}/v1/chat/completions`,
      continuationBody(prefix, '', { add_generation_prompt: true }),
      SIZE,
    );
    expect(res.status).toBe(200);
  });
});

describe('crash then continue on another replica', () => {
  it('stitches leg 1 (crashed at token 12) and leg 2 into the full answer', async () => {
    const a = engines['sglang/kimi-k3'];
    const b = engines['vllm/kimi-k3'];
    const body = { model: 'kimi-k3', stream: true, stream_options: { include_usage: true }, messages };
    const faults = { ...SIZE, 'x-fake-fault': 'crash@35;-' };
    const leg1 = await postJson(`${a.url}/v1/chat/completions`, body, faults);
    expect(leg1.error).toBeDefined();
    const c1 = sseChunks(leg1);
    const r = c1.map((ch) => ch.choices[0]?.delta?.reasoning_content ?? '').join('');
    const c = c1.map((ch) => ch.choices[0]?.delta?.content ?? '').join('');
    expect(c1.length).toBe(36);
    const leg2 = await postJson(`${b.url}/v1/chat/completions`, continuationBody(buildPrefix('kimi-k3', r, c), c), faults);
    const c2 = sseChunks(leg2);
    expect(r + c2.map((ch) => ch.choices[0]?.delta?.reasoning ?? '').join('')).toBe(FULL_R);
    expect(c + c2.map((ch) => ch.choices[0]?.delta?.content ?? '').join('')).toBe(FULL_C);
    expect(b.requests[b.requests.length - 1].fault).toBeUndefined();
  });
});
