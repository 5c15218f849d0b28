// The sidecar's drain and close (src/lifecycle/drain.ts, close.ts) on their own: which records, in which
// order, what is shut down and with what grace. The same drain through Envoy: test/e2e/drain.e2e.test.ts.
import * as grpc from '@grpc/grpc-js';
import { HealthStatus } from '../../../src/extproc/health';
import { closeOnce } from '../../../src/lifecycle/close';
import { closeGraceAfterDrain, type DrainingParts, drainOnce, SHUTDOWN_GRACE_MS, stopNowOnce } from '../../../src/lifecycle/drain';
import { createLogger } from '../../../src/obs/logger';
import { SHUTDOWN_GRACE_MS as FROM_SIDECAR } from '../../../src/sidecar';

type Rec = { decision?: string; active_streams?: number; msg: string };

/** A drain's parts: a real health service and logger; the streams a Set, as the sidecar's; close recorded. */
function parts() {
  const records: Rec[] = [];
  const log = createLogger('info', { write: (line: string) => void records.push(JSON.parse(line)) });
  const inFlight = new Set<{ shutdown(): void }>();
  const closes: number[] = [];
  const p: DrainingParts = {
    ctx: {
      log,
      inFlight,
      drain: { draining: false },
      streams: {
        get active() {
          return inFlight.size;
        },
      },
    },
    health: new HealthStatus('SERVING'),
    close: async (graceMs) => void closes.push(graceMs),
  };
  return { p, records, inFlight, closes, decisions: () => records.map((r) => r.decision).filter(Boolean) };
}

describe('closeGraceAfterDrain', () => {
  it("is what is left of the drain's deadline, at least 1 s", () => {
    expect(closeGraceAfterDrain(30_000, 1200)).toBe(28_800);
    expect(closeGraceAfterDrain(30_000, 29_500)).toBe(1000);
    expect(closeGraceAfterDrain(0, 5)).toBe(1000);
    expect(closeGraceAfterDrain(5000, 7000)).toBe(1000);
  });

  it('SHUTDOWN_GRACE_MS is still importable from src/sidecar', () => {
    expect(FROM_SIDECAR).toBe(SHUTDOWN_GRACE_MS);
  });
});

describe('drainOnce', () => {
  it('with nothing in flight: NOT_SERVING, DRAIN then DRAINED, one close; a second call shares the first', async () => {
    const { p, closes, decisions } = parts();
    const drain = drainOnce(p);
    const first = drain(10_000);
    expect(p.ctx.drain.draining).toBe(true);
    expect(p.health.get('')).toBe('NOT_SERVING');
    expect(drain(1)).toBe(first);
    await first;
    expect(decisions()).toEqual(['DRAIN', 'DRAINED']);
    expect(closes).toHaveLength(1);
    expect(closes[0]).toBeGreaterThan(1000);
  });

  it('a stream that ends before the deadline: DRAINED, never shut down', async () => {
    const { p, inFlight, closes, decisions } = parts();
    let shutdowns = 0;
    const stream = { shutdown: () => void shutdowns++ };
    inFlight.add(stream);
    setTimeout(() => inFlight.delete(stream), 60);
    await drainOnce(p)(10_000);
    expect(decisions()).toEqual(['DRAIN', 'DRAINED']);
    expect(shutdowns).toBe(0);
    expect(closes).toHaveLength(1);
  });

  it('streams past the deadline: DRAIN_TIMEOUT, each shut down, then the close with the least grace', async () => {
    const { p, inFlight, records, closes, decisions } = parts();
    const shut: string[] = [];
    for (const name of ['a', 'b']) {
      const s = {
        shutdown: () => {
          shut.push(name);
          setTimeout(() => inFlight.delete(s), 10); // ends with its interruption event shortly after
        },
      };
      inFlight.add(s);
    }
    await drainOnce(p)(50);
    expect(decisions()).toEqual(['DRAIN', 'DRAIN_TIMEOUT']);
    expect(records.find((r) => r.decision === 'DRAIN_TIMEOUT')?.active_streams).toBe(2);
    expect(shut).toEqual(['a', 'b']);
    expect(inFlight.size).toBe(0);
    expect(closes).toEqual([1000]);
  });
});

describe('closeOnce', () => {
  it('health off and watches ended, gRPC shut down, then admin, upstream and tracing, in that order; once', async () => {
    const steps: string[] = [];
    const server = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    expect(port).toBeGreaterThan(0);
    const health = new HealthStatus('SERVING');
    const close = closeOnce({
      server,
      health,
      stopListening: () => void steps.push('listening off'),
      stopChecks: () => void steps.push('checks stopped'),
      admin: { close: async () => void steps.push(`admin closed, health ${health.get('')}`) },
      ctx: {
        upstream: { close: async () => void steps.push('upstream closed') },
        tracing: { shutdown: async () => void steps.push('tracing flushed') },
      },
    });
    const first = close();
    expect(close(5000)).toBe(first);
    await first;
    expect(steps).toEqual(['listening off', 'checks stopped', 'admin closed, health NOT_SERVING', 'upstream closed', 'tracing flushed']);
  });
});

describe('stopNowOnce', () => {
  it('ends every stream in flight at once (STOP_NOW), then closes with 1 s of grace; a second call shares the first', async () => {
    const { p, closes, decisions, inFlight, records } = parts();
    const shut: string[] = [];
    for (const name of ['a', 'b'])
      inFlight.add({
        shutdown() {
          shut.push(name);
          inFlight.delete(this);
        },
      });
    const stopNow = stopNowOnce(p);
    const first = stopNow();
    expect(stopNow()).toBe(first);
    await first;
    expect(shut).toEqual(['a', 'b']);
    expect(p.ctx.drain.draining).toBe(true);
    expect(p.health.get('')).toBe('NOT_SERVING');
    expect(decisions()).toEqual(['STOP_NOW']);
    expect(records.find((r) => r.decision === 'STOP_NOW')?.active_streams).toBe(2);
    expect(closes).toEqual([1000]);
  });

  it('during a drain: the streams the drain waits for end now, and the drain then closes as well', async () => {
    const { p, decisions, inFlight } = parts();
    inFlight.add({
      shutdown() {
        inFlight.delete(this);
      },
    });
    const draining = drainOnce(p)(60_000);
    await stopNowOnce(p)();
    await draining;
    expect(decisions()).toEqual(['DRAIN', 'STOP_NOW', 'DRAINED']);
  });
});
