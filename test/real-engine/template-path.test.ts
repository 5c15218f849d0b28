// The TEMPLATE PATH against a REAL llama-server (issue 26 item 7, issue 27 item 2): a deployment whose
// CONTINUATION_MODEL names no family-table entry (`my-org/private-reasoner`), with CHAT_TEMPLATE set and TOKENIZER
// set, in front of two llama-server replicas serving the DeepSeek-R1 distills' published template
// (--chat-template-file llama.cpp's deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja: the generation prompt always
// opens `<think>\n`). template-continuation.test.ts serves the same file, but names a checkpoint whose table entry
// was proven against it, so the sidecar takes the table path there; here no name selects an entry, so leg 2 is
// designed from the template (src/templates/continuation.ts designFromTemplate: llama.cpp's candidate shapes,
// prompt1 our render of the served template) and the per-request check (src/templates/engine-check.ts) asks the
// engine's /apply-template, through Envoy's egress, whether leg 2's prompt is the uninterrupted one plus the raw
// text, before leg 2 is sent.
//
// CHAT_TEMPLATE is set two ways: the template file in a model directory (chat_template.jinja beside the
// tokenizer_config.json and tokenizer.json an engine loads; rebuilt from the GGUF, test/real-engine/gguf-tokenizer.ts),
// and `auto` (the sidecar reads llama-server's GET /props). For each, the serving replica is SIGKILLed at several
// points inside the reasoning and inside the content, and asserted:
//   - one complete stream; the sidecar's log: ATTEMPT {source: template, verified_by: engine, engine_check: agrees},
//     no SKIPPED, no ENGINE_CHECK_UNAVAILABLE, request_end completed-after-continuation;
//   - the engine's side (the survivor's GET /slots): leg 2's prompt is exactly the uninterrupted prompt
//     (/apply-template of the original request) followed by the raw text the model generated up to the cut
//     (/completion of that prompt: no chat parsing);
//   - usage counted in process (`usage.continuation` {method: tokenizer, prompt: template}): prompt_tokens the
//     uninterrupted run's, recovered_tokens llama-server's own /tokenize count of that generated text, leg 2's
//     max_tokens the rest of the budget, so completion_tokens is the uninterrupted run's when the text is;
//   - greedy stitched == uninterrupted (reasoning and content, to the last token: the budget is exact) at least
//     three times per phase; where not, the survivor's own text continuation of the same prompt (/completion)
//     diverges too: the engine's numerics (prefill against decode), not the prompt or the budget.
// Then CHAT_TEMPLATE names a template that is not the one served (llama.cpp's Distill-Qwen-32B copy, whose generation
// prompt adds `</think>` unless enable_thinking): the engine check must refuse (continuation-unverified,
// engine-disagrees-with-template, where the prompts part in numbers), and leg 2 is never sent.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { request } from 'undici';
import { chooseSource } from '../../src/recovery/leg2-design';
import { templateFromFiles } from '../../src/templates/provider';
import { expectInterruption, expectOneCompleteStream } from '../e2e/helpers';
import { provisionAssets } from '../fidelity/harness-client';
import { type ClientResult, newRequestId } from '../support/client';
import { tokenizerFromGguf } from './gguf-tokenizer';
import { type LlamaReplica, locateAssets, type RealStack, type StreamProgress, startRealStack, startReplicas, streamChat } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };

const SERVED = 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja';
const NOT_SERVED = 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja';
const MODEL = 'my-org/private-reasoner';
const MAX_TOKENS = 80;
// A pattern SmolLM2 continues, `</think>` included (as in template-continuation.test.ts).
const FEW_SHOT =
  'Q: 1+1\nthink: one plus one is two.\n</think>\n\nA: 2\n\nQ: 2+2\nthink: two plus two is four.\n</think>\n\nA: 4\n\n' +
  'Q: 5+5\nthink: five plus five is ten.\n</think>\n\nA: 10\n\nQ: 3+3\nthink:';
