import {
  decideOnSilence,
  decidePostCommit,
  decidePreCommit,
  RecoveryBudget,
  type FailureKind,
  type PostCommitInput,
  type SilenceInput,
} from '../../src/recovery/planner';

const ALL_FAILURES: FailureKind[] = ['reset', 'eof', 'error-event', 'abort-finish', 'stall', 'stall-limit', 'first-delta-timeout', 'headers-timeout', 'connect'];

describe('decidePreCommit', () => {
  const base = { attempt: 1, maxAttempts: 2, recoveryAllowed: true };

  it('retries every failure except connect while attempts and budget remain', () => {
    for (const failure of ALL_FAILURES.filter((f) => f !== 'connect')) {
      expect({ failure, d: decidePreCommit({ ...base, failure }) }).toEqual({ failure, d: { action: 'retry' } });
    }
  });

  it('connect: pass through at once (egress unreachable), even with attempts left', () => {
    expect(decidePreCommit({ ...base, failure: 'connect', maxAttempts: 5 })).toEqual({ action: 'pass-through', reason: 'egress-unreachable' });
  });

  it('attempts exhausted when attempt >= maxAttempts', () => {
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 2 })).toEqual({ action: 'pass-through', reason: 'attempts-exhausted' });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 3 })).toEqual({ action: 'pass-through', reason: 'attempts-exhausted' });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 1, maxAttempts: 1 })).toEqual({ action: 'pass-through', reason: 'attempts-exhausted' });
    expect(decidePreCommit({ ...base, failure: 'reset', attempt: 2, maxAttempts: 3 })).toEqual({ action: 'retry' });
  });

  it('budget exhausted', () => {
    expect(decidePreCommit({ ...base, failure: 'eof', recoveryAllowed: false })).toEqual({ action: 'pass-through', reason: 'recovery-budget-exhausted' });
  });

  it('precedence: connect, then attempts, then budget', () => {
    expect(decidePreCommit({ failure: 'connect', attempt: 9, maxAttempts: 1, recoveryAllowed: false })).toMatchObject({ reason: 'egress-unreachable' });
    expect(decidePreCommit({ failure: 'reset', attempt: 9, maxAttempts: 1, recoveryAllowed: false })).toMatchObject({ reason: 'attempts-exhausted' });
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
    recoveryAllowed: true,
  };

  it('continues a leg1 failure with recoverable text, for every failure kind', () => {
    for (const failure of ALL_FAILURES) expect(decidePostCommit({ ...ok, failure })).toEqual({ action: 'continue' });
  });

  it('leg2 failures always interrupt, named after the failure (there is never a third leg)', () => {
    for (const failure of ALL_FAILURES) expect(decidePostCommit({ ...ok, leg: 2, failure })).toEqual({ action: 'interrupt', reason: `leg2-${failure}` });
  });

  it('each blocking condition gives its own reason', () => {
    expect(decidePostCommit({ ...ok, toolCallDelivered: true })).toEqual({ action: 'interrupt', reason: 'tool-call-delivered' });
    expect(decidePostCommit({ ...ok, recoverableText: false })).toEqual({ action: 'interrupt', reason: 'nothing-recoverable' });
    expect(decidePostCommit({ ...ok, continuationConfigured: false })).toEqual({ action: 'interrupt', reason: 'continuation-unsupported' });
    expect(decidePostCommit({ ...ok, continuationEnabled: false })).toEqual({ action: 'interrupt', reason: 'continuation-disabled' });
    expect(decidePostCommit({ ...ok, recoveryAllowed: false })).toEqual({ action: 'interrupt', reason: 'recovery-budget-exhausted' });
  });

  it('precedence: leg2 > tool call > nothing recoverable > unsupported > disabled > budget', () => {
    const worst: PostCommitInput = { failure: 'eof', leg: 2, toolCallDelivered: true, recoverableText: false, continuationConfigured: false, continuationEnabled: false, recoveryAllowed: false };
    expect(decidePostCommit(worst)).toMatchObject({ reason: 'leg2-eof' });
    expect(decidePostCommit({ ...worst, leg: 1 })).toMatchObject({ reason: 'tool-call-delivered' });
    expect(decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false })).toMatchObject({ reason: 'nothing-recoverable' });
    expect(decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false, recoverableText: true })).toMatchObject({ reason: 'continuation-unsupported' });
    expect(decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false, recoverableText: true, continuationConfigured: true })).toMatchObject({
      reason: 'continuation-disabled',
    });
    expect(
      decidePostCommit({ ...worst, leg: 1, toolCallDelivered: false, recoverableText: true, continuationConfigured: true, continuationEnabled: true }),
    ).toMatchObject({ reason: 'recovery-budget-exhausted' });
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

