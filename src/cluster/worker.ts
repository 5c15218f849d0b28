// A cluster worker's side (WORKERS > 1, src/cluster/primary.ts): it reports readiness, answers the primary's
// metrics requests, and asks the primary for recovery admission.
import cluster from 'node:cluster';
import type { RecoveryAdmission } from '../recovery/admission';
import { RemoteAdmission } from '../recovery/admission-cluster';
import type { Sidecar } from '../sidecar';
import type { ToPrimary, ToWorker } from './messages';

let remoteAdmission: RemoteAdmission | undefined;

/** In a worker: recovery admission asks the primary (pass to startSidecar's `admission` option). */
export function workerAdmission(streams: { readonly active: number }): RecoveryAdmission {
  remoteAdmission = new RemoteAdmission(streams, (m) => (process.connected && process.send ? process.send(m) : false));
  return remoteAdmission;
}

/**
 * In a worker: report readiness, answer the primary's metrics requests and admission answers, and stop when
 * the primary says so (`onStop`; the worker's own SIGINT/SIGTERM are ignored, src/main.ts).
 */
export function serveAsWorker(sidecar: Sidecar, onStop: (level: 'draining' | 'stopping-now') => void): void {
  process.send?.({ type: 'ready', port: sidecar.port } satisfies ToPrimary);
  process.on('message', (m: ToWorker) => {
    if (m?.type === 'admission') return remoteAdmission?.receive(m);
    if (m?.type === 'stop') return onStop(m.level);
    if (m?.type !== 'metrics?') return;
    void sidecar.ctx.metrics.registry
      .getMetricsAsJSON()
      .then((json) => process.send?.({ type: 'metrics', id: m.id, json } satisfies ToPrimary));
  });
}

export const isClusterWorker = (): boolean => cluster.isWorker && process.env.SIDECAR_WORKER === '1';
