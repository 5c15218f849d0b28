// Issue 11: a replica crash never hits one stream, it hits every stream the replica serves at the same moment.
// Four fake replicas run as separate processes behind the real Envoy and the sidecar with its DEFAULT settings
// (admission, brake, timers); 200 concurrent streams; then one replica is SIGKILLed, SIGSTOPped, or falls over
// into 503s, or most or all of the pool dies. What every client received is checked against the answer the
// engine gives uninterrupted (the fake engine's answer is a pure function of the conversation).

import { REQUEST_OUTCOMES } from '../../src/obs/metric-labels';
import { reprefillLimit } from '../../src/recovery/admission-policy';
import { answerFor } from '../../tools/fake-engine/answer';
import { type ClientResult, chatBody, newRequestId, postChat } from '../support/client';
import { type ReplicaProcess, startReplicaProcesses, stopReplicaProcesses } from '../support/replica-processes';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream } from './helpers';

jest.setTimeout(120_000);

const STREAMS = 200;
// 45 tokens at 50 ms: long enough that a failure lands mid-answer, light enough for two shared cores.
// 4.75 s an answer: long enough that every stream is still streaming when the fault comes, also on a loaded
// machine where starting 200 streams takes seconds (a fresh-clone run under other load finished 159 of 200
// before the kill with 2.25 s answers, and the cases saw nothing to recover).
const SIZE = { 'x-fake-answer-tokens': '5,90', 'x-fake-token-ms': '50' };
const size = { reasoning: 5, content: 90 };

let replicas: ReplicaProcess[] = [];
let stack: TestStack | undefined;

async function startChaos(n = 4): Promise<TestStack> {
  replicas = await startReplicaProcesses(n);
  stack = await startTestStack({
    routerTier: replicas.map((r) => ({ host: '127.0.0.1', port: r.port })),
    productionDefaults: true,
    env: { LOG_LEVEL: 'info' },
  });
  return stack;
}

afterEach(async () => {
  await stack?.stop();
  stack = undefined;
  await stopReplicaProcesses(replicas);
  replicas = [];
});

interface Run {
  id: string;
  body: any;
  r: ClientResult;
  ms: number;
}

/**
 * Starts `n` streams with distinct prompts, waits until every one has received bytes, runs `fault`, and
 * resolves with what each client received.
 */
async function burst(s: TestStack, n: number, fault: () => void | Promise<void>): Promise<Run[]> {
  let started = 0;
  let allStarted!: () => void;
  const everyStreamStarted = new Promise<void>((r) => (allStarted = r));
  const runs = Array.from({ length: n }, async (_, k): Promise<Run> => {
    const id = newRequestId(`crash${k}`);
    const body = chatBody({}, `crash under load, stream ${k}`);
    const t0 = Date.now();
    let first = true;
    const r = await postChat(s.url, body, { ...SIZE, 'x-request-id': id }, () => {
      if (first && ++started === n) allStarted();
      first = false;
    });
    if (first && ++started === n) allStarted();
    return { id, body, r, ms: Date.now() - t0 };
  });
  await everyStreamStarted;
  await fault();
  return Promise.all(runs);
}

function expectedAnswer(body: any): string {
  const a = answerFor(body.messages, size);
  return a.reasoningTokens.join('') + a.contentTokens.join('');
}

/** Every stream complete: the uninterrupted text, one id, one finish_reason, [DONE]. */
function expectEveryStreamComplete(runs: Run[]): void {
  const broken = runs.filter(
    ({ r, body }) =>
      r.status !== 200 || r.errors.length > 0 || r.finishReasons.length !== 1 || r.reasoning + r.content !== expectedAnswer(body),
  );
  expect(
    broken.map(({ id, r }) => ({
      id,
      status: r.status,
      errors: r.errors.map((e) => e.reason),
      finish: r.finishReasons,
      transport: r.transportError,
    })),
  ).toEqual([]);
  for (const { r } of runs) expectOneCompleteStream(r);
}

