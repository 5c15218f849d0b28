// Recovery admission: the re-prefill limit, the waiting queue and the brake, driven with a fake clock.

import { type Admission, AdmissionAuthority, type AdmissionSettings } from '../../../src/recovery/admission';
import { RecoveryBrake, reprefillLimit } from '../../../src/recovery/admission-policy';

describe('reprefillLimit', () => {
  const l = { maxConcurrent: 64, percent: 20, floor: 3 };
  it('a floor for light traffic, percent of streams in between, the max on top', () => {
    expect(reprefillLimit(0, l)).toBe(3);
    expect(reprefillLimit(1, l)).toBe(3);
    expect(reprefillLimit(4, l)).toBe(3);
    expect(reprefillLimit(20, l)).toBe(4);
    expect(reprefillLimit(100, l)).toBe(20);
    expect(reprefillLimit(1000, l)).toBe(64);
  });
  it('the floor never exceeds the max; max 0 disables recovery', () => {
    expect(reprefillLimit(100, { maxConcurrent: 2, percent: 20, floor: 3 })).toBe(2);
    expect(reprefillLimit(100, { maxConcurrent: 0, percent: 100, floor: 3 })).toBe(0);
  });
  it('fractional percents are not inflated by floating-point error', () => {
    // 2.2 * 1500 / 100 is 33.00000000000001 in doubles.
    expect(reprefillLimit(1500, { maxConcurrent: 1000, percent: 2.2, floor: 0 })).toBe(33);
    expect(reprefillLimit(1501, { maxConcurrent: 1000, percent: 2.2, floor: 0 })).toBe(34);
  });
});

describe('RecoveryBrake', () => {
  const s = { failures: 3, windowMs: 10_000, openMs: 5_000 };
  it('opens after N failures in the window when failures are no fewer than successes', () => {
    const b = new RecoveryBrake(s);
    expect(b.settle(0, 'failed', false)).toBe(false);
    expect(b.settle(1, 'failed', false)).toBe(false);
    expect(b.settle(2, 'failed', false)).toBe(true);
    expect(b.mode(3)).toBe('open');
    expect(b.verdict(3)).toEqual({ go: false, retryAfterMs: 4_999 });
  });
  it('stays closed while the survivors absorb the recoveries (more successes than failures)', () => {
    const b = new RecoveryBrake(s);
    for (let i = 0; i < 10; i++) b.settle(i, 'ok', false);
    for (let i = 0; i < 9; i++) expect(b.settle(10 + i, 'failed', false)).toBe(false);
    expect(b.settle(20, 'failed', false)).toBe(true); // 10 failed, 10 ok
  });
  it('forgets outcomes older than the window; neutral results do not count', () => {
    const b = new RecoveryBrake(s);
    b.settle(0, 'failed', false);
    b.settle(1, 'failed', false);
    expect(b.settle(20_000, 'failed', false)).toBe(false);
    for (let i = 0; i < 10; i++) b.settle(20_001 + i, 'neutral', false);
    expect(b.mode(20_100)).toBe('closed');
  });
  it('half-open after openMs: one probe at a time; its token closes, its failure reopens', () => {
    const b = new RecoveryBrake(s);
    for (let i = 0; i < 3; i++) b.settle(i, 'failed', false);
    expect(b.verdict(5_002)).toEqual({ go: true, probe: true });
    expect(b.verdict(5_003)).toEqual({ go: false, retryAfterMs: 5_000 });
    expect(b.settle(5_100, 'failed', true)).toBe(true);
    expect(b.mode(5_101)).toBe('open');
    expect(b.verdict(10_200)).toEqual({ go: true, probe: true });
    expect(b.settle(10_300, 'ok', true)).toBe(false);
    expect(b.mode(10_301)).toBe('closed');
    expect(b.verdict(10_302)).toEqual({ go: true, probe: false });
  });
  it('failures 0 = never opens', () => {
    const b = new RecoveryBrake({ ...s, failures: 0 });
    for (let i = 0; i < 100; i++) expect(b.settle(i, 'failed', false)).toBe(false);
  });
});

