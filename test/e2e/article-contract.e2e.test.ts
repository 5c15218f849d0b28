// Issue 13 through the real Envoy: the article's rules that hold across legs. A continuation from another
// model revision is never stitched; tool_call ids derive from the client's key for its logical request, not
// from the GPU attempt; the phase record names the replica and the model revision.
import OpenAI from 'openai';
import { toolCallId } from '../../src/openai/tool-call-ids';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '10,30' };
const TOOLS = { tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }] };

describe('model revision across legs (two replicas of different revisions: a rolling update)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ perReplica: [{ revision: 'rev-a' }, { revision: 'rev-b' }], env: { MAX_ATTEMPTS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a continuation that lands on another revision is not stitched: the interruption event, model-revision-mismatch', async () => {
    const id = newRequestId('rev');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@15' });
    const e = expectInterruption(r, 'model-revision-mismatch');
    expect(e.partial_output).toBe(true);
    const [leg1, leg2] = seenFor(stack, id);
    // The recovery leg asked for leg 1's revision and to avoid leg 1's replica; this tier cannot route by
    // revision, so it got the other one, and not a byte of it reached the client.
    const leg1Revision = leg1.replica === 'replica-a' ? 'rev-a' : 'rev-b';
    expect(leg2.replica).not.toBe(leg1.replica);
    expect(leg2.headers['x-model-revision']).toBe(leg1Revision);
    expect(leg2.continuation).toBe(true);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'interrupted', reason: 'model-revision-mismatch', model_revision: leg1Revision, legs: 2 });
    expect(end.replica).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(stack.records({ request_id: id, decision: 'REVISION_MISMATCH' })).toHaveLength(1);
  });

  test("before the first delta a retry may land on any revision: the answer is that revision's, whole", async () => {
    const id = newRequestId('rev-retry');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@0' });
    expectOneCompleteStream(r);
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(2);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'completed-after-retry', model_revision: seen[1].replica === 'replica-a' ? 'rev-a' : 'rev-b' });
  });
});

describe('routing a continuation by revision (Envoy subsets over a replica list with revisions)', () => {
  // Mid rolling update: two replicas on each revision.
  const REVISIONS = ['rev-a', 'rev-b', 'rev-a', 'rev-b'];
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ replicas: 4, perReplica: REVISIONS.map((revision) => ({ revision })), revisionRouting: true });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test("leg 2 lands on the other replica of leg 1's revision, never the failed one, and the answer is stitched", async () => {
    const byName = Object.fromEntries(stack.engines.map((e, i) => [e.name, REVISIONS[i]]));
    const seenRevisions = new Set<string>();
    for (let k = 0; k < 8; k++) {
      const id = newRequestId(`route-rev${k}`);
      const r = await postChat(stack.url, chatBody({}, `revision routing ${k}`), {
        ...SIZE,
        'x-request-id': id,
        'x-fake-fault': `crash@${12 + k}`,
      });
      expectOneCompleteStream(r);
      const [leg1, leg2] = seenFor(stack, id);
      seenRevisions.add(byName[leg1.replica]);
      expect(leg2.replica).not.toBe(leg1.replica);
      expect(byName[leg2.replica]).toBe(byName[leg1.replica]);
      expect(leg2.headers['x-model-revision']).toBe(byName[leg1.replica]);
    }
    // Round robin put leg 1 on both revisions.
    expect(seenRevisions).toEqual(new Set(['rev-a', 'rev-b']));
  });
});

describe('model revision from system_fingerprint (no revision header)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      perReplica: [
        { revision: 'fp-1', revisionHeader: false },
        { revision: 'fp-2', revisionHeader: false },
      ],
    });
  });
  afterAll(async () => stack?.stop());

  test("the mismatch is seen on leg 2's first chunk, before anything of it is delivered", async () => {
    const id = newRequestId('fp');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@15' });
    expectInterruption(r, 'model-revision-mismatch');
    expect(r.chunks.every((c) => c.system_fingerprint === r.chunks[0].system_fingerprint)).toBe(true);
    expect((await stack.waitForEnd(id)).model_revision).toBe(r.chunks[0].system_fingerprint);
  });
});

describe('same revision on every replica', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ engine: { revision: 'rev-same' } });
  });
  afterAll(async () => stack?.stop());

  test('the continuation is stitched as usual, and the record names the revision and the replica', async () => {
    const id = newRequestId('same');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@15' });
    expectOneCompleteStream(r);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'completed-after-continuation', model_revision: 'rev-same' });
    const trig = stack.records({ request_id: id, decision: 'TRIGGERED' })[0];
    expect(trig).toMatchObject({ phase: 'decode', attempt: 1, first_delta_sent: true, model_revision: 'rev-same' });
    expect(trig.replica).toMatch(/^127\.0\.0\.1:\d+$/);
  });
});

describe('idempotent tool-call ids (official openai npm client)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  async function toolCallIds(headers: Record<string, string>): Promise<string[]> {
    const client = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'test-key', maxRetries: 0 });
    const tools = TOOLS.tools as OpenAI.Chat.Completions.ChatCompletionTool[];
    const stream = await client.chat.completions.create(
      { model: 'test-model', stream: true, messages: [{ role: 'user', content: 'weather?' }], tools },
      { headers },
    );
    const ids: string[] = [];
    for await (const c of stream) for (const t of c.choices[0]?.delta?.tool_calls ?? []) if (t.id) ids.push(t.id);
    return ids;
  }

  test('with Idempotency-Key: ids derive from the key and the call index, the same on every client retry', async () => {
    const key = `order-${Date.now()}`;
    const first = await toolCallIds({ 'Idempotency-Key': key, ...SIZE });
    const retry = await toolCallIds({ 'Idempotency-Key': key, ...SIZE });
    expect(first).toEqual([toolCallId(key, 0)]);
    expect(retry).toEqual(first);
    expect(await toolCallIds({ 'Idempotency-Key': `${key}-other`, ...SIZE })).not.toEqual(first);
  });

  test('the same across an invisible retry inside the gateway (the engine named the call anew)', async () => {
    const key = `invisible-${Date.now()}`;
    const ids = await toolCallIds({
      'Idempotency-Key': key,
      'x-fake-fault': 'crash-before-headers',
      'x-request-id': newRequestId('tool-retry'),
      ...SIZE,
    });
    expect(ids).toEqual([toolCallId(key, 0)]);
  });

  test("failing that, the client's own X-Request-Id", async () => {
    const rid = newRequestId('tool-rid');
    expect(await toolCallIds({ 'x-request-id': rid, ...SIZE })).toEqual([toolCallId(rid, 0)]);
  });

  test("without either header the engine's ids pass unchanged (Envoy's generated request id is not used)", async () => {
    const a = await toolCallIds({ ...SIZE });
    const b = await toolCallIds({ ...SIZE });
    expect(a).toHaveLength(1);
    expect(a[0]).toMatch(/^call_[0-9a-f]{8}_[0-9a-f]{6}$/); // the fake engine's own format
    expect(b[0]).not.toBe(a[0]);
  });
});
