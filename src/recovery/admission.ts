// Recovery admission: who may send a recovery leg (a retry before the first delta, or a continuation) now.
//
// One authority per gateway: in the sidecar process itself, or, with WORKERS > 1, in the cluster primary
// (the workers ask it over IPC, src/recovery/admission-cluster.ts), so the limit means the same thing with
// one process or eight. A request that finds no free slot waits in a FIFO queue for at most the queue
// timeout instead of being refused; the brake (admission-policy.ts) ends waiting and new recoveries at once
// when recovery legs keep failing.
import type { GatewayConfig } from '../config/env';
import { type AdaptiveState, currentLimit, INITIAL_STATE, observeBaseline, observeRecovery } from './adaptive-limit';
import { type BrakeResult, type BrakeSettings, RecoveryBrake, type ReprefillLimits, reprefillLimit } from './admission-policy';

export type RefusalReason = 'brake-open' | 'queue-timeout' | 'cancelled';

/**
 * The result of a recovery leg's re-prefill, reported once: first token, failure before it (`'failed'` is the
 * pool's; brakeEvidence tells a failure the request itself may cause), or neither.
 */
export type ReprefillResult = BrakeResult;

/** A slot held by one re-prefill in flight. settle() frees it; later calls do nothing. */
export interface ReprefillSlot {
  settle(result: ReprefillResult): void;
}

export type Admission =
  | { admitted: true; slot: ReprefillSlot; waitedMs: number }
  | { admitted: false; reason: RefusalReason; retryAfterMs: number; waitedMs: number };

/** One request for a slot: its answer, and a way to give up waiting (a deadline). */
export interface AdmissionTicket {
  readonly result: Promise<Admission>;
  cancel(): void;
}

export interface RecoveryAdmission {
  /**
   * `signal`: the request's cancellation (client gone, shutdown). Already aborted: refused at once
   * (`cancelled`); aborted while waiting: the waiter leaves the queue at once.
   */
  request(signal?: AbortSignal): AdmissionTicket;
  /**
   * A leg 1 first attempt reached its first delta after `ms` (the pool's normal first-token latency, which
   * the adaptive limit compares recovery legs with). Cheap: no I/O per call.
   */
  observeFirstToken?(ms: number): void;
}

export interface AdmissionSettings {
  readonly limits: ReprefillLimits;
  readonly brake: BrakeSettings;
  /** RECOVERY_QUEUE_TIMEOUT_SECONDS, in ms: the longest a recovery waits for a slot. */
  readonly queueTimeoutMs: number;
  /** RECOVERY_ADAPTIVE: the limit follows recovery legs' first tokens (src/recovery/adaptive-limit.ts); undefined = fixed. */
  readonly adaptive?: { readonly tolerance: number };
}

export function admissionSettings(c: GatewayConfig): AdmissionSettings {
  return {
    limits: { maxConcurrent: c.recoveryMaxConcurrent, percent: c.recoveryBudgetPercent, floor: c.recoveryMinConcurrent },
    brake: { failures: c.recoveryBrakeFailures, windowMs: c.recoveryBrakeWindowMs, openMs: c.recoveryBrakeOpenMs },
    queueTimeoutMs: c.recoveryQueueTimeoutMs,
    adaptive: c.recoveryAdaptive ? { tolerance: c.recoveryAdaptiveTolerance } : undefined,
  };
}

/** What the authority reports, for metrics and logs (src/obs/admission-metrics.ts). */
export interface AdmissionObserver {
  waited(ms: number, admitted: boolean): void;
  refused(reason: RefusalReason): void;
  brakeChanged(open: boolean): void;
  /** A recovery leg failed before its first token: what it showed (admission-policy.ts brakeEvidence). */
  failureEvidence?(evidence: 'pool' | 'repeat'): void;
  /** The adaptive limit moved (RECOVERY_ADAPTIVE=true): what it was, what it is. */
  limitChanged?(from: number, to: number, baselineMs: number | undefined, sampleMs: number): void;
}

interface Waiter {
  enqueuedAt: number;
  timer: NodeJS.Timeout;
  resolve: (a: Admission) => void;
  /** Stops listening to the request's cancellation signal. */
  unsubscribe?: () => void;
}

