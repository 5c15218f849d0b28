// Runs Envoy as a managed child process (managed-child.ts): writes the generated bootstrap, starts the binary,
// and waits until it listens and sees the sidecar healthy (admin API helpers below).
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureEnvoy } from './envoy-binary';
import { type EnvoyConfigOptions, EXT_PROC_CLUSTER, extProcEndpointsJson, writeEnvoyConfig } from './envoy-config';
import { type ChildExit, describeExit, logTail, spawnManaged } from './managed-child';

export { type ChildExit, describeExit, logTail, type ManagedChild, type SpawnManagedOptions, spawnManaged } from './managed-child';

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

/** The port each socket listener has bound (name -> port), from admin /listeners?format=json. */
export async function boundListeners(adminUrl: string): Promise<Map<string, number>> {
  const { status, body } = await httpGet(`${adminUrl}/listeners?format=json`);
  if (status !== 200) throw new Error(`GET /listeners answered ${status}`);
  const parsed = JSON.parse(body) as {
    listener_statuses?: Array<{ name?: string; local_address?: { socket_address?: { port_value?: number } } }>;
  };
  const ports = new Map<string, number>();
  for (const l of parsed.listener_statuses ?? []) {
    const p = l.local_address?.socket_address?.port_value;
    if (typeof l.name === 'string' && typeof p === 'number' && p > 0) ports.set(l.name, p);
  }
  return ports;
}

// ---------------------------------------------------------------------------------------------------------------
// Envoy
// ---------------------------------------------------------------------------------------------------------------

export interface RunningEnvoy {
  adminUrl: string;
  /** The ports Envoy bound (the ones asked for, or the ephemeral ones it got for port 0). */
  adminPort: number;
  listenPort: number;
  egressPort: number;
  continuationEgressPort?: number;
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
  /**
   * Only when started without extProcPort: points the ext_proc cluster at the sidecar (a new version of the
   * endpoints file, moved in atomically; Envoy then health-checks it).
   */
  setExtProcEndpoint(host: string, port: number): void;
  /** Waits until the ext_proc host is healthy (before that Envoy bypasses the sidecar). */
  waitForExtProcHealthy(timeoutMs: number): Promise<void>;
  /**
   * Waits (at most timeoutMs) until the front listener has no request in flight: before a stop, so that a
   * stream the sidecar has just ended reaches its client whole. Resolves either way, or as soon as `giveUp`
   * says so (a further stop signal).
   */
  waitForIdle(timeoutMs: number, giveUp?: () => boolean): Promise<void>;
}

export interface StartEnvoyOptions extends Omit<EnvoyConfigOptions, 'extProcHost' | 'extProcPort' | 'extProcEndpointsFile'> {
  /**
   * The sidecar's address. Without extProcPort the ext_proc cluster starts with no endpoint and is given one
   * later (setExtProcEndpoint): for a sidecar started after Envoy, once it knows Envoy's egress port. Then the
   * health wait is the caller's (waitForExtProcHealthy).
   */
  extProcHost?: string;
  extProcPort?: number;
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
  // Names unique within the workdir (a caller's workdir may hold several Envoys, one after another).
  const tag = `${process.pid}-${++startCount}`;
  const configFile = path.join(workdir, `envoy-${tag}.json`);
  const adminAddressFile = path.join(workdir, `admin-address-${tag}`);
  // The ext_proc endpoint file lives in a directory of its own: Envoy watches that directory for moves.
  const edsDir = o.extProcPort === undefined ? path.join(workdir, `ext-proc-eds-${tag}`) : undefined;
  const edsFile = edsDir ? path.join(edsDir, 'ext_proc.json') : undefined;
  let edsVersion = 0;
  const writeEds = (endpoint?: { host: string; port: number }): void => {
    if (!edsFile) throw new Error('setExtProcEndpoint: this Envoy was started with a fixed extProcPort');
    const tmp = path.join(workdir, `ext_proc-${tag}-${++edsVersion}.json.tmp`);
    fs.writeFileSync(tmp, extProcEndpointsJson(edsVersion, endpoint));
    fs.renameSync(tmp, edsFile); // atomic: Envoy never reads half a file
  };
  if (edsDir) {
    fs.mkdirSync(edsDir);
    writeEds();
  }
  writeEnvoyConfig(
    { ...o, extProcHost: o.extProcHost ?? '127.0.0.1', extProcPort: o.extProcPort ?? 0, extProcEndpointsFile: edsFile },
    configFile,
  );

