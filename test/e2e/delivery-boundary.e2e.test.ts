// Issue 3 through the real Envoy: invisible retry before the first delta, the interruption contract after
// it, fencing, the global budget, and the buffering modes.
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { engineClosedAt, engineSawAbort, expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '30,40' };
const TOOLS = { tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }] };

describe('with continuation (MAX_ATTEMPTS=2)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '2', FIRST_DELTA_TIMEOUT_SECONDS: '0' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('kill during prefill before any byte: one complete answer after an invisible retry', async () => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    // Reset before headers = Envoy's 503 UC: the same attempt is sent once more at once (src/upstream/client.ts).
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash-before-headers' });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.headers['x-request-id'])).toEqual([id, id]);
    expect(seen.every((s) => !s.continuation)).toBe(true);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed', attempt: 1 });
    // Reset twice: the attempt fails, and the retry (MAX_ATTEMPTS 2) completes.
    resetFaults();
    const id2 = newRequestId();
    const fault = 'crash-before-headers;crash-before-headers;-';
    const r2 = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id2, 'x-fake-fault': fault });
    expectOneCompleteStream(r2);
    expect(r2.reasoning + r2.content).toBe(ref.reasoning + ref.content);
    expect(seenFor(stack, id2).map((s) => s.headers['x-request-id'])).toEqual([id2, id2, `${id2}-a2`]);
    expect(await stack.waitForEnd(id2)).toMatchObject({ outcome: 'completed-after-retry', attempt: 2 });
  });

  test('kill after the engine produced output that was not delivered yet: retry, no fragment reaches the client', async () => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    // crash@0: the engine wrote its role chunk (held by the gateway: not a delta) and died.
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@0' });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    // The retry's id is the only one the client ever sees: the dead attempt's never left the gateway.
    const end = await stack.waitForEnd(id);
    expect(r.ids).toEqual([end.completion_id]);
    expect(seenFor(stack, id)).toHaveLength(2);
  });

  test('no first delta within FIRST_DELTA_TIMEOUT_SECONDS is not set: a slow prefill is waited for', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'slow@1800' });
    expectOneCompleteStream(r);
    expect(seenFor(stack, id)).toHaveLength(1);
  });

  test('replica alive but silent (network cut): leg1 is fenced and aborted before leg2 starts', async () => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'stall@25' });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    const leg2 = seenFor(stack, id)[1];
    expect(await engineSawAbort(stack, id, 0)).toBe(true);
    // Never two attempts writing: leg1 was aborted before leg2 was sent (the replica sees the abort after
    // it crossed Envoy, within a few ms), and no byte of leg1 reached the client after that.
    expect((await engineClosedAt(stack, id, 0)) ?? Infinity).toBeLessThanOrEqual(leg2.startedAt + 250);
  });

  test('kill after a delivered tool call: the interruption event and no second tool call', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(TOOLS), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@34' });
    expectInterruption(r, 'tool-call-delivered');
    expect(new Set(r.toolCalls.filter((t) => t.id).map((t) => t.id)).size).toBe(1);
    expect(seenFor(stack, id)).toHaveLength(1);
  });

  test('every fault kind after the first delta ends with finish_reason or the interruption event', async () => {
    for (const fault of [
      'crash@10',
      'fin@10',
      'eof@10',
      'stall@10',
      'error@10',
      'abort@10',
      'crash@10;crash@3',
      'crash@10;fin@3',
      'crash@10;eof@3',
      'crash@10;error@3',
      'crash@10;abort@3',
      'crash@10;status@503;status@503;status@503',
      'crash@10;status@500',
    ]) {
      resetFaults();
      const id = newRequestId();
      const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
      expect(r.transportError).toBeNull();
      const ended = r.finishReasons.length === 1 || r.errors.length === 1;
      expect([fault, ended]).toEqual([fault, true]);
      expect(r.done).toBe(true);
      if (fault.includes(';')) expectInterruption(r);
    }
  });

  test('the official openai client sees a recovered stream as one ordinary completion, and raises on the interruption event', async () => {
    const { default: OpenAI } = await import('openai');
    const client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'test-key', maxRetries: 0 });
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const stream = await client.chat.completions.create(
      { model: 'test-model', stream: true, messages: [{ role: 'user', content: 'Tell me about continuation.' }] },
      { headers: { ...SIZE, 'x-fake-fault': 'crash@40' } },
    );
    let content = '';
    const finish: string[] = [];
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.choices[0]?.finish_reason) finish.push(chunk.choices[0].finish_reason);
    }
    expect(content).toBe(ref.content);
    expect(finish).toEqual(['stop']);

    resetFaults();
    const broken = await client.chat.completions.create(
      { model: 'test-model', stream: true, messages: [{ role: 'user', content: 'Tell me about continuation.' }], ...TOOLS } as any,
      { headers: { ...SIZE, 'x-fake-fault': 'crash@34' } },
    );
    let caught: any = null;
    try {
      for await (const _ of broken as any) void _;
    } catch (e) {
      caught = e;
    }
    expect(caught).not.toBeNull();
    expect(String(caught.message)).toContain('could not continue');
    expect(caught.error?.code ?? caught.code).toBe('upstream_decode_interrupted');
  });
});