describe('AdmissionAuthority', () => {
  let now = 0;
  const settings: AdmissionSettings = {
    limits: { maxConcurrent: 2, percent: 100, floor: 0 },
    brake: { failures: 3, windowMs: 10_000, openMs: 5_000 },
    queueTimeoutMs: 1_000,
  };
  const make = (streams = 10, s = settings) =>
    new AdmissionAuthority(
      s,
      () => streams,
      undefined,
      () => now,
    );
  beforeEach(() => {
    now = 0;
    jest.useFakeTimers();
  });
  afterEach(() => jest.useRealTimers());

  const admitted = (a: Admission) => {
    if (!a.admitted) throw new Error(`refused: ${a.reason}`);
    return a.slot;
  };

  it('grants up to the limit at once, queues the rest in order, and hands freed slots to the head', async () => {
    const a = make();
    const s1 = admitted(await a.request().result);
    admitted(await a.request().result);
    expect(a.inFlight).toBe(2);
    const order: number[] = [];
    const t3 = a.request();
    const t4 = a.request();
    void t3.result.then(() => order.push(3));
    void t4.result.then(() => order.push(4));
    expect(a.waiting).toBe(2);
    now = 200;
    s1.settle('ok');
    const r3 = await t3.result;
    expect(r3).toMatchObject({ admitted: true, waitedMs: 200 });
    expect(a.waiting).toBe(1);
    expect(a.inFlight).toBe(2);
    expect(a.peakInFlight).toBe(2);
    await Promise.resolve();
    expect(order).toEqual([3]);
  });

  it('a slot is freed once however often it is settled', async () => {
    const a = make();
    const s1 = admitted(await a.request().result);
    s1.settle('ok');
    s1.settle('failed');
    s1.settle('neutral');
    expect(a.inFlight).toBe(0);
  });

  it('a waiter gives up after the queue timeout; a cancelled one leaves the queue', async () => {
    const a = make();
    admitted(await a.request().result);
    admitted(await a.request().result);
    const late = a.request();
    const cancelled = a.request();
    cancelled.cancel();
    expect(await cancelled.result).toMatchObject({ admitted: false, reason: 'cancelled' });
    now = 1_000;
    jest.advanceTimersByTime(1_000);
    expect(await late.result).toMatchObject({ admitted: false, reason: 'queue-timeout', waitedMs: 1_000 });
    expect(a.waiting).toBe(0);
  });

  it('the brake ends every waiting recovery at once and refuses new ones until a probe succeeds', async () => {
    const a = make(10, { ...settings, limits: { maxConcurrent: 3, percent: 100, floor: 0 } });
    const slots = [admitted(await a.request().result), admitted(await a.request().result), admitted(await a.request().result)];
    const waiting = [a.request(), a.request(), a.request()];
    // Each failure frees a slot for the next waiter, until the third opens the brake.
    slots[0].settle('failed');
    const w0 = admitted(await waiting[0].result);
    slots[1].settle('failed');
    const w1 = admitted(await waiting[1].result);
    slots[2].settle('failed');
    expect(await waiting[2].result).toMatchObject({ admitted: false, reason: 'brake-open' });
    expect(a.brakeOpen()).toBe(true);
    expect(await a.request().result).toMatchObject({ admitted: false, reason: 'brake-open', retryAfterMs: 5_000 });
    w0.settle('neutral');
    w1.settle('neutral');
    now = 5_000;
    const probe = admitted(await a.request().result);
    const behindProbe = a.request();
    expect(a.waiting).toBe(1);
    probe.settle('ok');
    expect(await behindProbe.result).toMatchObject({ admitted: true });
    expect(a.brakeOpen()).toBe(false);
  });

  it('a limit of 0 (RECOVERY_MAX_CONCURRENT=0) never admits: the request waits, then times out', async () => {
    const a = make(10, { ...settings, limits: { maxConcurrent: 0, percent: 100, floor: 3 } });
    const t = a.request();
    jest.advanceTimersByTime(1_000);
    expect(await t.result).toMatchObject({ admitted: false, reason: 'queue-timeout' });
  });
});

