import {
  decideOnSilence,
  decidePostCommit,
  decidePreCommit,
  type FailureKind,
  type PostCommitInput,
  parseRetryAfter,
  reprefillTooCostly,
  retryBackoffMs,
  type SilenceInput,
} from '../../../src/recovery/planner';

const ALL_FAILURES: FailureKind[] = [
  'reset',
  'eof',
  'error-event',
  'abort-finish',
  'stall',
  'stall-limit',
  'first-delta-timeout',
  'headers-timeout',
  'overloaded',
  'server-error',
  'connect',
];

describe('decidePreCommit', () => {
  const base = { attempt: 1, maxAttempts: 2, remainingMs: 60_000, backoffMs: 200, retryAfterMaxMs: 10_000 };

  it('retries every failure except connect while attempts remain, after the backoff', () => {
    for (const failure of ALL_FAILURES.filter((f) => f !== 'connect')) {
      expect({ failure, d: decidePreCommit({ ...base, failure }) }).toEqual({ failure, d: { action: 'retry', waitMs: 200 } });
    }
  });

  it('connect: pass through at once (egress unreachable), even with attempts left', () => {
    expect(decidePreCommit({ ...base, failure: 'connect', maxAttempts: 5 })).toEqual({
      action: 'pass-through',
      reason: 'egress-unreachable',
    });
  });

  it('attempts exhausted when attempt >= maxAttempts', () => {
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 2 })).toEqual({ action: 'pass-through', reason: 'attempts-exhausted' });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 3 })).toEqual({ action: 'pass-through', reason: 'attempts-exhausted' });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 1, maxAttempts: 1 })).toEqual({
      action: 'pass-through',
      reason: 'attempts-exhausted',
    });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 2, maxAttempts: 3 })).toEqual({ action: 'retry', waitMs: 200 });
  });

  it('precedence: connect, then attempts', () => {
    expect(decidePreCommit({ ...base, failure: 'connect', attempt: 9, maxAttempts: 1 })).toMatchObject({ reason: 'egress-unreachable' });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 9, maxAttempts: 1 })).toMatchObject({ reason: 'attempts-exhausted' });
  });

  it("the engine's Retry-After is waited out when it is longer than the backoff and within the bound", () => {
    expect(decidePreCommit({ ...base, failure: 'overloaded', retryAfterMs: 3000 })).toEqual({ action: 'retry', waitMs: 3000 });
    expect(decidePreCommit({ ...base, failure: 'overloaded', retryAfterMs: 0 })).toEqual({ action: 'retry', waitMs: 200 });
    expect(decidePreCommit({ ...base, failure: 'server-error', retryAfterMs: 10_000 })).toEqual({ action: 'retry', waitMs: 10_000 });
  });

  it("a Retry-After beyond RETRY_AFTER_MAX_SECONDS is the engine's answer to the client: no re-run", () => {
    expect(decidePreCommit({ ...base, failure: 'overloaded', retryAfterMs: 10_001 })).toEqual({
      action: 'pass-through',
      reason: 'retry-after-too-long',
    });
  });

  it('one deadline: no re-run that could not start before it, whatever the attempts left', () => {
    const many = { ...base, maxAttempts: 100, attempt: 3 };
    expect(decidePreCommit({ ...many, failure: 'reset', remainingMs: 201 })).toEqual({ action: 'retry', waitMs: 200 });
    expect(decidePreCommit({ ...many, failure: 'reset', remainingMs: 200 })).toEqual({
      action: 'pass-through',
      reason: 'deadline-exceeded',
    });
    expect(decidePreCommit({ ...many, failure: 'reset', remainingMs: -5 })).toEqual({
      action: 'pass-through',
      reason: 'deadline-exceeded',
    });
    expect(decidePreCommit({ ...many, failure: 'overloaded', retryAfterMs: 5000, remainingMs: 4000 })).toEqual({
      action: 'pass-through',
      reason: 'deadline-exceeded',
    });
    expect(decidePreCommit({ ...many, failure: 'first-delta-deadline' })).toEqual({ action: 'pass-through', reason: 'deadline-exceeded' });
  });
});

