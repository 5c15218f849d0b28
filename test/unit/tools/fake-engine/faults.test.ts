// Every injected fault, observed from the client side the way a gateway would see it, plus the shared
// registry, client-abort tracking and a prompt close() with hung requests.
import net from 'node:net';
import { baseRequestId, parseFault, resetFaults, takeFault } from '../../../../tools/fake-engine/faults';
import { type FakeEngine, type SeenRequest, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';

const body = {
  model: 'm',
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'fault please' }],
};
const SIZE = { 'x-fake-answer-tokens': '10,10' };
const chat = (e: FakeEngine, fault: string, extra: Record<string, string> = {}, timeoutMs?: number) =>
  postJson(`${e.url}/v1/chat/completions`, body, { ...SIZE, 'x-fake-fault': fault, ...extra }, { timeoutMs });

async function waitFor<T>(fn: () => T | undefined, ms = 2000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > until) throw new Error('waitFor timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}
const last = (e: FakeEngine): SeenRequest => e.requests[e.requests.length - 1];

let a: FakeEngine;
let b: FakeEngine;
beforeAll(async () => {
  a = await startFakeEngine({ name: 'a', tokenIntervalMs: 1 });
  b = await startFakeEngine({ name: 'b', dialect: 'vllm', tokenIntervalMs: 1 });
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
});
beforeEach(() => resetFaults());

describe('faults seen by the client', () => {
  it('crash@i: socket error after exactly i token chunks, no finish', async () => {
    const r = await chat(a, 'crash@4');
    expect(r.status).toBe(200);
    expect(r.error?.code).toBe('ECONNRESET');
    expect(r.timedOut).toBe(false);
    const chunks = sseChunks(r);
    expect(chunks.length).toBe(1 + 4);
    expect(chunks.some((c) => c.choices?.[0]?.finish_reason)).toBe(false);
    expect(last(a)).toMatchObject({ fault: 'crash@4', tokensSent: 4, clientAborted: false });
  });

  it('fin@i: the connection ends mid-body without the last chunk', async () => {
    const r = await chat(a, 'fin@3');
    expect(r.error?.code).toBe('UND_ERR_SOCKET'); // "other side closed": a FIN, not a reset
    expect(r.data).not.toContain('[DONE]');
    expect(sseChunks(r).length).toBe(4);
  });

  it('eof@i: the body ends cleanly but without finish chunk or [DONE]', async () => {
    const r = await chat(a, 'eof@6');
    expect(r.error).toBeUndefined();
    expect(r.data).not.toContain('[DONE]');
    const chunks = sseChunks(r);
    expect(chunks.length).toBe(7);
    expect(chunks.some((c) => c.choices?.[0]?.finish_reason)).toBe(false);
  });

  it('stall@i: no bytes after token i, connection stays open', async () => {
    const r = await chat(a, 'stall@2', {}, 300);
    expect(r.timedOut).toBe(true);
    expect(sseChunks(r).length).toBe(3);
    await waitFor(() => last(a).clientAborted);
  });

  it('stall@i: nothing arrives within 200 ms of the stall', async () => {
    const arrivals: number[] = [];
    const sock = net.connect(a.port, '127.0.0.1');
    const payload = JSON.stringify(body);
    sock.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-fake-answer-tokens: 10,10\r\nx-fake-fault: stall@1\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    );
    sock.on('data', () => arrivals.push(Date.now()));
    await new Promise((r) => setTimeout(r, 350));
    sock.destroy();
    expect(arrivals.length).toBeGreaterThan(0);
    const lastByte = Math.max(...arrivals);
    expect(Date.now() - lastByte).toBeGreaterThanOrEqual(200);
  });

  it('stall@i:ms resumes and finishes normally', async () => {
    const t0 = Date.now();
    const r = await chat(a, 'stall@2:150');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
    expect(r.data[r.data.length - 1]).toBe('[DONE]');
    expect(sseChunks(r).length).toBe(1 + 20 + 2);
  });

  it('error@i: an error event then [DONE]', async () => {
    const r = await chat(a, 'error@5');
    expect(r.error).toBeUndefined();
    expect(r.data.slice(-2)).toEqual([
      '{"error":{"message":"fake-engine injected error","type":"InternalServerError","code":500}}',
      '[DONE]',
    ]);
    expect(r.data.length).toBe(1 + 5 + 2);
  });

  it('abort@i: a finish_reason abort chunk then [DONE]', async () => {
    const r = await chat(b, 'abort@7');
    const chunks = sseChunks(r);
    expect(chunks.length).toBe(1 + 7 + 1);
    expect(chunks[chunks.length - 1].choices[0]).toMatchObject({ delta: {}, finish_reason: 'abort' });
    expect(r.data[r.data.length - 1]).toBe('[DONE]');
  });

  it('nodone: complete but without [DONE]', async () => {
    const r = await chat(a, 'nodone@-');
    expect(r.error).toBeUndefined();
    expect(r.data).not.toContain('[DONE]');
    const chunks = sseChunks(r);
    expect(chunks[chunks.length - 1].usage.completion_tokens).toBe(20);
  });

  it('malformed@i: one unparsable event, then the stream goes on', async () => {
    const r = await chat(a, 'malformed@3');
    expect(r.data[4]).toBe('{"this is not json');
    expect(sseChunks(r).length).toBe(1 + 20 + 2);
    expect(r.data[r.data.length - 1]).toBe('[DONE]');
  });

  it('status@CODE: an HTTP error before any stream', async () => {
    const r = await chat(a, 'status@503');
    expect(r.status).toBe(503);
    expect(JSON.parse(r.text).error.code).toBe(503);
  });

  it('slow@ms: the role chunk comes late', async () => {
    const t0 = Date.now();
    const r = await chat(a, 'slow@150');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
    expect(r.data[r.data.length - 1]).toBe('[DONE]');
  });

  it('crash-before-headers: a socket error and no status', async () => {
    const r = await chat(a, 'crash-before-headers');
    expect(r.status).toBe(0);
    expect(r.error?.code).toBe('ECONNRESET');
  });

  it('hang: no answer at all; the client abort is recorded', async () => {
    const r = await chat(a, 'hang', {}, 200);
    expect(r.timedOut).toBe(true);
    expect(r.status).toBe(0);
    const seen = await waitFor(() => (last(a).closedAt ? last(a) : undefined));
    expect(seen).toMatchObject({ fault: 'hang', clientAborted: true });
  });

  it('a bad spec is a 400, not a silent pass', async () => {
    const r = await chat(a, 'explode@1');
    expect(r.status).toBe(400);
  });
});