/** The explicit outcomes a client may get when a pool cannot serve: never a silent truncation or a bare reset. */
function expectExplicitEnd(run: Run): 'complete' | 'interrupted' | 'http-error' {
  const { r, body } = run;
  expect(r.transportError).toBeNull();
  if (r.status === 200 && r.finishReasons.length === 1) {
    expect(r.reasoning + r.content).toBe(expectedAnswer(body));
    return 'complete';
  }
  if (r.status === 200) {
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0].code).toBe('upstream_decode_interrupted');
    expect(r.done).toBe(true);
    // Whatever was delivered is a prefix of the real answer.
    expect(expectedAnswer(body).startsWith(r.reasoning + r.content)).toBe(true);
    return 'interrupted';
  }
  expect(r.status).toBeGreaterThanOrEqual(429);
  expect(JSON.parse(r.raw).error.retryable).toBe(true);
  return 'http-error';
}

async function sidecarMetric(s: TestStack, name: string): Promise<number> {
  const text = await s.sidecar!.ctx.metrics.render();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

/** The sum of every series `name` matches (request_outcomes_total over its `continuation` label). */
async function sidecarMetricSum(s: TestStack, name: string): Promise<number> {
  const text = await s.sidecar!.ctx.metrics.render();
  const all = [...text.matchAll(new RegExp(`^${name} (\\S+)$`, 'gm'))];
  return all.length ? all.reduce((a, m) => a + Number(m[1]), 0) : NaN;
}

/**
 * continuation_gateway_request_outcomes_total equals the request_end records, outcome by outcome (issue 21: the counter an
 * operator alerts on tells what the logs tell).
 */
async function expectOutcomeCounterMatchesRecords(s: TestStack, runs: Run[]): Promise<void> {
  await Promise.all(runs.map(({ id }) => s.waitForEnd(id)));
  const records: Record<string, number> = {};
  for (const l of s.logs.filter((x) => x.event === 'request_end')) records[l.outcome] = (records[l.outcome] ?? 0) + 1;
  const counted: Record<string, number> = {};
  for (const outcome of new Set([...REQUEST_OUTCOMES, ...Object.keys(records)]))
    counted[outcome] = await sidecarMetricSum(
      s,
      `continuation_gateway_request_outcomes_total\\{outcome="${outcome}",continuation="[a-z]+"\\}`,
    );
  expect(counted).toEqual(Object.fromEntries(Object.keys(counted).map((o) => [o, records[o] ?? 0])));
  expect(Object.values(records).reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(runs.length);
}

const countDecisions = (s: TestStack, decision: string) => s.logs.filter((l) => l.decision === decision).length;

/** The most re-prefills the default settings allow with STREAMS streams in progress (the limit follows them). */
function limitAtFullLoad(s: TestStack): number {
  const c = s.sidecar!.ctx.config;
  return reprefillLimit(STREAMS, {
    maxConcurrent: c.recoveryMaxConcurrent,
    percent: c.recoveryBudgetPercent,
    floor: c.recoveryMinConcurrent,
  });
}

test(`SIGKILL of one of 4 replicas under ${STREAMS} streams: every stream completes, the text identical to an uninterrupted answer`, async () => {
  const s = await startChaos();
  const runs = await burst(s, STREAMS, () => replicas[1].signal('SIGKILL'));
  expectEveryStreamComplete(runs);
  // The crash hit the streams of one replica (about a quarter): each continued once, none refused.
  const continued = countDecisions(s, 'SUCCEEDED');
  expect(continued).toBeGreaterThan(STREAMS / 8);
  expect(countDecisions(s, 'RECOVERY_REFUSED')).toBe(0);
  expect(await sidecarMetric(s, 'continuation_gateway_reprefills_in_flight_peak')).toBeLessThanOrEqual(limitAtFullLoad(s));
  expect(s.logs.filter((l) => l.decision === 'ATTEMPT' && l.leg === 2)).toHaveLength(continued);
  await expectOutcomeCounterMatchesRecords(s, runs);
});

test(`SIGSTOP (hung replica) of one of 4 under ${STREAMS} streams: stalls are detected, continued on the others, every stream completes`, async () => {
  const s = await startChaos();
  const runs = await burst(s, STREAMS, () => replicas[2].signal('SIGSTOP'));
  expectEveryStreamComplete(runs);
  const stalled = s.logs.filter((l) => l.decision === 'TRIGGERED' && l.failure === 'stall');
  expect(stalled.length).toBeGreaterThan(STREAMS / 8);
  // A hung replica still accepts connections: only the avoid-host header keeps the continuation off it.
  expect(countDecisions(s, 'SUCCEEDED')).toBe(stalled.length);
  // STALL_IDLE_TIMEOUT_SECONDS (20) plus the continuation: far inside MAX_STALL_SECONDS.
  expect(Math.max(...runs.map((r) => r.ms))).toBeLessThan(60_000);
});

test(`a replica that falls over and answers 503 for 3 s, under ${STREAMS} streams: every stream completes`, async () => {
  const s = await startChaos();
  const runs = await burst(s, STREAMS, () => replicas[0].signal('SIGUSR1'));
  expectEveryStreamComplete(runs);
  expect(countDecisions(s, 'SUCCEEDED')).toBeGreaterThan(STREAMS / 8);
  expect(countDecisions(s, 'RECOVERY_REFUSED')).toBe(0);
});

test(`3 of 4 replicas killed under ${STREAMS} streams: every stream completes or ends explicitly, re-prefills never above the limit`, async () => {
  const s = await startChaos();
  const runs = await burst(s, STREAMS, () => {
    for (const r of replicas.slice(0, 3)) r.signal('SIGKILL');
  });
  const outcomes = runs.map(expectExplicitEnd);
  // The survivor serves its own streams and takes over the others as far as its capacity and the brake allow.
  expect(outcomes.filter((o) => o === 'complete').length).toBeGreaterThanOrEqual(STREAMS / 4);
  const peak = await sidecarMetric(s, 'continuation_gateway_reprefills_in_flight_peak');
  expect(peak).toBeGreaterThan(0);
  expect(peak).toBeLessThanOrEqual(limitAtFullLoad(s));
  expect(await sidecarMetric(s, 'continuation_gateway_reprefills_in_flight')).toBe(0);
  expect(await sidecarMetric(s, 'continuation_gateway_recoveries_waiting')).toBe(0);
  expect(Math.max(...runs.map((r) => r.ms))).toBeLessThan(60_000);
  await expectOutcomeCounterMatchesRecords(s, runs);
});

test(`all 4 replicas killed under ${STREAMS} streams: every stream ends explicitly within seconds, and the engine requests stay bounded`, async () => {
  const s = await startChaos();
  let killedAt = 0;
  const runs = await burst(s, STREAMS, () => {
    killedAt = Date.now();
    for (const r of replicas) r.signal('SIGKILL');
  });
  const ended = Date.now();
  const outcomes = runs.map(expectExplicitEnd);
  expect(outcomes.filter((o) => o === 'complete')).toHaveLength(0);
  expect(ended - killedAt).toBeLessThan(10_000);
  // The brake opened: recoveries stopped being tried, the rest ended at once with the explicit outcome.
  expect(countDecisions(s, 'BRAKE_OPEN')).toBeGreaterThanOrEqual(1);
  expect(s.logs.filter((l) => l.decision === 'RECOVERY_REFUSED' && l.reason === 'brake-open').length).toBeGreaterThan(0);
  // At most one recovery leg per stream (leg1 + leg2), and far fewer: most never started.
  const legs = await sidecarMetric(s, 'continuation_gateway_legs_total');
  expect(legs).toBeLessThanOrEqual(2 * STREAMS);
  expect(legs - STREAMS).toBeLessThanOrEqual(STREAMS / 2);
  // Each leg is at most 1 + num_retries (2) connection attempts in Envoy, and only for connect failures.
  const stats = await (await fetch(`${s.envoy.adminUrl}/stats?filter=^cluster\\.router_tier\\.upstream_rq_retry$`)).text();
  const retries = Number(/upstream_rq_retry: (\d+)/.exec(stats)?.[1] ?? NaN);
  expect(retries).toBeLessThanOrEqual(2 * (legs - STREAMS));
});

test('4 streams, 2 failing together (2 in-process replicas, default settings): both rescued', async () => {
  stack = await startTestStack({ productionDefaults: true, env: { LOG_LEVEL: 'info' } });
  // Fault scripts are keyed by their text: two different ones so that both streams crash.
  const faults = ['crash@12', '-', 'crash@13', '-'];
  const runs = await Promise.all(
    faults.map(async (fault, k) => {
      const body = chatBody({}, `two of four ${k}`);
      const r = await postChat(stack!.url, body, { ...SIZE, 'x-request-id': newRequestId('2of4'), 'x-fake-fault': fault });
      return { id: '', body, r, ms: 0 };
    }),
  );
  expectEveryStreamComplete(runs);
  expect(countDecisions(stack, 'SUCCEEDED')).toBe(2);
});
