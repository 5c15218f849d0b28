// WORKERS > 1: a worker's leg 1 first-token latencies reach the primary's authority in batches, on the timer
// that already reports its stream count (src/recovery/admission-cluster.ts), and become the adaptive baseline
// when they were taken with no recovery in flight or waiting in any worker.

import type { Worker } from 'node:cluster';
import { AdmissionAuthority } from '../../../src/recovery/admission';
import {
  AdmissionHub,
  type AdmissionQuietMessage,
  type AdmissionRequestMessage,
  type AdmissionToWorker,
  RemoteAdmission,
} from '../../../src/recovery/admission-cluster';

const settings = {
  limits: { maxConcurrent: 64, percent: 20, floor: 3 },
  brake: { failures: 5, windowMs: 10_000, openMs: 5_000 },
  queueTimeoutMs: 1_000,
  adaptive: { tolerance: 2 },
};

describe('first-token latencies over the cluster IPC', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('are batched (one message per report interval, none without samples) and feed the primary baseline', () => {
    const sent: AdmissionRequestMessage[] = [];
    const remote = new RemoteAdmission({ active: 0 }, (m) => (sent.push(m), true));
    remote.observeFirstToken(100);
    remote.observeFirstToken(200);
    remote.observeFirstToken(300);
    expect(sent).toEqual([]); // nothing per request
    jest.advanceTimersByTime(250);
    const batches = sent.filter((m) => m.op === 'first-token');
    expect(batches).toEqual([{ type: 'admission', op: 'first-token', meanMs: 200, count: 3 }]);
    jest.advanceTimersByTime(1000);
    expect(sent.filter((m) => m.op === 'first-token')).toHaveLength(1);

    const hub = new AdmissionHub((streams) => new AdmissionAuthority(settings, streams));
    expect(hub.onMessage({ id: 1 } as Worker, batches[0])).toBe(true);
    expect(hub.authority.baselineMs).toBe(200);
  });
});

describe('the baseline counts only first tokens taken with no recovery anywhere (as with one process)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('the primary tells every worker when recoveries start and stop; a worker drops samples taken meanwhile', async () => {
    const told: AdmissionQuietMessage[] = [];
    const hub = new AdmissionHub(
      (streams) => new AdmissionAuthority(settings, streams),
      (m) => told.push(m),
    );
    expect(hub.quietMessage()).toEqual({ type: 'admission', op: 'quiet', quiet: true });
    // Another worker's recovery, straight to the hub.
    const other = { id: 2, isConnected: () => true, send: (m: AdmissionToWorker) => answers.push(m) } as unknown as Worker;
    const answers: AdmissionToWorker[] = [];
    hub.onMessage(other, { type: 'admission', op: 'request', id: 1, streams: 10 });
    await Promise.resolve();
    expect(told).toEqual([{ type: 'admission', op: 'quiet', quiet: false }]);

    const sent: AdmissionRequestMessage[] = [];
    const remote = new RemoteAdmission({ active: 0 }, (m) => (sent.push(m), true));
    for (const m of told) remote.receive(m);
    remote.observeFirstToken(5_000); // during the other worker's recovery: not the normal
    hub.onMessage(other, { type: 'admission', op: 'settle', id: 1, result: 'ok' });
    expect(told.at(-1)).toEqual({ type: 'admission', op: 'quiet', quiet: true });
    remote.receive(told.at(-1) as AdmissionQuietMessage);
    remote.observeFirstToken(100);
    jest.advanceTimersByTime(250);
    const batches = sent.filter((m) => m.op === 'first-token');
    expect(batches).toEqual([{ type: 'admission', op: 'first-token', meanMs: 100, count: 1 }]);
    // The batch arrives during a new recovery: it was taken before, and it counts.
    hub.onMessage(other, { type: 'admission', op: 'request', id: 2, streams: 10 });
    await Promise.resolve();
    expect(hub.quietMessage().quiet).toBe(false);
    hub.onMessage({ id: 1 } as Worker, batches[0]);
    expect(hub.authority.baselineMs).toBe(100);
  });

  it("a worker's own recovery counts from its request, before the primary has said anything", () => {
    const sent: AdmissionRequestMessage[] = [];
    const remote = new RemoteAdmission({ active: 1 }, (m) => (sent.push(m), true));
    remote.request();
    remote.observeFirstToken(5_000);
    remote.receive({
      type: 'admission',
      op: 'answer',
      id: 1,
      answer: { admitted: false, reason: 'queue-timeout', retryAfterMs: 1000, waitedMs: 5 },
    });
    remote.observeFirstToken(100);
    jest.advanceTimersByTime(250);
    expect(sent.filter((m) => m.op === 'first-token')).toEqual([{ type: 'admission', op: 'first-token', meanMs: 100, count: 1 }]);
  });
});
