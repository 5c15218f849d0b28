// The recovery brake cannot be opened by a client (issue 19, item 5), through the real Envoy: requests whose
// oversized header makes every replica reset them before the first token (fake-engine fault
// reject-headers@N) fail on each attempt, yet leave the brake closed, so other clients' crashed streams are
// still continued; a pool that is really dying (replicas resetting distinct requests, replicas gone) still
// opens it.
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '20,30' };
/** The replicas reset any request whose headers exceed 8000 bytes; the bad client's carry 9000 more. */
const OVERSIZED = { 'x-fake-fault': 'reject-headers@8000', 'x-client-blob': 'a'.repeat(9000) };
// A long open time: on the old code the brake, once open, is still open when the good client crashes.
const ENV = { RECOVERY_BRAKE_SECONDS: '60', RECOVERY_BRAKE_WINDOW_SECONDS: '60', RETRY_BACKOFF_SECONDS: '0.05' };

async function badRequests(stack: TestStack, n: number, headers: Record<string, string>, distinctBodies: boolean): Promise<void> {
  for (let i = 0; i < n; i++) {
    const id = newRequestId('bad');
    const body = chatBody({}, distinctBodies ? `bad request ${i}` : 'the same bad request');
    const r = await postChat(stack.url, body, { ...SIZE, ...OVERSIZED, ...headers, 'x-request-id': id });
    // Reset on both attempts before any byte: the client gets an HTTP error, not a stream.
    expect(r.status).toBe(502);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'failed-before-first-delta', attempt: 2 });
  }
}

async function rescued(stack: TestStack): Promise<void> {
  const id = newRequestId('good');
  const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@10' });
  expectOneCompleteStream(r);
  expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
}

describe('one client cannot open the brake', () => {
  let stack: TestStack;
  beforeEach(async () => {
    resetFaults();
    stack = await startTestStack({ env: ENV });
  });
  afterEach(async () => stack?.stop());

  test('the same request sent 8 times, reset on every replica: the brake stays closed, another client is rescued', async () => {
    await badRequests(stack, 8, {}, false);
    expect(stack.records({ decision: 'BRAKE_OPEN' })).toHaveLength(0);
    // Each retry failed as its first attempt had: 8 repeats, counted as one source.
    const metrics = await (await fetch(`http://127.0.0.1:${stack.sidecar?.adminPort}/metrics`)).text();
    expect(metrics).toMatch(/^continuation_gateway_recovery_failures_total\{evidence="repeat"\} 8$/m);
    await rescued(stack);
  });

  test('8 different requests from one forwarded client address: the brake stays closed, another client is rescued', async () => {
    await badRequests(stack, 8, { 'x-forwarded-for': '198.51.100.9' }, true);
    expect(stack.records({ decision: 'BRAKE_OPEN' })).toHaveLength(0);
    await rescued(stack);
  });
});

describe('a dying pool still opens it', () => {
  let stack: TestStack;
  beforeEach(async () => {
    resetFaults();
    stack = await startTestStack({ env: ENV });
  });
  afterEach(async () => stack?.stop());

  test('every replica resets distinct requests: the brake opens, later requests get 503 recovery-brake-open', async () => {
    const answers: number[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await postChat(stack.url, chatBody({}, `distinct request ${i}`), { ...SIZE, 'x-fake-fault': 'reject-headers@0' });
      answers.push(r.status);
    }
    expect(stack.records({ decision: 'BRAKE_OPEN' })).toHaveLength(1);
    // The first five were re-run and failed; from the brake on, a re-run is refused at once.
    expect(answers.slice(0, 5)).toEqual([502, 502, 502, 502, 502]);
    const r = await postChat(stack.url, chatBody({}, 'after the brake'), { ...SIZE, 'x-fake-fault': 'reject-headers@0' });
    expect(r.status).toBe(503);
    expect(JSON.parse(r.raw).error.reason).toBe('reset:recovery-brake-open');
  });

  test('the replicas are gone mid-answer (connections refused): the continuations fail and the brake opens', async () => {
    const streams = Array.from({ length: 6 }, (_, i) => {
      let started!: () => void;
      const firstBytes = new Promise<void>((r) => (started = r));
      const done = postChat(stack.url, chatBody({}, `in flight ${i}`), { 'x-fake-answer-tokens': '0,400', 'x-fake-token-ms': '20' }, () =>
        started(),
      );
      return { firstBytes, done };
    });
    await Promise.all(streams.map((s) => s.firstBytes));
    await Promise.all(stack.engines.map((e) => e.close()));
    const results = await Promise.all(streams.map((s) => s.done));
    for (const r of results) expect(r.errors).toHaveLength(1);
    expect(stack.records({ decision: 'BRAKE_OPEN' })).toHaveLength(1);
    const reasons = results.map((r) => r.errors[0].reason);
    expect(reasons.some((x) => x === 'recovery-brake-open' || /^leg2-/.test(x))).toBe(true);
  });
});
