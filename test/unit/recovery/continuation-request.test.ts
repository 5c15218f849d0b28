import { type Leg2Plan, planContinuationRequest } from '../../../src/recovery/continuation-request';

const cfg = { continuationModel: 'test-model', engine: 'sglang' as const, rates: { cjk: 1.6, other: 4 } };
const request = (extra: Record<string, unknown> = {}): any => ({
  model: 'served-alias',
  stream: true,
  max_tokens: 1000,
  temperature: 0.7,
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});
const state = (reasoning: string, content: string, toolCallsSeen = false) => ({ reasoning, content, toolCallsSeen });
/** A plan that sends, its body read loosely (the test looks into it). */
const sent = (p: Leg2Plan) => {
  if (p.kind !== 'send') throw new Error(`expected send, got skip ${p.reason}`);
  return p as Extract<Leg2Plan, { kind: 'send' }> & { body: any };
};

describe('planContinuationRequest: body', () => {
  it('content-done (reference content_done_stall): prefix, flags, budget; chat_template_kwargs untouched', () => {
    const p = sent(planContinuationRequest(request(), state('let me think. ', 'The answer is par'), cfg));
    expect(p.case).toBe('content-done');
    expect(p.recovered).toEqual({ promptTokens: 1, reasoningTokens: 4, contentTokens: 5, totalRecovered: 9 });
    expect(p.budgetFields).toEqual(['max_tokens']);
    expect(p.body).toEqual({
      model: 'served-alias',
      stream: true,
      max_tokens: 991,
      temperature: 0.7,
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: '<think>let me think. </think>The answer is par' },
      ],
      continue_final_message: true,
      add_generation_prompt: false,
      stream_options: { include_usage: true },
    });
    expect(p.design.familyName).toBe('generic');
    expect(p.design.raw).toBe('<think>let me think. </think>The answer is par');
  });

  it('thinking-partial (reference thinking_partial_disconnect): open think, thinking left on', () => {
    const p = sent(planContinuationRequest(request(), state('step one. step two', ''), cfg));
    expect(p.case).toBe('thinking-partial');
    expect(p.body.messages.at(-1)).toEqual({ role: 'assistant', content: '<think>step one. step two' });
    expect(p.body.chat_template_kwargs).toBeUndefined();
    expect(p.body.max_tokens).toBe(1000 - 5);
  });

  it('uses the family of CONTINUATION_MODEL, not the request model', () => {
    const p = sent(
      planContinuationRequest(request({ model: 'kimi-k3' }), state('k3 thinking. ', 'k3 answer'), { ...cfg, continuationModel: 'Kimi-K3' }),
    );
    // Kimi-K3's generation prompt opens the think channel itself (Kimi-K3.jinja: open_tag('think')): not written again.
    expect(p.body.messages.at(-1).content).toBe('k3 thinking. <|close|>think<|sep|><|open|>response<|sep|>k3 answer');
    const q = sent(planContinuationRequest(request({ model: 'kimi-k3' }), state('r', 'c'), cfg));
    expect(q.body.messages.at(-1).content).toBe('<think>r</think>c');
  });

  it("keeps the client's chat_template_kwargs and reasoning_effort as they are (they shape the generation prompt)", () => {
    const kw = { foo: 1, thinking: true };
    const p = sent(planContinuationRequest(request({ chat_template_kwargs: kw, reasoning_effort: 'high' }), state('r', 'c'), cfg));
    expect(p.body.chat_template_kwargs).toBe(kw);
    expect(p.body.reasoning_effort).toBe('high');
  });

  it('a cut the family cannot continue on this engine is skipped as continuation-unsupported, with why', () => {
    const p = planContinuationRequest(request(), state('\nstep one', ''), { ...cfg, continuationModel: 'Qwen/Qwen3-32B', engine: 'vllm' });
    expect(p).toMatchObject({ kind: 'skip', reason: 'continuation-unsupported', detail: 'phase-reasoning-unsupported' });
    const q = sent(planContinuationRequest(request(), state('\nstep one', ''), { ...cfg, continuationModel: 'Qwen/Qwen3-32B' }));
    expect(q.body.messages.at(-1)).toEqual({ role: 'assistant', content: '<think>\nstep one' });
  });

  it('gpt-oss on SGLang: raw harmony text, leg 2 asked for raw output and split by the gateway', () => {
    const p = sent(planContinuationRequest(request(), state('plan', 'Ans'), { ...cfg, continuationModel: 'openai/gpt-oss-120b' }));
    expect(p.body.messages.at(-1).content).toBe(
      '<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>final<|message|>Ans',
    );
    expect(p.body.separate_reasoning).toBe(false);
    expect(p.design.shape.split).toBe('harmony');
  });

  it('keeps other stream_options keys and forces include_usage', () => {
    const p = sent(
      planContinuationRequest(request({ stream_options: { include_usage: false, continuous_usage_stats: true } }), state('', 'c'), cfg),
    );
    expect(p.body.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });
  });

  it('sends the same body shape for vLLM (add_generation_prompt false explicitly)', () => {
    const p = sent(planContinuationRequest(request(), state('r', 'c'), { ...cfg, engine: 'vllm' }));
    expect(p.body.add_generation_prompt).toBe(false);
    expect(p.body.continue_final_message).toBe(true);
  });

  it('never mutates the original request', () => {
    const original = request({ chat_template_kwargs: { foo: 1 }, stream_options: { include_usage: false }, max_completion_tokens: 50 });
    const before = JSON.parse(JSON.stringify(original));
    const p = sent(planContinuationRequest(original, state('r', 'content'), cfg));
    expect(original).toEqual(before);
    expect(p.body).not.toBe(original);
    expect(p.body.messages).not.toBe(original.messages);
  });
});