describe('retryBackoffMs: exponential, equal jitter, capped', () => {
  it('attempt n waits within [step/2, step], step = base x 2^(n-1) up to the max', () => {
    const lo = () => 0;
    const hi = () => 1;
    expect([1, 2, 3, 4, 5, 6].map((n) => retryBackoffMs(n, 250, 5000, lo))).toEqual([125, 250, 500, 1000, 2000, 2500]);
    expect([1, 2, 3, 4, 5, 6].map((n) => retryBackoffMs(n, 250, 5000, hi))).toEqual([250, 500, 1000, 2000, 4000, 5000]);
    expect(retryBackoffMs(1, 250, 5000, () => 0.5)).toBe(188);
    expect(retryBackoffMs(10_000, 250, 5000, hi)).toBe(5000); // no overflow
  });

  it('jittered: draws spread over the upper half of the step', () => {
    const draws = Array.from({ length: 200 }, () => retryBackoffMs(3, 250, 5000));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(500);
    expect(Math.max(...draws)).toBeLessThanOrEqual(1000);
    expect(new Set(draws).size).toBeGreaterThan(20);
  });

  it('RETRY_BACKOFF_SECONDS=0: no wait', () => {
    expect(retryBackoffMs(3, 0, 5000)).toBe(0);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-12-01T12:00:00Z');
  it('delay-seconds and HTTP-dates, in ms from now; anything else is ignored', () => {
    expect(parseRetryAfter('7', now)).toBe(7000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter(['3', '9'], now)).toBe(3000);
    expect(parseRetryAfter('Tue, 01 Dec 2026 12:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Tue, 01 Dec 2026 11:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-3', now)).toBeUndefined();
  });
});

describe('decidePostCommit', () => {
  const ok: PostCommitInput = {
    failure: 'reset',
    leg: 1,
    toolCallDelivered: false,
    recoverableText: true,
    continuationConfigured: true,
    continuationEnabled: true,
  };

  it('continues a leg1 failure with recoverable text, for every failure kind', () => {
    for (const failure of ALL_FAILURES) expect(decidePostCommit({ ...ok, failure })).toEqual({ action: 'continue' });
  });

  it('leg2 failures always interrupt, named after the failure (there is never a third leg)', () => {
    for (const failure of ALL_FAILURES)
      expect(decidePostCommit({ ...ok, leg: 2, failure })).toEqual({ action: 'interrupt', reason: `leg2-${failure}` });
  });

  it('each blocking condition gives its own reason', () => {
    expect(decidePostCommit({ ...ok, toolCallDelivered: true })).toEqual({ action: 'interrupt', reason: 'tool-call-delivered' });
    expect(decidePostCommit({ ...ok, recoverableText: false })).toEqual({ action: 'interrupt', reason: 'nothing-recoverable' });
    expect(decidePostCommit({ ...ok, continuationConfigured: false })).toEqual({ action: 'interrupt', reason: 'continuation-unsupported' });
    expect(decidePostCommit({ ...ok, continuationEnabled: false })).toEqual({ action: 'interrupt', reason: 'continuation-disabled' });
  });

  it('precedence: leg2 > tool call > nothing recoverable > unsupported > disabled', () => {
    const worst: PostCommitInput = {
      failure: 'eof',
      leg: 2,
      toolCallDelivered: true,
      recoverableText: false,
      continuationConfigured: false,
      continuationEnabled: false,
    };
    expect(decidePostCommit(worst)).toMatchObject({ reason: 'leg2-eof' });
    expect(decidePostCommit({ ...worst, leg: 1 })).toMatchObject({ reason: 'tool-call-delivered' });
    expect(decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false })).toMatchObject({ reason: 'nothing-recoverable' });
    expect(decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false, recoverableText: true })).toMatchObject({
      reason: 'continuation-unsupported',
    });
    expect(
      decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false, recoverableText: true, continuationConfigured: true }),
    ).toMatchObject({
      reason: 'continuation-disabled',
    });
    expect(
      decidePostCommit({
        ...worst,
        leg: 1,
        toolCallDelivered: false,
        recoverableText: true,
        continuationConfigured: true,
        continuationEnabled: true,
      }),
    ).toEqual({
      action: 'continue',
    });
  });
});

