// Model families through the real Envoy: the continuation a family's engine receives, a family x engine pair
// that cannot continue a cut (which must end explicitly), and the restart guard (a continuation that starts
// the answer over is never appended). The replicas are fake engines speaking the family (their format and
// parser split are our reading of the engines, checked against the real templates and SGLang's parsers by
// test/unit/families/fidelity.test.ts).
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '30,40' };

describe('Kimi-K3 on SGLang', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { CONTINUATION_MODEL: 'moonshotai/Kimi-K3' }, engine: { family: 'kimi-k3' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    ['inside the reasoning', 'crash@12', false],
    ['inside the content', 'crash@45', true],
  ])(
    'a cut %s: the generation prompt opens the think channel, leg 2 does not repeat it; identical answer',
    async (_c, fault, inContent) => {
      const id = newRequestId();
      const body = chatBody({ chat_template_kwargs: { thinking_effort: 'high' } });
      const ref = await uninterrupted(stack, body, SIZE);
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
      expectOneCompleteStream(r);
      expect(r.reasoning).toBe(ref.reasoning);
      expect(r.content).toBe(ref.content);
      const leg2 = seenFor(stack, id)[1].body;
      const prefix: string = leg2.messages.at(-1).content;
      expect(prefix.startsWith('<|open|>')).toBe(false);
      expect(prefix.includes('<|close|>think<|sep|><|open|>response<|sep|>')).toBe(inContent);
      // The client's kwargs, untouched: `thinking: false` would change K3's system part and open the response channel.
      expect(leg2.chat_template_kwargs).toEqual({ thinking_effort: 'high' });
    },
  );
});

describe('a family x engine pair that cannot continue the cut: Qwen3 on vLLM, cut inside the reasoning', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      env: { CONTINUATION_MODEL: 'Qwen/Qwen3-32B', CONTINUATION_ENGINE: 'vllm' },
      engine: { dialect: 'vllm', family: 'qwen3' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('ends with the interruption event (continuation-unsupported), no leg 2; a content cut continues', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@12' });
    const e = expectInterruption(r, 'continuation-unsupported');
    expect(r.reasoning.length).toBeGreaterThan(0);
    expect(r.content).toBe('');
    expect(e.delivered_output_tokens).toBeGreaterThan(0);
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false]);
    expect(stack.records({ request_id: id, decision: 'SKIPPED' })[0]).toMatchObject({
      reason: 'continuation-unsupported',
      family: 'qwen3',
      engine: 'vllm',
      phase: 'reasoning',
      detail: 'phase-reasoning-unsupported',
    });

    const id2 = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const ok = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id2, 'x-fake-fault': 'crash@45' });
    expectOneCompleteStream(ok);
    expect(ok.reasoning).toBe(ref.reasoning);
    expect(ok.content).toBe(ref.content);
    expect(seenFor(stack, id2)[1].body.messages.at(-1)).toMatchObject({ role: 'assistant', reasoning_content: expect.any(String) });
  });
});

describe('the restart guard: CONTINUATION_MODEL names another family than the engine serves', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // The replicas speak Qwen3; the gateway was told Kimi-K3. Given a prompt it does not read as "go on", the
    // fake model starts its answer over (x-fake-on-mismatch: restart), as a real one tends to.
    stack = await startTestStack({ env: { CONTINUATION_MODEL: 'kimi-k3' }, engine: { family: 'qwen3' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    ['inside the reasoning', 'crash@14'],
    ['inside the content', 'crash@45'],
  ])('a cut %s: the restarted answer is never appended, the stream ends explicitly (leg2-restarted)', async (_c, fault) => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), {
      ...SIZE,
      'x-request-id': id,
      'x-fake-fault': fault,
      'x-fake-on-mismatch': 'restart',
    });
    expectInterruption(r, 'leg2-restarted');
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    // What the client has is leg 1's part of the answer and nothing of the restart.
    expect(ref.reasoning.startsWith(r.reasoning)).toBe(true);
    expect(ref.content.startsWith(r.content)).toBe(true);
    expect(r.reasoning.length).toBeLessThan(ref.reasoning.length + (r.content ? 1 : 0));
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false, true]);
    expect(stack.records({ request_id: id, decision: 'LEG2_RESTARTED' })).toHaveLength(1);
  });
});

