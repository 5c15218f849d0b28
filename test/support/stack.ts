// A whole gateway for one end-to-end suite: fake engine replicas (in this process, so faults and the
// requests they saw are visible), the sidecar (in this process, so its log records can be asserted; or, with
// `sidecarProcess`, as its own process whose log lines are read back), and the real Envoy binary in front,
// exactly as `npm run stack` wires them.
import { loadConfig } from '../../src/config/env';
import { createLogger } from '../../src/obs/logger';
import { type Sidecar, startSidecar } from '../../src/sidecar';
import { resetFaults } from '../../tools/fake-engine/faults';
import { type FakeEngine, type FakeEngineOptions, startFakeEngine } from '../../tools/fake-engine/server';
import { type RunningEnvoy, startEnvoy } from '../../tools/stack/envoy-process';
import type { EnvoyTracingOptions } from '../../tools/stack/envoy-tracing';
import type { ChildExit } from '../../tools/stack/managed-child';
import { captureLogs } from './log-capture';
import { type SidecarProcess, startSidecarProcess } from './sidecar-process';

export interface TestStackOptions {
  /** Sidecar environment (reference variable names). DOWNSTREAM_URL and PORT are filled in. */
  env?: Record<string, string>;
  replicas?: number;
  engine?: Omit<FakeEngineOptions, 'port' | 'name'>;
  /** Options of replica i on top of `engine` (e.g. a different model revision per replica). */
  perReplica?: Omit<FakeEngineOptions, 'port' | 'name'>[];
  /** Tell Envoy each replica's revision (UpstreamHost.revision), so a continuation is routed by revision. */
  revisionRouting?: boolean;
  /** A separate continuation router (CONTINUATION_URL) with its own replica. */
  continuationReplica?: boolean;
  /** Start Envoy without waiting for the sidecar (for the sidecar-down test). */
  noSidecar?: boolean;
  /** How Envoy health-checks the sidecar (default grpc, as `npm run stack`). */
  healthCheck?: 'tcp' | 'grpc';
  /** Replicas running elsewhere (separate processes): Envoy routes to these, and no in-process engine starts. */
  routerTier?: { host: string; port: number }[];
  /** The sidecar's own defaults (STALL_IDLE_TIMEOUT_SECONDS 20, ...) instead of the suites' short timers. */
  productionDefaults?: boolean;
  /** Envoy's heap cap (the overload manager's fixed_heap; default the generator's). */
  maxHeapBytes?: number;
  /** Envoy's OpenTelemetry tracer, exporting to this collector (default off). */
  envoyTracing?: EnvoyTracingOptions;
  /** Run the sidecar as its own process (test/support/sidecar-process.ts); `sidecar` is then undefined. */
  sidecarProcess?: boolean;
}

export interface TestStack {
  url: string;
  engines: FakeEngine[];
  continuationEngine?: FakeEngine;
  sidecar?: Sidecar;
  envoy: RunningEnvoy;
  logs: any[];
  /** Log records with a given decision (TRIGGERED, ATTEMPT, ...) or event. */
  records(filter: Record<string, unknown>): any[];
  /** Waits until a request_end record for the request id exists. */
  waitForEnd(requestId: string, timeoutMs?: number): Promise<any>;
  stopSidecar(): Promise<void>;
  stop(): Promise<void>;
  /** Set when Envoy exited before stop(). */
  envoyExit?: ChildExit;
}

/**
 * Every port is bound by the process that listens on it (port 0), as `npm run stack` does: the engines, then
 * Envoy (admin, front and egress listeners on port 0, read back), then the sidecar (PORT 0, its legs to the
 * egress port Envoy got), whose port Envoy then learns from its endpoints file. Nothing is picked free first,
 * so parallel jest workers cannot take each other's ports. PORT_TAKEN stays for suites that pick their own.
 */
/** Envoy's and grpc-js's words for a port that another process took first. */
export const PORT_TAKEN = /Address already in use|EADDRINUSE|No address added/;