/** The authority: slots, the waiting queue and the brake. */
export class AdmissionAuthority implements RecoveryAdmission {
  /** Re-prefills in flight now, and the most there ever were (a gauge tests and the bench read). */
  inFlight = 0;
  peakInFlight = 0;
  private readonly queue: Waiter[] = [];
  private readonly brake: RecoveryBrake;
  /** The adaptive limit's state (RECOVERY_ADAPTIVE=true; src/recovery/adaptive-limit.ts). */
  private adaptive: AdaptiveState = INITIAL_STATE;
  /** No recovery in flight or waiting; kept by noteQuiet() after every change of inFlight or the queue. */
  private quietNow = true;
  private readonly quietListeners: Array<(quiet: boolean) => void> = [];

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
    const fixed = reprefillLimit(this.activeStreams(), this.s.limits);
    return this.s.adaptive ? currentLimit(this.adaptive, fixed, this.adaptiveBounds()) : fixed;
  }

  /** The pool's normal first-token latency the adaptive limit compares with (ms), if known. */
  get baselineMs(): number | undefined {
    return this.adaptive.baselineMs;
  }

  /**
   * `count` leg 1 first attempts reached their first delta, `meanMs` on average. Only taken while no
   * recovery is in flight or waiting: during one, the pool's first token is what the limit is protecting,
   * not the normal to compare with (a baseline that rose with the overload would let the limit grow with it).
   */
  observeFirstToken(meanMs: number, count = 1): void {
    if (this.quietNow) this.observeQuietFirstTokens(meanMs, count);
  }

  /**
   * First tokens already known to have been taken while quiet: a cluster worker's batch, which arrives up to
   * 250 ms late and was judged when each sample was taken (src/recovery/admission-cluster.ts).
   */
  observeQuietFirstTokens(meanMs: number, count: number): void {
    if (this.s.adaptive) this.adaptive = observeBaseline(this.adaptive, meanMs, count);
  }

  /** No recovery in flight or waiting (when first-token samples are the pool's normal). */
  get quiet(): boolean {
    return this.quietNow;
  }

  /** Called on every change of `quiet` (the cluster primary tells its workers, src/recovery/admission-cluster.ts). */
  onQuietChange(listener: (quiet: boolean) => void): void {
    this.quietListeners.push(listener);
  }

  private noteQuiet(): void {
    const quiet = this.inFlight === 0 && this.queue.length === 0;
    if (quiet === this.quietNow) return;
    this.quietNow = quiet;
    for (const l of this.quietListeners) l(quiet);
  }

  brakeOpen(): boolean {
    return this.brake.mode(this.now()) !== 'closed';
  }

  request(signal?: AbortSignal): AdmissionTicket {
    const now = this.now();
    if (signal?.aborted) return settled(this.refuse('cancelled', 0));
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
    this.noteQuiet();
    const cancel = () => this.dequeue(waiter, this.refuse('cancelled', this.now() - now));
    if (signal) {
      signal.addEventListener('abort', cancel, { once: true });
      waiter.unsubscribe = () => signal.removeEventListener('abort', cancel);
    }
    return { result, cancel };
  }

  private dequeue(w: Waiter, a: Admission): void {
    const i = this.queue.indexOf(w);
    if (i < 0) return;
    this.queue.splice(i, 1);
    this.noteQuiet();
    this.leave(w);
    if (a.admitted === false && a.reason !== 'cancelled') this.observer?.waited(a.waitedMs, false);
    w.resolve(a);
  }

  /** A waiter out of the queue: its timer and its cancellation subscription go. */
  private leave(w: Waiter): void {
    clearTimeout(w.timer);
    w.unsubscribe?.();
  }

  private refuse(reason: RefusalReason, waitedMs: number): Admission {
    this.observer?.refused(reason);
    const retryAfterMs = reason === 'brake-open' ? Math.max(1000, this.s.brake.openMs) : 1000;
    return { admitted: false, reason, retryAfterMs, waitedMs };
  }

  private grant(probe: boolean, waitedMs: number): Admission {
    this.inFlight++;
    this.noteQuiet();
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
    const grantedAt = this.now();
    const inFlightAtGrant = this.inFlight;
    let done = false;
    const slot: ReprefillSlot = {
      settle: (result) => {
        if (done) return;
        done = true;
        this.inFlight--;
        if (result === 'failed' || typeof result === 'object')
          this.observer?.failureEvidence?.(result === 'failed' ? 'pool' : result.failed);
        const now = this.now();
        const wasClosed = this.brake.mode(now) === 'closed';
        if (this.brake.settle(now, result, probe)) this.onBrakeOpened();
        else if (!wasClosed && this.brake.mode(now) === 'closed') this.observer?.brakeChanged(false);
        this.adapt(result, now - grantedAt, inFlightAtGrant);
        this.pump();
        this.noteQuiet();
      },
    };
    return { admitted: true, slot, waitedMs };
  }

  private adaptiveBounds() {
    const tolerance = this.s.adaptive?.tolerance ?? 1;
    return { floor: this.s.limits.floor, ceiling: this.s.limits.maxConcurrent, tolerance };
  }

  /**
   * A settled slot as the adaptive limit reads it: a first token is a latency sample, the pool's failure a cut;
   * a neutral end or a failure the request itself may cause (`repeat`) says nothing about the pool's capacity.
   */
  private adapt(result: ReprefillResult, ms: number, inFlight: number): void {
    if (!this.s.adaptive) return;
    const failed = result === 'failed' || (typeof result === 'object' && result.failed === 'pool');
    if (result !== 'ok' && !failed) return;
    const before = this.limit;
    const fixed = reprefillLimit(this.activeStreams(), this.s.limits);
    this.adaptive = observeRecovery(this.adaptive, { firstTokenMs: ms, failed, inFlight }, fixed, this.adaptiveBounds());
    const after = this.limit;
    if (after !== before) this.observer?.limitChanged?.(before, after, this.adaptive.baselineMs, ms);
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
      this.leave(w);
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
      this.leave(w);
      w.resolve(this.refuse('brake-open', this.now() - w.enqueuedAt));
    }
    this.noteQuiet();
  }
}

function settled(a: Admission): AdmissionTicket {
  return { result: Promise.resolve(a), cancel: () => undefined };
}
