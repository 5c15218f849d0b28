import { readLlamaCompletionFrame, readVllmCompletionChunk } from '../../../../src/continuation/token-ids/leg2-frames';
import { planIdsLeg2 } from '../../../../src/continuation/token-ids/leg2-request';
import { idsUsage } from '../../../../src/continuation/token-ids/usage';

const original = { model: 'm', messages: [], max_tokens: 10, temperature: 0, seed: 3, top_k: 1, stream: true, logprobs: true };

describe('leg 2 by ids', () => {
  test('vLLM: /v1/completions, prompt = prompt ids + delivered ids, the budget left, the sampling fields, seed included', () => {
    const p = planIdsLeg2({ engine: 'vllm', original, promptIds: [1, 2], generatedIds: [3, 4, 5] });
    expect(p).toEqual({
      kind: 'send',
      path: '/v1/completions',
      remaining: 7,
      promptIds: 2,
      body: {
        model: 'm',
        prompt: [1, 2, 3, 4, 5],
        temperature: 0,
        top_k: 1,
        seed: 3,
        max_tokens: 7,
        stream: true,
        stream_options: { include_usage: true },
        return_token_ids: true,
      },
    });
  });

  test('llama-server: /completion with n_predict (-1 without a budget)', () => {
    const { max_tokens: _m, ...unlimited } = original;
    const p = planIdsLeg2({ engine: 'llamacpp', original: unlimited, promptIds: [1], generatedIds: [2] });
    expect(p).toMatchObject({
      kind: 'send',
      path: '/completion',
      body: { prompt: [1, 2], n_predict: -1, stream: true, return_tokens: true },
    });
  });

  test('a budget used up, or not a number: no leg', () => {
    expect(planIdsLeg2({ engine: 'vllm', original, promptIds: [1], generatedIds: Array(10).fill(1) })).toEqual({
      kind: 'skip',
      reason: 'budget-exhausted',
    });
    expect(planIdsLeg2({ engine: 'vllm', original: { ...original, max_tokens: 'x' }, promptIds: [1], generatedIds: [] })).toEqual({
      kind: 'skip',
      reason: 'budget-exhausted',
    });
  });

  test("the engines' frames", () => {
    expect(readVllmCompletionChunk({ choices: [{ text: 'a', token_ids: [9], finish_reason: null }] })).toEqual({
      frame: { text: 'a', ids: [9], finishReason: null, generated: null, promptTokens: null },
    });
    expect(readVllmCompletionChunk({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } })).toMatchObject({
      frame: { generated: 2, promptTokens: 4 },
    });
    expect(readLlamaCompletionFrame({ content: 'b', tokens: [8], stop: false, tokens_predicted: 1 })).toMatchObject({
      frame: { text: 'b', ids: [8], generated: 1 },
    });
    expect(readLlamaCompletionFrame({ content: '', stop: true, stop_type: 'limit', tokens_predicted: 5 })).toMatchObject({
      frame: { finishReason: 'length' },
    });
    expect(readLlamaCompletionFrame({ content: '', stop: true, stop_type: 'eos' })).toMatchObject({ frame: { finishReason: 'stop' } });
    expect(readLlamaCompletionFrame({ error: { code: 500 } })).toEqual({ error: 'error-event' });
  });

  test('usage exact from the ids, in the engine key order', () => {
    expect(Object.keys(idsUsage({ engine: 'llamacpp', promptTokens: 10, deliveredTokens: 3, leg2Tokens: 4, legs: 2 }))).toEqual([
      'completion_tokens',
      'prompt_tokens',
      'total_tokens',
      'prompt_tokens_details',
      'continuation',
    ]);
    expect(idsUsage({ engine: 'vllm', promptTokens: 10, deliveredTokens: 3, leg2Tokens: 4, legs: 2 })).toMatchObject({
      prompt_tokens: 10,
      completion_tokens: 7,
      total_tokens: 17,
      continuation: { method: 'token-ids', path: 'token-ids', recovered_tokens: 3 },
    });
  });
});