describe('planContinuationRequest: budget', () => {
  it('reduces max_tokens only', () => {
    const p = sent(planContinuationRequest(request(), state('', 'partial'), cfg));
    expect(p.budgetFields).toEqual(['max_tokens']);
    expect(p.body.max_tokens).toBe(998);
    expect('max_completion_tokens' in p.body).toBe(false);
  });
  it('reduces max_completion_tokens only (reference max_completion_tokens_field)', () => {
    const original: any = request({ max_completion_tokens: 1000 });
    delete original.max_tokens;
    const p = sent(planContinuationRequest(original, state('', 'partial with mct'), cfg));
    expect(p.budgetFields).toEqual(['max_completion_tokens']);
    expect(p.body.max_completion_tokens).toBe(996);
    expect('max_tokens' in p.body).toBe(false);
  });
  it('sets both to max_tokens minus recovered when both are set', () => {
    const p = sent(planContinuationRequest(request({ max_tokens: 100, max_completion_tokens: 300 }), state('', 'abcdefgh'), cfg));
    expect(p.budgetFields).toEqual(['max_tokens', 'max_completion_tokens']);
    expect(p.body.max_tokens).toBe(98);
    expect(p.body.max_completion_tokens).toBe(98);
  });
  it('adds no budget when the client set none (reference no_budget_field), null counting as none', () => {
    const original: any = request({ max_completion_tokens: null });
    delete original.max_tokens;
    const p = sent(planContinuationRequest(original, state('', 'no limit set'), cfg));
    expect(p.budgetFields).toEqual([]);
    expect('max_tokens' in p.body).toBe(false);
    expect(p.body.max_completion_tokens).toBeNull();
  });
  it('skips when the budget is used up (remaining <= 0)', () => {
    const exact = planContinuationRequest(request({ max_tokens: 2 }), state('', 'abcdefgh'), cfg);
    expect(exact).toEqual({
      kind: 'skip',
      reason: 'budget-exhausted',
      recovered: { promptTokens: 1, reasoningTokens: 0, contentTokens: 2, totalRecovered: 2 },
    });
    expect(planContinuationRequest(request({ max_tokens: 1 }), state('', 'abcdefgh'), cfg)).toMatchObject({
      kind: 'skip',
      reason: 'budget-exhausted',
    });
    expect(planContinuationRequest(request({ max_tokens: 3 }), state('', 'abcdefgh'), cfg)).toMatchObject({ kind: 'send' });
  });
  it('accepts a numeric string budget and declines an unreadable one', () => {
    expect(sent(planContinuationRequest(request({ max_tokens: '10' }), state('', 'abcd'), cfg)).body.max_tokens).toBe(9);
    expect(planContinuationRequest(request({ max_tokens: 'lots' }), state('', 'abcd'), cfg)).toMatchObject({
      kind: 'skip',
      reason: 'budget-exhausted',
    });
  });
});

describe('planContinuationRequest: skips', () => {
  it('skips after a tool call was seen', () => {
    expect(planContinuationRequest(request(), state('r', 'c', true), cfg)).toEqual({ kind: 'skip', reason: 'tool-call-seen' });
  });
  it('skips when nothing recoverable was delivered', () => {
    expect(planContinuationRequest(request(), state('', ''), cfg)).toEqual({ kind: 'skip', reason: 'no-recoverable-content' });
  });
});

describe('CONTINUATION_UNVERIFIED: the generic guess, allowed or refused', () => {
  const engines = ['sglang', 'vllm', 'llamacpp'] as const;
  // The three cuts of a reasoning stream: inside the reasoning, at its close (no content yet), in the content.
  const cuts = [state('r0 r1', ''), state('r0 r1 r2', ''), state('r0 r1', 'c0')];
  it.each(engines)('refuse, %s: every cut of a stream that has shown reasoning is continuation-unverified, nothing sent', (engine) => {
    for (const s of cuts) {
      const p = planContinuationRequest(request(), s, { ...cfg, engine, unverified: 'refuse' });
      expect(p).toEqual({
        kind: 'skip',
        reason: 'continuation-unverified',
        detail: 'unverified-guess-refused',
        design: { source: 'generic', familyName: 'generic' },
        diff: undefined,
      });
    }
  });
  it('refuse: a content-only stream is still continued by the guess (source generic: labelled unverified)', () => {
    const p = sent(planContinuationRequest(request(), state('', 'The answer is par'), { ...cfg, unverified: 'refuse' }));
    expect(p.design).toMatchObject({ source: 'generic', verifiedBy: null });
  });
  it("allow (and unset, the default): today's guess at every cut, source generic", () => {
    for (const unverified of ['allow', undefined] as const)
      for (const s of cuts) {
        const p = sent(planContinuationRequest(request(), s, { ...cfg, unverified }));
        expect(p.design).toMatchObject({ source: 'generic', familyName: 'generic', verifiedBy: null });
      }
  });
  it('refuse touches only the guess: a table entry (proven against its template) is not refused', () => {
    const qwen = planContinuationRequest(request(), state('r0 r1', ''), {
      ...cfg,
      continuationModel: 'Qwen/Qwen3-8B',
      unverified: 'refuse',
    });
    expect(sent(qwen).design.source).toBe('table');
  });
});
