// WORKERS > 1: several sidecar processes share the ext_proc gRPC port (Node cluster: the primary owns the
// listening socket and hands connections to the workers), so the data path uses every core. Each Envoy
// connection (and so each request on it) belongs to one worker; requests carry no state across processes.
//
// The primary serves the admin port itself: /healthz, /readyz (every worker listening, not draining) and
// /metrics aggregated from the workers over IPC (prom-client's AggregatorRegistry). It restarts a worker
// that dies, and on SIGTERM lets every worker drain before exiting, DRAIN_TIMEOUT_SECONDS at most.
// A worker whose primary is gone (killed, crashed) exits at once: Node's cluster does that on the unexpected
// IPC 'disconnect' (and src/obs/logger.ts keeps that exit from hanging on a dead stdout pipe).
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Registry } from 'prom-client';

// prom-client's JSON form of a registry, as getMetricsAsJSON() returns it and aggregate() takes it.
type metric = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

import type { GatewayConfig } from './config/env';
import { type AdminServer, startAdminServer } from './obs/admin-server';
import { AdmissionMetrics } from './obs/admission-metrics';
import type { Logger } from './obs/logger';
import { AdmissionAuthority, admissionSettings, type RecoveryAdmission } from './recovery/admission';
import { AdmissionHub, type AdmissionRequestMessage, type AdmissionToWorker, RemoteAdmission } from './recovery/admission-cluster';
import type { Sidecar } from './sidecar';

type ToPrimary = { type: 'ready'; port: number } | { type: 'metrics'; id: number; json: metric[] } | AdmissionRequestMessage;
type ToWorker = { type: 'metrics?'; id: number } | AdmissionToWorker;

const METRICS_TIMEOUT_MS = 2000;
/** More worker deaths than this within the window: something is wrong for good, stop instead of looping. */
const MAX_RESTARTS_IN_WINDOW = 5;
const RESTART_WINDOW_MS = 60_000;
/** Past a worker's own deadline (DRAIN_TIMEOUT_SECONDS + 5 s, src/main.ts): it is wedged, kill it. */
const WORKER_EXIT_SLACK_MS = 6000;

