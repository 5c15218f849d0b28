// How a recovery leg's end settles its re-prefill slot (src/recovery/slot-evidence.ts): one table for every fact
// the core reports, so the brake's and the adaptive limit's evidence rules are read in one place.
import { type SlotEnd, slotEvidence } from '../../../src/recovery/slot-evidence';

describe('slotEvidence', () => {
  const rows: Array<[string, SlotEnd, unknown]> = [
    ['first token', { kind: 'first-token' }, 'ok'],
    ['cancelled (client gone, shutdown, superseded)', { kind: 'cancelled' }, 'neutral'],
    ['text the gateway refused (revision, restart, unexpected output)', { kind: 'refused-output' }, 'neutral'],
    ["no head: the gateway's own abort", { kind: 'open-failed', open: 'aborted' }, 'neutral'],
    ['no head: connect failure', { kind: 'open-failed', open: 'connect' }, 'failed'],
    ['no head: reset', { kind: 'open-failed', open: 'reset' }, 'failed'],
    ['no head: headers timeout', { kind: 'open-failed', open: 'headers-timeout' }, 'failed'],
    ["a continuation's 400: the request's own answer", { kind: 'status', status: 400, source: 's' }, 'neutral'],
    ["a continuation's 429", { kind: 'status', status: 429, source: 's' }, { failed: 'pool' }],
    ["a continuation's 503", { kind: 'status', status: 503, source: 's' }, { failed: 'pool' }],
    ["leg 1's engine answer 404: the pool works", { kind: 'engine-answer', status: 404 }, 'ok'],
    ["leg 1's engine answer 429", { kind: 'engine-answer', status: 429 }, 'failed'],
    ["leg 1's engine answer 500", { kind: 'engine-answer', status: 500 }, 'failed'],
    ['a 200 without an event stream / the router tier unreachable', { kind: 'unusable-answer' }, 'failed'],
    ['leg 1 reset, first time', { kind: 'failed', failure: 'reset', source: 's', leg: 'leg1' }, { failed: 'pool' }],
    [
      'leg 1 reset again, same request: maybe its own doing',
      { kind: 'failed', failure: 'reset', previous: 'reset', source: 's', leg: 'leg1' },
      { failed: 'repeat', source: 's' },
    ],
    [
      'a continuation reset after another: the pool',
      { kind: 'failed', failure: 'reset', previous: 'reset', source: 's', leg: 'continuation' },
      'failed',
    ],
  ];
  it.each(rows)('%s', (_name, end, expected) => {
    expect(slotEvidence(end)).toEqual(expected);
  });
});
