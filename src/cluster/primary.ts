// WORKERS > 1: several sidecar processes share the ext_proc gRPC port (Node cluster: the primary owns the
// listening socket and hands connections to the workers), so the data path uses every core. Each Envoy
// connection (and so each request on it) belongs to one worker; requests carry no state across processes.
//
// The primary serves the admin port itself: /healthz, /readyz (every worker listening, not draining) and
// /metrics aggregated from the workers over IPC (worker-metrics.ts). It restarts a worker that dies, and on
// SIGTERM lets every worker drain before exiting, DRAIN_TIMEOUT_SECONDS at most (supervisor.ts).
// A worker whose primary is gone (killed, crashed) exits at once: Node's cluster does that on the unexpected
// IPC 'disconnect' (and src/obs/logger.ts keeps that exit from hanging on a dead stdout pipe).
import type { Worker } from 'node:cluster';
import { Registry } from 'prom-client';
import type { GatewayConfig } from '../config/env';
import { type AdminServer, startAdminServer } from '../obs/admin-server';
import { AdmissionMetrics } from '../obs/admission-metrics';
import type { Logger } from '../obs/logger';
import { AdmissionAuthority, admissionSettings } from '../recovery/admission';
import { AdmissionHub } from '../recovery/admission-cluster';
import type { ToWorker } from './messages';
import { WorkerSupervisor } from './supervisor';
import { WorkerMetrics } from './worker-metrics';

/** Recovery admission for all workers (src/recovery/admission-cluster.ts), its metrics in the primary's registry. */
function admissionHub(config: GatewayConfig, log: Logger, registry: Registry, live: ReadonlySet<Worker>): AdmissionHub {
  const hub: AdmissionHub = new AdmissionHub(
    (streams): AdmissionAuthority =>
      new AdmissionAuthority(admissionSettings(config), streams, new AdmissionMetrics(registry, log, () => hub?.authority)),
    (m) => {
      for (const w of live) if (w.isConnected()) w.send(m satisfies ToWorker);
    },
  );
  return hub;
}

/** The primary's exit: the admin server closed, the log flushed. */
function exitPrimary(admin: AdminServer, log: Logger, code: number): void {
  void admin.close().then(() => {
    log.flush();
    process.exit(code);
  });
}

export async function runPrimary(
  config: GatewayConfig,
  log: Logger,
  onListening: (port: number, adminPort: number) => void,
): Promise<void> {
  const live = new Set<Worker>();
  const primaryRegistry = new Registry();
  const hub = admissionHub(config, log, primaryRegistry, live);
  const metrics = new WorkerMetrics(primaryRegistry);
  const supervisor = new WorkerSupervisor(config, log, live, hub, metrics);
  const admin = await startAdminServer({
    host: config.adminHost,
    port: config.adminPort,
    metrics,
    ready: () => supervisor.allReady(),
  });
  // Workers only once the admin port is ours: a taken port stops the start here, before any process is forked.
  supervisor.start({
    onListening: (port) => onListening(port, admin.port),
    finish: (code) => exitPrimary(admin, log, code),
  });
  process.on('SIGTERM', () => supervisor.stop('SIGTERM'));
  process.on('SIGINT', () => supervisor.stop('SIGINT'));
}
