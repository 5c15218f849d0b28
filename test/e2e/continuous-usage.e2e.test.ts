// Issues 27 (1) and 33 (4): the usage after a rescue with continuous usage stats (vLLM's and SGLang's
// stream_options.continuous_usage_stats), on an answer that reasoned first and was reset after 10 content
// tokens, or inside its reasoning. The engine streamed its own running count with every delivered chunk: the
// prompt and the reasoning come from leg 1's last one, and the final usage chunk equals the uninterrupted run's, in the engine's own
// field layout (vLLM: completion_tokens_details.reasoning_tokens; SGLang: reasoning_tokens at the top level,
// repeated under completion_tokens_details), with and without TOKENIZER and TOKENIZE_URL (whose counts differ from
// the fake engines' toy tokenizer: the engine's own must win).
import { execFileSync } from 'node:child_process';
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

// Qwen3's real tokenizer.json (scripts/tokenizer-assets.sh): the in-process count, which disagrees with the fake
// engines' toy tokenizer on every prompt; the engine's running count must win over it all the same.
const ROOT = path.resolve(__dirname, '..', '..', '..');
const tokenizerDir = (): string =>
  path.join(
    execFileSync('bash', [path.join(ROOT, 'scripts', 'tokenizer-assets.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
      .trim()
      .split('\n')
      .pop() as string,
    'qwen3',
  );
const TOKENIZER = (): Record<string, string> => ({ TOKENIZER: tokenizerDir() });

const configs: Array<[string, 'vllm' | 'sglang', () => Record<string, string>, boolean]> = [
  ['vLLM, no TOKENIZE_URL', 'vllm', () => ({}), false],
  ['vLLM, TOKENIZE_URL', 'vllm', () => TOKENIZE, true],
  ['vLLM, TOKENIZER', 'vllm', TOKENIZER, false],
  ['vLLM, TOKENIZER and TOKENIZE_URL', 'vllm', () => ({ ...TOKENIZER(), ...TOKENIZE }), true],
  ['SGLang, no TOKENIZE_URL', 'sglang', () => ({}), false],
  ['SGLang, TOKENIZE_URL', 'sglang', () => TOKENIZE, false],
  ['SGLang, TOKENIZER', 'sglang', TOKENIZER, false],
  ['SGLang, TOKENIZER and TOKENIZE_URL', 'sglang', () => ({ ...TOKENIZER(), ...TOKENIZE }), false],
];

describe.each(configs)('Qwen3 on %s', (_name, dialect, env, served) => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      engine: served ? { dialect, chatTemplate: qwen3Served() } : { dialect, family: 'qwen3' },
      env: { CONTINUATION_MODEL: 'Qwen/Qwen3-32B', CONTINUATION_ENGINE: dialect, ...env() },
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

// A reset inside the reasoning, continued there (the R1 distills: vLLM continues their reasoning, SGLang every
// cut): the final prompt and reasoning counts are leg 1's running ones, with and without the other counters.
const reasoningConfigs: Array<[string, 'vllm' | 'sglang', () => Record<string, string>]> = [
  ['vLLM', 'vllm', () => ({})],
  ['vLLM, TOKENIZER', 'vllm', TOKENIZER],
  ['vLLM, TOKENIZE_URL', 'vllm', () => TOKENIZE],
  ['SGLang', 'sglang', () => ({})],
  ['SGLang, TOKENIZER', 'sglang', TOKENIZER],
  ['SGLang, TOKENIZE_URL', 'sglang', () => TOKENIZE],
];

describe.each(reasoningConfigs)('DeepSeek-R1-Distill on %s, reset inside the reasoning', (_name, dialect, env) => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      engine: { dialect, family: 'deepseek-r1-distill' },
      env: { CONTINUATION_MODEL: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', CONTINUATION_ENGINE: dialect, ...env() },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test("the final usage chunk is the uninterrupted run's: prompt and reasoning as leg 1's engine reported them", async () => {
    const body = chatBody({ stream_options: { include_usage: true, continuous_usage_stats: true } }, QUESTION);
    const ref = await uninterrupted(stack, body, SIZE);
    expect(ref.usage.prompt_tokens).toBe(10);
    // The sixth reasoning chunk (vLLM names the field `reasoning`, SGLang `reasoning_content`).
    const reasoning = ref.chunks.filter(
      (c: any) => c.usage && (c.choices?.[0]?.delta?.reasoning ?? c.choices?.[0]?.delta?.reasoning_content),
    );
    const cut = reasoning[5].usage.completion_tokens;
    const id = newRequestId();
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': `crash@${cut}` });
    expectOneCompleteStream(r);
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false, true]);
    expect([r.reasoning, r.content]).toEqual([ref.reasoning, ref.content]);
    const { continuation, ...usage } = r.usage;
    expect(usage).toEqual(ref.usage);
    expect(continuation).toMatchObject({ legs: 2, method: 'engine-usage', prompt: 'engine-usage' });
  });
});
