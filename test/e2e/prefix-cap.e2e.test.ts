// MAX_CONTINUATION_PREFIX_BYTES through the real Envoy (issue 19, item 3): a stream whose delivered text is
// past the cap is relayed to its end unchanged, and a crash after that ends with the interruption event
// `continuation-prefix-too-large` (no continuation leg is sent); under the cap a crash is still continued.

import { estimateTokens } from '../../src/recovery/token-estimate';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

/** About 5 bytes a token: 400 content tokens are about 2 KB, past the 1 KB cap below from about token 200. */
const SIZE = { 'x-fake-answer-tokens': '0,400' };
const CAP = 1024;

describe(`MAX_CONTINUATION_PREFIX_BYTES=${CAP}, MAX_CONTINUATIONS=2`, () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_CONTINUATION_PREFIX_BYTES: String(CAP), MAX_CONTINUATIONS: '2' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('under the cap: a crash is continued, the answer identical to an uninterrupted one', async () => {
    const body = chatBody();
    const ref = await uninterrupted(stack, body, SIZE);
    const id = newRequestId('under-cap');
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@30' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(ref.content);
    // Leg 2's text then carried the stream past the cap: that changes nothing for a stream that ends well.
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs: 2, prefix_capped: true });
  });

  test('past the cap: relayed unchanged up to the crash, then the interruption event continuation-prefix-too-large', async () => {
    const body = chatBody();
    const ref = await uninterrupted(stack, body, SIZE);
    const id = newRequestId('past-cap');
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@350' });
    const e = expectInterruption(r, 'continuation-prefix-too-large');
    expect(Buffer.byteLength(r.content)).toBeGreaterThan(CAP);
    // Everything up to the crash reached the client as the engine sent it.
    expect(ref.content.startsWith(r.content)).toBe(true);
    // The count covers all the delivered text, not only what the sidecar kept.
    expect(e.delivered_output_tokens).toBe(estimateTokens(r.content, 1.6, 4));
    // No continuation leg was sent.
    expect(seenFor(stack, id)).toHaveLength(1);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'interrupted', legs: 1, reason: 'continuation-prefix-too-large', prefix_capped: true });
    expect(end.delivered_content_chars).toBe(r.content.length);
  });

  test('a continuation leg that carries the text past the cap and fails: no further leg, the same reason', async () => {
    const body = chatBody();
    const id = newRequestId('leg2-past-cap');
    // Leg 1 crashes at token 30 (under the cap); leg 2 crashes at its own token 300, past it.
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@30;crash@300;-' });
    expectInterruption(r, 'continuation-prefix-too-large');
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false, true]);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'interrupted', legs: 2, prefix_capped: true });
  });
});
