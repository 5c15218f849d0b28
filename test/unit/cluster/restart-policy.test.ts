// The cluster primary's decisions about its workers (src/cluster/restart-policy.ts): a crash loop is told
// from a worker that died once in a while, and how long stopping workers get before they are killed. The
// primary and its workers as processes: test/e2e/workers.e2e.test.ts.
import {
  afterWorkerDeath,
  deathsInWindow,
  MAX_RESTARTS_IN_WINDOW,
  RESTART_WINDOW_MS,
  WORKER_EXIT_SLACK_MS,
  workerKillDelayMs,
} from '../../../src/cluster/restart-policy';

describe('deathsInWindow', () => {
  it('keeps the deaths of the last minute, the new one included, oldest first', () => {
    const now = 1_000_000;
    expect(deathsInWindow([], now)).toEqual([now]);
    expect(deathsInWindow([now - 70_000, now - 59_000, now - 1], now)).toEqual([now - 59_000, now - 1, now]);
    // exactly at the window's edge still counts
    expect(deathsInWindow([now - RESTART_WINDOW_MS], now)).toEqual([now - RESTART_WINDOW_MS, now]);
    expect(deathsInWindow([now - RESTART_WINDOW_MS - 1], now)).toEqual([now]);
  });

  it('does not change the list it is given', () => {
    const previous = [1, 2];
    deathsInWindow(previous, 100_000);
    expect(previous).toEqual([1, 2]);
  });
});

describe('afterWorkerDeath', () => {
  it('stops when a worker dies before every worker has started (it would die again at once)', () => {
    expect(afterWorkerDeath(false, 1)).toBe('stop');
  });

  it(`restarts up to ${MAX_RESTARTS_IN_WINDOW} deaths in the window, stops past it`, () => {
    expect(afterWorkerDeath(true, 1)).toBe('restart');
    expect(afterWorkerDeath(true, MAX_RESTARTS_IN_WINDOW)).toBe('restart');
    expect(afterWorkerDeath(true, MAX_RESTARTS_IN_WINDOW + 1)).toBe('stop');
  });

  it('six deaths within a minute are a crash loop; six spread over hours are not', () => {
    let fast: number[] = [];
    let slow: number[] = [];
    const verdicts = { fast: [] as string[], slow: [] as string[] };
    for (let i = 0; i < 6; i++) {
      fast = deathsInWindow(fast, 1_000_000 + i * 1000);
      slow = deathsInWindow(slow, 1_000_000 + i * 3_600_000);
      verdicts.fast.push(afterWorkerDeath(true, fast.length));
      verdicts.slow.push(afterWorkerDeath(true, slow.length));
    }
    expect(verdicts.fast).toEqual(['restart', 'restart', 'restart', 'restart', 'restart', 'stop']);
    expect(verdicts.slow).toEqual(Array(6).fill('restart'));
  });
});

describe('workerKillDelayMs', () => {
  it("SIGTERM: the workers' drain deadline plus the slack; SIGINT: the slack only", () => {
    expect(workerKillDelayMs('SIGTERM', 30_000)).toBe(30_000 + WORKER_EXIT_SLACK_MS);
    expect(workerKillDelayMs('SIGINT', 30_000)).toBe(WORKER_EXIT_SLACK_MS);
  });
});
