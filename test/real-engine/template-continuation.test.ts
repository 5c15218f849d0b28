// A continuation through a REAL llama-server serving the DeepSeek-R1 distills' published template
// (--chat-template-file: llama.cpp's deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja, whose generation prompt
// always opens `<think>\n`), with CHAT_TEMPLATE naming the same file. For a cut after every streamed chunk of a
// real greedy answer:
//   - the gateway's leg 2 (the production planner, CONTINUATION_ENGINE llamacpp) renders through llama-server's
//     /apply-template as the uninterrupted prompt followed by the raw text the model generated up to the cut
//     (the raw text from its native /completion, no chat parsing; the parts from its chat stream and parser);
//   - the per-request engine check (src/templates/engine-check.ts) agrees, asked of this server;
//   - leg 2, generated greedily by the server, stitched to the delivered parts, is the uninterrupted answer; where
//     it is not, the server's own text continuation of the same prompt (/completion) diverges the same way: the
//     engine's numerics (prefill against decode), not the prompt.
// SmolLM2-135M does not know the R1 format; a few-shot prompt makes it write `</think>` itself, so cuts fall
// inside the reasoning and inside the content. The template, the renderer and the parser are llama.cpp's; only
// the weights are not an R1 model's (no small R1 GGUF is in the registries: docs/real-engine.md).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { request } from 'undici';
import { planContinuationRequest } from '../../src/recovery/continuation-request';
import { designLeg2 } from '../../src/recovery/leg2-design';
import { engineCheck } from '../../src/templates/engine-check';
import { templateFromFiles } from '../../src/templates/provider';
import { provisionAssets } from '../fidelity/harness-client';
import { type LlamaReplica, locateAssets, startReplicas } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };
const MAX_TOKENS = 40;
const TEMPLATE = 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja';
const MODEL = 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B';
// A pattern SmolLM2 continues, `</think>` included.
const FEW_SHOT =
  'Q: 1+1\nthink: one plus one is two.\n</think>\n\nA: 2\n\nQ: 2+2\nthink: two plus two is four.\n</think>\n\nA: 4\n\n' +
  'Q: 5+5\nthink: five plus five is ten.\n</think>\n\nA: 10\n\nQ: 3+3\nthink:';

async function post(url: string, body: unknown): Promise<any> {
  const r = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${url} answered ${r.statusCode}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** The chat stream's parts, chunk by chunk (llama-server's own reasoning parser). */
async function streamParts(url: string, body: unknown): Promise<Array<{ reasoning: string; content: string }>> {
  const r = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });
  const text = await r.body.text();
  const out: Array<{ reasoning: string; content: string }> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const d = JSON.parse(line.slice(6)).choices?.[0]?.delta ?? {};
    const part = { reasoning: d.reasoning_content ?? '', content: d.content ?? '' };
    if (part.reasoning || part.content) out.push(part);
  }
  return out;
}

const join = (ps: Array<{ reasoning: string; content: string }>) => ({
  reasoning: ps.map((p) => p.reasoning).join(''),
  content: ps.map((p) => p.content).join(''),
});

const describeReal = 'skip' in located ? describe.skip : describe;
if ('skip' in located && underOwnConfig) console.warn(`template-continuation: skipped: ${located.skip}`);