describe('CONTINUATION_MODEL=auto: the family read from the engine', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { CONTINUATION_MODEL: 'auto' }, engine: { family: 'qwen3', model: 'Qwen/Qwen3-32B' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('detects qwen3 from /v1/models through the egress, then continues in its format', async () => {
    for (let i = 0; i < 100 && stack.records({ decision: 'FAMILY_DETECTED' }).length === 0; i++)
      await new Promise((r) => setTimeout(r, 100));
    expect(stack.records({ decision: 'FAMILY_DETECTED' })[0]).toMatchObject({ family: 'qwen3', served_as: 'Qwen/Qwen3-32B' });
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@20' });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(seenFor(stack, id)[1].body.messages.at(-1).content.startsWith('<think>\n')).toBe(true);
  });
});

// Gemma 4 (the published template, src/families/table/gemma.ts): thinking only when asked (enable_thinking), the
// model writes `<|channel>thought\n` R `\n<channel|>` C. The fake engine speaks that format (our reading of the
// engines' parsers; the fidelity suite proves the rules against the template and SGLang's own parser).
const GEMMA4_THINKING = chatBody({ chat_template_kwargs: { enable_thinking: true } });

describe('Gemma 4 on SGLang', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { CONTINUATION_MODEL: 'google/gemma-4-31B-it' }, engine: { family: 'gemma-4' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    ['inside the reasoning', 'crash@12', false],
    ['inside the content', 'crash@45', true],
  ])('a cut %s: leg 2 appends the raw channel text; identical answer, labelled verified', async (_c, fault, inContent) => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, GEMMA4_THINKING, SIZE);
    expect(ref.reasoning.length).toBeGreaterThan(0);
    const r = await postChat(stack.url, GEMMA4_THINKING, { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(r.content).toBe(ref.content);
    const prefix: string = seenFor(stack, id)[1].body.messages.at(-1).content;
    expect(prefix.startsWith('<|channel>thought\n')).toBe(true);
    expect(prefix.includes('<channel|>')).toBe(inContent);
    expect(stack.records({ request_id: id, decision: 'ATTEMPT', leg: 2 })).toEqual([
      expect.objectContaining({ family: 'gemma-4', source: 'table', unverified: false }),
    ]);
  });
});

describe('Gemma 4 on vLLM: the content continues, a cut inside the reasoning ends explicitly', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      env: { CONTINUATION_MODEL: 'google/gemma-4-26B-A4B-it', CONTINUATION_ENGINE: 'vllm' },
      engine: { dialect: 'vllm', family: 'gemma-4' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('reasoning cut: continuation-unsupported, no leg 2; content cut: the reasoning as delivered, identical answer', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, GEMMA4_THINKING, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@12' });
    expectInterruption(r, 'continuation-unsupported');
    expect(r.content).toBe('');
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false]);

    const id2 = newRequestId();
    const ref = await uninterrupted(stack, GEMMA4_THINKING, SIZE);
    const ok = await postChat(stack.url, GEMMA4_THINKING, { ...SIZE, 'x-request-id': id2, 'x-fake-fault': 'crash@45' });
    expectOneCompleteStream(ok);
    expect(ok.reasoning).toBe(ref.reasoning);
    expect(ok.content).toBe(ref.content);
    const final = seenFor(stack, id2)[1].body.messages.at(-1);
    // vLLM's parser dropped the "\n" before `<channel|>` (the client never saw it); the template writes it back
    // (reasoning_content + "\n<channel|>"): the reasoning goes as delivered.
    expect(final.reasoning_content).toBe(ref.reasoning);
    expect(ref.reasoning.endsWith('\n')).toBe(false);
    expect(ok.content.startsWith(final.content)).toBe(true);
    // The outcome metric: the rescue counted as verified (a proven entry), the refused cut as sending none.
    await stack.waitForEnd(id2);
    const text = await stack.sidecar!.ctx.metrics.render();
    expect(text).toMatch(
      /^continuation_gateway_request_outcomes_total\{outcome="completed-after-continuation",continuation="verified"\} 1$/m,
    );
    expect(text).toMatch(/^continuation_gateway_request_outcomes_total\{outcome="interrupted",continuation="none"\} 1$/m);
  });
});
