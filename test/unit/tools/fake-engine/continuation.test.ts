// The fake engine speaking a family: whatever the cut, a continuation request built by the gateway's own
// planner (planContinuationRequest) must make leg 1 + leg 2 equal the uninterrupted answer byte for byte, and a
// request that does not continue this answer must fail loudly. What the family formats and parser splits look
// like is the family table's and family-speech.ts's; that they match the real templates and SGLang's parsers is
// test/unit/families/fidelity.test.ts.

import { planContinuationRequest } from '../../../../src/recovery/continuation-request';
import { resetFaults } from '../../../../tools/fake-engine/faults';
import { type Dialect, type FakeEngine, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Explain continuation 你好 🙂' },
];
const SIZE = { 'x-fake-answer-tokens': '30,40' };
const FAMILIES = ['generic', 'kimi-k3', 'qwen3', 'gpt-oss', 'deepseek-r1-distill', 'glm-4.6'];

const engines: Record<string, FakeEngine> = {};
beforeAll(async () => {
  for (const dialect of ['sglang', 'vllm'] as Dialect[]) {
    for (const family of FAMILIES) {
      engines[`${dialect}/${family}`] = await startFakeEngine({ name: `${dialect}-${family}`, dialect, family, tokenIntervalMs: 0 });
    }
  }
});
afterAll(async () => {
  await Promise.all(Object.values(engines).map((e) => e.close()));
});
beforeEach(() => resetFaults());

// The R1 distills' template (llama.cpp's copy) closes the think block unless enable_thinking is set.
const THINKING: Record<string, Record<string, unknown>> = {};
const fieldOf = (dialect: Dialect) => (dialect === 'sglang' ? 'reasoning_content' : 'reasoning');
const text = (chunks: any[], field: string) => chunks.map((ch) => ch.choices[0]?.delta?.[field] ?? '').join('');
const body = (extra: Record<string, unknown> = {}) => ({
  model: 'm',
  stream: true,
  stream_options: { include_usage: true },
  messages,
  ...extra,
});

describe.each(['sglang', 'vllm'] as Dialect[])('%s', (dialect) => {
  describe.each(FAMILIES)('%s', (family) => {
    const engine = () => engines[`${dialect}/${family}`];

    it('continues byte-identically after every streamed chunk the family can continue on this engine', async () => {
      const original = body(THINKING[family]);
      const full = sseChunks(await postJson(`${engine().url}/v1/chat/completions`, original, SIZE));
      const tokenChunks = full.filter((c) => c.choices?.length && (c.choices[0].delta?.content || c.choices[0].delta?.[fieldOf(dialect)]));
      const want = { reasoning: text(full, fieldOf(dialect)), content: text(full, 'content') };
      expect(want.content.length).toBeGreaterThan(0);
      let continued = 0;
      for (let k = 1; k < tokenChunks.length; k++) {
        const delivered = { reasoning: text(tokenChunks.slice(0, k), fieldOf(dialect)), content: text(tokenChunks.slice(0, k), 'content') };
        const plan = planContinuationRequest(
          original,
          { ...delivered, toolCallsSeen: false },
          { continuationModel: family, engine: dialect, rates: { cjk: 1.6, other: 4 } },
        );
        if (plan.kind === 'skip') {
          expect(plan.reason).toBe('continuation-unsupported');
          continue;
        }
        const res = await postJson(`${engine().url}/v1/chat/completions`, plan.body, SIZE);
        expect(res.status).toBe(200);
        let leg2 = sseChunks(res);
        if (plan.design.shape.split === 'harmony') {
          // gpt-oss on SGLang: raw text; the gateway's split is exercised end to end in the fault matrix.
          expect(plan.body.separate_reasoning).toBe(false);
          const { HarmonySplit } = await import('../../../../src/recovery/harmony-split');
          const h = new HarmonySplit(plan.design.phase);
          leg2 = leg2.map((c) => {
            const p = h.feed(c.choices?.[0]?.delta?.content ?? '');
            if ('error' in p) throw new Error(p.error);
            return { choices: [{ delta: { content: p.content, [fieldOf(dialect)]: p.reasoning } }] };
          });
        }
        expect(delivered.reasoning + text(leg2, fieldOf(dialect))).toBe(want.reasoning);
        expect(delivered.content + text(leg2, 'content')).toBe(want.content);
        continued++;
      }
      // Every family continues somewhere on SGLang; on vLLM only the ones whose template renders a cut exactly.
      if (dialect === 'sglang' || ['generic', 'qwen3', 'deepseek-r1-distill', 'glm-4.6'].includes(family))
        expect(continued).toBeGreaterThan(0);
    });

    it('rejects a continuation that is not this answer', async () => {
      const res = await postJson(
        `${engine().url}/v1/chat/completions`,
        {
          ...body(),
          messages: [...messages, { role: 'assistant', content: 'Nope, something else entirely' }],
          continue_final_message: true,
          add_generation_prompt: false,
        },
        SIZE,
      );
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).error.message).toBe("fake-engine: continuation prefix does not match this engine's answer");
    });
  });
});

describe('add_generation_prompt', () => {
  const cont = (extra: Record<string, unknown>) => ({
    ...body(),
    messages: [...messages, { role: 'assistant', content: '<think>Okay' }],
    continue_final_message: true,
    ...extra,
  });
  it('vllm refuses continue_final_message unless add_generation_prompt is false', async () => {
    for (const agp of [undefined, true]) {
      const res = await postJson(`${engines['vllm/generic'].url}/v1/chat/completions`, cont({ add_generation_prompt: agp }), SIZE);
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).error.message).toMatch(/continue_final_message and add_generation_prompt cannot both be true/);
    }
  });
});

describe('crash then continue on another replica', () => {
  it('stitches leg 1 (crashed at token 12) and leg 2 into the full answer (qwen3, SGLang)', async () => {
    const a = engines['sglang/qwen3'];
    const full = sseChunks(await postJson(`${a.url}/v1/chat/completions`, body(), SIZE));
    const leg1 = await postJson(`${a.url}/v1/chat/completions`, body(), { ...SIZE, 'x-fake-fault': 'crash@12;-' });
    expect(leg1.error).toBeDefined();
    const c1 = sseChunks(leg1);
    const delivered = { reasoning: text(c1, 'reasoning_content'), content: text(c1, 'content') };
    const plan = planContinuationRequest(
      body(),
      { ...delivered, toolCallsSeen: false },
      { continuationModel: 'Qwen/Qwen3-32B', engine: 'sglang', rates: { cjk: 1.6, other: 4 } },
    );
    if (plan.kind !== 'send') throw new Error(plan.reason);
    expect((plan.body as any).messages.at(-1).content.startsWith('<think>\n')).toBe(true);
    const c2 = sseChunks(await postJson(`${a.url}/v1/chat/completions`, plan.body, { ...SIZE, 'x-fake-fault': 'crash@12;-' }));
    expect(delivered.reasoning + text(c2, 'reasoning_content')).toBe(text(full, 'reasoning_content'));
    expect(delivered.content + text(c2, 'content')).toBe(text(full, 'content'));
  });
});
