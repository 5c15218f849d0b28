// UPSTREAM_HTTP2=true (issue 22, "fewer connections"): the sidecar's legs go to Envoy's egress listener over
// HTTP/2 without TLS, multiplexed on one connection. Through the real Envoy: concurrent streams really run at
// once on it (the first try queued every leg behind the previous one: docs/performance.md), each client gets
// the engine's exact answer, Envoy saw HTTP/2 requests on few connections, and a crash is still continued.
import { request } from 'undici';
import { resetFaults } from '../../src/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream } from './helpers';

jest.setTimeout(120_000);

const STREAMS = 16;
/** ~60 token chunks at 20 ms: each stream lasts over a second, far longer than starting all of them takes. */
const SIZE = { 'x-fake-answer-tokens': '20,40', 'x-fake-token-ms': '20' };

describe('legs over HTTP/2 to the egress listener', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { UPSTREAM_HTTP2: 'true' } });
  });
  afterAll(async () => stack?.stop());

  const egressStat = async (name: string): Promise<number> => {
    const r = await request(`${stack.envoy.adminUrl}/stats?filter=${encodeURIComponent(`^http\\.egress\\.${name}$`)}`, { reset: true });
    const m = /: (\d+)/.exec(await r.body.text());
    return m ? Number(m[1]) : Number.NaN;
  };

  test(`${STREAMS} streams at once: all multiplexed, all whole`, async () => {
    const body = chatBody();
    const reference = await postChat(stack.url, body, SIZE);
    expectOneCompleteStream(reference);
    const before = await egressStat('downstream_rq_http2_total');

    // Order of events across all streams: each stream's first bytes and its end take the next number.
    let seq = 0;
    const firsts: number[] = [];
    const ends: number[] = [];
    const results = await Promise.all(
      Array.from({ length: STREAMS }, async (_, i) => {
        let first = true;
        const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': newRequestId(`h2-${i}`) }, () => {
          if (first) firsts.push(seq++);
          first = false;
        });
        ends.push(seq++);
        return r;
      }),
    );
    for (const r of results) {
      expectOneCompleteStream(r);
      expect(r.content).toBe(reference.content);
      expect(r.reasoning).toBe(reference.reasoning);
    }
    // Every stream had its first bytes before any stream ended: the legs ran at once, not one after another.
    expect(firsts).toHaveLength(STREAMS);
    expect(Math.max(...firsts)).toBeLessThan(Math.min(...ends));
    // Envoy saw the legs as HTTP/2 requests, on one or two connections (not one per stream).
    expect((await egressStat('downstream_rq_http2_total')) - before).toBe(STREAMS);
    expect(await egressStat('downstream_cx_http2_total')).toBeGreaterThanOrEqual(1);
    expect(await egressStat('downstream_cx_http2_total')).toBeLessThanOrEqual(2);
  });

  test('a replica crash mid-answer is continued over the same multiplexed connection', async () => {
    const body = chatBody({}, 'Continue me over HTTP/2.');
    const reference = await postChat(stack.url, body, SIZE);
    expectOneCompleteStream(reference);
    resetFaults();
    const rid = newRequestId('h2-crash');
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': rid, 'x-fake-fault': 'crash@15;-' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(reference.content);
    expect(r.reasoning).toBe(reference.reasoning);
    expect((await stack.waitForEnd(rid, 10_000)).outcome).toBe('completed-after-continuation');
  });
});
