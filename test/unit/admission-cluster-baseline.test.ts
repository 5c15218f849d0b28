// WORKERS > 1: a worker's leg 1 first-token latencies reach the primary's authority in batches, on the timer
// that already reports its stream count (src/recovery/admission-cluster.ts), and become the adaptive baseline.

import type { Worker } from 'node:cluster';
import { AdmissionAuthority } from '../../src/recovery/admission';
import { AdmissionHub, type AdmissionRequestMessage, RemoteAdmission } from '../../src/recovery/admission-cluster';

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