const BODY = {
  model: 'private-reasoner',
  stream: true,
  temperature: 0,
  max_tokens: MAX_TOKENS,
  stream_options: { include_usage: true },
  // llama.cpp's own field, passed on to leg 2 as the rest of the request is: every prompt prefilled from scratch.
  // With the prompt cache, a run whose prompt was cached (116 of 117 tokens) prefills the last token alone and the
  // greedy answer differs from a cold run's near its end ("six is 12" / "six is twelve."): the reference would
  // depend on which replica served what before.
  cache_prompt: false,
  messages: [
    { role: 'system', content: 'Follow the pattern.' },
    { role: 'user', content: FEW_SHOT },
  ],
};
// Kill points: after this many reasoning chunks (the reasoning is ~24 tokens), or content chunks.
const KILLS: Array<{ phase: 'reasoning' | 'content'; k: number }> = [
  ...[2, 5, 8, 11, 14].map((k) => ({ phase: 'reasoning' as const, k })),
  ...[3, 10, 17, 24, 31].map((k) => ({ phase: 'content' as const, k })),
];

async function post(url: string, body: unknown): Promise<any> {
  const r = await request(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${url} answered ${r.statusCode}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** llama-server's own count of `text` as it reads generated text in a prompt (no BOS added, special text parsed). */
async function engineCount(replica: LlamaReplica, text: string): Promise<number> {
  return ((await post(`${replica.url}/tokenize`, { content: text, add_special: false, parse_special: true })).tokens as unknown[]).length;
}

async function until<T>(what: string, get: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Reference {
  /** The uninterrupted prompt, as the engine renders it (/apply-template). */
  p1: string;
  /** The raw text the model generates after it (/completion: no chat parsing). */
  raw: string;
  greedy: ClientResult;
  reasoningChunks: number;
  contentChunks: number;
}

interface Cut {
  config: string;
  phase: 'reasoning' | 'content';
  k: number;
  /** The generated text leg 2's prompt continued from (chars), and its tokens (the engine's count / the sidecar's). */
  genChars: number;
  engineTokens: number;
  recovered: number;
  exact: boolean;
  why?: string;
}

if ('skip' in located) {
  if (underOwnConfig) process.stderr.write(`[real-engine] SKIPPED: ${located.skip}\n`);
  describe('the template path on llama-server', () => {
    test.skip(`skipped: ${located.skip}`, () => undefined);
  });
} else {
  const assets = located.assets;

  describe(`the template path (a model no table entry names, CHAT_TEMPLATE and TOKENIZER set) on llama-server (${assets.version})`, () => {
    let replicas: LlamaReplica[];
    let modelDir: string;
    let wrongDir: string;
    let ref: Reference;
    const cuts: Cut[] = [];

    beforeAll(async () => {
      const templates = provisionAssets().templates;
      // The model directory: chat_template.jinja, tokenizer.json, tokenizer_config.json (bos_token, eos_token).
      modelDir = await tokenizerFromGguf(assets.model, fs.mkdtempSync(path.join(os.tmpdir(), 'private-reasoner-')));
      fs.copyFileSync(path.join(templates, SERVED), path.join(modelDir, 'chat_template.jinja'));
      wrongDir = fs.mkdtempSync(path.join(os.tmpdir(), 'not-served-'));
      fs.copyFileSync(path.join(templates, NOT_SERVED), path.join(wrongDir, 'chat_template.jinja'));
      fs.copyFileSync(path.join(modelDir, 'tokenizer_config.json'), path.join(wrongDir, 'tokenizer_config.json'));
      replicas = await startReplicas(assets, 2, {
        extraArgs: ['--jinja', '--chat-template-file', path.join(modelDir, 'chat_template.jinja')],
      });
    }, 300_000);

    afterAll(async () => {
      await Promise.all((replicas ?? []).map((r) => r.stop()));
      for (const d of [modelDir, wrongDir]) if (d) fs.rmSync(d, { recursive: true, force: true });
      if (cuts.length > 0) {
        process.stderr.write(
          `[real-engine] template path, per cut (config phase k: generated chars, engine tokens / recovered, exact):\n${cuts
            .map(
              (c) =>
                `  ${c.config} ${c.phase} ${c.k}: ${c.genChars} chars, ${c.engineTokens}/${c.recovered} tokens, ${c.exact ? 'exact' : `not exact (${c.why})`}`,
            )
            .join('\n')}\n`,
        );
      }
    }, 60_000);

    test('the premise: the name selects no entry, so the served template (whose sha256 a table entry lists) takes the template path', async () => {
      const served = templateFromFiles(path.join(modelDir, 'chat_template.jinja'));
      expect(chooseSource({ continuationModel: MODEL, served }).source).toBe('template');
      expect(served.special).toMatchObject({ bos_token: '<|im_start|>', eos_token: '<|im_end|>' });
      // The same file under the checkpoint's own name is the table path (template-continuation.test.ts).
      expect(chooseSource({ continuationModel: 'deepseek-ai/DeepSeek-R1-Distill-Llama-8B', served }).source).toBe('table');
      // What llama-server answers at /props is this template, and the sidecar reads it the same.
      const props = (await (await fetch(`${replicas[0].url}/props`)).json()) as { chat_template: string; bos_token: string };
      expect(props.chat_template).toBe(fs.readFileSync(path.join(modelDir, 'chat_template.jinja'), 'utf8'));
      expect(props.bos_token).toBe('<|im_start|>');

      const p1: string = (await post(`${replicas[0].url}/apply-template`, BODY)).prompt;
      expect(p1.endsWith('<｜Assistant｜><think>\n')).toBe(true);
      const raw: string = (
        await post(`${replicas[0].url}/completion`, { prompt: p1, n_predict: MAX_TOKENS, temperature: 0, cache_prompt: false })
      ).content;
      const greedy = await streamChat(replicas[1].url, BODY, {});
      expectOneCompleteStream(greedy);
      const chunks = greedy.chunks.map((c) => c.choices?.[0]?.delta ?? {});
      ref = {
        p1,
        raw,
        greedy,
        reasoningChunks: chunks.filter((d) => d.reasoning_content).length,
        contentChunks: chunks.filter((d) => d.content).length,
      };
      expect(greedy.finishReasons).toEqual(['length']);
      expect(greedy.usage).toMatchObject({ completion_tokens: MAX_TOKENS });
      expect(ref.reasoningChunks).toBeGreaterThan(Math.max(...KILLS.filter((x) => x.phase === 'reasoning').map((x) => x.k)) + 5);
      expect(ref.contentChunks).toBeGreaterThan(Math.max(...KILLS.filter((x) => x.phase === 'content').map((x) => x.k)) + 10);
      // The parser hands out the generation prompt's `\n` after `<think>` as the reasoning's start: the raw text
      // is the parts joined by the marker, minus that one `\n`.
      expect(`${greedy.reasoning}</think>${greedy.content}`).toBe(`\n${raw}`);
      process.stderr.write(
        `[real-engine] template path: uninterrupted ${ref.reasoningChunks} reasoning + ${ref.contentChunks} content chunks, usage ${JSON.stringify(greedy.usage)}\n`,
      );
    });

    /** Streams BODY through `stack`; SIGKILLs the serving replica once the client has `k` chunks of `phase`. */
    async function streamWithKill(stack: RealStack, phase: 'reasoning' | 'content', k: number, id: string) {
      let killed: { replica: LlamaReplica; wasProcessing: boolean } | undefined;
      let killError: Error | undefined;
      const reached = (p: StreamProgress) =>
        phase === 'reasoning' ? p.reasoningChunks >= k && p.contentChunks === 0 : p.contentChunks >= k;
      const r = await streamChat(stack.url, BODY, { 'x-request-id': id }, async (p) => {
        if (killed || killError || !reached(p)) return;
        try {
          const active = await stack.activeRequestsByPort();
          const serving = replicas.filter((rep) => (active.get(rep.port) ?? 0) > 0);
          if (serving.length !== 1) throw new Error(`expected one replica with rq_active > 0, got ${JSON.stringify([...active])}`);
          const wasProcessing = (await serving[0].slots()).some((s) => s.is_processing === true);
          killed = { replica: serving[0], wasProcessing };
          await serving[0].kill();
        } catch (e) {
          killError = e as Error;
        }
      });
      if (killError) throw killError;
      if (!killed) throw new Error(`no kill after ${k} ${phase} chunks`);
      return { r, killed };
    }

    /** One kill through `stack` (`config`), asserted; returns the cut's measurement. */
    async function killAndCheck(stack: RealStack, config: string, phase: 'reasoning' | 'content', k: number): Promise<Cut> {
      const id = newRequestId(`tpl-${config}-${phase}${k}`);
      const { r, killed } = await streamWithKill(stack, phase, k, id);
      const survivor = replicas.find((rep) => rep !== killed.replica) as LlamaReplica;
      try {
        expect(killed.wasProcessing).toBe(true);
        expectOneCompleteStream(r);
        const end = await stack.waitForEnd(id, 30_000);
        expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2, accounting: 'tokenizer' });
        // The sidecar's log: the template path, checked by the engine, which agreed.
        expect(stack.records({ request_id: id, decision: 'SKIPPED' })).toEqual([]);
        expect(stack.records({ request_id: id, decision: 'ENGINE_CHECK_UNAVAILABLE' })).toEqual([]);
        const attempts = stack.records({ request_id: id, decision: 'ATTEMPT' }).filter((a) => a.leg === 2);
        expect(attempts).toHaveLength(1);
        const attempt = attempts[0];
        expect(attempt).toMatchObject({ source: 'template', family: 'template', verified_by: 'engine', engine_check: 'agrees' });
        const cutPhase: 'reasoning' | 'content' = attempt.phase;

        // The engine's side: leg 2's prompt is the uninterrupted prompt followed by the raw text generated so far.
        const slot = await survivor.lastTaskSlot();
        expect(typeof slot?.prompt).toBe('string');
        expect(slot.prompt.startsWith(ref.p1)).toBe(true);
        const gen: string = slot.prompt.slice(ref.p1.length);
        expect(gen.length).toBeGreaterThan(0);
        expect(ref.raw.startsWith(gen)).toBe(true);
        expect(cutPhase).toBe(gen.includes('</think>') ? 'content' : 'reasoning');

        // Usage, counted in process through the served template.
        expect(r.usage.continuation).toEqual({
          legs: 2,
          recovered_tokens: expect.any(Number),
          method: 'tokenizer',
          path: 'template',
          dialect: null,
          prompt: 'template',
        });
        expect(r.usage.prompt_tokens).toBe(ref.greedy.usage.prompt_tokens);
        const engineTokens = await engineCount(survivor, gen);
        expect(r.usage.continuation.recovered_tokens).toBe(engineTokens);
        expect(attempt.budget_remaining).toBe(MAX_TOKENS - engineTokens);
        expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens + r.usage.completion_tokens);

        // Greedy stitched == uninterrupted, to the last token.
        const exact = r.reasoning === ref.greedy.reasoning && r.content === ref.greedy.content;
        const cut: Cut = {
          config,
          phase: cutPhase,
          k,
          genChars: gen.length,
          engineTokens,
          recovered: r.usage.continuation.recovered_tokens,
          exact,
        };
        if (exact) {
          expect(r.usage.completion_tokens).toBe(ref.greedy.usage.completion_tokens);
          return cut;
        }
        // Not the uninterrupted answer: the survivor's own text continuation of the same prompt must diverge as well
        // (the engine's numerics); if that one reproduces the answer, the chat leg 2 is at fault.
        const text: string = (
          await post(`${survivor.url}/completion`, {
            prompt: slot.prompt,
            n_predict: MAX_TOKENS - engineTokens,
            temperature: 0,
            cache_prompt: false,
          })
        ).content;
        const joined = gen + text;
        expect(joined).not.toBe(ref.raw);
        const at = [...joined].findIndex((ch, i) => ch !== ref.raw[i]);
        cut.why = `the survivor's text continuation of the same prompt diverges too, at char ${at} of the raw text`;
        return cut;
      } finally {
        if (!killed.replica.pid) await killed.replica.start();
      }
    }

    async function runConfig(config: string, env: Record<string, string>): Promise<Cut[]> {
      expect(ref).toBeDefined();
      const stack = await startRealStack(replicas, { CONTINUATION_MODEL: MODEL, TOKENIZER: modelDir, TOKENIZE_TIMEOUT_MS: '2000', ...env });
      try {
        // `auto` reads GET /props through Envoy's egress, which starts after the sidecar: retried every 5 s.
        const loaded = await until('TEMPLATE_LOADED', () => stack.records({ decision: 'TEMPLATE_LOADED' })[0], 30_000);
        const reference = await streamChat(stack.url, BODY, { 'x-request-id': newRequestId(`tpl-${config}-ref`) });
        expect(reference.reasoning).toBe(ref.greedy.reasoning);
        expect(reference.content).toBe(ref.greedy.content);
        const out: Cut[] = [];
        for (const { phase, k } of KILLS) out.push(await killAndCheck(stack, config, phase, k));
        cuts.push(...out);
        const tally = (p: string) => `${out.filter((c) => c.phase === p && c.exact).length}/${out.filter((c) => c.phase === p).length}`;
        process.stderr.write(
          `[real-engine] template path, CHAT_TEMPLATE=${env.CHAT_TEMPLATE} (${loaded.origin}): stitched == uninterrupted ` +
            `${tally('reasoning')} reasoning cuts, ${tally('content')} content cuts; every engine check agreed\n`,
        );
        return out;
      } finally {
        await stack.stop();
      }
    }

    const bar = (out: Cut[]) => {
      for (const phase of ['reasoning', 'content'])
        expect(out.filter((c) => c.phase === phase && c.exact).length).toBeGreaterThanOrEqual(3);
    };

    test('CHAT_TEMPLATE = the template file in the model directory: every cut verified by the engine; stitched == uninterrupted', async () => {
      bar(await runConfig('file', { CHAT_TEMPLATE: path.join(modelDir, 'chat_template.jinja') }));
    });

    test("CHAT_TEMPLATE=auto (llama-server's GET /props): every cut verified by the engine; stitched == uninterrupted", async () => {
      bar(await runConfig('auto', { CHAT_TEMPLATE: 'auto' }));
    });

    test('CHAT_TEMPLATE names a template the engine does not serve: the engine check refuses, leg 2 is never sent', async () => {
      expect(ref).toBeDefined();
      const stack = await startRealStack(replicas, {
        CONTINUATION_MODEL: MODEL,
        TOKENIZER: modelDir,
        TOKENIZE_TIMEOUT_MS: '2000',
        CHAT_TEMPLATE: path.join(wrongDir, 'chat_template.jinja'),
      });
      try {
        const id = newRequestId('tpl-wrong');
        const before = await Promise.all(replicas.map(async (rep) => (await rep.lastTaskSlot())?.id_task));
        const { r, killed } = await streamWithKill(stack, 'content', 10, id);
        try {
          expectInterruption(r, 'continuation-unverified');
          const survivor = replicas.indexOf(replicas.find((rep) => rep !== killed.replica) as LlamaReplica);
          // No chat request reached the survivor: its last task is the one it had before this stream.
          expect((await replicas[survivor].lastTaskSlot())?.id_task).toBe(before[survivor]);
          expect(stack.records({ request_id: id, decision: 'ATTEMPT' }).filter((a) => a.leg === 2)).toEqual([]);
          const skipped = stack.records({ request_id: id, decision: 'SKIPPED' });
          expect(skipped).toHaveLength(1);
          // Our render ends `<think>\n</think>` (enable_thinking unset), the engine's `<think>\n`: they part where
          // the engine's prompt ends.
          expect(skipped[0]).toMatchObject({
            reason: 'continuation-unverified',
            source: 'template',
            detail: 'engine-disagrees-with-template',
            differs_at: ref.p1.length,
            expected_length: ref.p1.length + '</think>'.length,
            actual_length: ref.p1.length,
          });
          process.stderr.write(`[real-engine] template path, a template not served: ${JSON.stringify(skipped[0])}\n`);
        } finally {
          if (!killed.replica.pid) await killed.replica.start();
        }
      } finally {
        await stack.stop();
      }
    });
  });
}
