// The primary's decisions about its workers, free of I/O: restart a dead worker or stop (a crash loop), and
// how long a stopping worker may take before it is killed.

/** More worker deaths than this within the window: something is wrong for good, stop instead of looping. */
export const MAX_RESTARTS_IN_WINDOW = 5;
export const RESTART_WINDOW_MS = 60_000;
/** Past a worker's own deadline (DRAIN_TIMEOUT_SECONDS + 5 s, src/main.ts): it is wedged, kill it. */
export const WORKER_EXIT_SLACK_MS = 6000;

/** The deaths (epoch ms, oldest first) still inside the window ending `now`, the one at `now` included. */
export function deathsInWindow(previous: readonly number[], now: number, windowMs = RESTART_WINDOW_MS): number[] {
  const deaths = [...previous, now];
  while (deaths.length && deaths[0] < now - windowMs) deaths.shift();
  return deaths;
}

/**
 * After a worker died (not while stopping): a replacement, or stop. A worker that dies before every worker
 * has started (port taken, bad environment) would die again at once; so would one dying too often.
 */
export function afterWorkerDeath(allStarted: boolean, deathsInWindow: number): 'restart' | 'stop' {
  return !allStarted || deathsInWindow > MAX_RESTARTS_IN_WINDOW ? 'stop' : 'restart';
}

/** After SIGTERM the workers drain (DRAIN_TIMEOUT_SECONDS); after SIGINT they close at once. Then the slack. */
export function workerKillDelayMs(signal: NodeJS.Signals, drainTimeoutMs: number): number {
  return (signal === 'SIGTERM' ? drainTimeoutMs : 0) + WORKER_EXIT_SLACK_MS;
}
