// Managed child processes: Envoy, and for the stack runner the sidecar and the fake engines.
//
// Each child is started in its own process group (detached), which holds whatever it starts in turn (the
// sidecar's cluster workers): a Ctrl-C in a terminal reaches only the stack runner, which stops the children
// in order instead of racing them, and a child's whole group can be killed without knowing its members.
// Orphan prevention, in three layers:
//  - process.on('exit') SIGKILLs every live child's group (normal exits, process.exit(), uncaught exceptions);
//  - a tiny /bin/sh watchdog per child holds a pipe from us on its stdin: when this process dies by any means
//    (even SIGKILL, e.g. a jest worker or a whole `npm run stack` torn down hard) the pipe closes, `read`
//    returns, and the watchdog sends the group SIGTERM, then SIGKILL after 2 s. Envoy cannot watch its parent,
//    and a Node child busy in a synchronous loop could not either; a separate process can.
//  - when a child exits, what is left of its group (a worker whose primary was killed) is SIGKILLed.
import { type ChildProcess, spawn } from 'node:child_process';

const LOG_KEEP_BYTES = 200 * 1024;
const STOP_GRACE_MS = 3000;
/** The watchdog's grace between SIGTERM and SIGKILL: everything is gone within ~2 s of our death. */
const WATCHDOG_GRACE_TENTHS = 20;

// ---------------------------------------------------------------------------------------------------------------
// Managed child processes
// ---------------------------------------------------------------------------------------------------------------

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ManagedChild {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  /** Resolves when the process has exited (never rejects). */
  readonly exited: Promise<ChildExit>;
  /** True once the process has exited. */
  hasExited(): boolean;
  /** The last ~200 KB of stdout+stderr, interleaved as received. */
  logs(): string;
  /** Resolves with the first stdout/stderr line matching `re` (rejects on exit or timeout, with the log tail). */
  waitForLine(re: RegExp, timeoutMs: number, what?: string): Promise<RegExpMatchArray>;
  /**
   * `signal` (default SIGTERM) to the child, then SIGKILL to its process group after its stop grace (default
   * 3 s); resolves when the process has exited. Idempotent.
   */
  stop(signal?: NodeJS.Signals): Promise<ChildExit>;
  /** `signal` to the child alone (a further step of its own stop, after stop()); nothing once it has exited. */
  signal(signal: NodeJS.Signals): void;
}

export interface SpawnManagedOptions {
  name: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Called with every complete output line (stdout and stderr). */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
  /** Bytes of output kept for logs() (default 200 KB). */
  keepBytes?: number;
  /** How long stop() waits before SIGKILL (default 3 s). */
  stopGraceMs?: number;
  /** A folder the child's watchdog removes after killing it, when this process died without doing so. */
  watchdogRemoves?: string;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of live) killGroup(c, 'SIGKILL');
  });
}

/** Signals the child's process group (it leads one: detached), or the child alone if that fails. */
function killGroup(c: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (c.pid !== undefined) {
      process.kill(-c.pid, signal);
      return;
    }
  } catch {
    // no such group: the child alone, below
  }
  try {
    c.kill(signal);
  } catch {
    // already gone
  }
}

