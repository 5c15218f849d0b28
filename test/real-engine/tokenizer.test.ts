// TOKENIZER against a REAL engine (issue 27): SmolLM2-135M-Instruct's tokenizer (its tokenizer.json rebuilt from
// the GGUF llama-server serves, test/real-engine/gguf-tokenizer.ts), counted in process by the sidecar's own
// code (src/templates/model-tokenizer.ts), must equal llama-server's /tokenize on every text: the project's docs,
// the texts tokenizers disagree on, and the real answers the model writes. Then a replica is SIGKILLed mid-answer
// with TOKENIZER set and no TOKENIZE_URL: the rescued usage says `tokenizer`, its prompt_tokens is the
// uninterrupted run's and its completion_tokens within one token of the engine's count of the stitched text.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadModelTokenizer, type TextTokenizer } from '../../src/templates/model-tokenizer';
import { expectOneCompleteStream } from '../e2e/helpers';
import { newRequestId } from '../support/client';
import { tokenizerFromGguf } from './gguf-tokenizer';
import { type LlamaReplica, locateAssets, type RealStack, startRealStack, startReplicas, streamChat } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };
const ROOT = path.resolve(__dirname, '..', '..', '..');
const ASSISTANT_OPEN = '<|im_start|>assistant\n';

const PROMPTS = [
  'Explain in two sentences why the sky is blue.',
  'Write a haiku about the sea.',
  'List three prime numbers greater than 100 and say why they are prime.',
  'Translate "good morning, how are you?" into French, Spanish and German.',
];
const body = (content: string) => ({
  model: 'smollm2',
  stream: true,
  temperature: 0,
  max_tokens: 400,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content }],
});

