import { Leg1IdLedger } from '../../../../src/continuation/token-ids/leg1-ledger';
import { leg1Body, leg1IdsDecision } from '../../../../src/continuation/token-ids/leg1-request';

const chat = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] };

describe('what leg 1 is asked', () => {
  test('vLLM: return_token_ids; SGLang never; off for n > 1, structured output, or the setting', () => {
    const v = leg1IdsDecision('vllm', true, chat);
    expect(v).toEqual({
      ask: { engine: 'vllm', fields: { return_token_ids: true }, clientAsked: { tokenIds: false, logprobs: true, timings: true } },
    });
    expect(leg1IdsDecision('sglang', true, chat)).toEqual({ off: 'engine-streams-no-ids' });
    expect(leg1IdsDecision('vllm', false, chat)).toEqual({ off: 'disabled' });
    expect(leg1IdsDecision('vllm', true, { ...chat, n: 2 })).toEqual({ off: 'n-greater-than-1' });
    expect(leg1IdsDecision('vllm', true, { ...chat, response_format: { type: 'json_object' } })).toEqual({ off: 'structured-output' });
    if ('ask' in v) expect(JSON.parse(leg1Body(chat, v.ask).toString())).toEqual({ ...chat, return_token_ids: true });
  });

  test("llama-server: logprobs (1 alternative) and timings_per_token, the client's own logprobs kept; never with tools", () => {
    expect(leg1IdsDecision('llamacpp', true, chat)).toMatchObject({
      ask: { fields: { timings_per_token: true, logprobs: true, top_logprobs: 1 } },
    });
    const own = leg1IdsDecision('llamacpp', true, { ...chat, logprobs: true, top_logprobs: 3 });
    expect(own).toMatchObject({ ask: { fields: { timings_per_token: true }, clientAsked: { logprobs: true } } });
    expect(leg1IdsDecision('llamacpp', true, { ...chat, tools: [{ type: 'function' }] })).toEqual({ off: 'llamacpp-logprobs-with-tools' });
  });
});

const vllmAsk = { engine: 'vllm' as const, fields: {}, clientAsked: { tokenIds: false, logprobs: true, timings: true } };
const llamaAsk = { engine: 'llamacpp' as const, fields: {}, clientAsked: { tokenIds: false, logprobs: false, timings: false } };

describe('the ledger of leg 1 ids', () => {
  test('vLLM: prompt ids, every id (an empty delta too), the fields stripped, ids-only chunks dropped', () => {
    const l = new Leg1IdLedger(vllmAsk);
    const role = { id: 'c', prompt_token_ids: [1, 2], choices: [{ index: 0, delta: { role: 'assistant', content: '' }, token_ids: [] }] };
    l.observe(role);
    // As vLLM 0.33.0 writes a stream not asked for ids: the fields null, in place.
    expect(JSON.stringify(l.strip(role))).toBe(
      JSON.stringify({
        id: 'c',
        prompt_token_ids: null,
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, token_ids: null }],
      }),
    );
    const held = { id: 'c', choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: null, token_ids: [7] }] };
    l.observe(held);
    expect(l.strip(held)).toBe('drop');
    const text = { id: 'c', choices: [{ index: 0, delta: { content: 'é' }, logprobs: null, finish_reason: null, token_ids: [8] }] };
    l.observe(text);
    expect(l.state()).toEqual({ kind: 'complete', promptIds: [1, 2], generatedIds: [7, 8], reasoningIds: 0, markerHole: null });
    expect(l.shape()).toEqual({
      id: 'c',
      choices: [{ index: 0, delta: { content: 'é' }, logprobs: null, finish_reason: null, token_ids: null }],
    });
  });

  test('vLLM: a chunk with text and no ids is a gap (an engine that ignored the field)', () => {
    const l = new Leg1IdLedger(vllmAsk);
    l.observe({ choices: [{ delta: { content: 'a' } }] });
    expect(l.state()).toEqual({ kind: 'gap', reason: 'chunk-without-ids' });
    l.reset();
    expect(l.state()).toEqual({ kind: 'complete', promptIds: null, generatedIds: [], reasoningIds: 0, markerHole: null });
  });

  test('the ids of reasoning chunks are counted as reasoning (an ids-only chunk in the phase it came in)', () => {
    const l = new Leg1IdLedger(vllmAsk);
    const chunk = (delta: object, ids: number[]) => ({
      choices: [{ index: 0, delta, logprobs: null, finish_reason: null, token_ids: ids }],
    });
    l.observe(chunk({ reasoning: 'a' }, [1]));
    l.observe(chunk({}, [2]));
    l.observe(chunk({ content: 'b' }, [3]));
    l.observe(chunk({}, [4]));
    expect(l.state()).toMatchObject({ generatedIds: [1, 2, 3, 4], reasoningIds: 2 });
  });

  test('vLLM: the client that asked for ids gets them', () => {
    const l = new Leg1IdLedger({ ...vllmAsk, clientAsked: { ...vllmAsk.clientAsked, tokenIds: true } });
    expect(l.strip({ prompt_token_ids: [1], choices: [] })).toBeNull();
  });

  test("llama-server: ids from logprobs, checked against the engine's predicted_n; logprobs and timings stripped", () => {
    const l = new Leg1IdLedger(llamaAsk);
    const c1 = {
      choices: [{ finish_reason: null, index: 0, delta: { content: 'a' }, logprobs: { content: [{ id: 5 }] } }],
      timings: { predicted_n: 1 },
    };
    l.observe(c1);
    expect(l.strip(c1)).toEqual({ choices: [{ finish_reason: null, index: 0, delta: { content: 'a' } }] });
    // A token sent without a chunk (mid-character, or held by the parser): predicted_n jumps.
    l.observe({
      choices: [{ finish_reason: null, index: 0, delta: { content: 'b' }, logprobs: { content: [{ id: 6 }] } }],
      timings: { predicted_n: 3 },
    });
    expect(l.state()).toEqual({ kind: 'gap', reason: 'ids-missing' });
  });

  test('a further leg: ids appended, or a gap after a text leg', () => {
    const l = new Leg1IdLedger(vllmAsk);
    l.extend([1, 2], true);
    expect(l.state()).toMatchObject({ generatedIds: [1, 2], reasoningIds: 0 });
    // A leg by ids cut in the reasoning: its reasoning ids count for the next leg's usage.
    l.extend([3, 4, 5], true, 2);
    expect(l.state()).toMatchObject({ generatedIds: [1, 2, 3, 4, 5], reasoningIds: 2 });
    l.textLegSent();
    expect(l.state()).toEqual({ kind: 'gap', reason: 'after-text-leg' });
  });
});
