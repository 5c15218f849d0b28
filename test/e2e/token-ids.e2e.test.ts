// Continuation by token ids (issue 34, src/continuation/token-ids/) end to end through the real Envoy, against
// the fake engine speaking vLLM's fields for it: `return_token_ids` on the chat stream (prompt_token_ids on the
// first chunk, choices[].token_ids on each) and /v1/completions with a prompt of ids. That half rests on our
// reading of vLLM 0.33.0 (tools/fake-engine/token-completion.ts says where); the proof on a real engine is
// test/real-engine/token-ids.test.ts (llama-server).
import { resetFaults } from '../../tools/fake-engine/faults';
import { type ClientResult, chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '20,30' };

describe('continuation by token ids (vLLM dialect)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ replicas: 2, env: { CONTINUATION_ENGINE: 'vllm' }, engine: { dialect: 'vllm' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a cut in the content: leg 2 by ids; the client gets the uninterrupted stream, usage exact, no ids', async () => {
    const body = chatBody({ stream_options: { include_usage: true }, max_tokens: 200, seed: 7 });
    // The reference asks for the ids itself: it sees them (the gateway strips only what it asked for).
    const ref = await uninterrupted(stack, { ...body, return_token_ids: true }, SIZE);
    const refChunks = ref.raw
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)));
    const promptIds: number[] = refChunks.find((c) => c.prompt_token_ids)?.prompt_token_ids;
    const generatedIds: number[] = refChunks.flatMap((c) => c.choices?.[0]?.token_ids ?? []);
    expect(promptIds.length).toBeGreaterThan(0);
    expect(generatedIds).toHaveLength(50);

    const id = newRequestId('ids');
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@30' });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(r.content).toBe(ref.content);
    expect(r.finishReasons).toEqual(ref.finishReasons);
    // The ids the gateway asked for are not the client's: null in place, as vLLM writes a stream not asked for them.
    expect(r.raw).not.toMatch(/"(prompt_)?token_ids":\[/);
    const plain = await uninterrupted(stack, body, SIZE);
    const shape = (c: any) => [Object.keys(c), Object.keys(c.choices?.[0] ?? {})];
    expect(r.chunks.map(shape)).toEqual(plain.chunks.map(shape));
    const { continuation, ...usage } = r.usage;
    expect(usage).toMatchObject({
      prompt_tokens: ref.usage.prompt_tokens,
      completion_tokens: ref.usage.completion_tokens,
      total_tokens: ref.usage.total_tokens,
    });
    expect(continuation).toMatchObject({ legs: 2, method: 'token-ids', path: 'token-ids', recovered_tokens: 30 });
    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/completions']);
    expect(seen[0].body.return_token_ids).toBe(true);
    // Leg 2's prompt: the uninterrupted prompt ids + the ids of the 30 tokens the client has.
    expect(seen[1].body.prompt).toEqual([...promptIds, ...generatedIds.slice(0, 30)]);
    expect(seen[1].body).toMatchObject({ max_tokens: 170, seed: 7, stream: true, return_token_ids: true });
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
  });

  test('a cut in the reasoning of a model whose markers the gateway does not know: the text path, saying why', async () => {
    const body = chatBody({ stream_options: { include_usage: true } });
    const ref = await uninterrupted(stack, body, SIZE);
    const id = newRequestId('ids-fallback');
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@10' });
    expectOneCompleteStream(r);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(r.content).toBe(ref.content);
    expect(r.usage.continuation.path).toBe('template');
    expect(seenFor(stack, id).map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/chat/completions']);
    const logs = stack.logs.filter((l: any) => l.request_id === id || l.decision === 'TOKEN_IDS_FALLBACK');
    expect(logs.some((l: any) => l.decision === 'TOKEN_IDS_FALLBACK' && l.reason === 'no-reasoning-format')).toBe(true);
  });

  test('a burst: 100 streams, one replica fails under them in the content; every stream complete and equal to its uninterrupted run, those cut by ids', async () => {
    const n = 100;
    const headers = { ...SIZE, 'x-fake-token-ms': '20' };
    let started = 0;
    let allStarted!: () => void;
    const everyStreamStarted = new Promise<void>((res) => (allStarted = res));
    const runs = Array.from({ length: n }, async (_, k) => {
      const body = chatBody({ stream_options: { include_usage: true } }, `token ids under load, stream ${k}`);
      // A stream counts as started once it has content: the replica then fails under every one in the content,
      // where a model without markers is continued by ids.
      let first = true;
      let seen = '';
      const r = await postChat(stack.url, body, { ...headers, 'x-request-id': newRequestId(`idsb${k}`) }, (text) => {
        seen += text;
        if (first && /"content":"[^"]/.test(seen)) {
          first = false;
          if (++started === n) allStarted();
        }
      });
      if (first && ++started === n) allStarted();
      return { body, r };
    });
    await everyStreamStarted;
    stack.engines[0].failFor(300);
    const done = await Promise.all(runs);
    const paths: Record<string, number> = {};
    for (const { body, r } of done) {
      expectOneCompleteStream(r);
      const ref = await uninterrupted(stack, body, SIZE);
      expect(r.reasoning).toBe(ref.reasoning);
      expect(r.content).toBe(ref.content);
      const p = r.usage.continuation?.path ?? 'none';
      // Exact on the ids path; the text path here has no TOKENIZE_URL, so its counts are the estimate.
      if (p === 'token-ids') expect(r.usage.completion_tokens).toBe(ref.usage.completion_tokens);
      paths[p] = (paths[p] ?? 0) + 1;
    }
    console.log(`token-ids burst: ${JSON.stringify(paths)}`);
    expect(paths['token-ids']).toBeGreaterThan(0);
    expect(paths.template).toBeUndefined();
  });
});

