// Recovery admission: who may send a recovery leg (a retry before the first delta, or a continuation) now.
//
// One authority per gateway: in the sidecar process itself, or, with WORKERS > 1, in the cluster primary
// (the workers ask it over IPC, src/recovery/admission-cluster.ts), so the limit means the same thing with
// one process or eight. A request that finds no free slot waits in a FIFO queue for at most the queue
// timeout instead of being refused; the brake (admission-policy.ts) ends waiting and new recoveries at once
// when recovery legs keep failing.
import type { GatewayConfig } from '../config/env';
import { type BrakeSettings, RecoveryBrake, type ReprefillLimits, reprefillLimit } from './admission-policy';

export type RefusalReason = 'brake-open' | 'queue-timeout' | 'cancelled';

/** The result of a recovery leg's re-prefill, reported once: first token, failure before it, or neither. */
export type ReprefillResult = 'ok' | 'failed' | 'neutral';

/** A slot held by one re-prefill in flight. settle() frees it; later calls do nothing. */
export interface ReprefillSlot {
  settle(result: ReprefillResult): void;
}

export type Admission =
  | { admitted: true; slot: ReprefillSlot; waitedMs: number }
  | { admitted: false; reason: RefusalReason; retryAfterMs: number; waitedMs: number };

/** One request for a slot: its answer, and a way to give up waiting (client gone, shutdown). */
export interface AdmissionTicket {
  readonly result: Promise<Admission>;
  cancel(): void;
}

export interface RecoveryAdmission {
  request(): AdmissionTicket;
}

export interface AdmissionSettings {
  readonly limits: ReprefillLimits;
  readonly brake: BrakeSettings;
  /** RECOVERY_QUEUE_TIMEOUT_SECONDS, in ms: the longest a recovery waits for a slot. */
  readonly queueTimeoutMs: number;
}

export function admissionSettings(c: GatewayConfig): AdmissionSettings {
  return {
    limits: { maxConcurrent: c.recoveryMaxConcurrent, percent: c.recoveryBudgetPercent, floor: c.recoveryMinConcurrent },
    brake: { failures: c.recoveryBrakeFailures, windowMs: c.recoveryBrakeWindowMs, openMs: c.recoveryBrakeOpenMs },
    queueTimeoutMs: c.recoveryQueueTimeoutMs,
  };
}

/** What the authority reports, for metrics and logs (src/obs/admission-metrics.ts). */
export interface AdmissionObserver {
  waited(ms: number, admitted: boolean): void;
  refused(reason: RefusalReason): void;
  brakeChanged(open: boolean): void;
}

interface Waiter {
  enqueuedAt: number;
  timer: NodeJS.Timeout;
  resolve: (a: Admission) => void;
}

/** The authority: slots, the waiting queue and the brake. */
export class AdmissionAuthority implements RecoveryAdmission {
  /** Re-prefills in flight now, and the most there ever were (a gauge tests and the bench read). */
  inFlight = 0;
  peakInFlight = 0;
  private readonly queue: Waiter[] = [];
  private readonly brake: RecoveryBrake;

  constructor(
    private readonly s: AdmissionSettings,
    private readonly activeStreams: () => number,
    private readonly observer?: AdmissionObserver,
    private readonly now: () => number = Date.now,
  ) {
    this.brake = new RecoveryBrake(s.brake);
  }

  get waiting(): number {
    return this.queue.length;
  }

  get limit(): number {
    return reprefillLimit(this.activeStreams(), this.s.limits);
  }

  brakeOpen(): boolean {
    return this.brake.mode(this.now()) !== 'closed';
  }

  request(): AdmissionTicket {
    const now = this.now();
    if (this.brake.refusing(now)) return settled(this.refuse('brake-open', 0));
    if (this.queue.length === 0 && this.inFlight < this.limit) {
      const v = this.brake.verdict(now);
      if (v.go) {
        this.observer?.waited(0, true);
        return settled(this.grant(v.probe, 0));
      }
    }
    let waiter!: Waiter;
    const result = new Promise<Admission>((resolve) => {
      waiter = {
        enqueuedAt: now,
        resolve,
        timer: setTimeout(() => this.dequeue(waiter, this.refuse('queue-timeout', this.now() - now)), this.s.queueTimeoutMs),
      };
    });
    this.queue.push(waiter);
    return { result, cancel: () => this.dequeue(waiter, this.refuse('cancelled', this.now() - now)) };
  }

  private dequeue(w: Waiter, a: Admission): void {
    const i = this.queue.indexOf(w);
    if (i < 0) return;
    this.queue.splice(i, 1);
    clearTimeout(w.timer);
    if (a.admitted === false && a.reason !== 'cancelled') this.observer?.waited(a.waitedMs, false);
    w.resolve(a);
  }

  private refuse(reason: RefusalReason, waitedMs: number): Admission {
    this.observer?.refused(reason);
    const retryAfterMs = reason === 'brake-open' ? Math.max(1000, this.s.brake.openMs) : 1000;
    return { admitted: false, reason, retryAfterMs, waitedMs };
  }

  private grant(probe: boolean, waitedMs: number): Admission {
    this.inFlight++;
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    let done = false;
    const slot: ReprefillSlot = {
      settle: (result) => {
        if (done) return;
        done = true;
        this.inFlight--;
        const now = this.now();
        const wasClosed = this.brake.mode(now) === 'closed';
        if (this.brake.settle(now, result, probe)) this.onBrakeOpened();
        else if (!wasClosed && this.brake.mode(now) === 'closed') this.observer?.brakeChanged(false);
        this.pump();
      },
    };
    return { admitted: true, slot, waitedMs };
  }

  /** Hands free slots to the queue's head, in order. */
  private pump(): void {
    while (this.queue.length && this.inFlight < this.limit) {
      const now = this.now();
      const v = this.brake.verdict(now);
      if (!v.go) {
        if (this.brake.refusing(now)) this.refuseAllWaiting();
        return; // half-open: the probe is out, the rest wait for its result
      }
      const w = this.queue.shift() as Waiter;
      clearTimeout(w.timer);
      const waitedMs = now - w.enqueuedAt;
      this.observer?.waited(waitedMs, true);
      w.resolve(this.grant(v.probe, waitedMs));
    }
  }

  /** The pool is failing: every waiting recovery ends now, with the explicit outcome, instead of waiting. */
  private onBrakeOpened(): void {
    this.observer?.brakeChanged(true);
    this.refuseAllWaiting();
  }

  private refuseAllWaiting(): void {
    for (const w of this.queue.splice(0)) {
      clearTimeout(w.timer);
      w.resolve(this.refuse('brake-open', this.now() - w.enqueuedAt));
    }
  }
}

function settled(a: Admission): AdmissionTicket {
  return { result: Promise.resolve(a), cancel: () => undefined };
}
