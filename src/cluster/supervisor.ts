// The primary's workers (WORKERS > 1): forked, watched, replaced when one dies (unless it is a crash loop:
// then all stop), and stopped on a signal, with a deadline past which the ones still running are killed.
import cluster, { type Worker } from 'node:cluster';
import type { GatewayConfig } from '../config/env';
import { nextStopLevel, type StopLevel } from '../lifecycle/stop-ladder';
import type { Logger } from '../obs/logger';
import type { AdmissionHub } from '../recovery/admission-cluster';
import type { ToPrimary, ToWorker } from './messages';
import { afterWorkerDeath, deathsInWindow, workerKillDelayMs } from './restart-policy';
import type { WorkerMetrics } from './worker-metrics';

/** What the supervisor tells the primary: every worker listens, and the primary's exit code. */
export interface PrimaryHooks {
  onListening(port: number): void;
  finish(code: number): void;
}

export class WorkerSupervisor {
  /** The workers listening: worker id -> port. */
  private readonly ready = new Map<number, number>();
  private deaths: number[] = [];
  private draining = false;
  private level: StopLevel = 'running';
  /** A worker could not start, died too often or outlived the drain deadline: the primary's exit code is 1. */
  private failed = false;
  private announced = false;
  private hooks: PrimaryHooks = { onListening: () => undefined, finish: () => undefined };

  /**
   * `live`: the workers whose process has not exited, kept by us: Node's cluster.workers still lists a worker
   * whose 'exit' came before its IPC 'disconnect' (lib/internal/cluster/primary.js removes it on whichever
   * comes second), so "cluster.workers is empty" at the last 'exit' is not reliable.
   */
  constructor(
    private readonly config: Pick<GatewayConfig, 'workers' | 'drainTimeoutMs'>,
    private readonly log: Logger,
    private readonly live: Set<Worker>,
    private readonly hub: AdmissionHub,
    private readonly metrics: WorkerMetrics,
  ) {}

  /** /readyz: every worker listening, and not stopping. */
  allReady(): boolean {
    return !this.draining && this.ready.size === this.config.workers;
  }

  /** Forks WORKERS workers. */
  start(hooks: PrimaryHooks): void {
    this.hooks = hooks;
    for (let i = 0; i < this.config.workers; i++) this.fork();
  }

  /**
   * A signal, one step of the stop ladder (src/lifecycle/stop-ladder.ts): the workers are told over IPC to
   * drain or to stop now (they ignore signals, so one sent to the whole group counts once); past that they
   * are killed. Exits when the last one has.
   */
  stop(signal: NodeJS.Signals): void {
    const first = !this.draining;
    this.draining = true;
    this.level = nextStopLevel(this.level, signal);
    const level = this.level;
    this.log.info(
      { signal, stop: level, workers: this.live.size },
      level === 'draining' ? 'stopping: workers drain' : `stopping: ${level}`,
    );
    for (const w of this.live) {
      if ((level === 'draining' || level === 'stopping-now') && w.isConnected()) w.send({ type: 'stop', level } satisfies ToWorker);
      else w.process.kill('SIGKILL');
    }
    if (!first || level === 'exiting') return;
    if (this.live.size === 0) return this.hooks.finish(this.failed ? 1 : 0);
    // A drain deadline always ends the process, even with a worker that does not end on its own.
    setTimeout(() => this.killWedged(), workerKillDelayMs(signal, this.config.drainTimeoutMs)).unref();
  }

  private fork(): Worker {
    const w = cluster.fork({ SIDECAR_WORKER: '1' });
    this.live.add(w);
    w.on('message', (m: ToPrimary) => this.onMessage(w, m));
    w.on('exit', (code, signal) => this.onExit(w, code, signal));
    return w;
  }

  private onMessage(w: Worker, m: ToPrimary): void {
    if (m.type === 'admission') this.hub.onMessage(w, m);
    else if (m.type === 'ready') this.onReady(w, m.port);
    else if (m.type === 'metrics') this.metrics.receive(m);
  }

  private onReady(w: Worker, port: number): void {
    this.ready.set(w.id, port);
    if (w.isConnected()) w.send(this.hub.quietMessage() satisfies ToWorker); // a replacement may start during a recovery
    if (!this.announced && this.ready.size === this.config.workers) {
      this.announced = true;
      this.log.info({ workers: this.config.workers, port }, 'all sidecar workers listening');
      this.hooks.onListening(port);
    }
  }

  private onExit(w: Worker, code: number, signal: string): void {
    this.live.delete(w);
    this.ready.delete(w.id);
    this.hub.release(w.id);
    if (this.draining) {
      if (this.live.size === 0) this.hooks.finish(this.failed ? 1 : 0);
      return;
    }
    this.deaths = deathsInWindow(this.deaths, Date.now());
    if (afterWorkerDeath(this.announced, this.deaths.length) === 'stop') return this.stopCrashLoop(w, code, signal);
    this.log.error({ worker: w.id, code, signal }, 'sidecar worker died: starting a replacement');
    this.fork();
  }

  private stopCrashLoop(w: Worker, code: number, signal: string): void {
    this.log.error({ worker: w.id, code, signal, started: this.announced }, 'sidecar worker died during start-up or too often: stopping');
    this.draining = true;
    this.failed = true;
    for (const other of this.live) other.process.kill('SIGKILL');
    if (this.live.size === 0) this.hooks.finish(1);
    setTimeout(() => process.exit(1), 200).unref();
  }

  private killWedged(): void {
    this.log.error({ workers: this.live.size }, 'workers still running past the drain deadline: killing them');
    this.failed = true;
    for (const w of this.live) w.process.kill('SIGKILL');
    setTimeout(() => process.exit(1), 1000).unref();
  }
}