/** The reference run's ids (it asks for them itself): the prompt's, and every generated token's in order. */
function idsOf(raw: string): { promptIds: number[]; generatedIds: number[] } {
  const chunks = raw
    .split('\n\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)));
  return {
    promptIds: chunks.find((c) => c.prompt_token_ids)?.prompt_token_ids ?? [],
    generatedIds: chunks.flatMap((c) => c.choices?.[0]?.token_ids ?? []),
  };
}

/**
 * What the client must get exactly as from the uninterrupted run: the text, the finish and the usage counts.
 * prompt_tokens_details is left out: the ids path does not write it (src/continuation/token-ids/usage.ts: real
 * vLLM writes it only when asked) where this fake always does.
 */
function expectSameAnswer(r: ClientResult, ref: ClientResult): void {
  expectOneCompleteStream(r);
  expect(r.reasoning).toBe(ref.reasoning);
  expect(r.content).toBe(ref.content);
  expect(r.finishReasons).toEqual(ref.finishReasons);
  const { continuation: _c, prompt_tokens_details: _p, ...usage } = r.usage;
  const { prompt_tokens_details: _rp, ...refUsage } = ref.usage;
  expect(usage).toEqual(refUsage);
}

/** Each continuation leg's ATTEMPT record (leg 1 has one too): its leg number, how it continued, the ids it was prompted with. */
function attempts(stack: TestStack, id: string) {
  return stack
    .records({ request_id: id, decision: 'ATTEMPT' })
    .filter((a) => a.leg > 1)
    .map((a) => ({ leg: a.leg, continued_by: a.continued_by, phase: a.phase, delivered_ids: a.delivered_ids }));
}

// A leg by ids that itself fails: the ledger extends with the ids it streamed (leg1-ledger.ts `extend`) and the
// next leg goes by ids again, prompted with everything the client has. The fake engine's leg by ids takes the
// next step of the `x-fake-fault` script as a chat continuation does (tools/fake-engine/token-completion.ts), and
// counts its index in its own tokens: `crash@30;crash@8` = leg 1 dies after 30 tokens, leg 2 after 8 more.
describe('continuation by token ids across legs: a leg by ids that fails (vLLM dialect, MAX_CONTINUATIONS=3)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      replicas: 2,
      env: { CONTINUATION_ENGINE: 'vllm', MAX_CONTINUATIONS: '3' },
      engine: { dialect: 'vllm' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('leg 2 by ids crashes in the content: leg 3 by ids, prompted with leg 1 and leg 2 ids; the stream and usage exactly the uninterrupted ones', async () => {
    const body = chatBody({ stream_options: { include_usage: true }, max_tokens: 200, seed: 7 });
    const { promptIds, generatedIds } = idsOf((await uninterrupted(stack, { ...body, return_token_ids: true }, SIZE)).raw);
    expect(generatedIds).toHaveLength(50);
    const ref = await uninterrupted(stack, body, SIZE);

    const id = newRequestId('ids3');
    // 20 reasoning + 10 content tokens from leg 1, 8 from leg 2, the last 12 from leg 3.
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@30;crash@8' });
    expectSameAnswer(r, ref);
    expect(r.raw).not.toMatch(/"(prompt_)?token_ids":\[/);
    expect(r.usage.continuation).toMatchObject({ legs: 3, method: 'token-ids', path: 'token-ids', recovered_tokens: 38 });

    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/completions', '/v1/completions']);
    // The engine's side: leg 2 did die after its 8 tokens (the test would pass vacuously otherwise), leg 3 did not.
    expect(seen.map((s) => s.fault)).toEqual(['crash@30', 'crash@8', undefined]);
    expect(seen[1].tokensSent).toBe(8);
    expect(seen[1].body.prompt).toEqual([...promptIds, ...generatedIds.slice(0, 30)]);
    // Leg 3's prompt: leg 1's ids and leg 2's, exactly the 38 tokens the client has; its budget what is left.
    expect(seen[2].body.prompt).toEqual([...promptIds, ...generatedIds.slice(0, 38)]);
    expect(seen[2].body).toMatchObject({ max_tokens: 162, seed: 7, return_token_ids: true });
    expect(attempts(stack, id)).toEqual([
      { leg: 2, continued_by: 'token-ids', phase: 'content', delivered_ids: 30 },
      { leg: 3, continued_by: 'token-ids', phase: 'content', delivered_ids: 38 },
    ]);
    expect(stack.records({ request_id: id, decision: 'TOKEN_IDS_FALLBACK' })).toEqual([]);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs: 3 });
  });

  test('a burst: 100 streams whose leg 1 and leg 2 both crash; every stream complete and equal to its uninterrupted run, both continuations by ids', async () => {
    const n = 100;
    const runs = Array.from({ length: n }, async (_, k) => {
      const body = chatBody({ stream_options: { include_usage: true } }, `token ids, two crashes, stream ${k}`);
      const id = newRequestId(`ids3b${k}`);
      // Leg 1 dies in the content (a generic model's reasoning cut goes by text), leg 2 after 1 to 9 tokens of its
      // own; at least 1, so that leg 2 reached its first token (a recovery leg failing before it counts against the
      // recovery brake, which is not under test here). Steps are counted per header value: the trailing `-` steps
      // (never consumed) make each stream's script its own.
      const fault = `crash@${21 + (k % 20)};crash@${1 + (k % 9)}${';-'.repeat(k + 1)}`;
      const r = await postChat(stack.url, body, { ...SIZE, 'x-fake-token-ms': '20', 'x-request-id': id, 'x-fake-fault': fault });
      return { body, id, r };
    });
    const done = await Promise.all(runs);
    const failures: string[] = [];
    for (const { body, id, r } of done) {
      const ref = await uninterrupted(stack, body, SIZE);
      expectSameAnswer(r, ref);
      expect(r.usage.continuation).toMatchObject({ legs: 3, path: 'token-ids' });
      const legs = attempts(stack, id).map((a) => `${a.leg}:${a.continued_by}`);
      if (legs.join(',') !== '2:token-ids,3:token-ids') failures.push(`${id}: ${legs.join(',')}`);
      expect(seenFor(stack, id).map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/completions', '/v1/completions']);
    }
    expect(failures).toEqual([]);
  });
});

// A cut in the reasoning goes by ids only for a model whose closing marker the gateway knows (raw-split.ts): the
// fake engine speaks DeepSeek-R1-Distill here (its generation prompt opens `<think>`, vLLM's deepseek_r1 parser)
// and streams the ids of its raw tokens, `</think>` included (familyTokenIds); leg 2 and leg 3 then get raw text
// the gateway splits at the marker, which leg 3 must cross.
describe('continuation by token ids across legs: cuts in the reasoning (DeepSeek-R1-Distill on vLLM)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      replicas: 2,
      env: { CONTINUATION_ENGINE: 'vllm', CONTINUATION_MODEL: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', MAX_CONTINUATIONS: '3' },
      engine: { dialect: 'vllm', family: 'deepseek-r1-distill', familyTokenIds: true },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('leg 1 cut in the reasoning, leg 2 by ids crashes in the reasoning again, leg 3 by ids crosses </think>: the stream and usage exactly the uninterrupted ones', async () => {
    const body = chatBody({ stream_options: { include_usage: true }, max_tokens: 200 });
    const { promptIds, generatedIds } = idsOf((await uninterrupted(stack, { ...body, return_token_ids: true }, SIZE)).raw);
    // 20 reasoning tokens, `\n` `</think>` `\n` `\n`, 30 content tokens: the marker's ids are in the stream.
    expect(generatedIds).toHaveLength(54);
    const ref = await uninterrupted(stack, body, SIZE);
    expect(ref.reasoning.length).toBeGreaterThan(0);
    expect(ref.content.startsWith('\n\n')).toBe(true);

    const id = newRequestId('ids3r');
    // Leg 1: 8 reasoning tokens; leg 2: 6 more, still in the reasoning; leg 3: the rest, through the marker.
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@8;crash@6' });
    expectSameAnswer(r, ref);
    expect(r.usage.continuation).toMatchObject({ legs: 3, path: 'token-ids', recovered_tokens: 14 });
    expect(r.raw).not.toContain('</think>');

    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.path)).toEqual(['/v1/chat/completions', '/v1/completions', '/v1/completions']);
    expect(seen.map((s) => s.fault)).toEqual(['crash@8', 'crash@6', undefined]);
    expect(seen[1].tokensSent).toBe(6);
    expect(seen[2].body.prompt).toEqual([...promptIds, ...generatedIds.slice(0, 14)]);
    expect(attempts(stack, id)).toEqual([
      { leg: 2, continued_by: 'token-ids', phase: 'reasoning', delivered_ids: 8 },
      { leg: 3, continued_by: 'token-ids', phase: 'reasoning', delivered_ids: 14 },
    ]);
    expect(stack.records({ request_id: id, decision: 'TOKEN_IDS_FALLBACK' })).toEqual([]);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs: 3 });
  });
});