  const args = [
    '-c',
    configFile,
    // Several Envoys run at once (parallel jest workers, a stack next to tests). Hot restart is not used (we
    // restart by stop + start), so it is disabled: no shared memory or domain socket that could collide, and
    // the base id (which only names those) is left at its default.
    '--disable-hot-restart',
    // Where Envoy writes the admin address it bound: with adminPort 0, the only way to learn the port without
    // picking one first (and losing it to another process before Envoy binds it).
    '--admin-address-path',
    adminAddressFile,
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

  // The folder made here is removed however this process ends: by stop(), by the exit hook below (an exit
  // without stop(): a second signal, an uncaught error), or by Envoy's watchdog when this process was killed.
  const proc = spawnManaged(bin, args, {
    name: 'envoy',
    cwd: workdir,
    onLine: o.onLine,
    ...(ownWorkdir ? { watchdogRemoves: workdir } : {}),
  });
  const cleanup = (): void => {
    process.removeListener('exit', cleanup);
    if (ownWorkdir) fs.rmSync(workdir, { recursive: true, force: true });
    else {
      for (const f of [configFile, adminAddressFile]) fs.rmSync(f, { force: true });
      if (edsDir) fs.rmSync(edsDir, { recursive: true, force: true });
    }
  };
  process.on('exit', cleanup);
  const stop = async (): Promise<void> => {
    await proc.stop();
    cleanup();
  };

  const timeoutMs = o.startTimeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  const fail = async (what: string): Promise<never> => {
    const exitedAlready = proc.hasExited();
    await stop();
    const info = exitedAlready ? await proc.exited : undefined;
    throw new Error(
      `Envoy (${bin}) ${exitedAlready && info ? `exited (${describeExit(info)})` : 'did not become ready'}: ${what}. ` +
        `Config: ${configFile}${ownWorkdir ? ' (removed)' : ''}. Envoy log tail:\n${logTail(proc.logs())}`,
    );
  };

  // 1. The admin address Envoy bound (o.adminPort, or the ephemeral port it got), from --admin-address-path.
  let adminUrl = '';
  for (;;) {
    if (proc.hasExited()) return fail('exited before it bound its admin port');
    const addr = readAdminAddress(adminAddressFile);
    if (addr) {
      adminUrl = `http://${addr}`;
      break;
    }
    if (Date.now() >= deadline) return fail(`no admin address in ${adminAddressFile} within ${timeoutMs} ms`);
    await sleep(20);
  }
  const adminPort = Number(new URL(adminUrl).port);

  // 2. LIVE + every socket listener bound; their ports read back (the ephemeral ones are only known so).
  const wanted: Array<[string, number]> = [
    ['front', o.listenPort],
    ['egress', o.egressPort],
    ...(o.continuationEgressPort !== undefined ? [['continuation_egress', o.continuationEgressPort] as [string, number]] : []),
  ];
  let bound = new Map<string, number>();
  let state = 'no answer from admin yet';
  for (;;) {
    if (proc.hasExited()) return fail(`exited during startup (last admin state: ${state})`);
    try {
      const ready = await httpGet(`${adminUrl}/ready`, 1000);
      state = `/ready ${ready.status} ${ready.body.trim()}`;
      if (ready.status === 200 && ready.body.trim() === 'LIVE') {
        bound = await boundListeners(adminUrl);
        const missing = wanted.filter(([name, port]) => !bound.has(name) || (port !== 0 && bound.get(name) !== port));
        if (missing.length === 0) break;
        state = `LIVE but listeners ${missing.map(([n, p]) => `${n} (port ${p || 'ephemeral'})`).join(', ')} not bound yet`;
      }
    } catch (e) {
      state = (e as Error).message;
    }
    if (Date.now() >= deadline) return fail(`not ready within ${timeoutMs} ms (last: ${state})`);
    await sleep(50);
  }
  const listenPort = bound.get('front') as number;
  const egressPort = bound.get('egress') as number;
  const continuationEgressPort = o.continuationEgressPort !== undefined ? bound.get('continuation_egress') : undefined;

  let sidecarAt = o.extProcPort !== undefined ? `${o.extProcHost ?? '127.0.0.1'}:${o.extProcPort}` : 'none yet';
  // budgetMs: from now; reportMs: the budget named in the error (the whole start's, when part of the start).
  const waitHealthy = async (budgetMs: number, failStart: boolean, reportMs = budgetMs): Promise<void> => {
    const until = Date.now() + budgetMs;
    let last = 'no answer yet';
    for (;;) {
      if (proc.hasExited()) {
        if (failStart) return void (await fail(`exited while waiting for the ${EXT_PROC_CLUSTER} health check`));
        throw new Error(`Envoy exited while waiting for the ${EXT_PROC_CLUSTER} health check`);
      }
      try {
        const flags = await extProcHealthFlags(adminUrl);
        last = flags.join(',') || 'no host listed';
        if (flags.length > 0 && flags.every((f) => f === 'healthy')) return;
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() >= until) {
        const what =
          `the ${EXT_PROC_CLUSTER} host (the sidecar at ${sidecarAt}) was not healthy within ` +
          `${reportMs} ms (last health_flags: ${last}); is the sidecar listening?`;
        if (failStart) return void (await fail(what));
        throw new Error(what);
      }
      await sleep(100);
    }
  };

  // 3. The sidecar is seen as healthy (otherwise chat requests would bypass it), when its address is known.
  if (o.extProcPort !== undefined && (o.waitForExtProcHealthy ?? true))
    await waitHealthy(Math.max(0, deadline - Date.now()), true, timeoutMs);

  return {
    adminUrl,
    adminPort,
    listenPort,
    egressPort,
    continuationEgressPort,
    egressUrl: `http://127.0.0.1:${egressPort}`,
    continuationEgressUrl: continuationEgressPort !== undefined ? `http://127.0.0.1:${continuationEgressPort}` : undefined,
    configFile,
    pid: proc.pid,
    exited: proc.exited,
    stop,
    logs: proc.logs,
    setExtProcEndpoint(host: string, port: number) {
      sidecarAt = `${host}:${port}`;
      writeEds({ host, port });
    },
    waitForExtProcHealthy: (budgetMs: number) => waitHealthy(budgetMs, false),
    waitForIdle: (budgetMs: number, giveUp?: () => boolean) => waitForFrontIdle(adminUrl, budgetMs, giveUp),
  };
}

/** http.front.downstream_rq_active from admin /stats is 0 (or Envoy gone), at most `timeoutMs` from now. */
async function waitForFrontIdle(adminUrl: string, timeoutMs: number, giveUp: () => boolean = () => false): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !giveUp()) {
    const active = await httpGet(`${adminUrl}/stats?filter=${encodeURIComponent('^http\\.front\\.downstream_rq_active$')}`, 1000).then(
      (r) => Number(/downstream_rq_active: (\d+)/.exec(r.body)?.[1] ?? 0),
      () => 0,
    );
    if (active === 0) return;
    await sleep(50);
  }
}

let startCount = 0;

/** `host:port` from Envoy's --admin-address-path file, once Envoy has written it. */
function readAdminAddress(file: string): string | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
  return /^[\d.]+:\d+$/.test(text) && !text.endsWith(':0') ? text : undefined;
}
