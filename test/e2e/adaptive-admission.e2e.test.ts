// Issue 22, item 3: RECOVERY_ADAPTIVE=true moves the re-prefill limit with what the surviving replicas show.
// Two pools of 4 fake replicas (separate processes) behind the real Envoy and the sidecar on its defaults plus
// RECOVERY_ADAPTIVE=true; streams arrive at a steady pace (normal traffic, the baseline); once all stream,
// one replica is SIGKILLed and its streams are continued on the other three.
// - fast pool (--prefill-ms): every prefill takes the same time, however many run: a continuation's first token
//   comes about as fast as a normal one: the limit opens past the fixed one.
// - slow pool (--prefill-ms-per-concurrent): a first token waits for every prefill the replica is running, so
//   the burst of re-prefills is slow: the limit closes below the fixed one.
// Directions and completeness only; the figures at scale come from the bench (docs/performance.md).
import { answerFor } from '../../tools/fake-engine/answer';
import { type ClientResult, chatBody, newRequestId, postChat } from '../support/client';
import { type ReplicaProcess, startReplicaProcesses, stopReplicaProcesses } from '../support/replica-processes';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream } from './helpers';

jest.setTimeout(120_000);

const STREAMS = 120;
// One stream every 100 ms (a replica gets one about every 400 ms): normal prefills rarely overlap, as in steady
// traffic, also on a loaded machine; the crash then puts about 10 re-prefills on each survivor at once.
const SPACING_MS = 100;
// 365 tokens at 40 ms = 14.6 s: every stream is still streaming when the last one has started (12 s).
const SIZE = { 'x-fake-answer-tokens': '5,360', 'x-fake-token-ms': '40' };
const size = { reasoning: 5, content: 360 };
// Per prefill in progress: large against the sidecar's own overhead on a shared machine (100-300 ms seen).
const SLOW_PREFILL_MS = 200;
// The fast pool's prefill: as long as a slow-pool prefill with two others, but it does not queue. The sidecar's
// own share of a recovery leg (100-250 ms more than a calm leg 1 here, during the crash burst) is then well
// inside RECOVERY_ADAPTIVE_TOLERANCE (1.5) x the baseline.
const FAST_PREFILL_MS = 500;

let replicas: ReplicaProcess[] = [];
let stack: TestStack | undefined;

afterEach(async () => {
  await stack?.stop();
  stack = undefined;
  await stopReplicaProcesses(replicas);
  replicas = [];
});

async function startPool(args: string[]): Promise<TestStack> {
  replicas = await startReplicaProcesses(4, args);
  stack = await startTestStack({
    routerTier: replicas.map((r) => ({ host: '127.0.0.1', port: r.port })),
    productionDefaults: true,
    env: { LOG_LEVEL: 'info', RECOVERY_ADAPTIVE: 'true' },
  });
  return stack;
}