describeReal('a continuation through a real llama-server serving the published R1-distill template', () => {
  let replica: LlamaReplica;
  let dir: string;
  beforeAll(async () => {
    if ('skip' in located) return;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'r1-template-'));
    fs.copyFileSync(path.join(provisionAssets().templates, TEMPLATE), path.join(dir, 'chat_template.jinja'));
    [replica] = await startReplicas(located.assets, 1, {
      parallel: 1,
      extraArgs: ['--jinja', '--chat-template-file', path.join(dir, 'chat_template.jinja')],
    });
  });
  afterAll(async () => {
    await replica?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('every cut: leg 2 renders as prompt + raw text, the engine check agrees; greedy stitched == uninterrupted', async () => {
    const served = templateFromFiles(dir);
    const body = {
      model: 'm',
      stream: true,
      temperature: 0,
      max_tokens: MAX_TOKENS,
      messages: [
        { role: 'system', content: 'Follow the pattern.' },
        { role: 'user', content: FEW_SHOT },
      ],
    };
    const p1: string = (await post(`${replica.url}/apply-template`, body)).prompt;
    expect(p1.endsWith('<｜Assistant｜><think>\n')).toBe(true);
    const raw: string = (
      await post(`${replica.url}/completion`, { prompt: p1, n_predict: MAX_TOKENS, temperature: 0, cache_prompt: false })
    ).content;
    const parts = await streamParts(replica.url, body);
    const full = join(parts);
    expect(full.reasoning.length).toBeGreaterThan(0);
    expect(full.content.length).toBeGreaterThan(0);
    const problems: string[] = [];
    const stitchedExact = { reasoning: 0, content: 0 };
    const cuts = { reasoning: 0, content: 0 };
    for (let k = 1; k < parts.length - 1; k++) {
      const delivered = join(parts.slice(0, k));
      const phase = delivered.content ? 'content' : 'reasoning';
      cuts[phase]++;
      const state = { ...delivered, toolCallsSeen: false };
      const target = { continuationModel: MODEL, engine: 'llamacpp' as const, served, clock: { leg1At: new Date(), now: new Date() } };
      const designed = designLeg2(body, state, target);
      const plan = planContinuationRequest(body, state, { ...target, rates: { cjk: 1.6, other: 4 }, designed });
      if (plan.kind === 'skip') {
        problems.push(`cut ${k} (${phase}): refused ${plan.reason}:${plan.detail}`);
        continue;
      }
      // The prompt: the uninterrupted one plus the raw text up to the cut.
      const p2: string = (await post(`${replica.url}/apply-template`, plan.body)).prompt;
      const continued = p2.startsWith(p1) ? p2.slice(p1.length) : null;
      if (continued === null || !raw.startsWith(continued) || continued.length === 0) {
        problems.push(`cut ${k} (${phase}): leg 2 prompt ends ${JSON.stringify(p2.slice(-50))}`);
        continue;
      }
      // The raw text the sidecar counts as leg 1's output (usage, leg 2's budget) is exactly what the engine's leg 2
      // prompt continues from: not the generation prompt's `\n` the parser handed out as reasoning.
      if (plan.design.raw !== continued)
        problems.push(
          `cut ${k} (${phase}): counted ${JSON.stringify(plan.design.raw.slice(0, 12))}…, the prompt continues ${JSON.stringify(continued.slice(0, 12))}…`,
        );
      // The per-request check, against this engine.
      const verdict = await engineCheck({
        engine: 'llamacpp',
        tokenizeUrl: `${replica.url}/tokenize`,
        original: body,
        candidates: plan.design.candidates ?? [plan.design.shape.message],
        raw: plan.design.raw,
        prompt1: plan.design.prompt1,
        bosToken: served.special.bos_token,
        signal: AbortSignal.timeout(10_000),
      });
      if (verdict.kind !== 'agrees') problems.push(`cut ${k} (${phase}): engine check ${JSON.stringify(verdict)}`);
      // Leg 2, greedy, stitched: the uninterrupted answer (MAX_TOKENS long) must be where it begins. Leg 2 gets a
      // whole MAX_TOKENS (the planner's estimated budget could end it a token early).
      const leg2 = join(await streamParts(replica.url, { ...plan.body, max_tokens: MAX_TOKENS }));
      const got = { reasoning: delivered.reasoning + leg2.reasoning, content: delivered.content + leg2.content };
      if (got.reasoning === full.reasoning && got.content.startsWith(full.content)) {
        stitchedExact[phase]++;
        continue;
      }
      // Not the uninterrupted answer: the server's own text continuation of the same prompt must diverge too (the
      // engine's numerics); if that one reproduces the answer, the chat leg 2 is at fault.
      const textLeg2: string = (
        await post(`${replica.url}/completion`, { prompt: p2, n_predict: MAX_TOKENS, temperature: 0, cache_prompt: false })
      ).content;
      const joined = continued + textLeg2;
      const n = Math.min(joined.length, raw.length);
      if (joined.slice(0, n) === raw.slice(0, n))
        problems.push(`cut ${k} (${phase}): the text continuation is the uninterrupted answer, the chat leg 2 is not`);
    }
    console.log(
      `R1 published template on llama-server: ${cuts.reasoning} cuts in the reasoning (${stitchedExact.reasoning} stitched exactly), ` +
        `${cuts.content} in the content (${stitchedExact.content} stitched exactly); every leg 2 prompt = prompt + raw text, ` +
        'every engine check agreed',
    );
    expect(problems).toEqual([]);
    expect(stitchedExact.reasoning).toBeGreaterThanOrEqual(3);
    expect(stitchedExact.content).toBeGreaterThanOrEqual(3);
  });
});
