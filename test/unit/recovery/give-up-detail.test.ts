// A give-up's causes and its detail (src/recovery/give-up-detail.ts, issue 27): pure.
import { causeOf, causeWords, giveUpDetail } from '../../../src/recovery/give-up-detail';
import type { FailureCause, FailureKind } from '../../../src/recovery/reasons';

describe('causeOf', () => {
  it('a body that ended before any byte is an empty answer; every other failure is itself', () => {
    expect(causeOf('eof', true)).toBe('empty-answer');
    expect(causeOf('eof', false)).toBe('eof');
    expect(causeOf('eof')).toBe('eof');
    expect(causeOf('reset', true)).toBe('reset');
  });
});

describe('giveUpDetail', () => {
  it('names every attempt in order, counted', () => {
    expect(giveUpDetail(2, ['empty-answer', 'reset'])).toBe('no response after 2 attempts: empty answer, reset');
    expect(giveUpDetail(1, ['reset'])).toBe('no response after 1 attempt: reset');
    expect(giveUpDetail(1, [])).toBe('no response after 1 attempt');
    expect(giveUpDetail(1, ['reset', 'status-502'])).toBe('no response after 2 attempts: reset, status 502');
  });
  it('fixed words for every failure kind: no text of an exception, no address, nothing from the engine', () => {
    const kinds: FailureCause[] = [
      'reset',
      'eof',
      'error-event',
      'abort-finish',
      'stall',
      'stall-limit',
      'first-delta-timeout',
      'first-delta-deadline',
      'headers-timeout',
      'overloaded',
      'server-error',
      'model-revision-mismatch',
      'restarted',
      'unexpected-output',
      'connect',
      'aborted',
      'empty-answer',
      'status-503',
    ] satisfies FailureCause[];
    for (const k of kinds) expect(causeWords(k)).toMatch(/^[a-z0-9 ()-]+$/);
    expect(new Set(kinds.map(causeWords)).size).toBeGreaterThanOrEqual(kinds.length - 1); // `aborted` twice: abort-finish, aborted
    expect(causeWords('stall' as FailureKind)).toBe('stalled');
  });
});
