// A client that goes away must free its replica at once, whatever the leg is doing: streaming, silent
// (a stalled replica, STALL_IDLE_TIMEOUT_SECONDS at its default 20 s) or still in prefill. The engine sees
// its connection closed well within a second, and the request ends as client-disconnected.
import { request } from 'undici';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { seenFor } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '10,40' };
let stack: TestStack;

beforeAll(async () => {
  stack = await startTestStack({ productionDefaults: true });
});
afterAll(async () => stack?.stop());
beforeEach(() => resetFaults());

async function disconnectAfterFirstBytes(
  headers: Record<string, string>,
  waitForBytes: boolean,
  thenWaitMs = 0,
): Promise<{ id: string; abortedAt: number }> {
  const id = newRequestId('disconnect');
  const ac = new AbortController();
  const pending = request(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id, ...SIZE, ...headers },
    body: JSON.stringify(chatBody()),
    signal: ac.signal,
  });
  if (waitForBytes) {
    const res = await pending;
    await res.body[Symbol.asyncIterator]().next();
    await new Promise((r) => setTimeout(r, thenWaitMs));
  } else {
    pending.catch(() => undefined);
    // The engine has the request (it is in prefill) before the client leaves.
    const until = Date.now() + 5000;
    while (seenFor(stack, id).length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  }
  const abortedAt = Date.now();
  ac.abort();
  return { id, abortedAt };
}

async function expectReplicaFreedAtOnce(id: string, abortedAt: number): Promise<void> {
  const until = Date.now() + 3000;
  while (!seenFor(stack, id)[0]?.clientAborted && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  const seen = seenFor(stack, id);
  expect(seen).toHaveLength(1);
  expect(seen[0].clientAborted).toBe(true);
  expect(seen[0].closedAt! - abortedAt).toBeLessThan(1000);
  expect((await stack.waitForEnd(id)).outcome).toBe('client-disconnected');
}

test('while the answer streams', async () => {
  const { id, abortedAt } = await disconnectAfterFirstBytes({ 'x-fake-token-ms': '50' }, true);
  await expectReplicaFreedAtOnce(id, abortedAt);
});

test('while the replica is silent (stalled mid-answer, default 20 s stall timer)', async () => {
  // The replica goes silent after 12 tokens (~60 ms); the client leaves 300 ms later.
  const { id, abortedAt } = await disconnectAfterFirstBytes({ 'x-fake-token-ms': '5', 'x-fake-fault': 'stall@12' }, true, 300);
  await expectReplicaFreedAtOnce(id, abortedAt);
});

test('while the replica is still in prefill (nothing sent to the client yet)', async () => {
  const { id, abortedAt } = await disconnectAfterFirstBytes({ 'x-fake-fault': 'slow@10000' }, false);
  await expectReplicaFreedAtOnce(id, abortedAt);
});
