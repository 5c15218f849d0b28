import {
  decideOnSilence,
  decidePostCommit,
  decidePreCommit,
  type FailureKind,
  type PostCommitInput,
  reprefillTooCostly,
  type SilenceInput,
} from '../../src/recovery/planner';

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
  'connect',
];

describe('decidePreCommit', () => {
  const base = { attempt: 1, maxAttempts: 2 };

  it('retries every failure except connect while attempts remain', () => {
    for (const failure of ALL_FAILURES.filter((f) => f !== 'connect')) {
      expect({ failure, d: decidePreCommit({ ...base, failure }) }).toEqual({ failure, d: { action: 'retry' } });
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
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 2, maxAttempts: 3 })).toEqual({ action: 'retry' });
  });

  it('precedence: connect, then attempts', () => {
    expect(decidePreCommit({ failure: 'connect', attempt: 9, maxAttempts: 1 })).toMatchObject({ reason: 'egress-unreachable' });
    expect(decidePreCommit({ failure: 'reset', attempt: 9, maxAttempts: 1 })).toMatchObject({ reason: 'attempts-exhausted' });
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

  it('leg2 never fails with "stall" before the maximum, however long the silence', () => {
    for (const silent of [20_000, 100_000, 299_999]) {
      expect(decideOnSilence({ ...s, leg: 2, silentForMs: silent, totalStalledMs: silent })).toEqual(WAIT);
    }
    expect(decideOnSilence({ ...s, leg: 2, totalStalledMs: 300_000 })).toEqual(fail('stall-limit'));
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
