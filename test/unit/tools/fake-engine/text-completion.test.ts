// The fake engine's /v1/completions over real HTTP: each dialect's text_completion chunks (our reading of vLLM's
// and SGLang's serving code: tools/fake-engine/text-completion.ts), and a continuation recognised from its prompt.
import { resetFaults } from '../../../../tools/fake-engine/faults';
import { type FakeEngine, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';
import { completionAnswer, splitContinuation } from '../../../../tools/fake-engine/text-completion';
import { tokenize } from '../../../../tools/fake-engine/tokens';

let sg: FakeEngine;
let vl: FakeEngine;
const prompt = 'The old lighthouse keeper said';
const body = (extra: Record<string, unknown> = {}) => ({ model: 'm', stream: true, prompt, max_tokens: 100, ...extra });

beforeAll(async () => {
  resetFaults();
  sg = await startFakeEngine({ name: 'sg', dialect: 'sglang', tokenIntervalMs: 0 });
  vl = await startFakeEngine({ name: 'vl', dialect: 'vllm', tokenIntervalMs: 0 });
});
afterAll(async () => {
  await sg.close();
  await vl.close();
});

describe('/v1/completions streams', () => {
  it('vLLM: no role chunk, {index, text, logprobs, finish_reason, stop_reason}, the finish, a usage chunk of three counts', async () => {
    const r = await postJson(`${vl.url}/v1/completions`, body({ stream_options: { include_usage: true } }), { 'x-request-id': 'r1' });
    const chunks = sseChunks(r);
    const answer = completionAnswer(prompt);
    expect(chunks[0]).toEqual({
      id: 'cmpl-r1',
      object: 'text_completion',
      created: chunks[0].created,
      model: 'm',
      choices: [{ index: 0, text: answer[0], logprobs: null, finish_reason: null, stop_reason: null }],
    });
    expect(chunks.slice(0, answer.length).map((c: any) => c.choices[0].text)).toEqual(answer);
    expect(chunks[answer.length].choices[0]).toMatchObject({ text: '', finish_reason: 'stop' });
    const n = tokenize(prompt).length;
    expect(chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: n, total_tokens: n + answer.length, completion_tokens: answer.length },
    });
    expect(Object.keys(chunks.at(-1).usage)).toEqual(['prompt_tokens', 'total_tokens', 'completion_tokens']);
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('SGLang: every field, matched_stop, usage: null on every chunk, its usage layout', async () => {
    const r = await postJson(`${sg.url}/v1/completions`, body({ stream_options: { include_usage: true } }));
    const chunks = sseChunks(r);
    expect(chunks[0].choices[0]).toEqual({
      index: 0,
      text: completionAnswer(prompt)[0],
      logprobs: null,
      finish_reason: null,
      matched_stop: null,
    });
    expect(chunks[0].usage).toBeNull();
    expect(chunks.at(-1).usage).toMatchObject({ reasoning_tokens: 0, completion_tokens_details: null });
  });

  it('a prompt that carries the start of its own answer is a continuation: the rest, counted from the longer prompt', async () => {
    const answer = completionAnswer(prompt);
    const delivered = answer.slice(0, 5).join('');
    expect(splitContinuation(prompt + delivered)).toEqual({ original: prompt, delivered: answer.slice(0, 5) });
    expect(splitContinuation(prompt)).toEqual({ original: prompt, delivered: [] });
    const before = vl.requests.length;
    const r = await postJson(`${vl.url}/v1/completions`, body({ prompt: prompt + delivered, stream_options: { include_usage: true } }));
    const chunks = sseChunks(r);
    expect(chunks.map((c: any) => c.choices[0]?.text ?? '').join('')).toBe(answer.slice(5).join(''));
    expect(chunks.at(-1).usage.prompt_tokens).toBe(tokenize(prompt).length + 5);
    expect(vl.requests[before].continuation).toBe(true);
  });

  it('max_tokens cuts with finish_reason length (default 16, as the engines)', async () => {
    const r = await postJson(`${vl.url}/v1/completions`, body({ max_tokens: undefined }), { 'x-fake-answer-tokens': '0,30' });
    const chunks = sseChunks(r);
    expect(chunks.filter((c: any) => c.choices[0]?.text).length).toBe(16);
    expect(chunks.at(-1).choices[0].finish_reason).toBe('length');
  });
});
