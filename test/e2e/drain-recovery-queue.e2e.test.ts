// The drain deadline during recoveries, through the real Envoy (issue 20): every committed stream ends with the
// interruption event (reason gateway-shutdown) and [DONE], never a reset. One continuation holds the only
// re-prefill slot (its replica never answers), two more wait in the queue behind it, and a fourth is still
// counting its tokens (/tokenize) when the deadline comes: its wait for a slot would start after the shutdown.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AdmissionAuthority } from '../../src/recovery/admission';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectInterruption } from './helpers';

async function waitFor(cond: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`never reached: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A /tokenize that answers at once until told to hold its answers. */
function tokenizer() {
  const held: http.ServerResponse[] = [];
  const state = { hold: false, held };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (state.hold) held.push(res);
      else res.end(JSON.stringify({ count: 3, tokens: [1, 2, 3] }));
    });
  });
  return {
    state,
    async start(): Promise<string> {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/tokenize`;
    },
    async close(): Promise<void> {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('drain while recoveries wait in the admission queue', () => {
  let stack: TestStack;
  const tok = tokenizer();
  beforeAll(async () => {
    const url = await tok.start();
    stack = await startTestStack({
      env: {
        RECOVERY_MAX_CONCURRENT: '1',
        RECOVERY_MIN_CONCURRENT: '1',
        RECOVERY_QUEUE_TIMEOUT_SECONDS: '60',
        UPSTREAM_HEADERS_TIMEOUT_SECONDS: '60',
        TOKENIZE_URL: url,
        TOKENIZE_DIALECT: 'sglang',
        TOKENIZE_TIMEOUT_MS: '30000',
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await tok.close();
  });

  it('every committed stream ends with gateway-shutdown and [DONE], also one that was tokenizing', async () => {
    const sidecar = stack.sidecar!;
    const authority = sidecar.ctx.admission as AdmissionAuthority;
    // Leg 1 of each crashes after delivered text; its continuation (the next step of the same script) hangs
    // before its headers. Distinct scripts, so each stream has its own steps.
    const post = (n: number) => {
      const id = newRequestId(`drain-queue-${n}`);
      const headers = { 'x-fake-fault': `crash@${n};hang`, 'x-fake-answer-tokens': '10,20', 'x-request-id': id };
      return { id, result: postChat(stack.url, chatBody(), headers) };
    };
    const queued = [7, 8, 9].map(post);
    await waitFor(() => authority.inFlight === 1 && authority.waiting === 2, 'one continuation in flight, two waiting');
    tok.state.hold = true;
    const counting = post(12);
    await waitFor(() => tok.state.held.length > 0, 'the fourth continuation inside /tokenize');
    await sidecar.drain(300);
    // src/main.ts exits the process when drain() resolves: a stream still in flight then is cut, a reset for its
    // client (in this in-process stack it would live on).
    expect(sidecar.ctx.streams.active).toBe(0);
    expect(stack.records({ decision: 'DRAIN_TIMEOUT' })).toEqual([expect.objectContaining({ active_streams: 4 })]);
    const all = [...queued, counting];
    for (const r of await Promise.all(all.map((s) => s.result))) {
      expect(r.status).toBe(200);
      expectInterruption(r, 'gateway-shutdown');
      expect(r.raw.split('data: [DONE]').length - 1).toBe(1);
    }
    for (const { id } of all) expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'interrupted', reason: 'gateway-shutdown' });
    expect(authority.waiting).toBe(0);
    expect(authority.inFlight).toBe(0);
  });
});
