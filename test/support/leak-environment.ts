// Jest test environment that names the test file which leaves something running.
//
// Why: a jest worker exits only when its event loop is empty (jest-worker removes its message listener and
// waits). A timer, socket, server or child process a test file leaves referenced keeps the worker alive, and
// jest then prints "A worker process has failed to exit gracefully" at the very end of the run, without saying
// which of the ~80 files did it; .ci/run fails on that line. This environment records the event loop's
// referenced resources (process.getActiveResourcesInfo) when a file starts and compares them when it ends:
// what is still there after a grace period is reported with the file's name, and fails that file.
import { setTimeout as sleep } from 'node:timers/promises';
import type { EnvironmentContext, JestEnvironmentConfig } from '@jest/environment';
import { TestEnvironment as NodeEnvironment } from 'jest-environment-node';

// Long enough for a closed socket or a killed child to be reaped, short enough not to slow 80 files.
const GRACE_MS = 3000;
const POLL_MS = 50;

type Counts = Map<string, number>;

function countResources(): Counts {
  const counts: Counts = new Map();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

/** Resource types with more referenced instances now than at the baseline, as "Type xN". */
export function extraResources(baseline: Counts, now: Counts): string[] {
  const extra: string[] = [];
  for (const [type, n] of now) {
    const more = n - (baseline.get(type) ?? 0);
    if (more > 0) extra.push(`${type} x${more}`);
  }
  return extra.sort();
}

export default class LeakCheckingEnvironment extends NodeEnvironment {
  private readonly testPath: string;
  private baseline: Counts = new Map();

  constructor(config: JestEnvironmentConfig, context: EnvironmentContext) {
    super(config, context);
    this.testPath = context.testPath;
  }

  override async setup(): Promise<void> {
    stopWatching(); // the next file in this worker: what it starts is its own
    await super.setup();
    this.baseline = countResources();
  }

  override async teardown(): Promise<void> {
    await super.teardown();
    const deadline = Date.now() + GRACE_MS;
    let extra = extraResources(this.baseline, countResources());
    while (extra.length > 0 && Date.now() < deadline) {
      await sleep(POLL_MS);
      extra = extraResources(this.baseline, countResources());
    }
    const file = this.testPath.replace(/^.*\/dist\//, 'dist/');
    if (extra.length === 0) return watchAfterTeardown(file, countResources());
    const line = `[leak-check] ${file} left referenced: ${extra.join(', ')} (${GRACE_MS} ms after its last hook)`;
    process.stderr.write(`${line}\n`);
    throw new Error(line);
  }
}

/**
 * Something a file started can still appear after its teardown (a late callback arming a timer): it then keeps
 * the worker from exiting without failing any file. Watched for a few seconds, unreferenced, and printed once
 * with the file's name, so that jest's anonymous "failed to exit gracefully" has a name beside it in the log.
 */
let stopWatching: () => void = () => undefined;

function watchAfterTeardown(file: string, atTeardown: Counts): void {
  let polls = 0;
  const watch = setInterval(() => {
    const extra = extraResources(atTeardown, countResources());
    if (extra.length > 0) process.stderr.write(`[leak-check] after ${file}'s teardown, referenced: ${extra.join(', ')}\n`);
    if (extra.length > 0 || ++polls >= 40) clearInterval(watch);
  }, 100);
  watch.unref();
  stopWatching = () => clearInterval(watch);
}
