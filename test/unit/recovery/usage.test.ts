import type { CountedTokens, RecoveredTokens } from '../../../src/recovery/token-estimate';
import { correctUsage, fromRunningUsage, usageCount } from '../../../src/recovery/usage';

const rec = (promptTokens: number, reasoningTokens: number, contentTokens: number): RecoveredTokens => ({
  promptTokens,
  reasoningTokens,
  contentTokens,
  totalRecovered: reasoningTokens + contentTokens,
});

describe('correctUsage (SGLang shape: top-level reasoning_tokens)', () => {
  it('reference content_done_stall: completion adds reasoning and content, prompt is the estimate, cached clamped', () => {
    const leg2 = {
      prompt_tokens: 999,
      completion_tokens: 3,
      total_tokens: 1002,
      reasoning_tokens: 0,
      prompt_tokens_details: { cached_tokens: 5000 },
    };
    const out: any = correctUsage(leg2, rec(1, 4, 5), false);
    expect(out).toEqual({
      prompt_tokens: 1,
      completion_tokens: 12,
      total_tokens: 13,
      reasoning_tokens: 4,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(out.prompt_tokens_details.cached_tokens).toBeLessThanOrEqual(out.prompt_tokens);
  });
  it('reference thinking_partial_disconnect: recovered reasoning counts in completion and reasoning', () => {
    const out: any = correctUsage(
      { prompt_tokens: 500, completion_tokens: 5, total_tokens: 505, reasoning_tokens: 3 },
      rec(1, 5, 0),
      false,
    );
    expect(out).toEqual({ prompt_tokens: 1, completion_tokens: 10, total_tokens: 11, reasoning_tokens: 8 });
  });
  it('keeps cached_tokens below prompt_tokens but leaves a smaller value alone', () => {
    expect(
      correctUsage({ completion_tokens: 1, prompt_tokens_details: { cached_tokens: 500 } }, rec(100, 0, 1), false).prompt_tokens_details,
    ).toEqual({ cached_tokens: 99 });
    expect(
      correctUsage({ completion_tokens: 1, prompt_tokens_details: { cached_tokens: 20 } }, rec(100, 0, 1), false).prompt_tokens_details,
    ).toEqual({ cached_tokens: 20 });
  });
  it('never makes cached_tokens negative (prompt 0)', () => {
    expect(
      (correctUsage({ prompt_tokens_details: { cached_tokens: 7 } }, rec(0, 0, 1), false) as any).prompt_tokens_details.cached_tokens,
    ).toBe(0);
  });
  it('adds the top-level reasoning key when leg2 reported neither shape (as the reference)', () => {
    expect(correctUsage({ prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 }, rec(3, 2, 1), false)).toEqual({
      prompt_tokens: 3,
      completion_tokens: 5,
      total_tokens: 8,
      reasoning_tokens: 2,
    });
  });
});

describe('correctUsage (vLLM shape: completion_tokens_details.reasoning_tokens)', () => {
  it('adds recovered reasoning inside completion_tokens_details and adds no top-level key', () => {
    const leg2 = {
      prompt_tokens: 80,
      completion_tokens: 6,
      total_tokens: 86,
      prompt_tokens_details: null,
      completion_tokens_details: { reasoning_tokens: 2, accepted_prediction_tokens: 0 },
    };
    const out: any = correctUsage(leg2, rec(20, 5, 3), false);
    expect(out).toEqual({
      prompt_tokens: 20,
      completion_tokens: 14,
      total_tokens: 34,
      prompt_tokens_details: null,
      completion_tokens_details: { reasoning_tokens: 7, accepted_prediction_tokens: 0 },
    });
    expect('reasoning_tokens' in out).toBe(false);
  });
  it('updates both when both shapes are present', () => {
    const out: any = correctUsage(
      { completion_tokens: 1, reasoning_tokens: 1, completion_tokens_details: { reasoning_tokens: 1 } },
      rec(0, 2, 0),
      false,
    );
    expect(out.reasoning_tokens).toBe(3);
    expect(out.completion_tokens_details.reasoning_tokens).toBe(3);
  });
});

describe('correctUsage (multimodal)', () => {
  it('reference multimodal_continuation: prompt = leg2 prompt - recovered, total consistent', () => {
    const out: any = correctUsage(
      { prompt_tokens: 61234, completion_tokens: 4, total_tokens: 61238, reasoning_tokens: 0 },
      rec(12, 0, 7),
      true,
    );
    expect(out).toEqual({ prompt_tokens: 61227, completion_tokens: 11, total_tokens: 61238, reasoning_tokens: 0 });
  });
  it('never goes below 0', () => {
    expect(correctUsage({ prompt_tokens: 3, completion_tokens: 0 }, rec(0, 5, 5), true).prompt_tokens).toBe(0);
  });
  it('clamps cached_tokens against the subtracted prompt', () => {
    const out: any = correctUsage(
      { prompt_tokens: 1000, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 1000 } },
      rec(0, 0, 10),
      true,
    );
    expect(out.prompt_tokens).toBe(990);
    expect(out.prompt_tokens_details.cached_tokens).toBe(989);
  });
});

describe('correctUsage purity and robustness', () => {
  it('returns a new object and leaves the input untouched, keeping unknown keys', () => {
    const leg2 = {
      prompt_tokens: 5,
      completion_tokens: 1,
      total_tokens: 6,
      reasoning_tokens: 0,
      prompt_tokens_details: { cached_tokens: 9 },
      extra: 'x',
    };
    const snapshot = JSON.parse(JSON.stringify(leg2));
    const out: any = correctUsage(leg2, rec(2, 1, 1), false);
    expect(leg2).toEqual(snapshot);
    expect(out).not.toBe(leg2);
    expect(out.prompt_tokens_details).not.toBe(leg2.prompt_tokens_details);
    expect(out.extra).toBe('x');
  });
  it('treats missing or non-numeric counts as 0', () => {
    expect(correctUsage({ completion_tokens: 'a' }, rec(4, 1, 2), false)).toEqual({
      completion_tokens: 3,
      prompt_tokens: 4,
      total_tokens: 7,
      reasoning_tokens: 1,
    });
  });
  it('leaves an empty prompt_tokens_details as it was', () => {
    expect(correctUsage({ prompt_tokens_details: {} }, rec(4, 0, 0), false).prompt_tokens_details).toEqual({});
  });
});

describe('correctUsage with an engine-counted prefix (TOKENIZE_URL)', () => {
  const counted = (prompt: 'template' | 'leg2-minus-prefix'): RecoveredTokens => ({
    promptTokens: 12,
    reasoningTokens: 0,
    contentTokens: 30,
    totalRecovered: 30,
    prefixTokens: 31,
    accounting: { method: 'tokenize', dialect: prompt === 'template' ? 'llamacpp' : 'sglang', prompt },
  });
  it('leg2-minus-prefix: prompt = leg2 prompt minus the prefix count (not the estimate)', () => {
    const out: any = correctUsage({ prompt_tokens: 71, completion_tokens: 46, total_tokens: 117 }, counted('leg2-minus-prefix'), false);
    expect(out).toMatchObject({ prompt_tokens: 40, completion_tokens: 76, total_tokens: 116 });
  });
  it('template: the counted original prompt', () => {
    const out: any = correctUsage({ prompt_tokens: 71, completion_tokens: 46 }, { ...counted('template'), promptTokens: 40 }, false);
    expect(out.prompt_tokens).toBe(40);
  });
  it('multimodal with a counted prefix: leg2 minus the prefix, whatever the prompt method', () => {
    expect(correctUsage({ prompt_tokens: 1031, completion_tokens: 1 }, counted('template'), true).prompt_tokens).toBe(1000);
  });
  it('never below 0', () => {
    expect(correctUsage({ prompt_tokens: 5, completion_tokens: 1 }, counted('leg2-minus-prefix'), false).prompt_tokens).toBe(0);
  });
});

describe('correctUsage: negative counts from the engine are treated as absent (issue 19)', () => {
  it('a negative leg 2 completion, reasoning or cached count never reaches the corrected usage', () => {
    const out: any = correctUsage(
      { prompt_tokens: -7, completion_tokens: -50, reasoning_tokens: -3, prompt_tokens_details: { cached_tokens: -2 } },
      rec(4, 1, 2),
      false,
    );
    // As for a usage without these counts: the original prompt's count, completion = the recovered tokens.
    expect(out).toEqual({ prompt_tokens: 4, completion_tokens: 3, total_tokens: 7, reasoning_tokens: 1, prompt_tokens_details: {} });
  });
  it('a negative leg 2 prompt falls back to the original prompt count, not to 0 minus the prefix', () => {
    const counted: RecoveredTokens = {
      ...rec(12, 0, 30),
      prefixTokens: 31,
      accounting: { method: 'tokenize', dialect: 'sglang', prompt: 'leg2-minus-prefix' },
    };
    expect(correctUsage({ prompt_tokens: -71, completion_tokens: 46 }, counted, false)).toMatchObject({
      prompt_tokens: 12,
      completion_tokens: 76,
      total_tokens: 88,
    });
    expect(correctUsage({ prompt_tokens: -1000, completion_tokens: 1 }, rec(12, 0, 7), true).prompt_tokens).toBe(12);
  });
  it('a negative count inside completion_tokens_details is absent too', () => {
    const out: any = correctUsage({ completion_tokens: 5, completion_tokens_details: { reasoning_tokens: -9 } }, rec(1, 2, 0), false);
    expect(out.completion_tokens_details).toEqual({ reasoning_tokens: 2 });
  });
  it('usageCount: finite and not negative, else undefined', () => {
    expect([0, 3, 2.5, -1, Number.NaN, Number.POSITIVE_INFINITY, '3', null].map(usageCount)).toEqual([
      0,
      3,
      2.5,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});

describe("fromRunningUsage: the engine's running usage (continuous usage stats, issue 27)", () => {
  const counted: CountedTokens = {
    ...rec(17, 11, 9),
    prefixTokens: 25,
    method: 'tokenize',
    accounting: { method: 'tokenize', dialect: 'sglang', prompt: 'leg2-minus-prefix' },
  };
  const vllm = { prompt_tokens: 10, completion_tokens: 24, total_tokens: 34, completion_tokens_details: { reasoning_tokens: 14 } };
  const sglang = {
    prompt_tokens: 10,
    completion_tokens: 24,
    total_tokens: 34,
    reasoning_tokens: 14,
    completion_tokens_details: { reasoning_tokens: 14 },
  };

  it('current: prompt, generated and reasoning from the usage, in either layout', () => {
    for (const u of [vllm, sglang, { ...sglang, completion_tokens_details: null }])
      expect(fromRunningUsage(u, true, counted)).toEqual({
        promptTokens: 10,
        reasoningTokens: 14,
        contentTokens: 10,
        totalRecovered: 24,
        method: 'engine-usage',
        accounting: { method: 'engine-usage', dialect: null, prompt: 'engine-usage' },
      });
  });
  it("current, without a reasoning count: the other count's reasoning, never above the generated tokens", () => {
    expect(fromRunningUsage({ prompt_tokens: 10, completion_tokens: 24 }, true, counted)).toMatchObject({
      reasoningTokens: 11,
      contentTokens: 13,
    });
    expect(fromRunningUsage({ prompt_tokens: 10, completion_tokens: 5 }, true, counted)).toMatchObject({
      reasoningTokens: 5,
      contentTokens: 0,
    });
  });
  it('not current (text after it): only its prompt, the delivered tokens as counted', () => {
    expect(fromRunningUsage(vllm, false, counted)).toEqual({
      ...counted,
      promptTokens: 10,
      accounting: { method: 'tokenize', dialect: 'sglang', prompt: 'engine-usage' },
    });
  });
  it('no usage, or no valid prompt count: the other count as it is', () => {
    expect(fromRunningUsage(null, false, counted)).toBe(counted);
    expect(fromRunningUsage({ prompt_tokens: -1, completion_tokens: 3 }, true, counted)).toBe(counted);
    expect(fromRunningUsage({ completion_tokens: 3 }, true, counted)).toBe(counted);
  });
  it("the engine's prompt count stands in the correction, multimodal too (never leg 2's minus the prefix)", () => {
    const r = fromRunningUsage(vllm, false, counted);
    expect(correctUsage({ prompt_tokens: 60, completion_tokens: 4 }, r, false).prompt_tokens).toBe(10);
    expect(correctUsage({ prompt_tokens: 60, completion_tokens: 4 }, r, true).prompt_tokens).toBe(10);
  });
});

describe("correctUsage: SGLang's completion_tokens_details, present only with reasoning tokens", () => {
  it('a leg 2 that reasoned no more says null; the corrected usage repeats the recovered reasoning there', () => {
    const out: any = correctUsage(
      { prompt_tokens: 40, completion_tokens: 20, total_tokens: 60, reasoning_tokens: 0, completion_tokens_details: null },
      rec(10, 14, 10),
      false,
    );
    expect(out).toMatchObject({ reasoning_tokens: 14, completion_tokens_details: { reasoning_tokens: 14 } });
  });
  it('stays null when nothing was reasoned, and absent where the engine sends no such key', () => {
    const leg2 = { prompt_tokens: 40, completion_tokens: 20, reasoning_tokens: 0, completion_tokens_details: null };
    expect(correctUsage(leg2, rec(10, 0, 10), false).completion_tokens_details).toBeNull();
    expect('completion_tokens_details' in correctUsage({ completion_tokens: 2, reasoning_tokens: 0 }, rec(1, 3, 0), false)).toBe(false);
  });
});