describe('continuation disabled, tight stall bound', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { CONTINUATION_ENABLED: 'false', MAX_ATTEMPTS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('kill right after the first delta: the interruption event, no second generation starts', async () => {
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@1' });
    const e = expectInterruption(r, 'continuation-disabled');
    expect(e.delivered_output_tokens).toBeGreaterThan(0);
    expect(e.request_id).toBe(id);
    expect(r.reasoning.length).toBeGreaterThan(0);
    expect(seenFor(stack, id)).toHaveLength(1);
    // Dry run: the trigger is still detected and logged.
    expect(stack.records({ request_id: id, decision: 'TRIGGERED' })).toHaveLength(1);
  });
});

describe('leg2 stall bound and buffering modes', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      env: { MAX_STALL_SECONDS: '2', BUFFER_TOOL_CALLS: 'true', BUFFER_STRUCTURED_OUTPUT: 'true', MAX_ATTEMPTS: '2' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('leg2 silent after its first bytes: the interruption event on the stall timer, never a hang', async () => {
    // The stall timer (1 s here) comes before MAX_STALL_SECONDS (2 s); that MAX_STALL_SECONDS also bounds a leg 2
    // silent before its first bytes is the planner's (test/unit/recovery/planner.test.ts).
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@10;stall@3' });
    expectInterruption(r, 'leg2-stall');
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'interrupted', reason: 'leg2-stall' });
  });

  test('BUFFER_TOOL_CALLS: a tool call arrives whole; a crash inside it continues from the state before it', async () => {
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(TOOLS), SIZE);
    const r = await postChat(stack.url, chatBody(TOOLS), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@33' });
    expectOneCompleteStream(r);
    expect(r.finishReasons).toEqual(['tool_calls']);
    expect(r.reasoning).toBe(ref.reasoning);
    const args = (calls: any[]) => calls.map((t) => t.function?.arguments ?? '').join('');
    expect(args(r.toolCalls)).toBe(args(ref.toolCalls));
    expect(r.toolCalls.filter((t) => t.id)).toHaveLength(1);
    expect(stack.records({ request_id: id, decision: 'HELD_TOOL_CALL_DISCARDED' })).toHaveLength(1);
  });

  test('BUFFER_STRUCTURED_OUTPUT: an interrupted json_schema stream still yields one valid JSON document', async () => {
    const id = newRequestId();
    const body = chatBody({ response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object' } } } });
    const ref = await uninterrupted(stack, body, SIZE);
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(ref.content);
    expect(() => JSON.parse(r.content)).not.toThrow();
    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.continuation)).toEqual([false, false]); // re-run whole, never continued
  });

  test('BUFFER_STRUCTURED_OUTPUT with every attempt failing: the error, never a partial document', async () => {
    const id = newRequestId();
    const body = chatBody({ response_format: { type: 'json_object' } });
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40;crash@40' });
    expect(r.content).toBe('');
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0].partial_output).toBe(false);
  });
});

