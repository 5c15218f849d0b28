// How a stop signal moves a process along one ladder, the same for the sidecar, the cluster's primary and the
// stack runner (tools/stack/main.ts): free of I/O, so a unit test holds every step.
//
//   running       --SIGTERM/SIGHUP-->  draining       streams in flight finish (DRAIN_TIMEOUT_SECONDS), new
//                                                      requests pass through; past the deadline each ends with
//                                                      the interruption event (gateway-shutdown)
//   running       --SIGINT-->          stopping-now   every open stream ends at once with the interruption event
//   draining      --any-->             stopping-now
//   stopping-now  --any-->             exiting        at once, no further word to the clients
//
// One step per signal received: the processes that take these signals make sure a stop reaches them once
// (the stack runner leaves npm's process group, tools/stack/run.sh; cluster workers are driven by their primary
// over IPC and ignore signals), so a second step is a deliberate second signal, never a copy of the first.

export type StopLevel = 'running' | 'draining' | 'stopping-now' | 'exiting';

/** The level after `signal` arrives at `current` (SIGTERM and SIGHUP drain; SIGINT stops now). */
export function nextStopLevel(current: StopLevel, signal: NodeJS.Signals): StopLevel {
  if (current === 'running') return signal === 'SIGINT' ? 'stopping-now' : 'draining';
  if (current === 'draining') return 'stopping-now';
  return 'exiting';
}
