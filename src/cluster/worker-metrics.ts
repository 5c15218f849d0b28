// The primary's /metrics: every worker's registry asked over IPC (METRICS_TIMEOUT_MS at most: a worker that
// does not answer in time is left out), plus the primary's own (recovery admission), aggregated by
// prom-client's AggregatorRegistry.
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, Registry } from 'prom-client';
import type { MetricsSource } from '../obs/admin-server';
import type { MetricJson, ToWorker } from './messages';

const METRICS_TIMEOUT_MS = 2000;

interface Pending {
  got: MetricJson[][];
  want: number;
  done: () => void;
}

export class WorkerMetrics implements MetricsSource {
  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;
  private nextId = 0;
  /** The scrapes waiting for their workers' answers, by request id. */
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly primaryRegistry: Registry) {}

  async render(): Promise<string> {
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && w.isConnected());
    const id = ++this.nextId;
    const got: MetricJson[][] = [];
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, METRICS_TIMEOUT_MS);
      this.pending.set(id, {
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
    this.pending.delete(id);
    got.push(await this.primaryRegistry.getMetricsAsJSON());
    return AggregatorRegistry.aggregate(got).metrics();
  }

  /** A worker's answer to `metrics?` (a late one, after its scrape gave up, is dropped). */
  receive(m: { id: number; json: MetricJson[] }): void {
    const p = this.pending.get(m.id);
    if (p) {
      p.got.push(m.json);
      if (p.got.length >= p.want) p.done();
    }
  }
}
