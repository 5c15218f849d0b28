// The adaptive re-prefill limit (src/recovery/adaptive-limit.ts): tables of samples, no clock.

import {
  type AdaptiveSettings,
  type AdaptiveState,
  BASELINE_ALPHA,
  currentLimit,
  INITIAL_STATE,
  NOISE_MS,
  observeBaseline,
  observeRecovery,
  type RecoverySample,
} from '../../../src/recovery/adaptive-limit';

const s: AdaptiveSettings = { floor: 3, ceiling: 512, tolerance: 2 };
// With a baseline of 100 ms and tolerance 2, a recovery leg may take 2 x 100 + NOISE_MS = 300 ms.
const allowed = 2 * 100 + NOISE_MS;
const withBaseline = (ms: number, limit?: number): AdaptiveState => ({ limit, baselineMs: ms });

/** Feeds `n` identical samples, the in-flight count pinned at the current limit (a busy crash). */
function feed(state: AdaptiveState, n: number, firstTokenMs: number, start: number, busy = true): AdaptiveState {
  let st = state;
  for (let i = 0; i < n; i++) {
    const inFlight = busy ? currentLimit(st, start, s) : 1;
    st = observeRecovery(st, { firstTokenMs, failed: false, inFlight }, start, s);
  }
  return st;
}

describe('observeBaseline', () => {
  it.each([
    // [state baseline, mean, count, expected]
    [undefined, 80, 1, 80],
    [100, 200, 1, 100 + BASELINE_ALPHA * 100],
    [100, 200, 2, 100 + (1 - (1 - BASELINE_ALPHA) ** 2) * 100],
    [100, 50, 1, 100 - BASELINE_ALPHA * 50],
  ])('from %p with a mean of %p over %p sample(s): %p', (from, mean, count, want) => {
    const out = observeBaseline({ limit: undefined, baselineMs: from }, mean, count);
    expect(out.baselineMs).toBeCloseTo(want, 9);
  });

  it.each([
    [0, 100],
    [-1, 100],
    [1, Number.NaN],
    [1, -5],
    [1, Number.POSITIVE_INFINITY],
  ])('ignores a batch of %p sample(s) with mean %p', (count, mean) => {
    const st = withBaseline(100);
    expect(observeBaseline(st, mean, count)).toBe(st);
  });

  it('a batch of n moves it as n single samples do', () => {
    let one = withBaseline(100);
    for (let i = 0; i < 5; i++) one = observeBaseline(one, 300);
    expect(observeBaseline(withBaseline(100), 300, 5).baselineMs).toBeCloseTo(one.baselineMs as number, 9);
  });
});

describe('observeRecovery: one sample', () => {
  const cases: Array<[string, AdaptiveState, RecoverySample, number]> = [
    // first token as fast as normal, slots busy: gradient 1, grows by smoothing x sqrt(limit)
    ['fast, busy', withBaseline(100), { firstTokenMs: 100, failed: false, inFlight: 64 }, 64 + 0.2 * 8],
    // at what is allowed (tolerance x baseline + NOISE_MS): still gradient 1
    ['at the allowance', withBaseline(100), { firstTokenMs: allowed, failed: false, inFlight: 64 }, 64 + 0.2 * 8],
    // twice the allowance: gradient 0.5 (its lower clamp): target 32 + 8 = 40
    ['2x the allowance', withBaseline(100), { firstTokenMs: 2 * allowed, failed: false, inFlight: 64 }, 64 * 0.8 + 40 * 0.2],
    // far slower: still clamped at 0.5
    ['10x the baseline', withBaseline(100), { firstTokenMs: 10 * allowed, failed: false, inFlight: 64 }, 64 * 0.8 + 40 * 0.2],
    // 1.5 x the allowance: gradient 2/3
    [
      '1.5x the allowance',
      withBaseline(100),
      { firstTokenMs: 1.5 * allowed, failed: false, inFlight: 64 },
      64 * 0.8 + (64 * (2 / 3) + 8) * 0.2,
    ],
    // fast but fewer than half the slots used: says nothing, no growth
    ['fast, idle', withBaseline(100), { firstTokenMs: 100, failed: false, inFlight: 31 }, 64],
    // slow with few slots used: it still shrinks (slowness is evidence at any load)
    ['slow, idle', withBaseline(100), { firstTokenMs: 2 * allowed, failed: false, inFlight: 1 }, 64 * 0.8 + 40 * 0.2],
    // failed before its first token: multiplicative cut
    ['failed', withBaseline(100), { firstTokenMs: 5, failed: true, inFlight: 64 }, 64 * 0.9],
    // no baseline yet: cannot judge, stays at the start
    ['no baseline', INITIAL_STATE, { firstTokenMs: 10_000, failed: false, inFlight: 64 }, 64],
    // a bad measurement changes nothing
    ['NaN sample', withBaseline(100), { firstTokenMs: Number.NaN, failed: false, inFlight: 64 }, 64],
  ];
  it.each(cases)('%s', (_name, state, sample, want) => {
    const out = observeRecovery(state, sample, 64, s);
    expect(out.limit).toBeCloseTo(want, 9);
    expect(out.baselineMs).toBe(state.baselineMs);
  });

  it('starts from its own limit once it has one, not from the start value', () => {
    const out = observeRecovery(withBaseline(100, 10), { firstTokenMs: 100, failed: false, inFlight: 10 }, 64, s);
    expect(out.limit).toBeCloseTo(10 + 0.2 * Math.sqrt(10), 9);
  });

  it('a zero baseline and first token: gradient 1, not an infinite one', () => {
    const out = observeRecovery(withBaseline(0, 64), { firstTokenMs: 0, failed: false, inFlight: 64 }, 64, s);
    expect(out.limit).toBeCloseTo(64 + 0.2 * 8, 9);
  });
});

