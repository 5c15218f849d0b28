// The pure endings (src/stream/ending.ts): which Ending a request gets, by its situation.

import { REQUEST_OUTCOMES } from '../../../src/obs/metric-labels';
import type { FailureKind, PassReason } from '../../../src/recovery/reasons';
import {
  type Ending,
  endingBeforeCommit,
  endingForCancel,
  outcomeOf,
  type PreCommitGiveUp,
  reasonOf,
  stateFor,
} from '../../../src/stream/ending';

const base: PreCommitGiveUp = {
  failure: 'reset',
  reason: 'attempts-exhausted',
  structured: false,
  attemptHadHeaders: false,
  retryAfterMs: 1000,
  causes: ['reset'],
  attempts: 1,
};

const ANSWER = { status: 503, headers: { 'retry-after': '2' }, body: Buffer.from('busy') };

const httpError = (status: number, code: string, reason: string) => expect.objectContaining({ kind: 'http-error', status, code, reason });

describe('endingBeforeCommit', () => {
  const rows: Array<[string, Partial<PreCommitGiveUp>, unknown]> = [
    ['a reset, attempts exhausted', {}, httpError(502, 'upstream_failed', 'reset:attempts-exhausted')],
    ['no headers in time', { failure: 'headers-timeout' }, httpError(504, 'upstream_timeout', 'headers-timeout:attempts-exhausted')],
    ['the attempt timer', { failure: 'first-delta-timeout' }, httpError(504, 'upstream_timeout', 'first-delta-timeout:attempts-exhausted')],
    [
      'the request deadline',
      { failure: 'first-delta-deadline', reason: 'deadline-exceeded' },
      httpError(504, 'upstream_timeout', 'first-delta-deadline:deadline-exceeded'),
    ],
    [
      'the egress unreachable',
      { failure: 'connect', reason: 'egress-unreachable' },
      httpError(502, 'upstream_failed', 'connect:egress-unreachable'),
    ],
    [
      "the engine's 503, not re-run",
      { failure: 'overloaded', engineAnswer: ANSWER },
      { kind: 'engine-answer', as: 'status', reason: 'overloaded:attempts-exhausted', answer: ANSWER },
    ],
    [
      "the engine's 503, the re-run refused by admission: the gateway's 503",
      { failure: 'overloaded', engineAnswer: ANSWER, reason: 'recovery-brake-open', retryAfterMs: 5000 },
      expect.objectContaining({ kind: 'http-error', status: 503, code: 'recovery_unavailable', retryAfterMs: 5000 }),
    ],
    [
      "the engine's in-band error event",
      { failure: 'error-event', attemptHadHeaders: true, failingEvent: Buffer.from('data: {"error":{}}\n\n') },
      {
        kind: 'engine-answer',
        as: 'event',
        reason: 'error-event:attempts-exhausted',
        events: Buffer.from('data: {"error":{}}\n\ndata: [DONE]\n\n'),
      },
    ],
    [
      "the engine's abort finish",
      { failure: 'abort-finish', attemptHadHeaders: true, heldToolCall: Buffer.from('data: {"tool"}\n\n') },
      {
        kind: 'engine-answer',
        as: 'event',
        reason: 'abort-finish:attempts-exhausted',
        events: Buffer.from('data: {"tool"}\n\ndata: [DONE]\n\n'),
      },
    ],
    [
      'held structured output: the interruption event, nothing delivered',
      { structured: true, attemptHadHeaders: true, failure: 'stall' as FailureKind },
      { kind: 'interrupted', reason: 'stall:attempts-exhausted', partialOutput: false },
    ],
    ['structured, but no headers yet: the HTTP error', { structured: true }, httpError(502, 'upstream_failed', 'reset:attempts-exhausted')],
  ];
  it.each(rows)('%s', (_name, s, expected) => {
    expect(endingBeforeCommit({ ...base, ...s })).toEqual(expected);
  });

  it('every HTTP error has a fixed message naming codes only', () => {
    const reasons: PassReason[] = ['attempts-exhausted', 'deadline-exceeded', 'recovery-queue-timeout', 'retry-after-too-long'];
    for (const reason of reasons) {
      const e = endingBeforeCommit({ ...base, reason }) as Extract<Ending, { kind: 'http-error' }>;
      expect(e.message).toMatch(/^The upstream failed before responding \(no response after 1 attempt: reset\)/);
    }
  });

  it("the detail is true of the request as a whole: every attempt's cause, in order, in fixed words (issue 27)", () => {
    const e = endingBeforeCommit({ ...base, causes: ['empty-answer', 'reset'], attempts: 2 }) as Extract<Ending, { kind: 'http-error' }>;
    expect(e).toMatchObject({ status: 502, code: 'upstream_failed', reason: 'reset:attempts-exhausted' });
    expect(e.detail).toBe('no response after 2 attempts: empty answer, reset');
    expect(e.message).toBe('The upstream failed before responding (no response after 2 attempts: empty answer, reset).');
    const t = endingBeforeCommit({
      ...base,
      failure: 'first-delta-deadline',
      reason: 'deadline-exceeded',
      causes: ['overloaded', 'stall', 'first-delta-deadline'],
      attempts: 3,
    }) as Extract<Ending, { kind: 'http-error' }>;
    expect(t).toMatchObject({ status: 504, detail: 'no response after 3 attempts: overloaded (503), stalled, first-token deadline' });
    const refused = endingBeforeCommit({ ...base, reason: 'recovery-brake-open', causes: ['reset'] }) as Extract<
      Ending,
      { kind: 'http-error' }
    >;
    expect(refused.message).toBe(
      'The upstream failed before responding (no response after 1 attempt: reset) and the gateway could not re-run the request now (recovery-brake-open).',
    );
  });
});

