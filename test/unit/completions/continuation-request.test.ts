import { COMPLETIONS_DEFAULT_MAX_TOKENS, planCompletionsContinuation } from '../../../src/completions/continuation-request';
import { readChoiceZero } from '../../../src/openai/chunk';
import type { CompletionRequest } from '../../../src/openai/completions';
import { rewriteLeg2Chunk } from '../../../src/recovery/leg2-rewrite';
import type { RecoveredTokens } from '../../../src/recovery/token-estimate';

const recovered = (n: number): RecoveredTokens => ({ promptTokens: 5, reasoningTokens: 0, contentTokens: n, totalRecovered: n });
const original: CompletionRequest = {
  model: 'm',
  stream: true,
  prompt: 'Once upon a time',
  max_tokens: 20,
  temperature: 0.3,
  stream_options: { continuous_usage_stats: true },
};

describe('planCompletionsContinuation', () => {
  it('leg 2: the prompt plus exactly the delivered text, the budget left, usage forced, every other field kept', () => {
    const plan = planCompletionsContinuation(original, ' there was', recovered(2));
    expect(plan.kind).toBe('send');
    if (plan.kind !== 'send') return;
    expect(plan.body).toEqual({
      model: 'm',
      stream: true,
      prompt: 'Once upon a time there was',
      max_tokens: 18,
      temperature: 0.3,
      stream_options: { continuous_usage_stats: true, include_usage: true },
    });
    expect(plan.budgetFields).toEqual(['max_tokens']);
    expect(plan.design).toMatchObject({ familyName: 'completions', phase: 'content', raw: ' there was' });
    // The original is never changed.
    expect(original.prompt).toBe('Once upon a time');
  });
  it('no max_tokens: the engines default (16) is the budget, not "no limit"', () => {
    const { max_tokens: _m, ...noBudget } = original;
    const plan = planCompletionsContinuation(noBudget as CompletionRequest, ' x', recovered(3));
    expect(plan.kind === 'send' && plan.body.max_tokens).toBe(COMPLETIONS_DEFAULT_MAX_TOKENS - 3);
  });
  it('a string budget is read as the engines read it', () => {
    const plan = planCompletionsContinuation({ ...original, max_tokens: '10' }, ' x', recovered(4));
    expect(plan.kind === 'send' && plan.body.max_tokens).toBe(6);
  });
  it('skips: nothing delivered, the budget spent or unreadable', () => {
    expect(planCompletionsContinuation(original, '', recovered(0))).toEqual({ kind: 'skip', reason: 'no-recoverable-content' });
    expect(planCompletionsContinuation(original, ' x', recovered(20))).toMatchObject({ kind: 'skip', reason: 'budget-exhausted' });
    expect(planCompletionsContinuation({ ...original, max_tokens: 'many' }, ' x', recovered(1))).toMatchObject({
      reason: 'budget-exhausted',
    });
  });
});

describe('a text_completion chunk as the tracker reads it', () => {
  it('choice 0 text is content; its finish_reason is read', () => {
    const c = readChoiceZero({ object: 'text_completion', choices: [{ index: 0, text: ' hello', logprobs: null, finish_reason: null }] });
    expect(c).toMatchObject({ content: ' hello', reasoning: '', toolCalls: null, finishReason: null });
    expect(readChoiceZero({ choices: [{ index: 0, text: '', finish_reason: 'stop' }] })).toMatchObject({
      content: '',
      finishReason: 'stop',
    });
  });
});

describe('leg 2 chunk rewrite for completions', () => {
  const base = { recovered: recovered(3), multimodal: false, reasoningField: null };
  it("leg 1's id and created on every chunk", () => {
    const out = rewriteLeg2Chunk(
      { id: 'cmpl-2', created: 200, choices: [{ index: 0, text: 'x' }] },
      { ...base, responseId: 'cmpl-1', created: 100 },
    );
    expect(out).toMatchObject({ id: 'cmpl-1', created: 100 });
  });
  it("usage: both legs counted, no reasoning count invented (vLLM's completions usage has none)", () => {
    const usage = { prompt_tokens: 8, total_tokens: 12, completion_tokens: 4 };
    const rec = {
      ...recovered(3),
      prefixTokens: 3,
      accounting: { method: 'tokenize' as const, dialect: 'vllm' as const, prompt: 'leg2-minus-prefix' as const },
    };
    const out = rewriteLeg2Chunk({ id: 'x', choices: [], usage }, { ...base, recovered: rec, responseId: 'y', countsReasoning: false });
    expect(out.usage).toEqual({ prompt_tokens: 5, total_tokens: 12, completion_tokens: 7 });
    // Chat keeps its rule (a top-level reasoning count where the engine has no details).
    const chat = rewriteLeg2Chunk({ id: 'x', choices: [], usage }, { ...base, recovered: rec, responseId: 'y' });
    expect(chat.usage).toMatchObject({ reasoning_tokens: 0 });
  });
});