describe('AdmissionAuthority with RECOVERY_ADAPTIVE', () => {
  let now = 0;
  const adaptive: AdmissionSettings = {
    limits: { maxConcurrent: 16, percent: 20, floor: 2 },
    brake: { failures: 0, windowMs: 10_000, openMs: 5_000 },
    queueTimeoutMs: 60_000,
    adaptive: { tolerance: 2 },
  };
  const changes: Array<[number, number]> = [];
  const make = (s: AdmissionSettings = adaptive) =>
    new AdmissionAuthority(
      s,
      () => 20, // fixed limit: 20 % of 20 streams = 4
      { waited: () => undefined, refused: () => undefined, brakeChanged: () => undefined, limitChanged: (a, b) => changes.push([a, b]) },
      () => now,
    );
  beforeEach(() => {
    now = 0;
    changes.length = 0;
    jest.useFakeTimers();
  });
  afterEach(() => jest.useRealTimers());

  /** Keeps every slot busy for `rounds` rounds: each slot is granted, then settled after `ms`. */
  async function crash(a: AdmissionAuthority, rounds: number, ms: number, result: 'ok' | 'failed' = 'ok') {
    for (let r = 0; r < rounds; r++) {
      const slots = [];
      const n = a.limit;
      for (let i = 0; i < n; i++) {
        const g = await a.request().result;
        if (!g.admitted) throw new Error(g.reason);
        slots.push(g.slot);
      }
      now += ms;
      for (const s of slots) s.settle(result);
    }
  }

  it('starts at the fixed limit; with a baseline, fast recovery legs open it up to RECOVERY_MAX_CONCURRENT', async () => {
    const a = make();
    expect(a.limit).toBe(4);
    a.observeFirstToken(100);
    expect(a.baselineMs).toBe(100);
    await crash(a, 30, 120);
    expect(a.limit).toBe(16);
    expect(changes.length).toBeGreaterThan(0);
    expect(changes[0][1]).toBeGreaterThan(changes[0][0]);
  });

  it('slow recovery legs close it towards RECOVERY_MIN_CONCURRENT', async () => {
    const a = make();
    a.observeFirstToken(100);
    await crash(a, 2, 120); // opens a little first
    const opened = a.limit;
    await crash(a, 40, 1_000);
    expect(a.limit).toBeLessThan(opened);
    expect(a.limit).toBeLessThanOrEqual(4);
    expect(a.limit).toBeGreaterThanOrEqual(2);
  });

  it('the pool failing recovery legs cuts it; a neutral end does not move it', async () => {
    const a = make();
    a.observeFirstToken(100);
    const g = await a.request().result;
    if (!g.admitted) throw new Error('refused');
    g.slot.settle('neutral');
    expect(a.limit).toBe(4);
    await crash(a, 10, 5, 'failed');
    expect(a.limit).toBe(2);
  });

  it('no baseline sample is taken while a recovery is in flight', async () => {
    const a = make();
    a.observeFirstToken(100);
    const g = await a.request().result;
    a.observeFirstToken(5_000);
    expect(a.baselineMs).toBe(100);
    if (g.admitted) g.slot.settle('neutral');
    a.observeFirstToken(100, 3);
    expect(a.baselineMs).toBe(100);
  });

  it('RECOVERY_ADAPTIVE=false: the fixed limit, whatever the legs show', async () => {
    const { adaptive: _off, ...fixed } = adaptive;
    const a = make(fixed);
    a.observeFirstToken(100);
    expect(a.baselineMs).toBeUndefined();
    await crash(a, 20, 5);
    expect(a.limit).toBe(4);
    expect(changes).toEqual([]);
  });
});
