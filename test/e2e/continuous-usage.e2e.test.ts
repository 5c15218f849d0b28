// Issue 27 (1): the usage after a rescue with continuous usage stats (vLLM's and SGLang's
// stream_options.continuous_usage_stats), on an answer that reasoned first and was reset after 10 content
// tokens. The engine streamed its own running count with every delivered chunk: the prompt and the reasoning
// come from leg 1's last one, and the final usage chunk equals the uninterrupted run's, in the engine's own
// field layout (vLLM: completion_tokens_details.reasoning_tokens; SGLang: reasoning_tokens at the top level,
// repeated under completion_tokens_details), with and without TOKENIZE_URL.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { resetFaults } from '../../tools/fake-engine/faults';
import type { FakeEngineOptions } from '../../tools/fake-engine/server';
import { provisionAssets } from '../fidelity/harness-client';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

// 12 reasoning and 30 content tokens; a 3-word question: a prompt of 10 tokens (the fake's template adds 7).
const SIZE = { 'x-fake-answer-tokens': '12,30' };
const QUESTION = 'Explain continuation briefly';

const TOKENIZE = { TOKENIZE_URL: '{engine0}/tokenize', TOKENIZE_TIMEOUT_MS: '3000' };
// vLLM's /tokenize renders a chat request through the template the engine serves, which the engine check asks
// for: the replicas serve Qwen3's (llama.cpp's copy of Qwen3-0.6B, its prompt then longer than the fake's 10).
const qwen3Served = (): FakeEngineOptions['chatTemplate'] => ({
  text: fs.readFileSync(path.join(provisionAssets().templates, 'Qwen-Qwen3-0.6B.jinja'), 'utf8'),
  parser: 'markers',
});

const configs: Array<[string, 'vllm' | 'sglang', Record<string, string>, boolean]> = [
  ['vLLM, no TOKENIZE_URL', 'vllm', {}, false],
  ['vLLM, TOKENIZE_URL', 'vllm', TOKENIZE, true],
  ['SGLang, no TOKENIZE_URL', 'sglang', {}, false],
  ['SGLang, TOKENIZE_URL', 'sglang', TOKENIZE, false],
];

describe.each(configs)('Qwen3 on %s', (_name, dialect, env, served) => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      engine: served ? { dialect, chatTemplate: qwen3Served() } : { dialect, family: 'qwen3' },
      env: { CONTINUATION_MODEL: 'Qwen/Qwen3-32B', CONTINUATION_ENGINE: dialect, ...env },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test("reset after 10 content tokens: the final usage chunk is the uninterrupted run's, running usage never decreases", async () => {
    const body = chatBody({ stream_options: { include_usage: true, continuous_usage_stats: true } }, QUESTION);
    const ref = await uninterrupted(stack, body, SIZE);
    if (!served) expect(ref.usage.prompt_tokens).toBe(10);
    // Where the content starts, counted in generated tokens (the markers are generated, and silent).
    const running = ref.chunks.filter((c: any) => c.usage && c.choices?.[0]?.delta?.content);
    const cut = running[9].usage.completion_tokens;
    const id = newRequestId();
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': `crash@${cut}` });
    expectOneCompleteStream(r);
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false, true]);
    expect(r.content).toBe(ref.content);
    const { continuation, ...usage } = r.usage;
    expect(usage).toEqual(ref.usage);
    expect(continuation).toMatchObject({ legs: 2, method: 'engine-usage' });
    const counts = r.chunks.filter((c: any) => c.usage).map((c: any) => c.usage);
    for (let i = 1; i < counts.length; i++)
      for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) expect(counts[i][k]).toBeGreaterThanOrEqual(counts[i - 1][k]);
  });
});
