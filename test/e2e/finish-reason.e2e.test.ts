// One finish, well formed (issue 39), through the real Envoy binary, on both engine dialects: a finish_reason
// that is none of the engines' strings (42, SGLang's internal {"type":"stop"}) fails the leg, which is continued
// (or, when the continuation fails the same way, ends with the interruption event `leg2-malformed-finish`); an
// engine that sends "stop", more content and a second finish has everything after its first finish dropped,
// counted and logged. The client never reads a malformed finish_reason, two of them, or content after one.
// The faults are the fake engine's (tools/fake-engine/faults.ts: our reading of a broken engine); Envoy and
// the sidecar are the real ones.
import { resetFaults } from '../../tools/fake-engine/faults';
import { type ClientResult, chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '10,30' };
const DONE = 'data: [DONE]\n\n';
const count = (s: string, sub: string) => s.split(sub).length - 1;

/** What every stream of this suite must be: at most one finish_reason, a known one, nothing after it, one [DONE] last. */
function expectOneWellFormedEnd(r: ClientResult): void {
  expect(r.transportError).toBeNull();
  expect(r.finishReasons.length + r.errors.length).toBe(1);
  for (const f of r.finishReasons) expect(['stop', 'length']).toContain(f);
  expect(count(r.raw, DONE)).toBe(1);
  expect(r.raw.endsWith(DONE)).toBe(true);
  const finishAt = r.chunks.findIndex((c) => c.choices?.[0]?.finish_reason != null);
  if (finishAt >= 0) {
    for (const c of r.chunks.slice(finishAt + 1)) {
      expect(c.choices?.[0]?.delta?.content ?? '').toBe('');
      expect(c.choices?.[0]?.delta?.reasoning_content ?? c.choices?.[0]?.delta?.reasoning ?? '').toBe('');
    }
  }
}

for (const dialect of ['sglang', 'vllm'] as const) {
  describe(`${dialect}: one finish, well formed`, () => {
    let stack: TestStack;
    beforeAll(async () => {
      // The text path's continuation: the fake engine's leg 2 by token ids (/v1/completions with a prompt of
      // ids) injects no faults, so the faults on the continuation are exercised where they can be injected.
      stack = await startTestStack({
        engine: { dialect },
        env: dialect === 'vllm' ? { CONTINUATION_ENGINE: 'vllm', TOKEN_IDS_CONTINUATION: 'false' } : {},
      });
    });
    afterAll(async () => stack?.stop());
    beforeEach(() => resetFaults());

    for (const [fault, what] of [
      ['finish-number', 'number'],
      ['finish-object', 'object'],
    ] as const) {
      test(`${fault}: the leg failed; continued, the client reads the whole answer with one "stop"`, async () => {
        const body = chatBody({ stream_options: { include_usage: true } });
        const ref = await uninterrupted(stack, body, SIZE);
        const id = newRequestId(fault);
        const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': `${fault}@25` });
        expectOneCompleteStream(r);
        expectOneWellFormedEnd(r);
        expect(r.finishReasons).toEqual(['stop']);
        expect(r.raw).not.toContain('"finish_reason":42');
        expect(r.raw).not.toContain('"finish_reason":{');
        expect(r.reasoning).toBe(ref.reasoning);
        expect(r.content).toBe(ref.content);
        // The engine did send it (leg 1 carried the fault), and the gateway continued from what was delivered.
        expect(seenFor(stack, id).map((s) => s.fault ?? null)).toEqual([`${fault}@25`, null]);
        const triggered = stack.records({ request_id: id, decision: 'TRIGGERED' });
        expect(triggered).toHaveLength(1);
        expect(triggered[0]).toMatchObject({ failure: 'malformed-finish', detail: `finish_reason:${what}` });
        expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
      });

      test(`${fault} on leg 1 and on the continuation: the interruption event, reason leg2-malformed-finish`, async () => {
        const id = newRequestId(`${fault}-twice`);
        const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': `${fault}@25;${fault}@3` });
        expectInterruption(r, 'leg2-malformed-finish');
        expectOneWellFormedEnd(r);
        expect(seenFor(stack, id)).toHaveLength(2);
        expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'interrupted' });
      });
    }

    test('finish-twice: "stop", more content and a second finish: everything after the first finish dropped and counted', async () => {
      const body = chatBody({ stream_options: { include_usage: true } });
      const ref = await uninterrupted(stack, body, SIZE);
      const id = newRequestId('finish-twice');
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'finish-twice@25' });
      expectOneCompleteStream(r);
      expectOneWellFormedEnd(r);
      expect(r.finishReasons).toEqual(['stop']);
      // The client has the answer up to the first finish: 25 tokens (10 reasoning, 15 of content), not more.
      expect(ref.reasoning.startsWith(r.reasoning) && r.reasoning.length > 0).toBe(true);
      expect(ref.content.startsWith(r.content)).toBe(true);
      expect(r.content.length).toBeLessThan(ref.content.length);
      // The usage chunk after the finish is the engine's and is passed on.
      expect(r.usage).not.toBeNull();
      const dropped = stack.records({ request_id: id, decision: 'DROPPED_AFTER_FINISH' });
      expect(dropped).toHaveLength(1); // logged once per leg, however many
      expect(dropped[0]).toMatchObject({ leg: 1, after: 'finish', kind: 'chunk' });
      expect(stack.records({ request_id: id, decision: 'TRIGGERED' })).toHaveLength(0);
      expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed', legs: 1 });
      const metrics = await (await fetch(`http://127.0.0.1:${stack.sidecar!.adminPort}/metrics`)).text();
      const n = Number(/continuation_gateway_dropped_after_finish_total\{after="finish"\} (\d+)/.exec(metrics)?.[1]);
      expect(n).toBeGreaterThanOrEqual(6); // 5 content tokens and the second finish, at least
    });

    test('finish-twice on the continuation leg: its content after its own finish is dropped too', async () => {
      const id = newRequestId('leg2-finish-twice');
      const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@25;finish-twice@3' });
      expectOneCompleteStream(r);
      expectOneWellFormedEnd(r);
      expect(r.finishReasons).toEqual(['stop']);
      const dropped = stack.records({ request_id: id, decision: 'DROPPED_AFTER_FINISH' });
      expect(dropped).toHaveLength(1);
      expect(dropped[0]).toMatchObject({ leg: 2, after: 'finish' });
    });
  });
}

describe('a burst: 120 streams of one replica, each with one of the malformed endings', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // The request scope: each client request runs its script afresh (the gateway's legs of one request count as one).
    stack = await startTestStack({ engine: { tokenIntervalMs: 20, faultScope: 'request' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('every stream ends with one well-formed finish or one interruption event, one [DONE] last', async () => {
    const faults = ['finish-number@12', 'finish-object@12', 'finish-twice@12', 'finish-number@12;finish-object@2'];
    const results = await Promise.all(
      Array.from({ length: 120 }, (_, i) =>
        postChat(stack.url, chatBody({}, `burst ${i}`), {
          ...SIZE,
          'x-request-id': newRequestId(`burst-${i}`),
          'x-fake-fault': faults[i % faults.length],
        }),
      ),
    );
    const endings = { finish: 0, interrupted: 0 };
    for (const r of results) {
      expect(r.status).toBe(200);
      expectOneWellFormedEnd(r);
      if (r.errors.length === 1) {
        expectInterruption(r, 'leg2-malformed-finish');
        endings.interrupted++;
      } else endings.finish++;
    }
    // A quarter carried a malformed finish on the continuation too.
    expect(endings).toEqual({ finish: 90, interrupted: 30 });
  });
});
