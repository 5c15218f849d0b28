// `npm run stack` / `npm run demo`: the whole gateway on one machine.
//
//   [fake engines replica-a, replica-b]  (only without DOWNSTREAM_URL)
//   Envoy    generated bootstrap           front listener on LISTEN_PORT; ext_proc endpoint from a file, below
//   sidecar  node <SIDECAR_NODE_FLAGS> dist/src/main.js  PORT=0 (it names its port), DOWNSTREAM_URL=<Envoy egress>
//
// stdout carries exactly one line, `READY http://127.0.0.1:<LISTEN_PORT>`, once Envoy is ready and the sidecar
// is seen healthy; everything else (ours and the children's output: `[name] line` on a terminal, one JSON object
// per line otherwise, tools/stack/log-lines.ts) goes to stderr, including a
// `ports:` line. Every port not set explicitly is ephemeral and bound by the process that listens on it
// (port 0; nothing is picked free first), so that stacks can run side by side and back to back (the
// sidecar's own defaults, 50051 and 9090, are for deployments).
//
// Stopping: SIGTERM (or SIGHUP: the terminal closed) lets the sidecar drain first, Envoy and the engines still
// serving, for DRAIN_TIMEOUT_SECONDS at most, then stops Envoy and the engines; SIGINT stops everything at
// once; a second signal SIGKILLs everything. Exit 0, or 1 when a child died on its own (the rest is stopped).
// When this process is killed outright, each child's watchdog ends it (tools/stack/envoy-process.ts).

import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';
import { selectFamily } from '../../src/families/select';
import { ensureEnvoy } from './envoy-binary';
import { describeExit, type ManagedChild, type RunningEnvoy, spawnManaged, startEnvoy } from './envoy-process';
import { formatLine, stackLogFormat } from './log-lines';
import { envNumber, envoyTracingFrom, parseTierUrls, StackError } from './stack-env';

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
  let shuttingDown = false;
  let finish: (code: number) => void = () => undefined;
  const finished = new Promise<number>((r) => {
    finish = r;
  });

  const stopAll = async (now: boolean): Promise<void> => {
    const sidecar = st.children.find((c) => c.name === 'sidecar');
    // Graceful: the sidecar drains (streams in flight finish, new ones bypass it) while Envoy and the engines
    // still carry them; then the rest. Now: all at once, the sidecar told to close without draining.
    if (sidecar && !now) await sidecar.stop('SIGTERM');
    const envoy = st.envoy?.catch(() => undefined).then((e) => e?.stop().catch(() => undefined));
    await Promise.all([envoy, ...st.children.map((c) => c.stop(c === sidecar ? 'SIGINT' : 'SIGTERM'))]);
  };
  const shutdown = (code: number, why: string, now = false): void => {
    if (shuttingDown) return;
    shuttingDown = true;
    say(why);
    void stopAll(now).then(
      () => finish(code),
      () => finish(code || 1),
    );
  };
  const watch = (name: string, exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>): void => {
    void exited.then((info) => {
      if (!shuttingDown) shutdown(1, `${name} exited unexpectedly (${describeExit(info)}); stopping everything`);
    });
  };
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      say(`${sig} again: exiting now (children get SIGKILL)`);
      process.exit(130);
    }
    shutdown(
      0,
      sig === 'SIGINT'
        ? 'SIGINT: stopping everything now'
        : `${sig}: stopping (the sidecar drains first, ${drainTimeoutMs / 1000} s at most)`,
      sig === 'SIGINT',
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);
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
        if (!shuttingDown) say(`${name} exited (${describeExit(info)}); the other replica keeps serving; restart the demo to get it back`);
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
      if (!env.CONTINUATION_MODEL?.trim()) {
        sidecarEnv.CONTINUATION_MODEL = 'generic-demo';
        say("demo: CONTINUATION_MODEL was unset, using CONTINUATION_MODEL=generic-demo (the fake engines' family)");
      }
      // The fake engines speak the family CONTINUATION_MODEL names (`CONTINUATION_MODEL=Qwen/Qwen3-32B npm run
      // demo`: Qwen3's <think> format), or the generic one when it names none.
      const named = selectFamily(sidecarEnv.CONTINUATION_MODEL);
      const family = named.known && named.family.name !== 'generic' ? named.family.name : 'generic';
      if (family !== 'generic') say(`demo: the fake engines speak the ${family} family`);
      engines = await Promise.all(
        ['replica-a', 'replica-b'].map(async (name) => {
          // Port 0: the engine binds an ephemeral port itself and names it (no window for another process to
          // take a port picked here first; seen in CI with two jest workers starting stacks).
          const c = spawnNode(
            name,
            fakeEngineMain,
            // --fault-scope request: the README's `x-fake-fault: crash@30` crashes every request that sends it.
            ['--port', '0', '--name', name, '--dialect', dialect, '--family', family, '--token-ms', '40', '--fault-scope', 'request'],
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
  } catch (e) {
    if (!shuttingDown) shutdown(1, `start failed: ${(e as Error).message}`);
  }
  return finished;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (e: unknown) => {
      say(e instanceof StackError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e));
      process.exit(1);
    },
  );
}
