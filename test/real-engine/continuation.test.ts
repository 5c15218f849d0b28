// Crash continuation against a REAL inference server: two llama.cpp llama-server replicas serving
// SmolLM2-135M-Instruct (greedy, temperature 0) behind the real Envoy and the in-process sidecar. The
// replica serving an answer is SIGKILLed after the client has received k content chunks; the client must
// still get one complete stream whose text starts with what it already had, and the surviving replica
// must have run leg2 as a continuation of the delivered text.
//
// What this proves and what it does not: leg2 is a NEW generation conditioned on the delivered text, not
// a migration of the dead replica's state. At temperature 0 the stitched answer often equals the
// uninterrupted greedy answer, but nothing here claims token-identical output; the equality rate is
// measured and printed, not asserted.
//
// Usage IS asserted: TOKENIZE_URL points at llama-server's /tokenize (through Envoy's egress, so it reaches a
// live replica after a kill), its dialect detected (TOKENIZE_DIALECT=auto). A rescued stream must report the
// uninterrupted run's prompt_tokens exactly and completion_tokens within one token per leg boundary, and
// leg 2's max_tokens must be the original budget minus the engine's count of the delivered text.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { designLeg2 } from '../../src/recovery/continuation-request';
import { repoRoot } from '../../tools/stack/envoy-config';
import { expectOneCompleteStream } from '../e2e/helpers';
import { type ClientResult, newRequestId } from '../support/client';
import { firstDifference, type LlamaReplica, locateAssets, type RealStack, startRealStack, startReplicas, streamChat } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };

/** Kill points: after k content chunks received by the client. */
const KILL_POINTS = [5, 15, 30, 50, 60];
/** Leave at least this many chunks after a kill point, so the engine is still generating when it dies. */
const TAIL_MARGIN = 12;

// A question SmolLM2-135M-Instruct answers in a paragraph and ends by itself (finish_reason "stop").
// max_tokens is only a guard against a runaway answer; it is far above the answer's length.
const PROMPT = 'Explain in two sentences why the sky is blue.';
const body = (extra: Record<string, unknown> = {}) => ({
  model: 'smollm2',
  stream: true,
  temperature: 0,
  max_tokens: 400,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: PROMPT }],
  ...extra,
});

interface Row {
  k: number;
  servedBy: string;
  leg2By: string;
  clientAtKillChars: number;
  /** What leg2's final assistant message held (the sidecar's delivered text), read back from the engine. */
  leg2PrefixChars: number;
  totalChars: number;
  greedyChars: number;
  equal: boolean;
  firstDiff: number;
  /** The same continuation sent directly, WITHOUT the generic builder's `<think></think>` wrapper. */
  directNoWrapperEqual: boolean | null;
  usage: any;
  /** Kill sent -> the sidecar's TRIGGERED record. */
  detectMs: number | null;
  /** Leg2 opened -> its first byte (the sidecar's continuation_gateway_recovery_first_byte_ms_sum, this case only). */
  leg2FirstByteMs: number;
  ms: number;
}

const GENERIC_WRAPPER = '<think></think>';
/** What the configured family puts before the delivered content when there was no reasoning. */
const DESIGN = designLeg2(
  { messages: [] },
  { reasoning: '', content: 'X', toolCallsSeen: false },
  { continuationModel: process.env.REAL_ENGINE_CONTINUATION_MODEL ?? 'SmolLM2-135M-Instruct', engine: 'llamacpp' },
).design;
const FAMILY = { name: DESIGN.family?.name };
/** What the family writes before the delivered content (nothing for `plain`). */
const WRAPPER = (DESIGN.raw ?? 'X').slice(0, -1);
const ASSISTANT_OPEN = '<|im_start|>assistant\n';

