// x-fake-burst (several token chunks per timer step) and the engine's respect of its socket's
// backpressure: a client that stops reading must stop the generation, not grow the engine's buffers.
import net from 'node:net';
import { resetFaults } from '../../../../tools/fake-engine/faults';
import { type FakeEngine, type SeenRequest, startFakeEngine } from '../../../../tools/fake-engine/server';
import { postJson, sseChunks } from '../../../../tools/fake-engine/sse-client';

const body = {
  model: 'm',
  stream: true,
  stream_options: { include_usage: true },
  messages: [{ role: 'user', content: 'burst please' }],
};
const chat = (fault: string | undefined, burst: string, extra: Record<string, string> = {}) =>
  postJson(`${e.url}/v1/chat/completions`, body, {
    'x-fake-answer-tokens': '10,10',
    'x-fake-burst': burst,
    ...(fault ? { 'x-fake-fault': fault } : {}),
    ...extra,
  });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const last = (): SeenRequest => e.requests[e.requests.length - 1];

let e: FakeEngine;
beforeAll(async () => {
  e = await startFakeEngine({ name: 'burst', tokenIntervalMs: 1 });
});
afterAll(async () => e.close());
beforeEach(() => resetFaults());

describe('x-fake-burst', () => {
  it('sends the same stream as one chunk per step', async () => {
    const one = await chat(undefined, '1');
    const many = await chat(undefined, '7'); // 20 tokens: 7 + 7 + 6, finish in the last step
    const deltas = (r: typeof one) => sseChunks(r).map((c) => c.choices[0]?.delta ?? c.usage);
    expect(many.status).toBe(200);
    expect(deltas(many)).toEqual(deltas(one));
    expect(many.data[many.data.length - 1]).toBe('[DONE]');
    expect(last().tokensSent).toBe(20);
  });

  it('takes the whole answer in one step when the burst is larger than it', async () => {
    const r = await chat(undefined, '1000');
    expect(sseChunks(r).length).toBe(1 + 20 + 2);
    expect(r.data[r.data.length - 1]).toBe('[DONE]');
  });

  it('fires faults at their exact index inside a burst', async () => {
    const crash = await chat('crash@5', '4');
    expect(crash.error?.code).toBe('ECONNRESET');
    expect(sseChunks(crash).length).toBe(1 + 5);
    expect(last()).toMatchObject({ fault: 'crash@5', tokensSent: 5 });

    const eof = await chat('eof@6', '4');
    expect(eof.data).not.toContain('[DONE]');
    expect(sseChunks(eof).length).toBe(1 + 6);

    const error = await chat('error@5', '3');
    expect(error.data.length).toBe(1 + 5 + 2);
    expect(error.data[error.data.length - 2]).toContain('fake-engine injected error');

    const abort = await chat('abort@7', '5');
    const chunks = sseChunks(abort);
    expect(chunks.length).toBe(1 + 7 + 1);
    expect(chunks[chunks.length - 1].choices[0].finish_reason).toBe('abort');

    const late = await chat('crash@1000', '8'); // past the end: just before the finish chunk
    expect(late.error?.code).toBe('ECONNRESET');
    expect(sseChunks(late).length).toBe(1 + 20);
  });

  it('malformed@i goes on in the same burst; stall@i:ms resumes with a new one', async () => {
    const bad = await chat('malformed@3', '4');
    expect(bad.data[1 + 3]).toBe('{"this is not json');
    expect(sseChunks(bad).length).toBe(1 + 20 + 2);

    const t0 = Date.now();
    const stalled = await chat('stall@2:150', '8');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
    expect(sseChunks(stalled).length).toBe(1 + 20 + 2);
    expect(stalled.data[stalled.data.length - 1]).toBe('[DONE]');
  });

  it('is a 400 unless an integer >= 1', async () => {
    for (const v of ['0', '-1', '1.5', 'x', '']) expect((await chat(undefined, v)).status).toBe(400);
  });
});

describe('backpressure', () => {
  it('stops generating while the client does not read, and finishes when it reads again', async () => {
    const n = 100_000; // ~29 MB of SSE: far more than the kernel's socket buffers on loopback hold
    const payload = JSON.stringify(body);
    const sock = net.connect(e.port, '127.0.0.1');
    sock.pause();
    sock.write(
      'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n' +
        `x-fake-answer-tokens: 0,${n}\r\nx-fake-token-ms: 0\r\nx-fake-burst: 200\r\n` +
        `content-length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
    );
    const seen = () => e.requests.find((r) => r.headers['x-fake-answer-tokens'] === `0,${n}`);
    // Wait until the buffers are full: two samples 300 ms apart agree.
    let before = -1;
    for (let i = 0; i < 50; i++) {
      await sleep(300);
      const now = seen()?.tokensSent ?? 0;
      if (now > 0 && now === before) break;
      before = now;
    }
    const stuck = seen()!.tokensSent;
    expect(stuck).toBe(before);
    expect(stuck).toBeLessThan(n / 2);

    let tail = '';
    let bytes = 0;
    const ended = new Promise<void>((resolve, reject) => {
      sock.on('data', (c: Buffer) => {
        bytes += c.length;
        tail = (tail + c.toString('latin1')).slice(-64);
        if (tail.endsWith('data: [DONE]\n\n\r\n0\r\n\r\n')) resolve();
      });
      sock.on('error', reject);
    });
    sock.resume();
    await ended;
    sock.destroy();
    expect(seen()!.tokensSent).toBe(n);
    expect(bytes).toBeGreaterThan(n * 100);
  });
});