describe('client aborts', () => {
  it('records clientAborted and stops writing', async () => {
    const ctl = new AbortController();
    const p = postJson(`${a.url}/v1/chat/completions`, body, { 'x-fake-token-ms': '20' }, { signal: ctl.signal });
    await waitFor(() => (last(a).tokensSent >= 2 ? true : undefined));
    ctl.abort();
    await p;
    const seen = await waitFor(() => (last(a).closedAt ? last(a) : undefined));
    expect(seen.clientAborted).toBe(true);
    const sent = seen.tokensSent;
    await new Promise((r) => setTimeout(r, 100));
    expect(seen.tokensSent).toBe(sent);
  });

  it('does not flag a normally finished request', async () => {
    await chat(a, '-');
    const seen = await waitFor(() => (last(a).closedAt ? last(a) : undefined));
    expect(seen.clientAborted).toBe(false);
    expect(seen.fault).toBeUndefined();
  });
});

describe('shared fault registry', () => {
  it('hands out specs in order across two instances', async () => {
    const script = 'crash@3;-;eof@2';
    const r1 = await chat(a, script);
    const r2 = await chat(b, script);
    const r3 = await chat(a, script);
    const r4 = await chat(b, script);
    expect(r1.error).toBeDefined();
    expect(r2.data[r2.data.length - 1]).toBe('[DONE]');
    expect(sseChunks(r3).length).toBe(3);
    expect(r4.data[r4.data.length - 1]).toBe('[DONE]');
    expect(a.requests.slice(-2).map((s) => s.fault)).toEqual(['crash@3', 'eof@2']);
    expect(b.requests.slice(-2).map((s) => s.fault)).toEqual([undefined, undefined]);
  });
});