if ('skip' in located) {
  // Loud under its own config (someone asked for this suite); silent inside `npm test`.
  if (underOwnConfig) process.stderr.write(`[real-engine] SKIPPED: ${located.skip}\n`);
  describe('real engine (llama-server)', () => {
    test.skip(`skipped: ${located.skip}`, () => undefined);
  });
} else {
  const assets = located.assets;

  describe(`real engine: llama-server (${assets.version}) + ${path.basename(assets.model)}`, () => {
    let replicas: LlamaReplica[];
    let stack: RealStack;
    let greedy: ClientResult;
    let greedyChunks = 0;
    /** The greedy answer's content pieces, one per chunk (token boundaries). */
    let greedyPieces: string[] = [];
    const sweep: { k: number; plain: boolean; wrapped: boolean }[] = [];
    const rows: Row[] = [];
    const notes: string[] = [];

    beforeAll(async () => {
      replicas = await startReplicas(assets, 2);
      // 2 s: the /tokenize calls share two cores with two engines, Envoy and jest (the default is 200 ms).
      stack = await startRealStack(replicas, {
        STALL_IDLE_TIMEOUT_SECONDS: '3',
        TOKENIZE_URL: '{egress}/tokenize',
        TOKENIZE_TIMEOUT_MS: '2000',
      });
    }, 300_000);

    // A failed kill case must not leave its replica dead for the next one (same port, STATIC cluster).
    afterEach(async () => {
      for (const rep of replicas ?? []) if (!rep.pid) await rep.start();
    }, 180_000);

    afterAll(async () => {
      printTable(rows, notes, greedy, greedyChunks, assets.version);
      await stack?.stop();
      await Promise.all((replicas ?? []).map((r) => r.stop()));
    }, 60_000);

    /** Directly (no gateway) asks `replica` to continue `prefix` as the final assistant message. */
    async function directContinuation(replica: LlamaReplica, prefix: string, extra: Record<string, unknown> = {}): Promise<ClientResult> {
      return streamChat(
        replica.url,
        body({
          messages: [...body().messages, { role: 'assistant', content: prefix }],
          continue_final_message: true,
          add_generation_prompt: false,
          ...extra,
        }),
        {},
      );
    }

    test('greedy reference: both replicas and the gateway give the same answer at temperature 0', async () => {
      const direct: ClientResult[] = [];
      for (const rep of replicas) direct.push(await streamChat(rep.url, body(), {}));
      let chunks = 0;
      const viaGateway = await streamChat(stack.url, body(), { 'x-request-id': newRequestId('real-ref') }, (p) => {
        chunks = p.contentChunks;
      });
      for (const d of direct) {
        expect(d.status).toBe(200);
        expect(d.finishReasons).toEqual(['stop']);
        expect(d.usage?.completion_tokens).toBeGreaterThan(0);
      }
      expectOneCompleteStream(viaGateway);
      expect(viaGateway.finishReasons).toEqual(['stop']);
      expect(direct[1].content).toBe(direct[0].content);
      expect(viaGateway.content).toBe(direct[0].content);
      greedy = viaGateway;
      greedyChunks = chunks;
      greedyPieces = viaGateway.chunks
        .flatMap((c) => (c.choices ?? []).map((x: any) => x?.delta?.content ?? ''))
        .filter((t: string) => t !== '');
      expect(greedyPieces.join('')).toBe(greedy.content);
      // The scenario wants an answer of roughly 60-120 tokens (one content chunk per token here).
      expect(greedyChunks).toBeGreaterThanOrEqual(KILL_POINTS[KILL_POINTS.length - 1] + TAIL_MARGIN);
      expect(greedyChunks).toBeLessThanOrEqual(300);
      notes.push(`greedy answer: ${greedyChunks} content chunks, ${greedy.content.length} chars, usage ${JSON.stringify(greedy.usage)}`);
    });

    test("llama-server speaks vLLM's continuation dialect (why CONTINUATION_ENGINE=vllm)", async () => {
      expect(greedy).toBeDefined();
      // Cut at a token boundary (a chunk boundary of the greedy stream), as a real interruption is.
      const half = greedyPieces.slice(0, Math.floor(greedyPieces.length / 2)).join('');
      // continue_final_message without add_generation_prompt:false is refused (add_generation_prompt
      // defaults to true), exactly vLLM's rule; SGLang ignores add_generation_prompt.
      const refused = await streamChat(
        replicas[0].url,
        body({ messages: [...body().messages, { role: 'assistant', content: half }], continue_final_message: true }),
        {},
      );
      expect(refused.status).toBe(400);
      expect(refused.raw).toContain('add_generation_prompt');
      // With both fields, as the sidecar sends them: accepted, and only the new text is streamed.
      const cont = await directContinuation(replicas[0], half);
      expect(cont.status).toBe(200);
      expect(cont.finishReasons).toEqual(['stop']);
      expect(cont.content.length).toBeGreaterThan(0);
      expect(cont.usage?.completion_tokens).toBeGreaterThan(0);
      const wrapped = await directContinuation(replicas[0], `${GENERIC_WRAPPER}${half}`);
      expect(wrapped.status).toBe(200);
      const slot = await replicas[0].lastTaskSlot();
      // Why the sidecar must speak llama.cpp's /tokenize dialect here: it reads only `content`, and answers
      // 200 {"tokens": []} to the SGLang/vLLM body, which taken at face value would count any text as 0.
      const tok = await streamTokenize(replicas[0].url, { model: 'smollm2', prompt: half, add_special_tokens: false });
      notes.push(
        `llama-server /tokenize with the SGLang/vLLM body {model, prompt}: ${tok}; with {content}: ${await streamTokenize(replicas[0].url, { content: half })}`,
      );
      expect(tok).toContain('tokens.length=0');
      notes.push(
        `direct continuation after ${Math.floor(greedyPieces.length / 2)} chunks (${half.length} chars): plain prefix -> stitched==greedy ${half + cont.content === greedy.content}; ` +
          `with "${GENERIC_WRAPPER}" -> stitched==greedy ${half + wrapped.content === greedy.content}`,
      );
      // The engine's own view of the wrapped request: the prompt ends with the prefix, inside an open
      // assistant turn (no end-of-turn token after it).
      expect(typeof slot?.prompt).toBe('string');
      expect(slot.prompt.endsWith(`${ASSISTANT_OPEN}${GENERIC_WRAPPER}${half}`)).toBe(true);
    });

    test('diagnostic: continuing at token boundaries, with and without the generic builder\'s "<think></think>"', async () => {
      // No gateway, no kill: the engine is asked directly to continue the greedy answer cut after k
      // chunks, once with the plain delivered text and once with the prefix the generic builder sends for
      // "no reasoning, some content". Recorded, not asserted: it tells what the wrapper costs a model that
      // has no reasoning format (SmolLM2's template knows no <think>).
      expect(greedyPieces.length).toBeGreaterThan(0);
      for (let k = 2; k < greedyPieces.length - 2; k += 4) {
        const pre = greedyPieces.slice(0, k).join('');
        const plain = await directContinuation(replicas[0], pre);
        const wrapped = await directContinuation(replicas[0], `${GENERIC_WRAPPER}${pre}`);
        expect(plain.status).toBe(200);
        expect(wrapped.status).toBe(200);
        // The wrapper is never echoed back as text.
        expect(wrapped.content).not.toContain('think>');
        sweep.push({ k, plain: pre + plain.content === greedy.content, wrapped: pre + wrapped.content === greedy.content });
      }
      const plainEq = sweep.filter((x) => x.plain).length;
      const wrappedEq = sweep.filter((x) => x.wrapped).length;
      notes.push(
        `direct sweep over ${sweep.length} token boundaries (k = ${sweep.map((x) => x.k).join(',')}): stitched==greedy ` +
          `${plainEq}/${sweep.length} with the plain prefix, ${wrappedEq}/${sweep.length} with "${GENERIC_WRAPPER}" + prefix ` +
          `(wrapped equal at k = ${
            sweep
              .filter((x) => x.wrapped)
              .map((x) => x.k)
              .join(',') || 'none'
          })`,
      );
    });

    /**
     * Streams `reqBody` through the gateway and SIGKILLs the replica serving it once the client has `k`
     * content chunks; returns the client's result and what it held at the kill.
     */
    async function streamWithKill(k: number, reqBody: unknown, id: string) {
      let killed: { replica: LlamaReplica; pid: number; contentAtKill: string; wasProcessing: boolean; at: number } | undefined;
      let killError: Error | undefined;
      const r = await streamChat(stack.url, reqBody, { 'x-request-id': id }, async (p) => {
        if (killed || killError || p.contentChunks < k) return;
        try {
          // Which replica serves this stream: Envoy's router_tier cluster has exactly one request in
          // flight (the sidecar's leg1), on that replica's host. Reading stays paused meanwhile, so
          // p.content is exactly what the client holds when the kill is sent.
          const active = await stack.activeRequestsByPort();
          const serving = replicas.filter((rep) => (active.get(rep.port) ?? 0) > 0);
          if (serving.length !== 1) throw new Error(`expected one replica with rq_active > 0, got ${JSON.stringify([...active])}`);
          const replica = serving[0];
          // Cross-check with the engine itself: a slot is still generating (otherwise the kill would hit
          // an answer that was already complete and prove nothing).
          const wasProcessing = (await replica.slots()).some((s) => s.is_processing === true);
          const pid = replica.pid as number;
          killed = { replica, pid, contentAtKill: p.content, wasProcessing, at: Date.now() };
          await replica.kill();
        } catch (e) {
          killError = e as Error;
        }
      });
      if (killError) throw killError;
      expect(killed).toBeDefined();
      return { r, kill: killed! };
    }

    /** llama-server's own count of `text` (no special tokens added), asked directly. */
    async function engineTokens(replica: LlamaReplica, text: string): Promise<number> {
      const res = await fetch(`${replica.url}/tokenize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ content: text }),
      });
      const j = (await res.json()) as { tokens: unknown[] };
      return j.tokens.length;
    }

    test.each(KILL_POINTS)('replica SIGKILLed after %i delivered content chunks: one complete stream, leg2 on the survivor', async (k) => {
      expect(greedy).toBeDefined();
      if (k + TAIL_MARGIN > greedyChunks) {
        notes.push(`kill point ${k}: not run (greedy answer has only ${greedyChunks} chunks)`);
        return;
      }
      const id = newRequestId(`real-k${k}`);
      const started = Date.now();
      const firstByteBefore = stack.sidecar.ctx.metrics.recoveryLatencySumSeconds();
      const { r, kill } = await streamWithKill(k, body(), id);
      expect(kill.wasProcessing).toBe(true);
      const survivor = replicas.find((rep) => rep !== kill.replica)!;

      // The client: ONE complete stream that starts with exactly what it had at the kill.
      expectOneCompleteStream(r);
      expect(r.content.startsWith(kill.contentAtKill)).toBe(true);
      expect(r.usage?.completion_tokens).toBeGreaterThan(0);

      // The sidecar: leg1 failed after the first delta, leg2 was attempted and completed.
      const end = await stack.waitForEnd(id, 30_000);
      expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
      const trig = stack.records({ request_id: id, decision: 'TRIGGERED' });
      expect(trig).toHaveLength(1);
      expect(trig[0].case).toBe('content-done');
      const leg2 = stack.records({ request_id: id, decision: 'ATTEMPT' }).filter((a) => a.leg === 2);
      expect(leg2).toHaveLength(1);
      expect(leg2[0]).toMatchObject({ case: 'content-done', family: FAMILY.name });

      // The survivor ran leg2 (it answered 200, or the sidecar would have sent the interruption event):
      // its last task's prompt is the original conversation plus an OPEN assistant turn holding the
      // generic builder's prefix "<think></think>" + the delivered text, and its generated text is what
      // the client got after that text.
      const slot = await survivor.lastTaskSlot();
      expect(typeof slot?.prompt).toBe('string');
      const prompt: string = slot.prompt;
      const at = prompt.lastIndexOf(`${ASSISTANT_OPEN}${WRAPPER}`);
      expect(at).toBeGreaterThan(0);
      expect(prompt.slice(0, at)).toContain(PROMPT);
      const delivered = prompt.slice(at + ASSISTANT_OPEN.length + WRAPPER.length);
      expect(delivered.startsWith(kill.contentAtKill)).toBe(true);
      expect(r.content.startsWith(delivered)).toBe(true);
      if (typeof slot.generated === 'string' && slot.generated !== '') expect(delivered + slot.generated).toBe(r.content);

      // Usage you can bill on: counted by llama-server's /tokenize (dialect detected), the prompt through
      // its chat template. prompt_tokens is the uninterrupted run's exactly; completion_tokens is within one
      // token of the engine's count of the text the client got (+1: the end-of-turn token an answer that
      // stops generates, as in the uninterrupted run) and, when the text is the greedy one, of its usage.
      expect(r.usage.continuation.fallback ?? null).toBeNull(); // the reason, if the estimate was used
      expect(r.usage.continuation).toMatchObject({ legs: 2, method: 'tokenize', dialect: 'llamacpp', prompt: 'template' });
      expect(r.usage.prompt_tokens).toBe(greedy.usage.prompt_tokens);
      const stitchedTokens = (await engineTokens(survivor, r.content)) + 1;
      expect(Math.abs(r.usage.completion_tokens - stitchedTokens)).toBeLessThanOrEqual(1);
      if (r.content === greedy.content) expect(Math.abs(r.usage.completion_tokens - greedy.usage.completion_tokens)).toBeLessThanOrEqual(1);
      expect(r.usage.total_tokens).toBe(r.usage.prompt_tokens + r.usage.completion_tokens);
      // Leg 2's budget: max_tokens minus the engine's count of what leg 1 delivered (leg 2's prefix).
      const deliveredTokens = await engineTokens(survivor, delivered);
      expect(leg2[0].budget_remaining).toBe(body().max_tokens - deliveredTokens);
      expect(end).toMatchObject({
        accounting: 'tokenize',
        accounting_dialect: 'llamacpp',
        accounting_prompt: 'template',
        accounting_fallback: null,
      });

      // Diagnostic (not asserted): the same continuation without the `<think></think>` wrapper.
      const plain = await directContinuation(survivor, delivered);
      const directNoWrapperEqual = plain.status === 200 ? delivered + plain.content === greedy.content : null;

      rows.push({
        k,
        servedBy: kill.replica.name,
        leg2By: survivor.name,
        clientAtKillChars: kill.contentAtKill.length,
        leg2PrefixChars: delivered.length,
        totalChars: r.content.length,
        greedyChars: greedy.content.length,
        equal: r.content === greedy.content,
        firstDiff: firstDifference(r.content, greedy.content),
        directNoWrapperEqual,
        usage: r.usage,
        detectMs: trig[0].time ? Date.parse(trig[0].time) - kill.at : null,
        leg2FirstByteMs: Math.round((stack.sidecar.ctx.metrics.recoveryLatencySumSeconds() - firstByteBefore) * 1000),
        ms: Date.now() - started,
      });

      // Bring the killed replica back for the next case (same port, Envoy's STATIC cluster).
      await kill.replica.start();
    });

    test('a budget-limited answer (max_tokens 40, killed after 15 chunks) is as long as the uninterrupted one', async () => {
      // With the estimate, leg 2's max_tokens was the budget minus an over-count of the delivered text, so a
      // rescued answer that runs into max_tokens ended early. Counted by the engine, it ends where the
      // uninterrupted answer ends, and its usage says the same.
      const BUDGET = 40;
      const limited = body({ max_tokens: BUDGET });
      const ref = await streamChat(stack.url, limited, { 'x-request-id': newRequestId('real-budget-ref') });
      expectOneCompleteStream(ref);
      expect(ref.finishReasons).toEqual(['length']);
      expect(ref.usage.completion_tokens).toBe(BUDGET);
      const id = newRequestId('real-budget');
      const { r, kill } = await streamWithKill(15, limited, id);
      expectOneCompleteStream(r);
      expect(r.content.startsWith(kill.contentAtKill)).toBe(true);
      expect(r.finishReasons).toEqual(['length']);
      expect(r.usage.continuation.fallback ?? null).toBeNull();
      expect(r.usage.continuation).toMatchObject({ method: 'tokenize', dialect: 'llamacpp', prompt: 'template' });
      expect(r.usage.prompt_tokens).toBe(ref.usage.prompt_tokens);
      expect(r.usage.completion_tokens).toBe(BUDGET);
      const survivor = replicas.find((rep) => rep !== kill.replica)!;
      // One leg boundary: the stitched text re-tokenizes to the budget within one token.
      expect(Math.abs((await engineTokens(survivor, r.content)) - BUDGET)).toBeLessThanOrEqual(1);
      const attempt = stack.records({ request_id: id, decision: 'ATTEMPT' }).find((a) => a.leg === 2);
      notes.push(
        `budget-limited (max_tokens ${BUDGET}, kill after 15 chunks): leg 2 max_tokens ${attempt?.budget_remaining}, stitched ${r.content.length} chars / uninterrupted ${ref.content.length}, ` +
          `equal ${r.content === ref.content}, usage ${r.usage.prompt_tokens}/${r.usage.completion_tokens} vs ${ref.usage.prompt_tokens}/${ref.usage.completion_tokens}`,
      );
      await kill.replica.start();
    });
  });
}

/** POSTs to /tokenize and describes the answer (status and token count). */
async function streamTokenize(url: string, body: unknown): Promise<string> {
  const res = await fetch(`${url}/tokenize`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  try {
    const j = JSON.parse(text);
    return `${res.status}, tokens.length=${Array.isArray(j.tokens) ? j.tokens.length : 'n/a'}, count=${j.count ?? 'absent'}`;
  } catch {
    return `${res.status} ${text.slice(0, 100)}`;
  }
}

function printTable(rows: Row[], notes: string[], greedy: ClientResult | undefined, greedyChunks: number, version: string): void {
  const lines: string[] = [];
  lines.push(`llama-server: ${version}`);
  for (const n of notes) lines.push(`note: ${n}`);
  lines.push('');
  lines.push(
    '| kill after k chunks | served by | leg2 by | client had at kill (chars) | leg2 prefix (chars) | stitched total (chars) | greedy (chars) | stitched == greedy | first diff at | no-wrapper direct == greedy | usage (prompt/completion) | kill -> TRIGGERED (ms) | leg2 first byte (ms) |',
  );
  lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    lines.push(
      `| ${r.k} | ${r.servedBy} | ${r.leg2By} | ${r.clientAtKillChars} | ${r.leg2PrefixChars} | ${r.totalChars} | ${r.greedyChars} | ${r.equal ? 'yes' : 'no'} | ${r.firstDiff < 0 ? '-' : r.firstDiff} | ${r.directNoWrapperEqual === null ? 'n/a' : r.directNoWrapperEqual ? 'yes' : 'no'} | ${r.usage?.prompt_tokens}/${r.usage?.completion_tokens} (${r.usage?.continuation?.method}${r.usage?.continuation?.dialect ? `:${r.usage.continuation.dialect}` : ''}) | ${r.detectMs ?? 'n/a'} | ${r.leg2FirstByteMs} |`,
    );
  }
  const eq = rows.filter((r) => r.equal).length;
  lines.push('');
  lines.push(`stitched == greedy: ${eq}/${rows.length} (temperature 0; leg2 is a new generation conditioned on the delivered text)`);
  const text = lines.join('\n');
  process.stdout.write(`\n[real-engine] results\n${text}\n`);
  try {
    const dir = path.join(repoRoot(), 'results');
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'real-engine.md'), `${text}\n`);
    fs.writeFileSync(
      path.join(dir, 'real-engine.json'),
      JSON.stringify({ version, greedyChunks, greedy: greedy?.content, rows, notes }, null, 2),
    );
  } catch {
    // results are a convenience
  }
}
