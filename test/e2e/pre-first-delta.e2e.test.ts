// Issue 18 item 6 through the real Envoy: failures before the first delta. One deadline for the client's answer
// or an explicit error, whatever the number of attempts (FIRST_DELTA_DEADLINE_SECONDS); jittered exponential
// backoff between re-runs that honours the engine's Retry-After up to RETRY_AFTER_MAX_SECONDS; a 500/502/504
// before any byte re-run like a 503, under the same admission; a 429 passed through unchanged with its
// Retry-After; and the README's bound on engine requests per client request, reached and not exceeded.
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

jest.setTimeout(90_000);

const SIZE = { 'x-fake-answer-tokens': '10,20' };
/** Polls `cond` for up to 5 s (what the engine records arrives after the client's answer); fails if it never holds. */
async function until(cond: () => boolean): Promise<void> {
  const end = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`condition never held: ${cond}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The fake engine's error body for an injected status (tools/fake-engine/server.ts). */
const injected = (code: number) => expect.stringContaining(`fake-engine injected status ${code}`);

describe('one deadline (FIRST_DELTA_DEADLINE_SECONDS=3) whatever MAX_ATTEMPTS allows', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      env: { FIRST_DELTA_DEADLINE_SECONDS: '3', MAX_ATTEMPTS: '10', UPSTREAM_HEADERS_TIMEOUT_SECONDS: '30', RETRY_BACKOFF_SECONDS: '0.1' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('an engine that never answers: 504 at the deadline, not after the 30 s headers timeout (x attempts)', async () => {
    const id = newRequestId('hang');
    const t0 = Date.now();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'hang' });
    const elapsed = Date.now() - t0;
    expect(r.status).toBe(504);
    expect(r.headers['retry-after']).toBeDefined();
    expect(JSON.parse(r.raw).error).toMatchObject({
      code: 'upstream_timeout',
      request_id: id,
      retryable: true,
      reason: 'first-delta-deadline:deadline-exceeded',
    });
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'failed-before-first-delta', attempt: 1 });
    // The gateway gave up at its deadline: no earlier, and well before the per-attempt headers timeout.
    expect(elapsed).toBeGreaterThanOrEqual(3000);
    expect(end.total_ms).toBeGreaterThanOrEqual(3000);
    expect(end.total_ms).toBeLessThan(30_000);
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(1);
    await until(() => seen[0].clientAborted); // the attempt was cancelled, so the replica frees its slot
  });
});

describe('one deadline (3 s) over attempts that each take FIRST_DELTA_TIMEOUT_SECONDS=1.2 to fail', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({
      env: { FIRST_DELTA_DEADLINE_SECONDS: '3', FIRST_DELTA_TIMEOUT_SECONDS: '1.2', MAX_ATTEMPTS: '10', RETRY_BACKOFF_SECONDS: '0.1' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('re-run while the deadline leaves room, then 504: never the 10 attempts (12 s) MAX_ATTEMPTS allows', async () => {
    const id = newRequestId('slowfail');
    // Each attempt: headers and the role chunk, then a prefill that never produces a token.
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': Array(10).fill('stall@0').join(';') });
    expect(r.status).toBe(504);
    expect(JSON.parse(r.raw).error.code).toBe('upstream_timeout');
    const end = await stack.waitForEnd(id);
    expect(end.total_ms).toBeGreaterThanOrEqual(3000);
    expect(end.attempt).toBeGreaterThanOrEqual(2);
    expect(end.attempt).toBeLessThan(10);
    expect(stack.records({ request_id: id, decision: 'RETRY' }).map((x) => x.failure)).toEqual(
      Array(end.attempt - 1).fill('first-delta-timeout'),
    );
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(end.attempt);
    // Every attempt was cancelled (the last one's abort crosses Envoy after the client has its 504).
    await until(() => seen.every((s) => s.clientAborted));
  });
});

describe('backoff and Retry-After (RETRY_BACKOFF_SECONDS=0.4, RETRY_AFTER_MAX_SECONDS=5)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '3', RETRY_BACKOFF_SECONDS: '0.4', RETRY_AFTER_MAX_SECONDS: '5' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('two 503s: each re-run waits at least half its doubling step (0.2 s, then 0.4 s), jittered', async () => {
    const gaps: number[][] = [];
    const waits: number[][] = [];
    for (let k = 0; k < 3; k++) {
      resetFaults();
      const id = newRequestId('backoff');
      const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'status@503;status@503;-' });
      expectOneCompleteStream(r);
      const seen = seenFor(stack, id);
      expect(seen.map((s) => s.headers['x-request-id'])).toEqual([id, `${id}-a2`, `${id}-a3`]);
      gaps.push([seen[1].startedAt - seen[0].startedAt, seen[2].startedAt - seen[1].startedAt]);
      const retries = stack.records({ request_id: id, decision: 'RETRY' });
      waits.push(retries.map((x) => x.backoff_ms));
      expect(retries.map((x) => x.failure)).toEqual(['overloaded', 'overloaded']);
      expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-retry', attempt: 3 });
    }
    for (const [w1, w2] of waits) {
      expect(w1).toBeGreaterThanOrEqual(200);
      expect(w1).toBeLessThanOrEqual(400);
      expect(w2).toBeGreaterThanOrEqual(400);
      expect(w2).toBeLessThanOrEqual(800);
    }
    for (const [g1, g2] of gaps) {
      expect(g1).toBeGreaterThanOrEqual(200);
      expect(g2).toBeGreaterThanOrEqual(400);
    }
    // Jitter: three requests failed the same way did not all wait the same.
    expect(new Set(waits.map((w) => w.join(','))).size).toBeGreaterThan(1);
  });

  test('a 503 with Retry-After: 2 is re-run no sooner than the engine asked, then completes', async () => {
    const id = newRequestId('ra');
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'status@503:2;-' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(ref.content);
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(2);
    expect(seen[1].startedAt - seen[0].startedAt).toBeGreaterThanOrEqual(2000);
    expect(stack.records({ request_id: id, decision: 'RETRY' })).toEqual([
      expect.objectContaining({ failure: 'overloaded', retry_after_ms: 2000, backoff_ms: 2000 }),
    ]);
  });

  test("a Retry-After above the bound: no re-run, the engine's 503 reaches the client unchanged with its Retry-After", async () => {
    const id = newRequestId('ra-long');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'status@503:120;-' });
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('120');
    expect(r.raw).toEqual(injected(503));
    expect(seenFor(stack, id)).toHaveLength(1);
    expect(await stack.waitForEnd(id)).toMatchObject({ reason: 'overloaded:retry-after-too-long' });
  });

  test('a 429 every attempt gets passes through unchanged with its Retry-After: never re-run by the sidecar', async () => {
    const id = newRequestId('429');
    // Envoy's egress sends a refused leg to another replica (test/e2e/rate-limited.e2e.test.ts); a Retry-After
    // above RETRY_AFTER_MAX_SECONDS is not waited for, so its three attempts come at once, each refused.
    const fault = 'status@429:70;status@429:70;status@429:70';
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBe('70');
    expect(r.headers['content-type']).toBe('application/json');
    expect(JSON.parse(r.raw)).toEqual({
      error: expect.objectContaining({ message: 'fake-engine injected status 429', code: 429 }),
    });
    // Envoy's three attempts of the one leg the sidecar sent.
    expect(seenFor(stack, id).map((s) => s.headers['x-request-id'])).toEqual([id, id, id]);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'passed-through-status', upstream_status: 429, legs: 1 });
  });
});

describe('500, 502, 504 before any byte: re-run like a 503', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([500, 502, 504])('%i then a healthy attempt: one complete answer, the same text as without the failure', async (code) => {
    const id = newRequestId(`s${code}`);
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': `status@${code};-` });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    expect(seenFor(stack, id).map((s) => s.headers['x-request-id'])).toEqual([id, `${id}-a2`]);
    expect(stack.records({ request_id: id, decision: 'RETRY' })).toEqual([
      expect.objectContaining({ failure: 'server-error', detail: `status-${code}` }),
    ]);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-retry', attempt: 2 });
  });

  test("500 on every attempt: the engine's last 500 reaches the client unchanged", async () => {
    const id = newRequestId('s500x2');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'status@500;status@500' });
    expect(r.status).toBe(500);
    expect(r.raw).toEqual(injected(500));
    expect(seenFor(stack, id)).toHaveLength(2);
    expect(await stack.waitForEnd(id)).toMatchObject({ reason: 'server-error:attempts-exhausted' });
  });

  test('the engine requests one client request can cause: 2 x (MAX_ATTEMPTS + MAX_CONTINUATIONS) = 6, reached and no more', async () => {
    // Every leg lost once to a terminated connection (Envoy's 503 UC, re-sent at once by the sidecar): leg 1's
    // attempt 1 twice (its re-send too), attempt 2 once more then served until a crash at token 5, and the
    // continuation once more then served.
    const id = newRequestId('bound');
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const script = 'crash-before-headers;crash-before-headers;crash-before-headers;crash@5;crash-before-headers;-';
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': script });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    expect(seenFor(stack, id).map((s) => s.headers['x-request-id'])).toEqual([id, id, `${id}-a2`, `${id}-a2`, `${id}-c1`, `${id}-c1`]);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', attempt: 2 });
  });
});

describe('the same admission: a 500 re-run waits for a re-prefill slot like a 503', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // No re-prefill slot at all, and a short wait for one: every re-run is refused by admission.
    stack = await startTestStack({
      env: { RECOVERY_MAX_CONCURRENT: '0', RECOVERY_MIN_CONCURRENT: '0', RECOVERY_QUEUE_TIMEOUT_SECONDS: '0.5', MAX_ATTEMPTS: '3' },
    });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test.each([
    [500, 'server-error'],
    [503, 'overloaded'],
  ])('%i: the re-run is refused by admission (queue timeout): 503 recovery_unavailable, one engine request', async (code, failure) => {
    const id = newRequestId(`adm${code}`);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': `status@${code};-` });
    expect(r.status).toBe(503);
    expect(JSON.parse(r.raw).error).toMatchObject({ code: 'recovery_unavailable', reason: `${failure}:recovery-queue-timeout` });
    expect(seenFor(stack, id)).toHaveLength(1);
    expect(stack.records({ request_id: id, decision: 'RECOVERY_REFUSED' })).toEqual([
      expect.objectContaining({ reason: 'queue-timeout', phase: 'prefill' }),
    ]);
  });
});

describe("a give-up names every attempt's cause (issue 27)", () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '2', RETRY_BACKOFF_SECONDS: '0' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('a clean, empty 200, then a reset: 502 whose detail names both, the FAILED record lists them in order', async () => {
    const id = newRequestId('empty-then-reset');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'empty;crash@0' });
    expect(r.status).toBe(502);
    const error = JSON.parse(r.raw).error;
    expect(error).toMatchObject({
      code: 'upstream_failed',
      request_id: id,
      retryable: true,
      reason: 'reset:attempts-exhausted',
      detail: 'no response after 2 attempts: empty answer, reset',
    });
    expect(error.message).toContain('no response after 2 attempts: empty answer, reset');
    expect(seenFor(stack, id)).toHaveLength(2);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'failed-before-first-delta', attempt: 2, causes: ['empty-answer', 'reset'] });
    expect(stack.records({ request_id: id, decision: 'FAILED' })).toEqual([
      expect.objectContaining({ reason: 'reset:attempts-exhausted', causes: ['empty-answer', 'reset'], status: 502 }),
    ]);
  });

  test('an empty 200, then a 200 without an event stream: the FAILED record names the earlier cause and both attempts', async () => {
    const id = newRequestId('empty-then-plain');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'empty;plain' });
    expect(r.status).toBe(502);
    expect(JSON.parse(r.raw).error).toMatchObject({ code: 'upstream_failed', reason: 'not-event-stream', request_id: id });
    expect(seenFor(stack, id)).toHaveLength(2);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'failed-before-first-delta', attempt: 2, causes: ['empty-answer'] });
    expect(stack.records({ request_id: id, decision: 'FAILED' })).toEqual([
      expect.objectContaining({ reason: 'not-event-stream', status: 200, attempts: 2, causes: ['empty-answer'] }),
    ]);
  });
});