describe('close()', () => {
  it('resolves fast with hung and stalled requests open', async () => {
    const e = await startFakeEngine({ name: 'closing', tokenIntervalMs: 1 });
    const hung = chat(e, 'hang', {}, 5000);
    const stalled = chat(e, 'stall@1', { 'x-other': '1' }, 5000);
    await waitFor(() => (e.requests.length === 2 ? true : undefined));
    await new Promise((r) => setTimeout(r, 30));
    const t0 = Date.now();
    await e.close();
    expect(Date.now() - t0).toBeLessThan(500);
    const [h, s] = await Promise.all([hung, stalled]);
    expect(h.timedOut || s.timedOut).toBe(false);
    expect(h.error).toBeDefined();
    expect(s.error).toBeDefined();
    expect(e.requests.every((r) => !r.clientAborted)).toBe(true);
  });
});

describe('status@CODE:SECONDS and the request scope', () => {
  it('status@503:2 answers 503 with Retry-After: 2; status@429 without one', async () => {
    const r = await chat(a, 'status@503:2');
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('2');
    const r2 = await chat(a, 'status@429');
    expect(r2.status).toBe(429);
    expect(r2.headers['retry-after']).toBeUndefined();
  });

  it('header scope: a one-step script is spent after one request; request scope: every client request runs it afresh', async () => {
    expect(takeFault('crash@3')).toMatchObject({ kind: 'crash', at: 3 });
    expect(takeFault('crash@3')).toBeUndefined();
    for (const id of ['r1', 'r2', 'r3']) expect(takeFault('crash@3', false, id)).toMatchObject({ kind: 'crash' });
    // the gateway's legs of one request share its script: a retry (-a2) and the continuation (-c1)
    expect(takeFault('status@503;crash@2;eof@1', false, 'r9')).toMatchObject({ kind: 'status' });
    expect(takeFault('status@503;crash@2;eof@1', false, 'r9-a2')).toMatchObject({ kind: 'crash' });
    expect(takeFault('status@503;crash@2;eof@1', true, 'r9-c1')).toMatchObject({ kind: 'eof' });
    expect(takeFault('crash@3', true, 'r10-c1')).toBeUndefined(); // a one-step script never hits the continuation
    expect(baseRequestId('2f1c0e7a-9b7d-4c1e-a6f3-0b1c2d3e4f5a')).toBe('2f1c0e7a-9b7d-4c1e-a6f3-0b1c2d3e4f5a');
  });

  it('an engine started with faultScope request crashes each request sending the same header', async () => {
    const e = await startFakeEngine({ name: 'scoped', tokenIntervalMs: 1, faultScope: 'request' });
    try {
      for (const id of ['x1', 'x2']) {
        const r = await chat(e, 'crash@2', { 'x-request-id': id });
        expect(r.error?.code).toBe('ECONNRESET');
      }
    } finally {
      await e.close();
    }
  });
});

describe('issue 39 faults: their specs', () => {
  it('finish-number, finish-object, finish-twice at an index; flood with what and how long; bigline with a size', () => {
    expect(parseFault('finish-number@3')).toMatchObject({ kind: 'finish-number', at: 3 });
    expect(parseFault('finish-object@0')).toMatchObject({ kind: 'finish-object', at: 0 });
    expect(parseFault('finish-twice@25')).toMatchObject({ kind: 'finish-twice', at: 25 });
    expect(parseFault('flood@12:comment:10000')).toMatchObject({ kind: 'flood', at: 12, flood: 'comment', ms: 10000 });
    expect(parseFault('flood@1:empty-data:5')).toMatchObject({ flood: 'empty-data', ms: 5 });
    expect(parseFault('flood@1:data-lines:5')).toMatchObject({ flood: 'data-lines' });
    expect(parseFault('bigline@12:1048592')).toMatchObject({ kind: 'bigline', at: 12, ms: 1048592 });
    for (const bad of ['flood@12:comments:10', 'flood@12:comment', 'bigline@12', 'finish-twice@x'])
      expect(() => parseFault(bad)).toThrow(/bad fault spec/);
  });
});