describe('decideOnSilence', () => {
  const s: SilenceInput = {
    committed: true,
    anyBytes: true,
    leg: 1,
    recoverable: true,
    silentForMs: 20_000,
    totalStalledMs: 20_000,
    stallIdleTimeoutMs: 20_000,
    maxStallMs: 300_000,
    firstDeltaTimeoutMs: 0,
    sinceLegStartMs: 60_000,
  };
  const WAIT = { action: 'wait' };
  const fail = (failure: FailureKind) => ({ action: 'fail', failure });

  it('committed leg1 with recoverable text, silent for the idle timeout: stall', () => {
    expect(decideOnSilence(s)).toEqual(fail('stall'));
    expect(decideOnSilence({ ...s, silentForMs: 25_000 })).toEqual(fail('stall'));
  });

  it('committed leg1 silent for less than the idle timeout: wait', () => {
    expect(decideOnSilence({ ...s, silentForMs: 19_999 })).toEqual(WAIT);
  });

  it('committed leg1 with nothing recoverable (tool call or no text) or no bytes: wait', () => {
    expect(decideOnSilence({ ...s, recoverable: false })).toEqual(WAIT);
    expect(decideOnSilence({ ...s, anyBytes: false })).toEqual(WAIT);
  });

  it('leg2 after its first bytes stalls on the same timer as leg1; before them it waits (re-prefill) up to the maximum', () => {
    expect(decideOnSilence({ ...s, leg: 2, silentForMs: 19_999, totalStalledMs: 19_999 })).toEqual(WAIT);
    expect(decideOnSilence({ ...s, leg: 2, silentForMs: 20_000, totalStalledMs: 20_000 })).toEqual(fail('stall'));
    for (const silent of [20_000, 100_000, 299_999]) {
      expect(decideOnSilence({ ...s, leg: 2, anyBytes: false, silentForMs: silent, totalStalledMs: silent })).toEqual(WAIT);
    }
    expect(decideOnSilence({ ...s, leg: 2, anyBytes: false, totalStalledMs: 300_000 })).toEqual(fail('stall-limit'));
  });

  it('MAX_STALL bounds every wait: stall-limit at exactly the max, in every phase', () => {
    const atMax = { ...s, totalStalledMs: 300_000 };
    expect(decideOnSilence({ ...atMax, totalStalledMs: 299_999, recoverable: false })).toEqual(WAIT);
    expect(decideOnSilence({ ...atMax, recoverable: false })).toEqual(fail('stall-limit'));
    expect(decideOnSilence(atMax)).toEqual(fail('stall-limit'));
    expect(decideOnSilence({ ...atMax, committed: false, anyBytes: false })).toEqual(fail('stall-limit'));
    expect(decideOnSilence({ ...atMax, committed: false, firstDeltaTimeoutMs: 10_000 })).toEqual(fail('stall-limit'));
    expect(decideOnSilence({ ...atMax, leg: 2 })).toEqual(fail('stall-limit'));
  });

  it('before commit: first-delta timeout when enabled and elapsed since the leg started', () => {
    const pre = { ...s, committed: false, anyBytes: false, recoverable: false, firstDeltaTimeoutMs: 30_000 };
    expect(decideOnSilence({ ...pre, sinceLegStartMs: 29_999 })).toEqual(WAIT);
    expect(decideOnSilence({ ...pre, sinceLegStartMs: 30_000 })).toEqual(fail('first-delta-timeout'));
    expect(decideOnSilence({ ...pre, anyBytes: true, sinceLegStartMs: 31_000 })).toEqual(fail('first-delta-timeout'));
  });

  it('before commit with the first-delta timeout disabled (0): wait, never "stall"', () => {
    const pre = { ...s, committed: false, firstDeltaTimeoutMs: 0, sinceLegStartMs: 10_000_000, silentForMs: 200_000 };
    expect(decideOnSilence(pre)).toEqual(WAIT);
    expect(decideOnSilence({ ...pre, anyBytes: false })).toEqual(WAIT);
  });

  it("before commit: the request's deadline (FIRST_DELTA_DEADLINE_SECONDS) fails the leg once it has passed", () => {
    const pre = { ...s, committed: false, anyBytes: true, recoverable: false };
    expect(decideOnSilence({ ...pre, untilDeadlineMs: 1 })).toEqual(WAIT);
    expect(decideOnSilence({ ...pre, untilDeadlineMs: 0 })).toEqual(fail('first-delta-deadline'));
    expect(decideOnSilence({ ...pre, untilDeadlineMs: -10, firstDeltaTimeoutMs: 1 })).toEqual(fail('first-delta-deadline'));
    expect(decideOnSilence({ ...pre, untilDeadlineMs: null })).toEqual(WAIT);
    // after the commit point it no longer applies
    expect(decideOnSilence({ ...s, silentForMs: 1, untilDeadlineMs: -10 })).toEqual(WAIT);
  });

  it('the dry run: a stall is a skip (reported, the leg waited on), everything else as without it', () => {
    expect(decideOnSilence({ ...s, dryRun: true })).toEqual({ action: 'skip', failure: 'stall' });
    expect(decideOnSilence({ ...s, dryRun: true, silentForMs: 19_999 })).toEqual(WAIT);
    expect(decideOnSilence({ ...s, dryRun: true, recoverable: false })).toEqual(WAIT);
    expect(decideOnSilence({ ...s, dryRun: true, totalStalledMs: 300_000 })).toEqual(fail('stall-limit'));
    expect(decideOnSilence({ ...s, dryRun: false })).toEqual(fail('stall'));
  });

  it('the first-delta timeout does not apply after commit', () => {
    expect(decideOnSilence({ ...s, firstDeltaTimeoutMs: 1_000, sinceLegStartMs: 1_000_000, silentForMs: 1 })).toEqual(WAIT);
    expect(decideOnSilence({ ...s, firstDeltaTimeoutMs: 1_000, sinceLegStartMs: 1_000_000, recoverable: false })).toEqual(WAIT);
  });
});

describe('reprefillTooCostly (MAX_RECOVERY_PROMPT_TOKENS)', () => {
  it('0 = no limit', () => {
    expect(reprefillTooCostly(10_000_000, 10_000_000, 0)).toBe(false);
  });
  it('counts the prompt plus the delivered text, strictly above the limit', () => {
    expect(reprefillTooCostly(900, 100, 1000)).toBe(false);
    expect(reprefillTooCostly(900, 101, 1000)).toBe(true);
    expect(reprefillTooCostly(1001, 0, 1000)).toBe(true);
  });
});
