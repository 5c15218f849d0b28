// The fault matrix for `POST /v1/completions`: every fault kind at every token index of a deterministic text
// completion, through the real Envoy, several replicas behind the egress cluster. The client must get what the
// uninterrupted run gives: the same chunks (ids aside: each run has its own), one id and one `created` in every
// chunk, one finish_reason, and exact usage (counted by the engine's /tokenize in the dialect under test), with
// leg 2 being the original request with the delivered text appended to its prompt and the budget left.
// The chunks' shapes are the fake engine's reading of each engine's serving code (tools/fake-engine/text-completion.ts).

import { resetFaults } from '../../../tools/fake-engine/faults';
import type { Dialect } from '../../../tools/fake-engine/server';
import { completionAnswer } from '../../../tools/fake-engine/text-completion';
import { type ClientResult, completionsBody, newRequestId, postCompletions } from '../../support/client';
import { startTestStack, type TestStack } from '../../support/stack';
import { engineClosedAt, seenFor } from '../helpers';
import { FAULT_KINDS, FENCE_SLACK_MS } from './fault-matrix';

const CONTENT = 22;
const SIZE = { 'x-fake-answer-tokens': `0,${CONTENT}` };
const CONCURRENCY = 12;

/** The chunks as the client reads them, without what differs between two runs (the id) or is the gateway's note. */
export function comparable(r: ClientResult): string {
  return JSON.stringify(
    r.chunks.map(({ id: _id, ...c }) => (c.usage?.continuation ? { ...c, usage: { ...c.usage, continuation: undefined } } : c)),
  );
}

/** One stream: one id, one created, one finish, [DONE], no error event. */
export function expectOneCompletionStream(r: ClientResult): void {
  expect(r.transportError).toBeNull();
  expect(r.status).toBe(200);
  expect(r.errors).toEqual([]);
  expect(r.ids).toHaveLength(1);
  expect(r.created).toHaveLength(1);
  expect(r.roleChunks).toBe(0);
  expect(r.finishReasons).toHaveLength(1);
  expect(r.done).toBe(true);
}

export function completionsFaultMatrix(dialect: Dialect): void {
  describe(`completions fault matrix: ${dialect}`, () => {
    let stack: TestStack;
    let ref: ClientResult;
    const prompt = `The completions matrix on ${dialect}: once upon a time`;
    const N = completionAnswer(prompt, { reasoning: 0, content: CONTENT }).length;
    // One above the answer: the end-of-sequence token (the fake counts none), so a fault after the last token
    // still leaves leg 2 a budget.
    const body = completionsBody({ stream_options: { include_usage: true }, max_tokens: N + 1 }, prompt);

    beforeAll(async () => {
      resetFaults();
      stack = await startTestStack({
        replicas: 3,
        engine: { dialect },
        env: {
          CONTINUATION_MODEL: 'generic-test',
          CONTINUATION_ENGINE: dialect,
          MAX_ATTEMPTS: '2',
          FIRST_DELTA_TIMEOUT_SECONDS: '2',
          STALL_IDLE_TIMEOUT_SECONDS: '1',
          TOKENIZE_URL: '{engine0}/tokenize',
          TOKENIZE_TIMEOUT_MS: '3000',
          RECOVERY_BUDGET_PERCENT: '100',
          LOG_LEVEL: 'info',
        },
      });
      ref = await postCompletions(stack.url, body, SIZE);
      expectOneCompletionStream(ref);
      expect(ref.finishReasons).toEqual(['stop']);
      expect(ref.usage.completion_tokens).toBe(N);
    });
    afterAll(async () => {
      await stack?.stop();
    });

    test('every fault kind at every token index: the uninterrupted stream, exact usage', async () => {
      const cases = FAULT_KINDS.flatMap((kind) => Array.from({ length: N + 1 }, (_, index) => ({ kind, index })));
      const failures: string[] = [];
      let next = 0;
      const one = async (c: { kind: string; index: number }) => {
        const id = newRequestId(`cm-${c.kind}-${c.index}`);
        let r: ClientResult | undefined;
        try {
          r = await postCompletions(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': `${c.kind}@${c.index}` });
          expectOneCompletionStream(r);
          expect(comparable(r)).toBe(comparable(ref));
          const delivered = c.index > 0;
          if (delivered) expect(r.usage.continuation).toMatchObject({ method: 'tokenize', dialect, prompt: 'leg2-minus-prefix', legs: 2 });
          const seen = seenFor(stack, id);
          expect(seen.map((s) => s.continuation)).toEqual(delivered ? [false, true] : [false, false]);
          expect((await engineClosedAt(stack, id, 0)) ?? Infinity).toBeLessThanOrEqual(seen[1].startedAt + FENCE_SLACK_MS);
          if (delivered) {
            // Leg 2: the prompt plus exactly the delivered text, the budget that was left (+1 of slack).
            expect(seen[1].path).toBe('/v1/completions');
            expect(seen[1].body.prompt).toBe(prompt + leg1Text(seen[0]));
            expect(seen[1].body.max_tokens).toBe(seen[1].tokensSent + 1);
          }
        } catch (e) {
          const decisions = stack.logs
            .filter((l) => l.request_id === id && l.decision)
            .map((l) => `${l.decision}${l.reason ? `(${l.reason})` : ''}${l.failure ? `[${l.failure}]` : ''}`);
          failures.push(
            `${c.kind}@${c.index}: ${(e as Error).message.split('\n').slice(0, 6).join(' | ')} | decisions: ${decisions.join(' ')}`,
          );
        }
      };
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < cases.length) await one(cases[next++]);
        }),
      );
      // eslint-disable-next-line no-console
      console.log(`completions fault matrix ${dialect}: ${cases.length} cases, ${failures.length} failed`);
      expect(failures).toEqual([]);
    }, 240_000);
  });
}

/** The text leg 1 streamed before it failed: its tokens, as the engine wrote them. */
function leg1Text(leg1: { body: { prompt: string }; tokensSent: number }): string {
  return completionAnswer(leg1.body.prompt, { reasoning: 0, content: CONTENT }).slice(0, leg1.tokensSent).join('');
}