describe('endingForCancel', () => {
  it.each([
    ['client-gone', false, undefined],
    ['client-gone', true, undefined],
    ['shutdown', true, { kind: 'interrupted', reason: 'gateway-shutdown', partialOutput: true }],
    ['shutdown', false, expect.objectContaining({ kind: 'http-error', status: 503, code: 'gateway_shutdown', reason: 'gateway-shutdown' })],
  ] as const)('%s, committed %s', (cause, committed, expected) => {
    expect(endingForCancel(cause, committed)).toEqual(expected);
  });
});

describe('what an Ending means: the last state, the outcome and the reason (outcomeOf, stateFor, reasonOf)', () => {
  const http = (reason: 'reset:attempts-exhausted' | 'gateway-internal-error'): Ending => ({
    kind: 'http-error',
    status: 502,
    code: 'upstream_failed',
    reason,
    message: 'm',
    retryAfterMs: 1000,
  });
  const rows: Array<[Ending, string, string, string | undefined]> = [
    [{ kind: 'complete', after: 'first-attempt' }, 'done', 'completed', undefined],
    [{ kind: 'complete', after: 'retry' }, 'done', 'completed-after-retry', undefined],
    [{ kind: 'complete', after: 'continuation' }, 'done', 'completed-after-continuation', undefined],
    [{ kind: 'interrupted', reason: 'leg2-eof', partialOutput: true }, 'interrupted', 'interrupted', 'leg2-eof'],
    [
      { kind: 'interrupted', reason: 'stall:attempts-exhausted', partialOutput: false },
      'answered',
      'failed-before-first-delta',
      'stall:attempts-exhausted',
    ],
    [{ kind: 'interrupted', reason: 'gateway-internal-error', partialOutput: true }, 'interrupted', 'error', 'gateway-internal-error'],
    [http('reset:attempts-exhausted'), 'answered', 'failed-before-first-delta', 'reset:attempts-exhausted'],
    [http('gateway-internal-error'), 'answered', 'error', 'gateway-internal-error'],
    [
      { kind: 'engine-answer', as: 'status', reason: 'overloaded:attempts-exhausted', answer: ANSWER },
      'answered',
      'failed-before-first-delta',
      'overloaded:attempts-exhausted',
    ],
    [{ kind: 'passed-through', answer: { status: 404, headers: {}, body: {} as never } }, 'answered', 'passed-through-status', undefined],
    [{ kind: 'client-gone', detail: 'stream cancelled' }, 'gone', 'client-disconnected', 'stream cancelled'],
  ];
  it.each(rows)('%j: state %s, outcome %s, reason %s', (e, state, outcome, reason) => {
    expect(stateFor(e)).toBe(state);
    expect(outcomeOf(e)).toBe(outcome);
    expect(reasonOf(e)).toBe(reason);
  });

  it('every outcome is the outcome of some Ending, and every Ending kind has a row', () => {
    expect(new Set(rows.map(([e]) => outcomeOf(e)))).toEqual(new Set(REQUEST_OUTCOMES));
    expect(new Set(rows.map(([e]) => e.kind))).toEqual(
      new Set(['complete', 'interrupted', 'http-error', 'engine-answer', 'passed-through', 'client-gone']),
    );
  });
});
