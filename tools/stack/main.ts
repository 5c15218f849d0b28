// `npm run stack` / `npm run demo`: the whole gateway on one machine.
//
//   [fake engines replica-a, replica-b]  (only without DOWNSTREAM_URL)
//   Envoy    generated bootstrap           front listener on LISTEN_PORT; ext_proc endpoint from a file, below
//   sidecar  node <SIDECAR_NODE_FLAGS> dist/src/main.js  PORT=0 (it names its port), DOWNSTREAM_URL=<Envoy egress>
//
// stdout carries two lines once Envoy is ready and the sidecar is seen healthy: `READY http://127.0.0.1:<LISTEN_PORT>`,
// then `ADMIN http://127.0.0.1:<sidecar admin port>` (its /metrics, /readyz); everything else (ours and the
// children's output: `[name] line` on a terminal, one JSON object per line otherwise, tools/stack/log-lines.ts)
// goes to stderr, including a `ports:` line. Every port not set explicitly is ephemeral and bound by the process
// that listens on it (port 0; nothing is picked free first), so that stacks can run side by side and back to
// back (the sidecar's own defaults, 50051 and 9090, are for deployments).
//
// Stopping, one step per signal (src/lifecycle/stop-ladder.ts): SIGTERM (or SIGHUP) lets the sidecar drain
// first, Envoy and the engines still serving, for DRAIN_TIMEOUT_SECONDS at most, then stops Envoy once its
// front listener is idle (within the same deadline) and the engines last; SIGINT (or a signal during the drain) has the sidecar end every open stream at once with the
// interruption event, then stops the rest; a signal after that exits at once (children SIGKILLed). Each stop
// arrives once: the children run in process groups of their own, and under npm tools/stack/run.sh takes this
// process out of npm's group (npm forwards what its group receives). Exit 0, 130 after a second signal, or 1
// when a child died on its own (the rest is stopped). When this process is killed outright, each child's
// watchdog ends it (tools/stack/managed-child.ts) and Envoy's removes its /tmp/envoy-gw-* folder.

import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';
import { nextStopLevel, type StopLevel } from '../../src/lifecycle/stop-ladder';
import { demoConfig } from './demo-config';
import { ensureEnvoy } from './envoy-binary';
import { DEFAULT_REQUEST_BODY_TIMEOUT_SECONDS } from './envoy-config';
import { describeExit, type ManagedChild, type RunningEnvoy, spawnManaged, startEnvoy } from './envoy-process';
import { formatLine, stackLogFormat } from './log-lines';
import { watchParent } from './parent-watch';
import { envNumber, envoyTracingFrom, parseTierUrls, StackError } from './stack-env';

/** After the sidecar has stopped, how long Envoy at least gets to hand its clients their last bytes before its stop. */
const ENVOY_IDLE_WAIT_MS = 2000;

const LOG_FORMAT = stackLogFormat(process.env.STACK_LOG_FORMAT, process.stderr.isTTY === true);
const say = (line: string): void => {
  process.stderr.write(formatLine(LOG_FORMAT, 'stack', line));
};

interface Started {
  children: ManagedChild[];
  /** Envoy, or its start in progress (so that a shutdown during the start still stops it). */
  envoy?: Promise<RunningEnvoy | undefined>;
}