export async function runPrimary(
  config: GatewayConfig,
  log: Logger,
  onListening: (port: number, adminPort: number) => void,
): Promise<void> {
  const ready = new Map<number, number>(); // worker id -> port
  // The workers whose process has not exited, kept by us: Node's cluster.workers still lists a worker whose
  // 'exit' came before its IPC 'disconnect' (lib/internal/cluster/primary.js removes it on whichever comes
  // second), so "cluster.workers is empty" at the last 'exit' is not reliable.
  const live = new Set<Worker>();
  let draining = false;
  /** A worker could not start, died too often or outlived the drain deadline: the primary's exit code is 1. */
  let failed = false;
  let announced = false;
  let nextId = 0;
  const pending = new Map<number, { got: metric[][]; want: number; done: () => void }>();
  const recentDeaths: number[] = [];
  // Recovery admission for all workers lives here (src/recovery/admission-cluster.ts), with its metrics.
  const primaryRegistry = new Registry();
  const hub: AdmissionHub = new AdmissionHub(
    (streams): AdmissionAuthority =>
      new AdmissionAuthority(admissionSettings(config), streams, new AdmissionMetrics(primaryRegistry, log, () => hub?.authority)),
    (m) => {
      for (const w of live) if (w.isConnected()) w.send(m satisfies ToWorker);
    },
  );

  const aggregated = {
    contentType: Registry.PROMETHEUS_CONTENT_TYPE,
    async render(): Promise<string> {
      const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && w.isConnected());
      const id = ++nextId;
      const got: metric[][] = [];
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, METRICS_TIMEOUT_MS);
        pending.set(id, {
          got,
          want: workers.length,
          done: () => {
            clearTimeout(timer);
            resolve();
          },
        });
        for (const w of workers) w.send({ type: 'metrics?', id } satisfies ToWorker);
        if (workers.length === 0) resolve();
      });
      pending.delete(id);
      got.push(await primaryRegistry.getMetricsAsJSON());
      return AggregatorRegistry.aggregate(got).metrics();
    },
  };
  const admin: AdminServer = await startAdminServer({
    host: config.adminHost,
    port: config.adminPort,
    metrics: aggregated,
    ready: () => !draining && ready.size === config.workers,
  });
  const finish = (code: number) => {
    void admin.close().then(() => {
      log.flush();
      process.exit(code);
    });
  };
  const fork = (): Worker => {
    const w = cluster.fork({ SIDECAR_WORKER: '1' });
    live.add(w);
    w.on('message', (m: ToPrimary) => {
      if (m.type === 'admission') {
        hub.onMessage(w, m);
      } else if (m.type === 'ready') {
        ready.set(w.id, m.port);
        if (w.isConnected()) w.send(hub.quietMessage() satisfies ToWorker); // a replacement may start during a recovery
        if (!announced && ready.size === config.workers) {
          announced = true;
          log.info({ workers: config.workers, port: m.port }, 'all sidecar workers listening');
          onListening(m.port, admin.port);
        }
      } else if (m.type === 'metrics') {
        const p = pending.get(m.id);
        if (p) {
          p.got.push(m.json);
          if (p.got.length >= p.want) p.done();
        }
      }
    });
    w.on('exit', (code, signal) => {
      live.delete(w);
      ready.delete(w.id);
      hub.release(w.id);
      if (draining) {
        if (live.size === 0) finish(failed ? 1 : 0);
        return;
      }
      // A worker that cannot start (port taken, bad environment) would die again at once: no crash loop.
      const now = Date.now();
      recentDeaths.push(now);
      while (recentDeaths.length && recentDeaths[0] < now - RESTART_WINDOW_MS) recentDeaths.shift();
      if (!announced || recentDeaths.length > MAX_RESTARTS_IN_WINDOW) {
        log.error({ worker: w.id, code, signal, started: announced }, 'sidecar worker died during start-up or too often: stopping');
        draining = true;
        failed = true;
        for (const other of live) other.process.kill('SIGKILL');
        if (live.size === 0) finish(1);
        setTimeout(() => process.exit(1), 200).unref();
        return;
      }
      log.error({ worker: w.id, code, signal }, 'sidecar worker died: starting a replacement');
      fork();
    });
    return w;
  };
  // Workers only once the admin port is ours: a taken port stops the start here, before any process is forked.
  for (let i = 0; i < config.workers; i++) fork();

  const stop = (signal: NodeJS.Signals) => {
    const second = draining;
    draining = true;
    log.info({ signal, workers: live.size }, second ? 'stopping now' : 'stopping: workers drain');
    for (const w of live) w.process.kill(second ? 'SIGKILL' : signal);
    if (second) return;
    if (live.size === 0) return finish(failed ? 1 : 0);
    // A drain deadline always ends the process, even with a worker that does not end on its own.
    setTimeout(
      () => {
        log.error({ workers: live.size }, 'workers still running past the drain deadline: killing them');
        failed = true;
        for (const w of live) w.process.kill('SIGKILL');
        setTimeout(() => process.exit(1), 1000).unref();
      },
      (signal === 'SIGTERM' ? config.drainTimeoutMs : 0) + WORKER_EXIT_SLACK_MS,
    ).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

let remoteAdmission: RemoteAdmission | undefined;

/** In a worker: recovery admission asks the primary (pass to startSidecar's `admission` option). */
export function workerAdmission(streams: { readonly active: number }): RecoveryAdmission {
  remoteAdmission = new RemoteAdmission(streams, (m) => (process.connected && process.send ? process.send(m) : false));
  return remoteAdmission;
}

/** In a worker: report readiness and answer the primary's metrics requests and admission answers. */
export function serveAsWorker(sidecar: Sidecar): void {
  process.send?.({ type: 'ready', port: sidecar.port } satisfies ToPrimary);
  process.on('message', (m: ToWorker) => {
    if (m?.type === 'admission') return remoteAdmission?.receive(m);
    if (m?.type !== 'metrics?') return;
    void sidecar.ctx.metrics.registry
      .getMetricsAsJSON()
      .then((json) => process.send?.({ type: 'metrics', id: m.id, json } satisfies ToPrimary));
  });
}

export const isClusterWorker = (): boolean => cluster.isWorker && process.env.SIDECAR_WORKER === '1';