describe('observeRecovery: bounds and direction over many samples', () => {
  it('a fast pool opens the limit up to the ceiling, never past it', () => {
    const st = feed(withBaseline(100), 2000, 120, 64);
    expect(currentLimit(st, 64, s)).toBe(512);
  });

  it('a fast pool opens it within a crash worth of recoveries (about 100 samples from 64 to twice that)', () => {
    const st = feed(withBaseline(100), 100, 120, 64);
    expect(currentLimit(st, 64, s)).toBeGreaterThan(128);
  });

  it('a slow pool closes it to where half the limit plus its headroom meet (L = L/2 + sqrt(L): 4)', () => {
    const st = feed(withBaseline(100), 2000, 2000, 64);
    expect(currentLimit(st, 64, s)).toBe(4);
  });

  it('... and never under the floor', () => {
    const b = { ...s, floor: 10 };
    let st = withBaseline(100);
    for (let i = 0; i < 2000; i++) st = observeRecovery(st, { firstTokenMs: 2000, failed: false, inFlight: 64 }, 64, b);
    expect(currentLimit(st, 64, b)).toBe(10);
  });

  it('a pool whose first token grows with the re-prefills in flight settles where the first token is about the allowance', () => {
    // first token = 10 ms per re-prefill in flight; allowed 300 ms -> about 30 in flight, plus the sqrt(limit)
    // headroom: L = 30 + sqrt(L) at about 36.
    let st = withBaseline(100);
    for (let i = 0; i < 3000; i++) {
      const inFlight = currentLimit(st, 64, s);
      st = observeRecovery(st, { firstTokenMs: 10 * inFlight, failed: false, inFlight }, 64, s);
    }
    const l = currentLimit(st, 64, s);
    expect(l).toBeGreaterThanOrEqual(33);
    expect(l).toBeLessThanOrEqual(40);
  });

  it('fast samples while the slots sit idle leave the limit where it was', () => {
    const st = feed(withBaseline(100), 500, 100, 64, false);
    expect(currentLimit(st, 64, s)).toBe(64);
  });

  it('failures cut it to the floor, not below', () => {
    let st = withBaseline(100);
    for (let i = 0; i < 100; i++) st = observeRecovery(st, { firstTokenMs: 1, failed: true, inFlight: 1 }, 64, s);
    expect(currentLimit(st, 64, s)).toBe(3);
  });

  it.each([
    // [floor, ceiling, start, expected first limit]: the start is clamped into the bounds
    [3, 64, 1000, 64],
    [10, 64, 2, 10],
    [5, 2, 40, 2], // a floor above the ceiling: the ceiling wins (as reprefillLimit)
  ])('floor %p, ceiling %p: a start of %p becomes %p', (floor, ceiling, start, want) => {
    const b = { floor, ceiling, tolerance: 2 };
    const out = observeRecovery(INITIAL_STATE, { firstTokenMs: 100, failed: false, inFlight: 0 }, start, b);
    expect(currentLimit(out, start, b)).toBe(want);
  });
});

describe('currentLimit', () => {
  it('follows the fixed limit until the first recovery sample', () => {
    expect(currentLimit(INITIAL_STATE, 40, s)).toBe(40);
    expect(currentLimit(withBaseline(100), 17, s)).toBe(17);
  });
  it('then the adaptive one, rounded and within the bounds', () => {
    expect(currentLimit(withBaseline(100, 70.4), 40, s)).toBe(70);
    expect(currentLimit(withBaseline(100, 70.6), 40, s)).toBe(71);
    expect(currentLimit(withBaseline(100, 1), 40, s)).toBe(3);
    expect(currentLimit(withBaseline(100, 9999), 40, s)).toBe(512);
  });
});
