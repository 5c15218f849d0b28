// Issue 11 against a REAL inference server: two llama-server replicas (SmolLM2-135M, temperature 0), 8
// concurrent streams through the real Envoy and the sidecar with its default admission settings, and one
// replica SIGKILLed while every stream is mid-answer. Every stream must complete: one id, one finish_reason,
// and text that starts with exactly what the client held at the kill. Leg 2 is a new generation conditioned
// on the delivered text; how often the stitched answer equals the uninterrupted one is printed, not asserted.
import { expectOneCompleteStream } from '../e2e/helpers';
import { type ClientResult, newRequestId } from '../support/client';
import {
  type LlamaReplica,
  locateAssets,
  type RealStack,
  type StreamProgress,
  sleep,
  startRealStack,
  startReplicas,
  streamChat,
} from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };

const STREAMS = 8;
/** Every stream has received at least this many content chunks when the replica is killed. */
const KILL_AFTER_CHUNKS = 5;
const PROMPTS = [
  'Explain in two sentences why the sky is blue.',
  'Explain in two sentences why the sea is salty.',
  'Explain in two sentences why leaves are green.',
  'Explain in two sentences why ice floats on water.',
];
const body = (k: number) => ({
  model: 'smollm2',
  stream: true,
  temperature: 0,
  max_tokens: 400,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: PROMPTS[k % PROMPTS.length] }],
});

if ('skip' in located) {
  if (underOwnConfig) process.stderr.write(`[real-engine] SKIPPED: ${located.skip}\n`);
  describe('real engine crash under load (llama-server)', () => {
    test.skip(`skipped: ${located.skip}`, () => undefined);
  });
} else {
  const assets = located.assets;

  // The text path (the suite's default, support.ts), and continuation by token ids (issue 34): leg 1 asked for its
  // ids, every continued stream's leg 2 prompted with them.
  describe.each([
    { path: 'template', env: {} as Record<string, string> },
    { path: 'token-ids', env: { TOKEN_IDS_CONTINUATION: 'auto' } },
  ])(`real engine crash under load: llama-server (${assets.version}), ${STREAMS} streams, continued by $path`, ({ path, env }) => {
    let replicas: LlamaReplica[];
    let stack: RealStack;

    beforeAll(async () => {
      // Four slots per replica, so that all 8 streams generate at once (a batch of 4 on each).
      replicas = await startReplicas(assets, 2, { parallel: 4, ctxSize: 4096 });
      // Default admission, brake and queue settings: only the timers of the suite are shortened.
      stack = await startRealStack(replicas, { STALL_IDLE_TIMEOUT_SECONDS: '3', LOG_LEVEL: 'info', ...env });
    }, 300_000);

    afterAll(async () => {
      await stack?.stop();
      await Promise.all((replicas ?? []).map((r) => r.stop()));
    }, 60_000);

    test(`one of two replicas SIGKILLed while all ${STREAMS} streams are mid-answer: ${STREAMS}/${STREAMS} complete`, async () => {
      // The uninterrupted answers, one per prompt, through the gateway.
      const greedy: string[] = [];
      for (let k = 0; k < PROMPTS.length; k++) {
        const g = await streamChat(stack.url, body(k), { 'x-request-id': newRequestId('real-crash-ref') });
        expectOneCompleteStream(g);
        greedy.push(g.content);
      }
      const progress: StreamProgress[] = Array.from({ length: STREAMS }, () => ({
        contentChunks: 0,
        content: '',
        reasoningChunks: 0,
        reasoning: '',
      }));
      const ids = Array.from({ length: STREAMS }, () => newRequestId('real-crash'));
      const runs: Promise<ClientResult>[] = ids.map((id, k) =>
        streamChat(stack.url, body(k), { 'x-request-id': id }, (p) => {
          progress[k] = p;
        }),
      );
      // Wait until every stream is mid-answer, then kill the replica that serves the most of them.
      const deadline = Date.now() + 120_000;
      while (progress.some((p) => p.contentChunks < KILL_AFTER_CHUNKS)) {
        if (Date.now() > deadline) throw new Error(`streams did not all start: ${progress.map((p) => p.contentChunks).join(',')}`);
        await sleep(20);
      }
      const active = await stack.activeRequestsByPort();
      const victim = [...replicas].sort((a, b) => (active.get(b.port) ?? 0) - (active.get(a.port) ?? 0))[0];
      const onVictim = active.get(victim.port) ?? 0;
      const atKill = progress.map((p) => p.content);
      await victim.kill();
      const results = await Promise.all(runs);

      expect(onVictim).toBeGreaterThan(0);
      // A stream that did not complete: the sidecar's records of it, to tell why.
      results.forEach((r, k) => {
        if (r.errors.length > 0 || r.finishReasons.length !== 1)
          process.stderr.write(
            `[real-engine] ${ids[k]} did not complete: ${JSON.stringify(stack.logs.filter((l) => l.request_id === ids[k]))}\n`,
          );
      });
      for (let k = 0; k < STREAMS; k++) {
        expectOneCompleteStream(results[k]);
        expect(results[k].content.startsWith(atKill[k])).toBe(true);
      }
      const continued = stack.logs.filter((l) => l.decision === 'SUCCEEDED').length;
      expect(continued).toBe(onVictim);
      // Every continued stream says how: all by the path this stack runs.
      const paths = results.map((r) => r.usage?.continuation?.path).filter((p) => p !== undefined);
      expect(paths).toEqual(Array(onVictim).fill(path));
      expect(stack.logs.filter((l) => l.decision === 'RECOVERY_REFUSED')).toEqual([]);
      const equal = results.filter((r, k) => r.content === greedy[k % PROMPTS.length]).length;
      process.stdout.write(
        `\n[real-engine] crash under load (${path}): ${STREAMS}/${STREAMS} complete, ${onVictim} continued on the survivor, stitched == uninterrupted ${equal}/${STREAMS} (temperature 0, batched decoding)\n`,
      );
    });
  });
}