export async function startTestStack(o: TestStackOptions = {}): Promise<TestStack> {
  resetFaults();
  const engines: FakeEngine[] = [];
  for (let i = 0; i < (o.routerTier ? 0 : (o.replicas ?? 2)); i++)
    engines.push(await startFakeEngine({ ...o.engine, ...o.perReplica?.[i], name: `replica-${String.fromCharCode(97 + i)}` }));
  const continuationEngine = o.continuationReplica ? await startFakeEngine({ ...o.engine, name: 'continuation' }) : undefined;
  const capture = captureLogs();
  const { sink, logs, records } = capture;
  let sidecar: Sidecar | undefined;
  let sidecarProc: SidecarProcess | undefined;
  const closeEngines = () => Promise.all([...engines, ...(continuationEngine ? [continuationEngine] : [])].map((e) => e.close()));
  const envoy = await startEnvoy({
    listenPort: 0,
    adminPort: 0,
    egressPort: 0,
    routerTier:
      o.routerTier ??
      engines.map((e, i) => ({ host: '127.0.0.1', port: e.port, ...(o.revisionRouting ? { revision: o.perReplica?.[i]?.revision } : {}) })),
    ...(continuationEngine ? { continuationEgressPort: 0, continuationTier: [{ host: '127.0.0.1', port: continuationEngine.port }] } : {}),
    stallTimeoutSeconds: Number(o.env?.STALL_IDLE_TIMEOUT_SECONDS ?? (o.productionDefaults ? 20 : 1)),
    maxStallSeconds: Number(o.env?.MAX_STALL_SECONDS ?? 300),
    ...(o.env?.RETRY_AFTER_MAX_SECONDS ? { retryAfterMaxSeconds: Number(o.env.RETRY_AFTER_MAX_SECONDS) } : {}),
    // The sidecar serves grpc.health.v1: Envoy sees it NOT_SERVING while it drains.
    extProcHealthCheck: o.healthCheck ?? 'grpc',
    ...(o.maxHeapBytes !== undefined ? { maxHeapBytes: o.maxHeapBytes } : {}),
    ...(o.envoyTracing ? { tracing: o.envoyTracing } : {}),
  }).catch(async (e) => {
    await closeEngines();
    throw e;
  });
  // Without a sidecar the ext_proc cluster keeps no endpoint: Envoy proxies chat requests natively (fail-open).
  if (!o.noSidecar) {
    try {
      // `{engine0}` in a value stands for the first replica's URL (e.g. TOKENIZE_URL={engine0}/tokenize).
      const env = Object.fromEntries(
        Object.entries(o.env ?? {}).map(([k, v]) => [k, v.replace('{engine0}', engines[0]?.url ?? '{engine0}')]),
      );
      const sidecarEnv: Record<string, string> = {
        CONTINUATION_MODEL: 'generic-test',
        ...(o.productionDefaults ? {} : { STALL_IDLE_TIMEOUT_SECONDS: '1' }),
        ADMIN_PORT: '0', // several sidecars run in one process: an ephemeral admin port each
        ...env,
        DOWNSTREAM_URL: envoy.egressUrl,
        ...(envoy.continuationEgressUrl ? { CONTINUATION_URL: envoy.continuationEgressUrl } : {}),
        PORT: '0',
        LOG_LEVEL: o.env?.LOG_LEVEL ?? 'debug',
      };
      if (o.sidecarProcess) {
        sidecarProc = await startSidecarProcess(sidecarEnv, sink);
        envoy.setExtProcEndpoint('127.0.0.1', sidecarProc.port);
      } else {
        const config = loadConfig(sidecarEnv);
        sidecar = await startSidecar(config, createLogger(config.logLevel, sink));
        envoy.setExtProcEndpoint('127.0.0.1', sidecar.port);
      }
      await envoy.waitForExtProcHealthy(30_000);
    } catch (e) {
      await envoy.stop();
      await sidecar?.close();
      await sidecarProc?.stop();
      await closeEngines();
      throw e;
    }
  }
  // Envoy dying under a suite shows up as clients cut mid-answer; say so, with what Envoy last wrote.
  let stopping = false;
  void envoy.exited.then((x) => {
    if (stopping) return;
    stack.envoyExit = x;
    // Its application log only (the access log lines start with an ISO time): a crash's cause and backtrace.
    const appLog = envoy
      .logs()
      .split('\n')
      .filter((l) => !/^\[\d{4}-\d\d-\d\dT/.test(l));
    process.stderr.write(
      `[test stack] Envoy exited while the suite was running (code ${x.code}, signal ${x.signal}); its last output:\n` +
        `${appLog.slice(-200).join('\n')}\n`,
    );
  });
  const stack: TestStack = {
    url: `http://127.0.0.1:${envoy.listenPort}`,
    engines,
    continuationEngine,
    sidecar,
    envoy,
    logs,
    records,
    waitForEnd: capture.waitForEnd,
    async stopSidecar() {
      await sidecar?.close();
      await sidecarProc?.stop();
      sidecar = undefined;
      sidecarProc = undefined;
    },
    async stop() {
      stopping = true;
      await envoy.stop();
      await sidecar?.close();
      await sidecarProc?.stop();
      // The engines the stack has now: a suite may have swapped one for another (a different dialect on the
      // same port); a server left listening keeps the jest worker from exiting.
      await Promise.all([...stack.engines, ...(stack.continuationEngine ? [stack.continuationEngine] : [])].map((e) => e.close()));
    },
  };
  return stack;
}
