// A replica's 429 before the first token: Envoy's egress route sends the leg to another replica after the replica's
// Retry-After (tools/stack/envoy-config.ts egressListener's retry_policy), and the client gets the stream; only when
// every attempt is refused does the 429 reach the client, unchanged (status, Retry-After, body). Through the real
// Envoy, two fake replicas; the 429 is the fake engine's `status@429:N` (N: its Retry-After in seconds).
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, completionsBody, newRequestId, postChat, postCompletions } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor } from './helpers';

let stack: TestStack;

/** One counter of the egress cluster (Envoy's admin /stats). */
async function routerStat(name: string): Promise<number> {
  const text = await (await fetch(`${stack.envoy.adminUrl}/stats?filter=^cluster\\.router_tier\\.${name}$`)).text();
  const m = /: (\d+)/.exec(text);
  return m ? Number(m[1]) : 0;
}

beforeAll(async () => {
  resetFaults();
  stack = await startTestStack({ replicas: 2, env: { CONTINUATION_MODEL: 'generic-test', RETRY_AFTER_MAX_SECONDS: '3' } });
});
afterAll(async () => {
  await stack?.stop();
});

test('a 429 with Retry-After on one replica: Envoy waits it out and the other replica answers; the client gets the stream', async () => {
  const before = await routerStat('upstream_rq_retry_backoff_ratelimited');
  const id = newRequestId('rl-one');
  const r = await postChat(stack.url, chatBody({}, 'rate limited once'), { 'x-request-id': id, 'x-fake-fault': 'status@429:1' });
  expectOneCompleteStream(r);
  expect(r.finishReasons).toEqual(['stop']);
  const seen = seenFor(stack, id);
  // One leg of the sidecar (no re-run of its own), two upstream requests: the refusal, then another replica.
  expect(seen.map((s) => [s.fault ?? null, s.headers['x-request-id']])).toEqual([
    ['status@429:1', id],
    [null, id],
  ]);
  expect(seen[1].replica).not.toBe(seen[0].replica);
  // Retry-After honoured: the retry left no sooner than one second after the refusal (Envoy's rate-limited back-off
  // waits between the interval and 1.5 times it), and Envoy counted it as such.
  expect(seen[1].startedAt - seen[0].startedAt).toBeGreaterThanOrEqual(1000 - 20);
  expect((await routerStat('upstream_rq_retry_backoff_ratelimited')) - before).toBe(1);
  expect(stack.records({ request_id: id, decision: 'RETRY' })).toEqual([]);
});

test('the same for a completions stream', async () => {
  const id = newRequestId('rl-cmpl');
  // A script of its own (steps are counted per header value): the refusal, then no fault.
  const fault = 'status@429:1;-';
  const r = await postCompletions(stack.url, completionsBody({ max_tokens: 100 }), { 'x-request-id': id, 'x-fake-fault': fault });
  expect([r.status, r.errors, r.finishReasons, r.done]).toEqual([200, [], ['stop'], true]);
  expect(seenFor(stack, id).map((s) => s.fault ?? null)).toEqual(['status@429:1', null]);
});

test('every attempt refused: the last 429 reaches the client unchanged, with its Retry-After', async () => {
  const id = newRequestId('rl-all');
  const fault = 'status@429:1;status@429:1;status@429:1';
  const r = await postChat(stack.url, chatBody({}, 'rate limited everywhere'), { 'x-request-id': id, 'x-fake-fault': fault });
  expect(r.status).toBe(429);
  expect(r.headers['retry-after']).toBe('1');
  expect(JSON.parse(r.raw)).toEqual({ error: { message: 'fake-engine injected status 429', type: 'InjectedError', code: 429 } });
  const seen = seenFor(stack, id);
  // Envoy's three attempts (num_retries 2), both replicas among them; the sidecar sent one leg and re-ran nothing.
  expect(seen).toHaveLength(3);
  expect(new Set(seen.map((s) => s.replica)).size).toBe(2);
  expect(stack.records({ request_id: id, decision: 'RETRY' })).toEqual([]);
});

test('a Retry-After above RETRY_AFTER_MAX_SECONDS is not waited for: the other replica is asked after the ordinary back-off', async () => {
  const before = await routerStat('upstream_rq_retry_backoff_ratelimited');
  const retries = await routerStat('upstream_rq_retry');
  const id = newRequestId('rl-long');
  const r = await postChat(stack.url, chatBody({}, 'rate limited for an hour'), { 'x-request-id': id, 'x-fake-fault': 'status@429:3600' });
  expectOneCompleteStream(r);
  expect(seenFor(stack, id).map((s) => s.fault ?? null)).toEqual(['status@429:3600', null]);
  expect((await routerStat('upstream_rq_retry')) - retries).toBe(1);
  expect((await routerStat('upstream_rq_retry_backoff_ratelimited')) - before).toBe(0);
});
