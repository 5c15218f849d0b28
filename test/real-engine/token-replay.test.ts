// Measurement (issue 17 item 6): does replaying the exact generated token ids reproduce the greedy answer where
// replaying the generated TEXT does not? On one real llama-server (SmolLM2-135M, temperature 0), for a cut after
// n generated tokens, n swept over the answer:
//   text replay:  /completion with prompt = the uninterrupted prompt text + the text of the first n tokens
//                 (the engine re-tokenizes it: what a text continuation leg gives the engine);
//   token replay: /completion with prompt = the uninterrupted prompt's ids + the first n generated ids
//                 (what a token-exact leg 2 would give it).
// Each is stitched after the n-token prefix and compared with the greedy answer. Printed, not asserted beyond
// sanity: the rates are what docs/real-engine.md reports.
import { request } from 'undici';
import { type LlamaReplica, locateAssets, startReplicas } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };
const PROMPT_MESSAGES = [{ role: 'user', content: 'Explain in two sentences why the sky is blue.' }];
const MAX = 160;

async function post(url: string, body: unknown): Promise<any> {
  const r = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${url} answered ${r.statusCode}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

const describeReal = 'skip' in located ? describe.skip : describe;

describeReal('token replay vs text replay on llama-server (measurement)', () => {
  let replica: LlamaReplica;
  beforeAll(async () => {
    if ('skip' in located) return;
    [replica] = await startReplicas(located.assets, 1, { parallel: 1 });
  });
  afterAll(async () => {
    await replica?.stop();
  });

  test('reproduction of the greedy answer after a cut at n generated tokens', async () => {
    const prompt: string = (await post(`${replica.url}/apply-template`, { messages: PROMPT_MESSAGES })).prompt;
    const gen = { n_predict: MAX, temperature: 0, cache_prompt: false, return_tokens: true };
    const greedy = await post(`${replica.url}/completion`, { prompt, ...gen });
    const ids: number[] = greedy.tokens;
    const text: string = greedy.content;
    expect(ids.length).toBeGreaterThan(20);
    // The text of the first n generated tokens: detokenized by the engine itself.
    const promptIds: number[] = (await post(`${replica.url}/tokenize`, { content: prompt, add_special: true, parse_special: true })).tokens;
    const rows: Array<{ n: number; text: boolean; tokens: boolean; retokenizedSame: boolean }> = [];
    for (let n = 5; n < ids.length - 5; n += 5) {
      const head: string = (await post(`${replica.url}/detokenize`, { tokens: ids.slice(0, n) })).content;
      if (!text.startsWith(head)) continue; // a cut inside a multi-byte character: no text prefix to replay
      const rest = { ...gen, n_predict: MAX - n };
      const viaText = await post(`${replica.url}/completion`, { prompt: prompt + head, ...rest });
      const viaTokens = await post(`${replica.url}/completion`, { prompt: [...promptIds, ...ids.slice(0, n)], ...rest });
      const retok: number[] = (await post(`${replica.url}/tokenize`, { content: prompt + head, add_special: true, parse_special: true }))
        .tokens;
      rows.push({
        n,
        text: head + viaText.content === text,
        tokens: head + viaTokens.content === text,
        retokenizedSame: JSON.stringify(retok) === JSON.stringify([...promptIds, ...ids.slice(0, n)]),
      });
    }
    const count = (f: (r: (typeof rows)[number]) => boolean) => rows.filter(f).length;
    console.log(
      [
        `token replay vs text replay, ${rows.length} cuts over a ${ids.length}-token greedy answer:`,
        `  text replay reproduced the greedy answer at ${count((r) => r.text)}/${rows.length}`,
        `  token replay at ${count((r) => r.tokens)}/${rows.length}`,
        `  the re-tokenized text equalled the generated ids at ${count((r) => r.retokenizedSame)}/${rows.length}`,
        ...rows.map(
          (r) =>
            `  n=${r.n}: text ${r.text ? 'same' : 'DIFFERS'}, tokens ${r.tokens ? 'same' : 'DIFFERS'}${r.retokenizedSame ? '' : ' (re-tokenized differently)'}`,
        ),
      ].join('\n'),
    );
    expect(rows.length).toBeGreaterThan(3);
  });
});
