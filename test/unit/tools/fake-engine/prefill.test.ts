// The fake engine's slow-prefill mode: the first token comes later the more prefills the replica runs.

import { PrefillLoad } from '../../../../tools/fake-engine/prefill';
import { type FakeEngine, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';

describe('PrefillLoad', () => {
  it('each arrival waits msPerConcurrent x the prefills in progress, itself included; done frees one, once', () => {
    const p = new PrefillLoad(40);
    const a = p.begin();
    const b = p.begin();
    const c = p.begin();
    expect([a.delayMs, b.delayMs, c.delayMs]).toEqual([40, 80, 120]);
    expect(p.inProgress).toBe(3);
    b.done();
    b.done();
    expect(p.inProgress).toBe(2);
    expect(p.begin().delayMs).toBe(120);
    a.done();
    c.done();
    expect(p.inProgress).toBe(1);
  });

  it('a fixed part on top, the same at any load', () => {
    const p = new PrefillLoad(40, 300);
    expect([p.begin().delayMs, p.begin().delayMs]).toEqual([340, 380]);
    const fixedOnly = new PrefillLoad(0, 300);
    expect([fixedOnly.begin().delayMs, fixedOnly.begin().delayMs]).toEqual([300, 300]);
    expect(fixedOnly.inProgress).toBe(0);
  });

  it.each([0, -5, Number.NaN])('off with %p ms: no delay, nothing counted', (ms) => {
    const p = new PrefillLoad(ms);
    expect(p.begin().delayMs).toBe(0);
    expect(p.inProgress).toBe(0);
  });
});

describe('startFakeEngine({ prefillMsPerConcurrent })', () => {
  let e: FakeEngine;
  beforeAll(async () => {
    e = await startFakeEngine({ name: 'slow-prefill', tokenIntervalMs: 1, prefillMsPerConcurrent: 40 });
  });
  afterAll(async () => e.close());
  const body = (k: number) => ({ model: 'm', stream: true, messages: [{ role: 'user', content: `prefill ${k}` }] });
  const until = async (cond: () => boolean) => {
    while (!cond()) await new Promise((r) => setTimeout(r, 5));
  };

  it('4 concurrent streams: all counted while waiting, the i-th answer no sooner than 40 x i ms, complete, then none counted', async () => {
    const runs = [1, 2, 3, 4].map(async (k) => {
      const t0 = performance.now();
      const c = await postJson(`${e.url}/v1/chat/completions`, body(k), { 'x-fake-answer-tokens': '1,2' });
      return { c, ms: performance.now() - t0 };
    });
    await until(() => e.requests.length >= 4);
    expect(e.prefillsInProgress).toBe(4);
    const done = await Promise.all(runs);
    for (const { c } of done) {
      expect(c.status).toBe(200);
      expect(sseChunks(c).some((x) => x.choices?.[0]?.finish_reason === 'stop')).toBe(true);
    }
    // Arrival order is the server's; whatever it was, the delays were 40, 80, 120 and 160 ms.
    const sorted = done.map((d) => d.ms).sort((a, b) => a - b);
    sorted.forEach((ms, i) => expect(ms).toBeGreaterThanOrEqual(40 * (i + 1) - 2));
    expect(e.prefillsInProgress).toBe(0);
  });

  it('a client that leaves during its prefill frees its place', async () => {
    const before = e.requests.length;
    const ac = new AbortController();
    const gone = postJson(`${e.url}/v1/chat/completions`, body(9), {}, { signal: ac.signal });
    await until(() => e.requests.length > before);
    expect(e.prefillsInProgress).toBe(1);
    ac.abort();
    await gone;
    await until(() => e.prefillsInProgress === 0);
    expect(e.prefillsInProgress).toBe(0);
  });
});
