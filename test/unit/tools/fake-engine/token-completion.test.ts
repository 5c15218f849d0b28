// The fake engine's leg by token ids (vLLM /v1/completions with a prompt of ids: tools/fake-engine/token-completion.ts)
// over real HTTP: it takes its step of the `x-fake-fault` script as a chat continuation leg does and counts the
// index in its own tokens (what the e2e suite's crashed legs by ids rest on), and with familyTokenIds a family's
// raw answer, markers included, is carried by the chat stream's ids and continued from them.
import { resetFaults } from '../../../../tools/fake-engine/faults';
import { type FakeEngine, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';
import { tokenOf } from '../../../../tools/fake-engine/tokens';

const SIZE = { 'x-fake-answer-tokens': '20,30' };
const messages = [{ role: 'user', content: 'Continue me by ids.' }];

let generic: FakeEngine;
let r1: FakeEngine;
beforeAll(async () => {
  generic = await startFakeEngine({ name: 'vl', dialect: 'vllm', tokenIntervalMs: 0 });
  r1 = await startFakeEngine({ name: 'r1', dialect: 'vllm', tokenIntervalMs: 0, family: 'deepseek-r1-distill', familyTokenIds: true });
});
afterAll(async () => {
  await Promise.all([generic.close(), r1.close()]);
});
beforeEach(() => resetFaults());

/** The chat stream's ids, asked for: the prompt's and every generated token's (`headers`: the script's first step). */
async function chatIds(
  e: FakeEngine,
  headers: Record<string, string> = {},
): Promise<{ prompt: number[]; generated: number[]; chunks: any[] }> {
  const r = await postJson(
    `${e.url}/v1/chat/completions`,
    { model: 'm', stream: true, messages, return_token_ids: true },
    { ...SIZE, ...headers },
  );
  const chunks = sseChunks(r);
  return { prompt: chunks[0].prompt_token_ids, generated: chunks.flatMap((c) => c.choices?.[0]?.token_ids ?? []), chunks };
}

/** A leg by ids after `k` generated tokens; the texts it streamed and how it ended. */
async function idsLeg(e: FakeEngine, k: number, headers: Record<string, string>) {
  // The chat leg is the script's first request, as leg 1 is through the gateway.
  const { prompt, generated } = await chatIds(e, headers);
  const body = {
    model: 'm',
    stream: true,
    prompt: [...prompt, ...generated.slice(0, k)],
    return_token_ids: true,
    stream_options: { include_usage: true },
  };
  const r = await postJson(`${e.url}/v1/completions`, body, { ...SIZE, ...headers });
  const chunks = sseChunks(r).filter((c) => c.choices.length > 0);
  return {
    r,
    texts: chunks.map((c) => c.choices[0].text),
    finishes: chunks.map((c) => c.choices[0].finish_reason).filter(Boolean),
    generated,
  };
}

describe('faults on the leg by ids', () => {
  it("takes the script's next step: `-;crash@5` leaves the chat leg whole and resets the leg by ids after 5 of its own tokens", async () => {
    // chatIds() is the script's first request (`-`); the leg by ids takes `crash@5`.
    const leg = await idsLeg(generic, 30, { 'x-fake-fault': '-;crash@5' });
    expect(leg.texts).toHaveLength(5);
    expect(leg.r.error).toBeDefined();
    expect(leg.r.data).not.toContain('[DONE]');
    expect(generic.requests.at(-1)).toMatchObject({ fault: 'crash@5', tokensSent: 5, continuation: true });
  });

  it('a single-step script never applies to it (as to a chat continuation)', async () => {
    // The chat leg dies after its 3 tokens; the leg by ids after them streams the other 47, whole.
    const leg = await idsLeg(generic, 3, { 'x-fake-fault': 'crash@3' });
    expect(leg.generated).toHaveLength(3);
    expect(leg.r.error).toBeUndefined();
    expect(leg.texts).toHaveLength(47);
    expect(leg.finishes).toEqual(['stop']);
  });

  it('an index past the end fires after the last token, before the finish (which then has a chunk of its own)', async () => {
    const leg = await idsLeg(generic, 30, { 'x-fake-fault': '-;stall@1000:30' });
    expect(leg.texts).toEqual([...leg.texts.slice(0, 20), '']);
    expect(leg.finishes).toEqual(['stop']);
    expect(leg.r.data.at(-1)).toBe('[DONE]');
  });

  it('a stall with a resume time goes on where it stopped; status answers before any byte', async () => {
    const stalled = await idsLeg(generic, 10, { 'x-fake-fault': '-;stall@4:50' });
    expect(stalled.texts.join('')).toBe(
      stalled.generated
        .slice(10)
        .map((id) => tokenOf(id))
        .join(''),
    );
    resetFaults();
    const refused = await idsLeg(generic, 10, { 'x-fake-fault': '-;status@503' });
    expect(refused.r.status).toBe(503);
  });

  it('a fault kind it does not serve is a 400, not a silent pass', async () => {
    const leg = await idsLeg(generic, 10, { 'x-fake-fault': '-;finish-twice@3' });
    expect(leg.r.status).toBe(400);
  });
});

describe('a family by ids (familyTokenIds)', () => {
  it("DeepSeek-R1-Distill: the chat stream carries the raw tokens' ids, `</think>` on a chunk `delta: {}` of its own", async () => {
    const { generated, chunks } = await chatIds(r1);
    const raw = generated.map((id) => tokenOf(id));
    // 20 reasoning tokens, `\n`, `</think>`, `\n\n` (two tokens), 30 content tokens.
    expect(raw).toHaveLength(54);
    expect(raw[21]).toBe('</think>');
    const held = chunks.filter(
      (c) => c.choices?.[0]?.delta && Object.keys(c.choices[0].delta).length === 0 && c.choices[0].finish_reason === null,
    );
    expect(held.map((c) => c.choices[0].token_ids.map((id: number) => tokenOf(id)))).toEqual([['</think>']]);
  });

  it('a leg by ids from inside the reasoning streams the raw rest, the marker included', async () => {
    const leg = await idsLeg(r1, 10, {});
    expect(leg.texts.join('')).toBe(
      leg.generated
        .slice(10)
        .map((id) => tokenOf(id))
        .join(''),
    );
    expect(leg.texts).toContain('</think>');
  });
});
