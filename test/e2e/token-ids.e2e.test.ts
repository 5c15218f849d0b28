// Continuation by token ids (issue 34, src/continuation/token-ids/) end to end through the real Envoy, against
// the fake engine speaking vLLM's fields for it: `return_token_ids` on the chat stream (prompt_token_ids on the
// first chunk, choices[].token_ids on each) and /v1/completions with a prompt of ids. That half rests on our
// reading of vLLM 0.33.0 (tools/fake-engine/token-completion.ts says where); the proof on a real engine is
// test/real-engine/token-ids.test.ts (llama-server).
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
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