describe('RecoveryBudget', () => {
  const withStreams = (b: RecoveryBudget, n: number) => {
    b.activeStreams = n;
    return b;
  };

  it('allows ceil(percent of active streams), capped by maxConcurrent', () => {
    expect(withStreams(new RecoveryBudget(64, 20), 1).allowed()).toBe(1);
    expect(withStreams(new RecoveryBudget(64, 20), 5).allowed()).toBe(1);
    expect(withStreams(new RecoveryBudget(64, 20), 6).allowed()).toBe(2);
    expect(withStreams(new RecoveryBudget(64, 20), 100).allowed()).toBe(20);
    expect(withStreams(new RecoveryBudget(3, 20), 100).allowed()).toBe(3);
    expect(withStreams(new RecoveryBudget(64, 20), 0).allowed()).toBe(0);
    expect(withStreams(new RecoveryBudget(64, 100), 7).allowed()).toBe(7);
  });

  it('fractional percents are not inflated by floating-point error', () => {
    // 2.2 * 1500 / 100 is 33.00000000000001 in doubles.
    expect(withStreams(new RecoveryBudget(1000, 2.2), 1500).allowed()).toBe(33);
    expect(withStreams(new RecoveryBudget(1000, 8.8), 375).allowed()).toBe(33);
    expect(withStreams(new RecoveryBudget(1000, 2.2), 1501).allowed()).toBe(34);
    expect(withStreams(new RecoveryBudget(1000, 0.5), 1).allowed()).toBe(1);
  });

  it('zero percent disables recovery entirely', () => {
    const b = withStreams(new RecoveryBudget(64, 0), 1000);
    expect(b.allowed()).toBe(0);
    expect(b.tryAcquire()).toBeNull();
    expect(b.rejected).toBe(1);
    expect(b.activeRecoveries).toBe(0);
  });

  it('zero max concurrent disables recovery entirely', () => {
    const b = withStreams(new RecoveryBudget(0, 100), 10);
    expect(b.tryAcquire()).toBeNull();
    expect(b.rejected).toBe(1);
  });

  it('acquire up to the limit, then reject and count; release frees a slot', () => {
    const b = withStreams(new RecoveryBudget(2, 100), 10);
    const r1 = b.tryAcquire();
    const r2 = b.tryAcquire();
    expect(r1).toEqual(expect.any(Function));
    expect(r2).toEqual(expect.any(Function));
    expect(b.activeRecoveries).toBe(2);
    expect(b.tryAcquire()).toBeNull();
    expect(b.tryAcquire()).toBeNull();
    expect(b.rejected).toBe(2);
    r1!();
    expect(b.activeRecoveries).toBe(1);
    expect(b.tryAcquire()).not.toBeNull();
    expect(b.activeRecoveries).toBe(2);
    expect(b.rejected).toBe(2);
  });

  it('release is idempotent: calling it twice frees one slot only', () => {
    const b = withStreams(new RecoveryBudget(5, 100), 10);
    const r1 = b.tryAcquire()!;
    b.tryAcquire();
    r1();
    r1();
    r1();
    expect(b.activeRecoveries).toBe(1);
  });

  it('the percent limit follows the number of active streams', () => {
    const b = withStreams(new RecoveryBudget(64, 20), 5);
    expect(b.tryAcquire()).not.toBeNull();
    expect(b.tryAcquire()).toBeNull();
    b.activeStreams = 10;
    expect(b.tryAcquire()).not.toBeNull();
    expect(b.activeRecoveries).toBe(2);
    expect(b.rejected).toBe(1);
  });
});
