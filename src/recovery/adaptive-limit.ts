// The adaptive re-prefill limit (RECOVERY_ADAPTIVE=true), pure: state in, state out, no clock, no I/O, so the
// tables in test/unit/recovery/adaptive-limit.test.ts run in microseconds.
//
// What it reads: how long recovery legs take to their first token on the surviving replicas, against the
// pool's normal first-token latency (leg 1's first attempts, measured while no recovery was in flight). A pool
// that answers recovery legs about as fast as normal traffic has prefill capacity to spare: the limit grows.
// A pool whose first token slows down as re-prefills pile up is saturated: the limit shrinks, so that
// requests that were never interrupted keep getting their first token in reasonable time.
//
// The rule follows Netflix concurrency-limits' Gradient2Limit (https://github.com/Netflix/concurrency-limits,
// concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/limit/Gradient2Limit.java): its gradient
// clamped to [0.5, 1], smoothing 0.2 and "no growth while app-limited" rule, one sample at a time. Ours: the
// baseline is another population's latency (normal leg 1 first tokens, not the recovery legs' own long-term
// average), hence the tolerance and NOISE_MS; the headroom is sqrt(limit) (its queueSize can be set to
// SquareRootFunction; its default is a fixed 4); and the AIMD cut for failures:
//   gradient = clamp((tolerance x baseline + NOISE_MS) / sample, 0.5, 1)
//   target   = limit x gradient + sqrt(limit)          (sqrt(limit): the headroom that lets it grow)
//   limit    = limit x (1 - smoothing) + target x smoothing
// NOISE_MS is what a recovery leg costs the gateway itself during a crash: its legs are sent in a burst while
// the sidecar and Envoy relay every other stream, so even on a pool with capacity to spare they reached their
// first token 20-250 ms later than calm leg 1 attempts on our shared 2-core machine (debug runs of
// test/e2e/adaptive-admission.e2e.test.ts). Against a real engine's first token (hundreds of ms and more) it
// hardly counts; without it a pool with a fast first token looks saturated. The AIMD cut is for a recovery
// leg that failed before its first token (the pool's evidence only). A sample taken while fewer than half the
// slots were in use does not make it grow (a limit nobody reached says nothing about the pool). The limit
// always stays within [RECOVERY_MIN_CONCURRENT, RECOVERY_MAX_CONCURRENT]; the brake (admission-policy.ts)
// still stops recoveries outright on a dead pool. What it cannot tell apart: a saturated gateway from a
// saturated pool (it measures first tokens end to end; docs/performance.md, "Adaptive recovery admission").

export interface AdaptiveSettings {
  /** RECOVERY_MIN_CONCURRENT: the limit never goes below this (light traffic is never refused). */
  readonly floor: number;
  /** RECOVERY_MAX_CONCURRENT: ... nor above this. */
  readonly ceiling: number;
  /** RECOVERY_ADAPTIVE_TOLERANCE: a recovery leg's first token may take this many times the normal one before the limit shrinks. */
  readonly tolerance: number;
}

/** How fast the limit follows its target per sample (Gradient2's default smoothing). */
export const SMOOTHING = 0.2;
/** Weight of one normal first-token sample in the baseline (an EWMA over roughly the last 1/ALPHA requests). */
export const BASELINE_ALPHA = 0.05;
/** The cut for a recovery leg the pool failed (AIMD's multiplicative decrease, gentle: failures come in bursts). */
export const FAILURE_BACKOFF = 0.9;
/** First-token latency a recovery leg may add to tolerance x baseline before it counts as the pool's (ms; see above). */
export const NOISE_MS = 100;

export interface AdaptiveState {
  /** The limit as a real number; undefined until the first recovery sample (the fixed limit applies until then). */
  readonly limit: number | undefined;
  /** The pool's normal first-token latency (ms, EWMA); undefined until the first sample. */
  readonly baselineMs: number | undefined;
}

export const INITIAL_STATE: AdaptiveState = { limit: undefined, baselineMs: undefined };

/** One recovery leg's re-prefill, reported when its slot is settled. */
export interface RecoverySample {
  /** From the slot's grant to the leg's first token (or its failure). */
  readonly firstTokenMs: number;
  /** Failed before its first token, and the pool's failure (brakeEvidence 'pool'). */
  readonly failed: boolean;
  /** Re-prefills in flight when the slot was granted, this one included. */
  readonly inFlight: number;
}

function clamp(x: number, s: AdaptiveSettings): number {
  const floor = Math.min(s.floor, s.ceiling);
  return Math.min(s.ceiling, Math.max(floor, x));
}

/**
 * `count` normal first-token latencies whose mean is `meanMs` (a worker reports them in batches): the
 * baseline moves towards them as `count` single samples would move it.
 */
export function observeBaseline(state: AdaptiveState, meanMs: number, count = 1): AdaptiveState {
  if (!(count > 0) || !Number.isFinite(meanMs) || meanMs < 0) return state;
  if (state.baselineMs === undefined) return { ...state, baselineMs: meanMs };
  const w = 1 - (1 - BASELINE_ALPHA) ** count;
  return { ...state, baselineMs: state.baselineMs + w * (meanMs - state.baselineMs) };
}

/**
 * The state after one recovery sample. `start`: the limit to start from on the first sample (the fixed
 * limit, src/recovery/admission-policy.ts reprefillLimit, at that moment).
 */
export function observeRecovery(state: AdaptiveState, sample: RecoverySample, start: number, s: AdaptiveSettings): AdaptiveState {
  const limit = clamp(state.limit ?? start, s);
  if (sample.failed) return { ...state, limit: clamp(limit * FAILURE_BACKOFF, s) };
  const base = state.baselineMs;
  if (base === undefined || !Number.isFinite(sample.firstTokenMs) || sample.firstTokenMs < 0) return { ...state, limit };
  const allowed = s.tolerance * base + NOISE_MS;
  const gradient = Math.min(1, Math.max(0.5, allowed / Math.max(sample.firstTokenMs, 1)));
  if (gradient >= 1 && sample.inFlight < limit / 2) return { ...state, limit };
  const target = limit * gradient + Math.sqrt(limit);
  return { ...state, limit: clamp(limit * (1 - SMOOTHING) + target * SMOOTHING, s) };
}

/** The limit in effect: the adaptive one once it has a sample, else `fixed`; a whole number within bounds. */
export function currentLimit(state: AdaptiveState, fixed: number, s: AdaptiveSettings): number {
  if (state.limit === undefined) return fixed;
  return Math.round(clamp(state.limit, s));
}