/** Spawns the watchdog described at the top of the file; returns it (unref'd: it never keeps us alive). */
function spawnWatchdog(pid: number, removes?: string): ChildProcess | undefined {
  // "-$1": the child's process group (dash's kill takes a negative pid after the signal, no "--"). "$2": a
  // folder to remove once the group is gone (Envoy's /tmp/envoy-gw-*), the stack no longer there to do it.
  const script =
    'rmdir_() { [ -n "$2" ] && rm -rf -- "$2"; }; ' +
    'read -r _ ; kill -TERM "-$1" 2>/dev/null || { rmdir_ "$@"; exit 0; }; ' +
    `i=0; while [ $i -lt ${WATCHDOG_GRACE_TENTHS} ]; do kill -0 "-$1" 2>/dev/null || { rmdir_ "$@"; exit 0; }; sleep 0.1; i=$((i+1)); done; ` +
    'kill -KILL "-$1" 2>/dev/null; rmdir_ "$@"; exit 0';
  try {
    const wd = spawn('/bin/sh', ['-c', script, 'watchdog', String(pid), removes ?? ''], {
      stdio: ['pipe', 'ignore', 'ignore'],
      detached: true,
    });
    wd.on('error', () => undefined);
    wd.stdin?.on('error', () => undefined);
    wd.unref();
    (wd.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return wd;
  } catch {
    return undefined;
  }
}

/** Spawns a child with output capture, orphan protection and a graceful stop(). */
export function spawnManaged(command: string, args: string[], opts: SpawnManagedOptions): ManagedChild {
  installExitHook();
  const keep = opts.keepBytes ?? LOG_KEEP_BYTES;
  const child = spawn(command, args, {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const chunks: string[] = [];
  let kept = 0;
  const lineListeners = new Set<(line: string) => void>();
  const partial: Record<'stdout' | 'stderr', string> = { stdout: '', stderr: '' };

  const record = (text: string): void => {
    chunks.push(text);
    kept += text.length;
    while (kept > keep && chunks.length > 1) kept -= (chunks.shift() as string).length;
    if (kept > keep && chunks.length === 1) {
      chunks[0] = chunks[0].slice(-keep);
      kept = chunks[0].length;
    }
  };
  const emitLine = (line: string, stream: 'stdout' | 'stderr'): void => {
    opts.onLine?.(line, stream);
    for (const l of lineListeners) l(line);
  };
  const onData =
    (stream: 'stdout' | 'stderr') =>
    (buf: Buffer): void => {
      const text = buf.toString('utf8');
      record(text);
      const lines = (partial[stream] + text).split('\n');
      partial[stream] = lines.pop() as string;
      for (const line of lines) emitLine(line.replace(/\r$/, ''), stream);
    };
  child.stdout?.on('data', onData('stdout'));
  child.stderr?.on('data', onData('stderr'));

  let exitInfo: ChildExit | undefined;
  let spawnError: Error | undefined;
  let watchdog: ChildProcess | undefined;
  const exited = new Promise<ChildExit>((resolve) => {
    const finish = (info: ChildExit): void => {
      if (exitInfo) return;
      exitInfo = info;
      live.delete(child);
      for (const s of ['stdout', 'stderr'] as const) {
        if (partial[s]) {
          emitLine(partial[s], s);
          partial[s] = '';
        }
      }
      // The watchdog's job is over; kill it before it could ever signal a recycled pid.
      try {
        watchdog?.kill('SIGKILL');
      } catch {
        // gone
      }
      resolve(info);
    };
    child.once('error', (e) => {
      spawnError = e;
      record(`[${opts.name}] spawn error: ${e.message}\n`);
      if (child.pid === undefined) finish({ code: null, signal: null });
    });
    // Members of its group that outlive it (none when it stopped cleanly; a worker whose primary was killed
    // holds our output pipe, so 'close' would wait for it). The group id cannot have been reused: a pid is not
    // handed out again while a process group of that id still has members.
    child.once('exit', () => killGroup(child, 'SIGKILL'));
    // 'close' (not 'exit'): all output has been read by then.
    child.once('close', (code, signal) => finish({ code, signal }));
  });
  if (child.pid !== undefined) {
    live.add(child);
    watchdog = spawnWatchdog(child.pid, opts.watchdogRemoves);
  }

  const logs = (): string => chunks.join('');
  let stopping: Promise<ChildExit> | undefined;

  const mc: ManagedChild = {
    name: opts.name,
    pid: child.pid ?? -1,
    child,
    exited,
    hasExited: () => exitInfo !== undefined,
    logs,
    waitForLine(re, timeoutMs, what) {
      return new Promise<RegExpMatchArray>((resolve, reject) => {
        let done = false;
        const finish = (err?: Error, m?: RegExpMatchArray): void => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          lineListeners.delete(listener);
          if (err) reject(err);
          else resolve(m as RegExpMatchArray);
        };
        const listener = (line: string): void => {
          const m = line.match(re);
          if (m) finish(undefined, m);
        };
        const timer = setTimeout(
          () => finish(new Error(`${opts.name}: no ${what ?? String(re)} within ${timeoutMs} ms. Log tail:\n${logTail(logs())}`)),
          timeoutMs,
        );
        lineListeners.add(listener);
        // Already printed before we started listening?
        for (const line of logs().split('\n')) {
          const m = line.match(re);
          if (m) {
            finish(undefined, m);
            return;
          }
        }
        void exited.then((info) =>
          finish(
            new Error(
              `${opts.name} exited (${describeExit(info)}${spawnError ? `, ${spawnError.message}` : ''}) before printing ${what ?? String(re)}. Log tail:\n${logTail(logs())}`,
            ),
          ),
        );
      });
    },
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (stopping) return stopping;
      if (exitInfo) {
        stopping = Promise.resolve(exitInfo);
        return stopping;
      }
      stopping = new Promise<ChildExit>((resolve) => {
        const killTimer = setTimeout(() => killGroup(child, 'SIGKILL'), opts.stopGraceMs ?? STOP_GRACE_MS);
        void exited.then((info) => {
          clearTimeout(killTimer);
          resolve(info);
        });
        // The child alone: it forwards the signal to what it started (a cluster primary to its workers), and a
        // second copy from us would read as "stop now" to them.
        try {
          child.kill(signal);
        } catch {
          // gone
        }
      });
      return stopping;
    },
    signal(signal) {
      if (exitInfo) return;
      try {
        child.kill(signal);
      } catch {
        // gone
      }
    },
  };
  return mc;
}

export function describeExit(info: ChildExit): string {
  return info.signal ? `signal ${info.signal}` : `exit code ${info.code}`;
}

/** The last `n` characters of a log, for error messages. */
export function logTail(s: string, n = 4000): string {
  return s.length > n ? `...${s.slice(-n)}` : s;
}
