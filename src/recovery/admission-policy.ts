// Pure rules for admitting recoveries (no I/O, no timers: the caller passes `now`), unit-tested in
// microseconds.
//
// What a replica crash makes scarce is prefill capacity on the surviving replicas: every stream the dead
// replica served asks for a re-prefill (its prompt, plus the delivered text for a continuation) at the same
// moment. So the limit is on re-prefills IN FLIGHT (a recovery leg counts from the moment it is sent until
// its first token or its failure), not on recovered streams for their whole life: a crash of 500 streams is
// then a queue that drains in a few prefill times, not 400 refusals.

export interface ReprefillLimits {
  /** RECOVERY_MAX_CONCURRENT: never more re-prefills in flight than this. */
  readonly maxConcurrent: number;
  /** RECOVERY_BUDGET_PERCENT: re-prefills in flight as a percentage of the streams in progress. */
  readonly percent: number;
  /** RECOVERY_MIN_CONCURRENT: always allowed, however few streams run (Envoy's min_retry_concurrency). */
  readonly floor: number;
}

/** How many re-prefills may be in flight at once with `activeStreams` streams in progress. */
export function reprefillLimit(activeStreams: number, l: ReprefillLimits): number {
  // The epsilon absorbs binary floating-point error with fractional percents: 2.2% of 1500 streams is
  // 33.00000000000001 in doubles, and a bare ceil would grant a 34th slot.
  const share = Math.ceil((l.percent * Math.max(0, activeStreams)) / 100 - 1e-9);
  return Math.max(Math.min(l.floor, l.maxConcurrent), Math.min(l.maxConcurrent, share));
}

export interface BrakeSettings {
  /** RECOVERY_BRAKE_FAILURES: failed recovery legs within the window that open the brake (0 = never). */
  readonly failures: number;
  /** RECOVERY_BRAKE_WINDOW_SECONDS, in ms: how far back recovery-leg outcomes count. */
  readonly windowMs: number;
  /** RECOVERY_BRAKE_SECONDS, in ms: how long the brake stays open before one probe may go. */
  readonly openMs: number;
}

export type BrakeMode = 'closed' | 'open' | 'half-open';

/**
 * What a recovery leg's failure before its first token says about the pool.
 * - `pool`: the pool itself shows it (connect refused, the router unreachable, a 503, 429 or other 5xx, or a
 *   failure unlike the request's previous one): counted.
 * - `repeat`: the leg failed the way the same request's previous attempt failed (two resets before the first
 *   token, on two replicas): the request itself may be the cause, so such failures count once per `source`.
 */
export type BrakeFailure = { readonly failed: 'pool' } | { readonly failed: 'repeat'; readonly source: string };

/** A recovery leg's result as the brake reads it: first token, a failure before it (with its evidence), neither. */
export type BrakeResult = 'ok' | 'neutral' | 'failed' | BrakeFailure;

/** Failures a request's own bytes can cause (a replica that cannot parse it resets it, stalls on it, ...). */
const REQUEST_CAUSABLE = new Set<string>([
  'reset',
  'eof',
  'error-event',
  'abort-finish',
  'stall',
  'stall-limit',
  'first-delta-timeout',
  'headers-timeout',
]);

/**
 * The evidence of one failed recovery leg (pure). `failure`: how it failed; `previous`: how the same request's
 * previous attempt failed before its first token (none for a continuation: leg 1 had answered); `status`: the
 * HTTP status it was answered with, if any; `source`: who sent the request (see requestSource).
 * A 4xx other than 429 is the request's own answer: `neutral`, never counted.
 */
export function brakeEvidence(i: { failure: string; previous?: string; status?: number; source: string }): BrakeResult {
  if (i.status !== undefined && i.status >= 400 && i.status < 500 && i.status !== 429) return 'neutral';
  if (REQUEST_CAUSABLE.has(i.failure) && i.previous === i.failure) return { failed: 'repeat', source: i.source };
  return { failed: 'pool' };
}

/** What the brake says about starting one more recovery leg now. */
export type BrakeVerdict = { go: true; probe: boolean } | { go: false; retryAfterMs: number };

/**
 * A circuit breaker on recovery legs for a dying pool. Closed: recoveries start (subject to the limit).
 * It opens when, within the window, at least `failures` recovery legs failed before their first token AND
 * they were at least as many as the ones that got a token: a crash that the survivors absorb stays closed,
 * a pool that is gone opens it. Only what the pool shows counts (brakeEvidence): a `repeat` failure counts
 * once per source, so one client's requests that every replica refuses cannot open it. Open: nothing starts for `openMs`. Half-open: one probe at a time; its
 * first token closes the brake, its failure opens it again.
 */
export class RecoveryBrake {
  private modeNow: BrakeMode = 'closed';
  private openedAt = 0;
  private probing = false;
  /** Recent outcomes (time, ok, the source of a `repeat` failure), oldest first; trimmed to the window. */
  private readonly recent: { at: number; ok: boolean; source?: string }[] = [];

  constructor(private readonly s: BrakeSettings) {}

  mode(now: number): BrakeMode {
    if (this.modeNow === 'open' && now - this.openedAt >= this.s.openMs) this.modeNow = 'half-open';
    return this.modeNow;
  }

  /** May a recovery leg start now? A `probe: true` answer must be reported with settle(). */
  verdict(now: number): BrakeVerdict {
    const m = this.mode(now);
    if (m === 'closed') return { go: true, probe: false };
    if (m === 'half-open' && !this.probing) {
      this.probing = true;
      return { go: true, probe: true };
    }
    return { go: false, retryAfterMs: m === 'open' ? this.s.openMs - (now - this.openedAt) : this.s.openMs };
  }

  /** True while the brake refuses everything (new recoveries end at once rather than wait). */
  refusing(now: number): boolean {
    return this.mode(now) === 'open';
  }

  /**
   * A recovery leg's result: 'ok' (first token), 'failed' (failed before it) or 'neutral' (cancelled: the
   * client left, the gateway shuts down). Returns true when this result opened the brake.
   */
  settle(now: number, result: BrakeResult, probe: boolean): boolean {
    if (probe) this.probing = false;
    if (result === 'neutral') return false;
    const m = this.mode(now);
    if (probe || m === 'half-open') {
      if (result === 'ok') {
        this.modeNow = 'closed';
        this.recent.length = 0;
        return false;
      }
      // A probe that failed as its own request had failed says nothing about the pool: the next probe decides.
      if (typeof result === 'object' && result.failed === 'repeat') return false;
      return this.open(now);
    }
    const source = typeof result === 'object' && result.failed === 'repeat' ? result.source : undefined;
    this.recent.push({ at: now, ok: result === 'ok', source });
    while (this.recent.length && now - this.recent[0].at > this.s.windowMs) this.recent.shift();
    if (m !== 'closed' || result === 'ok' || this.s.failures <= 0) return false;
    const { failed, ok } = this.counted();
    if (failed >= this.s.failures && failed >= ok) return this.open(now);
    return false;
  }

  /** The window's successes, and its failures as the pool shows them: each `repeat` source once. */
  private counted(): { failed: number; ok: number } {
    let failed = 0;
    let ok = 0;
    const sources = new Set<string>();
    for (const r of this.recent) {
      if (r.ok) ok++;
      else if (r.source === undefined) failed++;
      else if (!sources.has(r.source)) {
        sources.add(r.source);
        failed++;
      }
    }
    return { failed, ok };
  }

  private open(now: number): boolean {
    this.modeNow = 'open';
    this.openedAt = now;
    this.recent.length = 0;
    return true;
  }
}
