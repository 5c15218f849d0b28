// Runs Envoy (and, for the stack runner, other children) as managed child processes.
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
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureEnvoy } from './envoy-binary';
import { writeEnvoyConfig, EXT_PROC_CLUSTER, type EnvoyConfigOptions } from './envoy-config';

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
function spawnWatchdog(pid: number): ChildProcess | undefined {
  // "-$1": the child's process group (dash's kill takes a negative pid after the signal, no "--").
  const script =
    'read -r _ ; kill -TERM "-$1" 2>/dev/null || exit 0; ' +
    `i=0; while [ $i -lt ${WATCHDOG_GRACE_TENTHS} ]; do kill -0 "-$1" 2>/dev/null || exit 0; sleep 0.1; i=$((i+1)); done; ` +
    'kill -KILL "-$1" 2>/dev/null; exit 0';
  try {
    const wd = spawn('/bin/sh', ['-c', script, 'watchdog', String(pid)], {
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
  const onData = (stream: 'stdout' | 'stderr') => (buf: Buffer): void => {
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
    watchdog = spawnWatchdog(child.pid);
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
      if (exitInfo) return (stopping = Promise.resolve(exitInfo));
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

// ---------------------------------------------------------------------------------------------------------------
// Admin API helpers
// ---------------------------------------------------------------------------------------------------------------

function httpGet(url: string, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** health_flags of the ext_proc cluster's hosts, from admin /clusters ("healthy", "/failed_active_hc", ...). */
export async function extProcHealthFlags(adminUrl: string): Promise<string[]> {
  const { status, body } = await httpGet(`${adminUrl}/clusters`);
  if (status !== 200) throw new Error(`GET ${adminUrl}/clusters answered ${status}`);
  const flags: string[] = [];
  const prefix = `${EXT_PROC_CLUSTER}::`;
  for (const line of body.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const m = /::health_flags::(.*)$/.exec(line);
    if (m) flags.push(m[1].trim());
  }
  return flags;
}

/**
 * Waits until Envoy's health checker marks the ext_proc host healthy (healthy=true) or unhealthy (false).
 * While it is not healthy Envoy bypasses the sidecar (fail-open): chat requests are proxied natively.
 */
export async function waitForExtProcHealth(adminUrl: string, healthy: boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  for (;;) {
    try {
      const flags = await extProcHealthFlags(adminUrl);
      last = flags.length ? flags.join(',') : `no ${EXT_PROC_CLUSTER} host listed`;
      if (flags.length > 0) {
        const allHealthy = flags.every((f) => f === 'healthy');
        if (healthy ? allHealthy : !allHealthy) return;
      }
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() >= deadline) {
      throw new Error(
        `Envoy did not mark the ${EXT_PROC_CLUSTER} host ${healthy ? 'healthy' : 'unhealthy'} within ${timeoutMs} ms ` +
          `(last health_flags: ${last})` +
          (healthy ? '; is the sidecar listening on the ext_proc port?' : ''),
      );
    }
    await sleep(100);
  }
}

/** Ports Envoy has bound, from admin /listeners?format=json. */
async function boundListenerPorts(adminUrl: string): Promise<Set<number>> {
  const { status, body } = await httpGet(`${adminUrl}/listeners?format=json`);
  if (status !== 200) throw new Error(`GET /listeners answered ${status}`);
  const parsed = JSON.parse(body) as {
    listener_statuses?: Array<{ local_address?: { socket_address?: { port_value?: number } } }>;
  };
  const ports = new Set<number>();
  for (const l of parsed.listener_statuses ?? []) {
    const p = l.local_address?.socket_address?.port_value;
    if (typeof p === 'number') ports.add(p);
  }
  return ports;
}

// ---------------------------------------------------------------------------------------------------------------
// Envoy
// ---------------------------------------------------------------------------------------------------------------

export interface RunningEnvoy {
  adminUrl: string;
  listenPort: number;
  /** http://127.0.0.1:<egressPort>: where the sidecar sends its legs (DOWNSTREAM_URL for the sidecar). */
  egressUrl: string;
  /** http://127.0.0.1:<continuationEgressPort>, when a continuation tier is configured. */
  continuationEgressUrl?: string;
  /** The bootstrap file Envoy runs with. */
  configFile: string;
  pid: number;
  /** Resolves when Envoy has exited (for whatever reason). */
  exited: Promise<ChildExit>;
  /** SIGTERM, then SIGKILL after 3 s; resolves when the process has exited. Idempotent. */
  stop(): Promise<void>;
  /** The last ~200 KB of Envoy's stdout (access log) and stderr (application log). */
  logs(): string;
}

export interface StartEnvoyOptions extends EnvoyConfigOptions {
  /** Envoy binary (default: $ENVOY_BIN, else ensureEnvoy()). */
  envoyBin?: string;
  /** Envoy's -l (default "info": startup and warnings, no per-request lines; the access log is separate). */
  logLevel?: string;
  /** Where to write the bootstrap (default: a fresh temp dir, removed by stop()). */
  workdir?: string;
  /** Wait until the ext_proc host is healthy (default true); before that Envoy bypasses the sidecar. */
  waitForExtProcHealthy?: boolean;
  /** Budget for the whole start, including the health wait (default 30 s). */
  startTimeoutMs?: number;
  /** Worker threads (default 2, see below). */
  concurrency?: number;
  /** Every line Envoy prints (access log on stdout, application log on stderr). */
  onLine?: (line: string, stream: 'stdout' | 'stderr') => void;
}

/**
 * Starts Envoy with the gateway bootstrap and waits until it serves: admin /ready says LIVE, every listener is
 * bound and (by default) the ext_proc host is healthy.
 */
export async function startEnvoy(o: StartEnvoyOptions): Promise<RunningEnvoy> {
  const bin = o.envoyBin ?? process.env.ENVOY_BIN ?? (await ensureEnvoy());
  const ownWorkdir = o.workdir === undefined;
  const workdir = o.workdir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-gw-'));
  const configFile = path.join(workdir, `envoy-${o.adminPort}.json`);
  writeEnvoyConfig(o, configFile);

  const args = [
    '-c',
    configFile,
    // Several Envoys run at once (parallel jest workers, a stack next to tests). Hot restart is not used (we
    // restart by stop + start), so it is disabled: no shared memory or domain socket that could collide. The
    // base id is unique anyway (derived from the admin port, itself unique per running Envoy) as a second line
    // of defence should someone drop --disable-hot-restart.
    '--disable-hot-restart',
    '--base-id',
    String(o.adminPort),
    // 2 workers = the cores of this machine class. Tests use the same default on purpose: per-worker
    // connection pools and load-balancer state behave as in production (1 worker would hide that).
    '--concurrency',
    String(o.concurrency ?? 2),
    '-l',
    o.logLevel ?? 'info',
    // The stdout access log is buffered and flushed every 10 s by default; 1 s keeps logs() useful in tests.
    '--file-flush-interval-msec',
    '1000',
    // Listener drain on shutdown is pointless for a stopping local stack.
    '--drain-time-s',
    '1',
  ];

  const proc = spawnManaged(bin, args, { name: 'envoy', cwd: workdir, onLine: o.onLine });
  const adminUrl = `http://127.0.0.1:${o.adminPort}`;
  const cleanup = (): void => {
    if (ownWorkdir) fs.rmSync(workdir, { recursive: true, force: true });
  };
  const stop = async (): Promise<void> => {
    await proc.stop();
    cleanup();
  };

  const timeoutMs = o.startTimeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  const wanted = [o.listenPort, o.egressPort, ...(o.continuationEgressPort !== undefined ? [o.continuationEgressPort] : [])];
  const fail = async (what: string): Promise<never> => {
    const exitedAlready = proc.hasExited();
    await stop();
    const info = exitedAlready ? await proc.exited : undefined;
    throw new Error(
      `Envoy (${bin}) ${exitedAlready && info ? `exited (${describeExit(info)})` : 'did not become ready'}: ${what}. ` +
        `Config: ${configFile}${ownWorkdir ? ' (removed)' : ''}. Envoy log tail:\n${logTail(proc.logs())}`,
    );
  };

  // 1. LIVE + listeners bound.
  let state = 'no answer from admin yet';
  for (;;) {
    if (proc.hasExited()) return fail(`exited during startup (last admin state: ${state})`);
    try {
      const ready = await httpGet(`${adminUrl}/ready`, 1000);
      state = `/ready ${ready.status} ${ready.body.trim()}`;
      if (ready.status === 200 && ready.body.trim() === 'LIVE') {
        const bound = await boundListenerPorts(adminUrl);
        const missing = wanted.filter((p) => !bound.has(p));
        if (missing.length === 0) break;
        state = `LIVE but listeners on ports ${missing.join(', ')} not bound yet`;
      }
    } catch (e) {
      state = (e as Error).message;
    }
    if (Date.now() >= deadline) return fail(`not ready within ${timeoutMs} ms (last: ${state})`);
    await sleep(100);
  }

  // 2. The sidecar is seen as healthy (otherwise chat requests would bypass it).
  if (o.waitForExtProcHealthy ?? true) {
    let last = 'no answer yet';
    for (;;) {
      if (proc.hasExited()) return fail(`exited while waiting for the ${EXT_PROC_CLUSTER} health check`);
      try {
        const flags = await extProcHealthFlags(adminUrl);
        last = flags.join(',') || 'no host listed';
        if (flags.length > 0 && flags.every((f) => f === 'healthy')) break;
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() >= deadline) {
        return fail(
          `the ${EXT_PROC_CLUSTER} host (the sidecar at ${o.extProcHost}:${o.extProcPort}) was not healthy within ` +
            `${timeoutMs} ms (last health_flags: ${last}); is the sidecar listening?`,
        );
      }
      await sleep(100);
    }
  }

  return {
    adminUrl,
    listenPort: o.listenPort,
    egressUrl: `http://127.0.0.1:${o.egressPort}`,
    continuationEgressUrl: o.continuationEgressPort !== undefined ? `http://127.0.0.1:${o.continuationEgressPort}` : undefined,
    configFile,
    pid: proc.pid,
    exited: proc.exited,
    stop,
    logs: proc.logs,
  };
}