describe('recovery admission: re-prefill slots and the waiting queue', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // One re-prefill at a time, and a short wait for it, so that a burst overflows the queue.
    stack = await startTestStack({ env: { RECOVERY_MAX_CONCURRENT: '1', RECOVERY_QUEUE_TIMEOUT_SECONDS: '2', MAX_ATTEMPTS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  const metric = async (name: string): Promise<number> => {
    const text = await stack.sidecar!.ctx.metrics.render();
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
    return m ? Number(m[1]) : NaN;
  };

  test('a burst of failing streams: one re-prefill at a time, the others wait their turn, the queue timeout ends the rest explicitly', async () => {
    // Each stream crashes after its first deltas; each leg2 takes 1.5 s to its first token, holding the slot.
    const runs = Array.from({ length: 6 }, (_, k) => {
      const id = newRequestId('burst');
      return postChat(stack.url, chatBody({}, `burst ${k}`), {
        ...SIZE,
        'x-request-id': id,
        'x-fake-token-ms': '15',
        'x-fake-fault': `crash@5;slow@1500${';-'.repeat(k)}`,
      }).then((r) => ({ id, r }));
    });
    const results = await Promise.all(runs);
    const completed = results.filter(({ r }) => r.finishReasons.length === 1);
    const timedOut = results.filter(({ r }) => r.errors[0]?.reason === 'recovery-queue-timeout');
    // The first gets the slot at once, the second after ~1.5 s of waiting (< 2 s), later ones time out.
    expect(completed.length).toBeGreaterThanOrEqual(2);
    expect(timedOut.length).toBeGreaterThanOrEqual(1);
    expect(completed.length + timedOut.length).toBe(6);
    for (const { r } of timedOut) expectInterruption(r, 'recovery-queue-timeout');
    expect(stack.logs.filter((l) => l.decision === 'RECOVERY_REFUSED' && l.reason === 'queue-timeout' && l.phase === 'decode').length).toBe(
      timedOut.length,
    );
    expect(stack.logs.filter((l) => l.decision === 'RECOVERY_ADMITTED' && l.waited_ms > 0).length).toBeGreaterThanOrEqual(1);
    expect(await metric('continuation_gateway_reprefills_in_flight_peak')).toBe(1);
    expect(await metric('continuation_gateway_reprefills_in_flight')).toBe(0);
    expect(await metric('continuation_gateway_recoveries_waiting')).toBe(0);
  });

  test('before the first delta, a retry that cannot get a slot in time is an HTTP 503 with Retry-After, never 200 and a reset', async () => {
    const runs = Array.from({ length: 4 }, (_, k) => {
      const id = newRequestId('burst0');
      return postChat(stack.url, chatBody({}, `prefill burst ${k}`), {
        ...SIZE,
        'x-request-id': id,
        'x-fake-fault': `crash@0;slow@1500${';-'.repeat(k)}`,
      }).then((r) => ({ id, r }));
    });
    const results = await Promise.all(runs);
    const retried = results.filter(({ r }) => r.finishReasons.length === 1);
    const refused = results.filter(({ r }) => r.status === 503);
    expect(retried.length).toBeGreaterThanOrEqual(2);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    expect(retried.length + refused.length).toBe(4);
    for (const { id, r } of refused) {
      expect(r.transportError).toBeNull();
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(r.raw).error).toMatchObject({
        code: 'recovery_unavailable',
        request_id: id,
        retryable: true,
        reason: 'reset:recovery-queue-timeout',
      });
    }
    expect(stack.logs.filter((l) => l.decision === 'RECOVERY_REFUSED' && l.phase === 'prefill').length).toBe(refused.length);
  });
});

describe('retry cost: MAX_RECOVERY_PROMPT_TOKENS', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // The prompt alone is ~7 estimated tokens: a retry (prompt only) fits, a continuation after 20 delivered
    // tokens does not.
    stack = await startTestStack({ env: { MAX_RECOVERY_PROMPT_TOKENS: '15', MAX_ATTEMPTS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a continuation whose re-prefill (prompt + delivered text) is over the limit is not started: explicit end at once', async () => {
    const id = newRequestId('costly');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@20' });
    expectInterruption(r, 'recovery-too-costly');
    expect(seenFor(stack, id).filter((s) => s.continuation)).toHaveLength(0);
    const refused = stack.records({ request_id: id, decision: 'RECOVERY_REFUSED' });
    expect(refused).toEqual([expect.objectContaining({ reason: 'too-costly', phase: 'decode', max_recovery_prompt_tokens: 15 })]);
    expect(refused[0].reprefill_tokens).toBeGreaterThan(15);
  });

  test('a retry of the prompt alone is under the limit: re-run as usual', async () => {
    const id = newRequestId('cheap-retry');
    // Twice: the first reset before headers is sent once more (503 UC), the second fails the attempt.
    const fault = 'crash-before-headers;crash-before-headers;-';
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expectOneCompleteStream(r);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-retry', attempt: 2 });
  });

  test('a prompt over the limit: a failure before the first delta is an HTTP 503, not a retry', async () => {
    const id = newRequestId('costly-retry');
    const long = 'Tell me about continuation, at length and with many details please.';
    const fault = 'crash-before-headers;crash-before-headers';
    const r = await postChat(stack.url, chatBody({}, long), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expect(r.status).toBe(503);
    expect(JSON.parse(r.raw).error).toMatchObject({ code: 'recovery_unavailable', retryable: true, reason: 'reset:recovery-too-costly' });
    // The attempt and its one re-send after Envoy's 503 UC; no retry.
    expect(seenFor(stack, id)).toHaveLength(2);
  });
});