/** llama-server's own count of `text`, as it reads generated text in a prompt (special-token text parsed). */
async function engineCount(replica: LlamaReplica, text: string): Promise<number> {
  const res = await fetch(`${replica.url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ content: text, add_special: false, parse_special: true }),
  });
  return ((await res.json()) as { tokens: unknown[] }).tokens.length;
}

function corpus(): string[] {
  const docs = ['README.md', 'docs/families.md', 'docs/real-engine.md'].map((f) => fs.readFileSync(path.join(ROOT, f), 'utf8'));
  return [
    ...docs
      .join('\n\n')
      .split(/\n\n+/)
      .filter((p) => p.trim() !== '')
      .slice(0, 200),
    '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n',
    '天空为什么是蓝色的？日本語のテキスト。한국어 문장도 있습니다.',
    'Numbers: 1234567890, 3.14159, 2026-12-03T19:00:00Z, 0xDEADBEEF, 1e-9, 100%.',
    'Emoji 👍🏽 🇫🇷 👨‍👩‍👧‍👦 and symbols ∑∫√∞ ≠ ≤ ≥ — “quotes” ‘single’ …',
    'def f(x):\n    return {"a": [1, 2, 3]}\n\n\n\tindented\ttabs   and   spaces  \n',
    "   leading, trailing   and it's, we'll, they've ",
  ];
}

if ('skip' in located) {
  if (underOwnConfig) process.stderr.write(`[real-engine] SKIPPED: ${located.skip}\n`);
  describe('TOKENIZER against llama-server', () => {
    test.skip(`skipped: ${located.skip}`, () => undefined);
  });
} else {
  const assets = located.assets;

  describe(`TOKENIZER against llama-server (${assets.version}) + ${path.basename(assets.model)}`, () => {
    let replicas: LlamaReplica[];
    let stack: RealStack;
    let dir: string;
    let tok: TextTokenizer;

    beforeAll(async () => {
      dir = await tokenizerFromGguf(assets.model, fs.mkdtempSync(path.join(os.tmpdir(), 'smollm2-tokenizer-')));
      tok = loadModelTokenizer(dir);
      replicas = await startReplicas(assets, 2, { extraArgs: ['--metrics'] });
      stack = await startRealStack(replicas, { STALL_IDLE_TIMEOUT_SECONDS: '3', TOKENIZER: dir });
    }, 300_000);

    afterAll(async () => {
      await stack?.stop();
      await Promise.all((replicas ?? []).map((r) => r.stop()));
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    test("every text: the sidecar's in-process count equals llama-server's /tokenize", async () => {
      const answers: string[] = [];
      for (const p of PROMPTS) {
        const r = await streamChat(replicas[0].url, body(p), {});
        expect(r.status).toBe(200);
        answers.push(r.content);
      }
      const texts = [...corpus(), ...answers];
      const differing: unknown[] = [];
      for (const t of texts) {
        const [ours, engine] = [await tok.count(t), await engineCount(replicas[0], t)];
        if (ours !== engine) differing.push({ text: t.slice(0, 50), ours, engine });
      }
      process.stderr.write(`[real-engine] TOKENIZER: ${texts.length} texts counted, ${differing.length} differ from llama-server\n`);
      expect(texts.length).toBeGreaterThan(150);
      expect(differing).toEqual([]);
    });

    /** llama-server's own count of the tokens it generated so far (GET /metrics, `--metrics`). */
    async function predicted(replica: LlamaReplica): Promise<number> {
      const text = await (await fetch(`${replica.url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('llamacpp:tokens_predicted_total '));
      if (!line) throw new Error(`${replica.name} /metrics has no llamacpp:tokens_predicted_total`);
      return Number(line.split(' ')[1]);
    }

    /**
     * Streams PROMPTS[0] through `s`, SIGKILLs the serving replica after 20 content chunks, and holds the rescued usage
     * to the engine's own numbers. Returns the usage and what the survivor saw.
     */
    async function killAndCount(s: RealStack, tag: string) {
      const req = body(PROMPTS[0]);
      const greedy = await streamChat(s.url, req, { 'x-request-id': newRequestId(`${tag}-ref`) });
      expectOneCompleteStream(greedy);
      const id = newRequestId(tag);
      let killed: LlamaReplica | undefined;
      let killError: Error | undefined;
      const predictedBefore = await Promise.all(replicas.map(predicted));
      const r = await streamChat(s.url, req, { 'x-request-id': id }, async (p) => {
        if (killed || killError || p.contentChunks < 20) return;
        try {
          const active = await s.activeRequestsByPort();
          const serving = replicas.filter((rep) => (active.get(rep.port) ?? 0) > 0);
          if (serving.length !== 1) throw new Error(`expected one replica with rq_active > 0, got ${JSON.stringify([...active])}`);
          killed = serving[0];
          await killed.kill();
        } catch (e) {
          killError = e as Error;
        }
      });
      if (killError) throw killError;
      expect(killed).toBeDefined();
      const survivor = replicas.find((rep) => rep !== killed) as LlamaReplica;
      try {
        expectOneCompleteStream(r);
        const end = await s.waitForEnd(id, 30_000);
        expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2, accounting: 'tokenizer' });
        expect(r.usage.prompt_tokens).toBe(greedy.usage.prompt_tokens);
        // +1: the end-of-turn token an answer that stops generates, as in the uninterrupted run.
        const stitched = (await engineCount(survivor, r.content)) + 1;
        expect(Math.abs(r.usage.completion_tokens - stitched)).toBeLessThanOrEqual(1);
        if (r.content === greedy.content)
          expect(Math.abs(r.usage.completion_tokens - greedy.usage.completion_tokens)).toBeLessThanOrEqual(1);
        // Leg 2's budget from the same count: max_tokens minus the engine's count of what leg 1 delivered.
        const leg2 = s.records({ request_id: id, decision: 'ATTEMPT' }).find((a) => a.leg === 2);
        expect(leg2.budget_remaining).toBe(req.max_tokens - r.usage.continuation.recovered_tokens);

        // The engine's own numbers. What leg 1 delivered, as the survivor saw it: leg 2's prompt is the original
        // conversation and an open assistant turn holding that text (the plain family: the text alone), and the
        // survivor generated the rest of what the client got.
        const slot = await survivor.lastTaskSlot();
        expect(typeof slot?.prompt).toBe('string');
        const at = slot.prompt.lastIndexOf(ASSISTANT_OPEN);
        expect(at).toBeGreaterThan(0);
        const delivered: string = slot.prompt.slice(at + ASSISTANT_OPEN.length);
        expect(delivered.length).toBeGreaterThan(0);
        expect(delivered + slot.generated).toBe(r.content);
        // The recovered count is llama-server's /tokenize count of that text, and leg 2's budget the rest of
        // max_tokens by that count (not by the sidecar's own number).
        const deliveredTokens = await engineCount(survivor, delivered);
        expect(r.usage.continuation.recovered_tokens).toBe(deliveredTokens);
        expect(leg2.budget_remaining).toBe(req.max_tokens - deliveredTokens);
        // completion_tokens: exactly the recovered text's count plus the tokens the survivor generated for leg 2
        // (its /metrics counter; the end-of-turn token included, as in any completion_tokens).
        const leg2Generated = (await predicted(survivor)) - predictedBefore[replicas.indexOf(survivor)];
        expect(leg2Generated).toBeGreaterThan(0);
        expect(r.usage.completion_tokens).toBe(deliveredTokens + leg2Generated);
        // Re-tokenizing what leg 1 generated gives as many tokens as it generated: llama-server streams one token
        // per chunk (whole characters here), and the delivered text is the client's first chunks. So when the
        // stitched text is the uninterrupted one, the count is the uninterrupted run's, exactly.
        const pieces: string[] = r.chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').filter((t: string) => t !== '');
        let leg1Chunks = 0;
        for (let text = ''; text.length < delivered.length; leg1Chunks++) text += pieces[leg1Chunks];
        expect(pieces.slice(0, leg1Chunks).join('')).toBe(delivered);
        expect(deliveredTokens).toBe(leg1Chunks);
        if (r.content === greedy.content) expect(r.usage.completion_tokens).toBe(greedy.usage.completion_tokens);
        process.stderr.write(
          `[real-engine] TOKENIZER kill (${tag}): usage ${JSON.stringify(r.usage)}; uninterrupted ${JSON.stringify(greedy.usage)}; ` +
            `engine: delivered ${deliveredTokens} tokens, leg 2 generated ${leg2Generated}, stitched text + 1 = ${stitched}; ` +
            `stitched ${r.content === greedy.content ? '==' : '!='} uninterrupted\n`,
        );
        return { r, greedy, end };
      } finally {
        if (killed && !killed.pid) await killed.start();
      }
    }

    test('a replica SIGKILLed mid-answer, TOKENIZER and no TOKENIZE_URL: usage counted in process, exact', async () => {
      const { r } = await killAndCount(stack, 'tok-kill');
      expect(r.usage.continuation).toEqual({
        legs: 2,
        recovered_tokens: expect.any(Number),
        method: 'tokenizer',
        path: 'template',
        dialect: null,
        prompt: 'leg2-minus-prefix',
      });
    });

    test("TOKENIZER with CHAT_TEMPLATE=auto (SmolLM2's own template, GET /props): the prompt counted through the served template", async () => {
      const templated = await startRealStack(replicas, { STALL_IDLE_TIMEOUT_SECONDS: '3', TOKENIZER: dir, CHAT_TEMPLATE: 'auto' });
      try {
        // `auto` reads GET /props through Envoy's egress, which starts after the sidecar (retried every 5 s).
        const deadline = Date.now() + 30_000;
        while (templated.records({ decision: 'TEMPLATE_LOADED' }).length === 0) {
          if (Date.now() > deadline) throw new Error('CHAT_TEMPLATE=auto: no TEMPLATE_LOADED within 30 s');
          await new Promise((res) => setTimeout(res, 100));
        }
        const { r, end } = await killAndCount(templated, 'tok-tpl-kill');
        // Counted in process, the prompt as the served template renders it (not leg 2's prompt minus the prefix).
        expect(r.usage.continuation).toEqual({
          legs: 2,
          recovered_tokens: expect.any(Number),
          method: 'tokenizer',
          path: 'template',
          dialect: null,
          prompt: 'template',
        });
        expect(end).toMatchObject({ accounting: 'tokenizer', accounting_prompt: 'template' });
        const attempt = templated.records({ request_id: end.request_id, decision: 'ATTEMPT' }).find((a) => a.leg === 2);
        expect(attempt).toMatchObject({ verified_by: 'engine', engine_check: 'agrees' });
      } finally {
        await templated.stop();
      }
    });
  });
}