async function metric(s: TestStack, name: string): Promise<number> {
  const text = await s.sidecar!.ctx.metrics.render();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

interface Crash {
  results: Array<{ id: string; body: any; r: ClientResult }>;
  limitBefore: number;
  limitAfter: number;
  baseline: number;
}

/** STREAMS streams, one every SPACING_MS; when all have bytes, SIGKILL replica 1; the limit before and after. */
async function crashUnderSteadyLoad(s: TestStack): Promise<Crash> {
  let started = 0;
  let allStarted!: () => void;
  const everyStreamStarted = new Promise<void>((r) => (allStarted = r));
  const runs = Array.from({ length: STREAMS }, async (_, k) => {
    await new Promise((r) => setTimeout(r, k * SPACING_MS));
    const body = chatBody({}, `adaptive admission, stream ${k}`);
    let first = true;
    const id = newRequestId(`adapt${k}`);
    const r = await postChat(s.url, body, { ...SIZE, 'x-request-id': id }, () => {
      if (first && ++started === STREAMS) allStarted();
      first = false;
    });
    if (first && ++started === STREAMS) allStarted();
    return { id, body, r };
  });
  await everyStreamStarted;
  const limitBefore = await metric(s, 'continuation_gateway_reprefill_limit');
  const baseline = await metric(s, 'continuation_gateway_first_token_baseline_seconds');
  replicas[1].signal('SIGKILL');
  const results = await Promise.all(runs);
  return { results, limitBefore, limitAfter: await metric(s, 'continuation_gateway_reprefill_limit'), baseline };
}

/**
 * A stream cut at the client (`other side closed`, 200, no error event): the failure names what the sidecar
 * recorded and what each Envoy hop logged for it (response flags), and prints Envoy's ext_proc counters. The cut
 * seen in CI (2 streams started 200 ms apart) never reached the sidecar: front_chat proxied them natively
 * (upstream = a replica) and that replica was the one killed. The one way found to get there is fail-open after
 * a health check of the busy sidecar timed out (1 s then, reproduced by test/e2e/sidecar-pause.e2e.test.ts,
 * 5 s now); these counters say whether that is what a next cut was.
 */
async function cutStreams(s: TestStack, c: Crash): Promise<string[]> {
  const cut = c.results.filter(({ r }) => r.transportError !== null || !r.done || r.finishReasons.length !== 1);
  if (cut.length === 0) return [];
  await new Promise((r) => setTimeout(r, 1500)); // Envoy flushes its access log every second
  const envoyLines = s.envoy.logs().split('\n');
  // Whether the sidecar was bypassed (fail-open: a failed health check, then Envoy proxied natively).
  const filter = 'ext_proc\\.health_check\\.|ext_proc\\.(failure_mode_allowed|streams_failed|streams_started)';
  const stats = await fetch(`${s.envoy.adminUrl}/stats?filter=${encodeURIComponent(filter)}`)
    .then((r) => r.text())
    .catch((e) => `stats unavailable: ${e}`);
  const own = (await s.sidecar!.ctx.metrics.render())
    .split('\n')
    .filter((l) => /^(continuation_gateway_requests_total|nodejs_eventloop_lag_max_seconds)/.test(l) && !/ 0$/.test(l));
  process.stderr.write(`[adaptive-admission] after a cut stream, Envoy:\n${stats}\nsidecar:\n${own.join('\n')}\n`);
  return cut.map(({ id, r }) => {
    const end = s.logs.find((l) => l.event === 'request_end' && l.request_id === id);
    const hops = envoyLines.filter((l) => l.includes(`rid=${id}`)).map((l) => l.replace(/^.*?\] /, ''));
    return `${id}: status ${r.status}, transport ${r.transportError}, done ${r.done}, sidecar ${end ? `${end.outcome}/${end.reason ?? '-'}` : 'no request_end'}, envoy: ${hops.join(' | ')}`;
  });
}

async function expectEveryStreamComplete(s: TestStack, c: Crash): Promise<void> {
  expect(await cutStreams(s, c)).toEqual([]);
  for (const { body, r } of c.results) {
    const a = answerFor(body.messages, size);
    expect({
      status: r.status,
      errors: r.errors.length,
      text: r.reasoning + r.content === a.reasoningTokens.join('') + a.contentTokens.join(''),
    }).toEqual({
      status: 200,
      errors: 0,
      text: true,
    });
    expectOneCompleteStream(r);
  }
}

const continued = (s: TestStack) => s.logs.filter((l) => l.decision === 'SUCCEEDED').length;

test('fast pool: after the crash the limit opens past the fixed one, every stream complete', async () => {
  const s = await startPool(['--prefill-ms', String(FAST_PREFILL_MS)]);
  const c = await crashUnderSteadyLoad(s);
  await expectEveryStreamComplete(s, c);
  expect(continued(s)).toBeGreaterThan(STREAMS / 8);
  expect(c.baseline).toBeGreaterThan(0);
  // Before any recovery the limit is the fixed one (20 % of the streams in progress).
  expect(c.limitBefore).toBe(Math.ceil(STREAMS * 0.2));
  expect(c.limitAfter).toBeGreaterThan(c.limitBefore);
  expect(c.limitAfter).toBeLessThanOrEqual(s.sidecar!.ctx.config.recoveryMaxConcurrent);
  expect(s.logs.filter((l) => l.decision === 'RECOVERY_REFUSED')).toEqual([]);
});

test('slow pool (first token grows with concurrent prefills): after the crash the limit closes, every stream complete', async () => {
  const s = await startPool(['--prefill-ms-per-concurrent', String(SLOW_PREFILL_MS)]);
  const c = await crashUnderSteadyLoad(s);
  await expectEveryStreamComplete(s, c);
  expect(continued(s)).toBeGreaterThan(STREAMS / 8);
  // The baseline is this pool's normal first token: at least one prefill's wait.
  expect(c.baseline).toBeGreaterThanOrEqual(SLOW_PREFILL_MS / 1000);
  expect(c.limitBefore).toBe(Math.ceil(STREAMS * 0.2));
  expect(c.limitAfter).toBeLessThan(c.limitBefore);
  expect(c.limitAfter).toBeGreaterThanOrEqual(s.sidecar!.ctx.config.recoveryMinConcurrent);
  expect(s.logs.filter((l) => l.decision === 'RECOVERY_REFUSED')).toEqual([]);
});