async function main(): Promise<number> {
  const env = process.env;
  // This file runs as dist/tools/stack/main.js: the product is dist/src, the fake engine dist/tools/fake-engine.
  const dist = path.resolve(__dirname, '..', '..');
  // Dev knobs (envoy/README.md): run stand-ins instead of the real sidecar / fake engine (the stack test does).
  const sidecarMain = env.STACK_SIDECAR_MAIN || path.join(dist, 'src', 'main.js');
  const fakeEngineMain = env.STACK_FAKE_ENGINE_MAIN || path.join(dist, 'tools', 'fake-engine', 'main.js');
  const startTimeoutMs = envNumber(env, 'STACK_START_TIMEOUT_SECONDS', 60, { min: 1 }) * 1000;

  const listenPortEnv = env.LISTEN_PORT?.trim() ? envNumber(env, 'LISTEN_PORT', 0, { int: true, min: 1 }) : undefined;
  // The sidecar's own drain deadline (its default too); the stack waits that long, plus its exit path.
  const drainTimeoutMs = envNumber(env, 'DRAIN_TIMEOUT_SECONDS', 30, { min: 0 }) * 1000;
  const listenAddress = env.LISTEN_ADDRESS?.trim() || '127.0.0.1';
  const stallTimeoutSeconds = envNumber(env, 'STALL_IDLE_TIMEOUT_SECONDS', 20, { min: 0.001 });
  const maxStallSeconds = envNumber(env, 'MAX_STALL_SECONDS', 300, { min: 0.001 });
  const upstreamHeadersTimeoutSeconds = envNumber(env, 'UPSTREAM_HEADERS_TIMEOUT_SECONDS', 60, { min: 0.001 });
  // The longest Retry-After of a replica's 429 Envoy's egress waits out before another replica (envoy-config.ts).
  const retryAfterMaxSeconds = envNumber(env, 'RETRY_AFTER_MAX_SECONDS', 10, { min: 0.001 });
  const adminPortEnv = env.ENVOY_ADMIN_PORT ? envNumber(env, 'ENVOY_ADMIN_PORT', 0, { int: true, min: 1 }) : undefined;
  const envoyLogLevel = env.ENVOY_LOG_LEVEL?.trim() || 'warning';
  // Envoy's memory cap for clients that do not read (tools/stack/envoy-memory.ts; default 384 MiB).
  const envoyMaxHeapMb = env.ENVOY_MAX_HEAP_MB?.trim() ? envNumber(env, 'ENVOY_MAX_HEAP_MB', 384, { int: true, min: 32 }) : undefined;
  // The time a client has to send its whole request, body included (Envoy's 408 after it; 0 = no limit).
  const requestBodyTimeoutSeconds = envNumber(env, 'ENVOY_REQUEST_BODY_TIMEOUT_SECONDS', DEFAULT_REQUEST_BODY_TIMEOUT_SECONDS, { min: 0 });
  // Envoy's own OpenTelemetry tracer (tools/stack/envoy-tracing.ts): off unless an OTLP/HTTP collector is named.
  const envoyTracing = envoyTracingFrom(env.ENVOY_OTLP_ENDPOINT);
  // grpc.health.v1 by default: it also sees a draining (NOT_SERVING) or wedged sidecar, which a TCP check cannot.
  const healthCheck = (env.ENVOY_EXT_PROC_HEALTH_CHECK?.trim().toLowerCase() || 'grpc') as 'tcp' | 'grpc';
  if (healthCheck !== 'tcp' && healthCheck !== 'grpc') {
    throw new StackError(`ENVOY_EXT_PROC_HEALTH_CHECK must be tcp or grpc, got ${JSON.stringify(env.ENVOY_EXT_PROC_HEALTH_CHECK)}`);
  }
  const userDownstream = env.DOWNSTREAM_URL?.trim() || undefined;
  const userContinuation = env.CONTINUATION_URL?.trim() || undefined;
  const continuationTier = userContinuation ? parseTierUrls('CONTINUATION_URL', userContinuation) : undefined;
  let routerTier = userDownstream ? parseTierUrls('DOWNSTREAM_URL', userDownstream) : undefined;

  for (const [what, file] of [['sidecar', sidecarMain], ...(routerTier ? [] : [['fake engine', fakeEngineMain]])] as const) {
    if (!fs.existsSync(file)) throw new StackError(`${what} entry point ${file} not found: run \`npm run build\` first`);
  }

  const st: Started = { children: [] };
  let level: StopLevel = 'running';
  /** 130 once a second signal has stepped past the first: the exit code says the stop was cut short. */
  let stopCode: number | undefined;
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((r) => {
    finish = r;
  });

  // The sidecar first: it drains (SIGTERM) or ends every open stream with the interruption event (SIGINT)
  // while Envoy and the engines still carry the streams; then Envoy, once its clients have had their last
  // bytes, and the engines. Draining, Envoy's own streams (requests the draining sidecar passed through, proxied
  // natively) get what is left of the same deadline; stopping now, a moment to deliver the last bytes.
  const stopAll = async (how: 'draining' | 'stopping-now'): Promise<void> => {
    const deadline = Date.now() + (how === 'draining' ? drainTimeoutMs : 0);
    const sidecar = st.children.find((c) => c.name === 'sidecar');
    if (sidecar) await sidecar.stop(how === 'draining' ? 'SIGTERM' : 'SIGINT');
    const envoy = st.envoy
      ?.catch(() => undefined)
      .then(async (e) => {
        const draining = level === 'draining';
        const idleWaitMs = draining ? Math.max(ENVOY_IDLE_WAIT_MS, deadline - Date.now()) : ENVOY_IDLE_WAIT_MS;
        // A further signal during the wait ends it: stop now means now.
        await e?.waitForIdle(idleWaitMs, () => draining && level !== 'draining').catch(() => undefined);
        await e?.stop().catch(() => undefined);
      });
    // The engines last: a stream Envoy still proxies natively needs its replica until Envoy is done.
    await envoy;
    await Promise.all(st.children.map((c) => c.stop('SIGTERM')));
  };
  /** One step of the stop ladder (src/lifecycle/stop-ladder.ts), for a signal or a reason of our own. */
  const step = (to: StopLevel, code: number, why: string): void => {
    if (to === level || level === 'exiting') return;
    const from = level;
    level = to;
    say(why);
    if (to === 'exiting') {
      // The exit hooks SIGKILL every child's process group and remove Envoy's folder (envoy-process.ts).
      process.exit(130);
    }
    if (from === 'draining') {
      // Already stopping in order: the sidecar takes the further step itself; the rest follows it as before.
      st.children.find((c) => c.name === 'sidecar')?.signal('SIGINT');
      stopCode = 130;
      return;
    }
    void stopAll(to === 'draining' ? 'draining' : 'stopping-now').then(
      () => finish(stopCode ?? code),
      () => finish(stopCode ?? (code || 1)),
    );
  };
  const shutdown = (code: number, why: string): void => {
    if (level === 'running') step('stopping-now', code, why);
  };
  const watch = (name: string, exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>): void => {
    void exited.then((info) => shutdown(1, `${name} exited unexpectedly (${describeExit(info)}); stopping everything`));
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    const to = nextStopLevel(level, sig);
    step(
      to,
      0,
      to === 'exiting'
        ? `${sig} again: exiting now (children get SIGKILL)`
        : to === 'stopping-now'
          ? `${sig}: stopping now (every open stream ends with the interruption event)`
          : `${sig}: stopping (the sidecar drains first, ${drainTimeoutMs / 1000} s at most)`,
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
  // npm gone (SIGKILLed with its group, the terminal closed): whoever stopped it wants everything gone, a drain
  // under way included.
  watchParent(env.STACK_PARENT_PID, () => {
    if (level === 'running' || level === 'draining') step('stopping-now', 0, 'the parent process (npm) is gone: stopping now');
  });
  // Ours alone (tools/stack/run.sh): the children, which inherit this environment, have other parents.
  delete env.STACK_PARENT_PID;
  // With the terminal gone (SIGHUP), writing to it fails: keep stopping rather than die on an 'error' event.
  process.stdout.on('error', () => undefined);
  process.stderr.on('error', () => undefined);

  const prefixed =
    (name: string) =>
    (line: string): void => {
      process.stderr.write(formatLine(LOG_FORMAT, name, line));
    };
  const spawnNode = (
    name: string,
    script: string,
    args: string[],
    childEnv: NodeJS.ProcessEnv,
    critical = true,
    stopGraceMs?: number,
    nodeFlags: readonly string[] = [],
  ): ManagedChild => {
    const c = spawnManaged(process.execPath, [...nodeFlags, script, ...args], { name, env: childEnv, onLine: prefixed(name), stopGraceMs });
    st.children.push(c);
    if (critical) watch(name, c.exited);
    // A demo replica is meant to be killed (that is what the demo shows): the stack keeps running.
    else
      void c.exited.then((info) => {
        if (level === 'running')
          say(`${name} exited (${describeExit(info)}); the other replica keeps serving; restart the demo to get it back`);
      });
    return c;
  };
  // Any failure while starting: stop what is up and fail with the reason.
  const guard = <T>(p: Promise<T>): Promise<T> =>
    Promise.race([
      p,
      finished.then((): never => {
        throw new StackError('stopped while starting');
      }),
    ]);

  try {
    const envoyBin = await ensureEnvoy({ log: say });
    say(`envoy: ${envoyBin}`);
    const sidecarEnv: NodeJS.ProcessEnv = { ...env };
    let engines: Array<{ name: string; host: string; port: number; pid: number }> = [];

    // 1. Fake engines when no router tier was given.
    if (!routerTier) {
      const dialect = (env.CONTINUATION_ENGINE?.trim().toLowerCase() || 'sglang') === 'vllm' ? 'vllm' : 'sglang';
      const demo = demoConfig(env, path.resolve(dist, '..'), dialect);
      Object.assign(sidecarEnv, demo.sidecarEnv);
      for (const line of demo.lines) say(line);
      engines = await Promise.all(
        ['replica-a', 'replica-b'].map(async (name) => {
          // Port 0: the engine binds an ephemeral port itself and names it (no window for another process to
          // take a port picked here first; seen in CI with two jest workers starting stacks).
          const c = spawnNode(
            name,
            fakeEngineMain,
            // --fault-scope request: the README's `x-fake-fault: crash@30` crashes every request that sends it.
            ['--port', '0', '--name', name, '--dialect', dialect, ...demo.engineArgs, '--token-ms', '40', '--fault-scope', 'request'],
            env,
            false,
          );
          const m = await guard(
            c.waitForLine(new RegExp(`^FAKE_ENGINE ${name} listening (http://\\S+)`), startTimeoutMs, 'its FAKE_ENGINE line'),
          );
          const u = new URL(m[1]);
          return { host: u.hostname, port: Number(u.port), pid: c.pid, name };
        }),
      );
      routerTier = engines.map(({ host, port }) => ({ host, port }));
      say(
        `demo: fake engines ${engines.map((e) => `${e.name} ${e.host}:${e.port} (pid ${e.pid})`).join(', ')} (dialect ${dialect}); kill -9 a pid mid-answer to watch the recovery`,
      );
    }

    // 2. Envoy first, binding every port it was not given itself (port 0, read back from its admin
    // interface): a port picked free here and bound a moment later can be taken in between (seen: Envoy's
    // admin port, picked free, taken by this stack's own sidecar). The ext_proc cluster starts without an
    // endpoint (Envoy bypasses the sidecar meanwhile) and gets the sidecar's once it has bound its own port.
    const envoyStart = startEnvoy({
      envoyBin,
      listenPort: listenPortEnv ?? 0,
      listenAddress,
      adminPort: adminPortEnv ?? 0,
      egressPort: 0,
      continuationEgressPort: continuationTier ? 0 : undefined,
      routerTier,
      continuationTier,
      stallTimeoutSeconds,
      maxStallSeconds,
      upstreamHeadersTimeoutSeconds,
      retryAfterMaxSeconds,
      extProcHealthCheck: healthCheck,
      logLevel: envoyLogLevel,
      ...(envoyMaxHeapMb !== undefined ? { maxHeapBytes: envoyMaxHeapMb * 1024 * 1024 } : {}),
      ...(envoyTracing ? { tracing: envoyTracing } : {}),
      requestBodyTimeoutSeconds,
      startTimeoutMs,
      onLine: prefixed('envoy'),
    });
    st.envoy = envoyStart;
    const envoy = await guard(envoyStart);
    watch('envoy', envoy.exited);

    // 3. The sidecar, its legs through Envoy's egress listener(s); it binds port 0 itself and names its port.
    if (!env.PORT?.trim()) sidecarEnv.PORT = '0';
    if (!env.ADMIN_PORT?.trim()) sidecarEnv.ADMIN_PORT = '0';
    sidecarEnv.DOWNSTREAM_URL = envoy.egressUrl;
    // The demo counts exactly: its fake engines serve /tokenize, reached through the egress listener (so a
    // recovery's counts never go to the replica that just failed). Against a router tier, TOKENIZE_URL is the user's.
    if (engines.length > 0 && !env.TOKENIZE_URL?.trim()) {
      sidecarEnv.TOKENIZE_URL = `${envoy.egressUrl}/tokenize`;
      say(`demo: TOKENIZE_URL=${sidecarEnv.TOKENIZE_URL} (exact usage from the fake engines' /tokenize)`);
    }
    if (envoy.continuationEgressUrl !== undefined) sidecarEnv.CONTINUATION_URL = envoy.continuationEgressUrl;
    else delete sidecarEnv.CONTINUATION_URL;
    // Its drain deadline, then its own hard exit (+5 s, src/main.ts), then SIGKILL to its process group.
    const sidecar = spawnNode('sidecar', sidecarMain, [], sidecarEnv, true, drainTimeoutMs + 7000, SIDECAR_NODE_FLAGS);
    const sm = await guard(
      sidecar.waitForLine(/^SIDECAR listening (\d+)(?: admin (-?\d+))?/, startTimeoutMs, 'its `SIDECAR listening <port>` line'),
    );
    const extProcPort = Number(sm[1]);
    const sidecarAdminPort = sm[2] !== undefined ? Number(sm[2]) : undefined;
    const sidecarHost = env.HOST?.trim();
    // The sidecar binds HOST (default 127.0.0.1); Envoy reaches a wildcard bind through loopback.
    const extProcHost =
      sidecarHost && net.isIP(sidecarHost) && sidecarHost !== '0.0.0.0' && sidecarHost !== '::' ? sidecarHost : '127.0.0.1';

    // 4. Envoy is told where the sidecar is, and health-checks it (chat requests bypass it until then).
    envoy.setExtProcEndpoint(extProcHost, extProcPort);
    await guard(envoy.waitForExtProcHealthy(startTimeoutMs));
    const { listenPort, adminPort, egressPort, continuationEgressPort } = envoy;
    say(
      `envoy admin ${envoy.adminUrl}, egress ${envoy.egressUrl}` +
        (envoy.continuationEgressUrl ? `, continuation egress ${envoy.continuationEgressUrl}` : '') +
        `, router tier ${routerTier.map((h) => `${h.host}:${h.port}`).join(', ')}` +
        (continuationTier ? `, continuation tier ${continuationTier.map((h) => `${h.host}:${h.port}`).join(', ')}` : '') +
        `, sidecar ext_proc ${extProcHost}:${extProcPort}`,
    );
    say(
      `ports: front ${listenAddress}:${listenPort}, envoy admin ${adminPort}, egress ${egressPort}` +
        (continuationEgressPort !== undefined ? `, continuation egress ${continuationEgressPort}` : '') +
        `, sidecar ext_proc ${extProcPort}` +
        (sidecarAdminPort !== undefined && sidecarAdminPort > 0 ? `, sidecar admin ${sidecarAdminPort}` : '') +
        (engines.length ? `, ${engines.map((e) => `${e.name} ${e.port}`).join(', ')}` : ''),
    );
    process.stdout.write(`READY http://127.0.0.1:${listenPort}\n`);
    if (sidecarAdminPort !== undefined && sidecarAdminPort > 0) process.stdout.write(`ADMIN http://127.0.0.1:${sidecarAdminPort}\n`);
  } catch (e) {
    shutdown(1, `start failed: ${(e as Error).message}`);
  }
  return finished;
}

/**
 * Exits once what was written to stdout and stderr has left the process: a reader slower than the records
 * (a burst of streams ending at a stop) leaves the rest in Node's queue, and process.exit() drops it, the last
 * record cut short (CI saw one in stack-signals.e2e). The empty writes' callbacks come after everything queued
 * before them; 2 s at most, for a reader that never reads.
 */
function exitAfterOutput(code: number): void {
  let pending = 2;
  const done = (): void => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
  setTimeout(() => process.exit(code), 2000).unref();
}

if (require.main === module) {
  main().then(
    (code) => exitAfterOutput(code),
    (e: unknown) => {
      say(e instanceof StackError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e));
      exitAfterOutput(1);
    },
  );
}
