// A continuation leg that fails is handled like leg 1 (issue 18 item 5): its stall is detected by the same timer
// (STALL_IDLE_TIMEOUT_SECONDS, not MAX_STALL_SECONDS), and with MAX_CONTINUATIONS above 1 another leg continues
// from everything delivered so far, usage exact across the legs.
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '20,30' };

describe('the default (MAX_CONTINUATIONS=1): a stalled continuation leg', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { STALL_IDLE_TIMEOUT_SECONDS: '0.5', MAX_STALL_SECONDS: '60' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('ends with leg2-stall on the stall timer, not after MAX_STALL_SECONDS', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@10;stall@5' });
    expectInterruption(r, 'leg2-stall');
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false, true]);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'interrupted', legs: 2, reason: 'leg2-stall' });
    expect(end.total_ms).toBeLessThan(30_000);
  });
});

describe('MAX_CONTINUATIONS=3', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      replicas: 3,
      env: {
        MAX_CONTINUATIONS: '3',
        STALL_IDLE_TIMEOUT_SECONDS: '0.5',
        TOKENIZE_URL: '{engine0}/tokenize',
        TOKENIZE_TIMEOUT_MS: '3000',
        RECOVERY_BUDGET_PERCENT: '100',
      },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    ['a crash, then a crash of the continuation', 'crash@10;crash@6;-', 3],
    ['a crash, a stalled continuation, an EOF', 'crash@8;stall@4;eof@5;-', 4],
  ])('%s: one complete, identical stream, usage exact across the legs', async (_c, fault, legs) => {
    const id = newRequestId();
    const body = chatBody({ stream_options: { include_usage: true }, max_tokens: 200 });
    const ref = await uninterrupted(stack, body, SIZE);
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(r.content).toBe(ref.content);
    expect(r.usage.completion_tokens).toBe(ref.usage.completion_tokens);
    expect(r.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
    expect(r.usage.continuation).toMatchObject({ legs });
    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.continuation)).toEqual([false, ...Array(legs - 1).fill(true)]);
    expect(seen.slice(1).map((s) => s.headers['x-request-id'])).toEqual(Array.from({ length: legs - 1 }, (_, i) => `${id}-c${i + 1}`));
    // Each leg's budget is the client's minus everything delivered before it.
    for (const s of seen.slice(1)) expect(s.body.max_tokens).toBeLessThan(200);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs });
  });

  test('the last allowed leg failing ends the stream explicitly', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@5;crash@3;crash@3;crash@3' });
    expectInterruption(r, 'leg2-reset');
    expect(seenFor(stack, id)).toHaveLength(4);
  });
});

describe("vLLM's continuous_usage_stats: running usage across the legs", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      replicas: 3,
      engine: { dialect: 'vllm' },
      env: { CONTINUATION_ENGINE: 'vllm', MAX_CONTINUATIONS: '2', STALL_IDLE_TIMEOUT_SECONDS: '0.5', RECOVERY_BUDGET_PERCENT: '100' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    ['one continuation', 'crash@20;-'],
    ['two continuations', 'crash@12;crash@9;-'],
  ])('%s: never decreases from one chunk to the next and ends at the uninterrupted totals', async (_c, fault) => {
    const body = chatBody({ stream_options: { include_usage: true, continuous_usage_stats: true } });
    const ref = await uninterrupted(stack, body, SIZE);
    const id = newRequestId();
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expectOneCompleteStream(r);
    expect(r.content).toBe(ref.content);
    const running = r.chunks.filter((c: any) => c.usage).map((c: any) => c.usage);
    expect(running.length).toBeGreaterThan(20);
    for (let i = 1; i < running.length; i++) {
      for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens'])
        expect(running[i][k]).toBeGreaterThanOrEqual(running[i - 1][k]);
    }
    // Without TOKENIZE_URL the engine's own running count is the base: exact, not estimated.
    expect(r.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
    expect(r.usage.completion_tokens).toBe(ref.usage.completion_tokens);
    expect(r.usage.continuation).toMatchObject({ method: 'engine-usage' });
  });
});

describe('unfinished ends and partial events (issue 19)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { STALL_IDLE_TIMEOUT_SECONDS: '1' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  const doneCount = (raw: string) => raw.split('data: [DONE]').length - 1;

  test("leg 1's [DONE] without a finish_reason is a failure: continued, exactly one [DONE], last", async () => {
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': newRequestId(), 'x-fake-fault': 'done@20' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(ref.content);
    expect(doneCount(r.raw)).toBe(1);
    expect(r.raw.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  test("leg 2's [DONE] without a finish_reason: the interruption event, then the one [DONE]", async () => {
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': newRequestId(), 'x-fake-fault': 'crash@20;done@5' });
    expectInterruption(r, 'leg2-eof');
    expect(doneCount(r.raw)).toBe(1);
  });

  test('a partial event trickling in after the commit point is a stall on the timer: continued', async () => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'trickle@20:200' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(ref.content);
    expect(stack.records({ request_id: id, decision: 'TRIGGERED' })[0]).toMatchObject({ failure: 'stall' });
  });
});
