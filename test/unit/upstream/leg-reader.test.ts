// LegReader over real legs: a node:http server on loopback and the gateway's own undici client, so the
// dispatch handler, pause/resume and aborts are the real ones.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LegAbort, LegOpenError, type LegResponse, UpstreamClient } from '../../../src/upstream/client';
import { LegReader, MAX_PARTIAL_EVENT_BYTES } from '../../../src/upstream/leg-reader';

type Script = (req: http.IncomingMessage, res: http.ServerResponse) => void;

let server: http.Server;
let base: string;
let script: Script;
const client = new UpstreamClient({ connectTimeoutMs: 2000, headersTimeoutMs: 2000 });

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => script(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await client.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

function open(abort = new LegAbort()): Promise<LegResponse> {
  return client.open(`${base}/v1/chat/completions`, { 'content-type': 'application/json' }, Buffer.from('{}'), abort);
}

const sse = (res: http.ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.flushHeaders();
};
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('LegReader', () => {
  it('returns whole events only, across chunk splits, then the end', async () => {
    script = (_req, res) => {
      sse(res);
      res.write('data: {"a"');
      setTimeout(() => res.end(':1}\n\ndata: [DONE]\n\n'), 20);
    };
    const leg = await open();
    expect(leg.status).toBe(200);
    expect(leg.headers['content-type']).toBe('text/event-stream');
    const r = new LegReader(leg.body);
    const got: string[] = [];
    for (;;) {
      const x = await r.next(1000);
      if (x.type !== 'events') {
        expect(x.type).toBe('end');
        break;
      }
      got.push(...x.events.map((e) => e.data ?? ''));
    }
    expect(got).toEqual(['{"a":1}', '[DONE]']);
  });

  it('reports silence without losing the pending read', async () => {
    let later!: () => void;
    script = (_req, res) => {
      sse(res);
      later = () => res.end('data: x\n\n');
    };
    const r = new LegReader((await open()).body);
    expect((await r.next(30)).type).toBe('idle');
    later();
    const ev = await r.next(1000);
    expect(ev.type === 'events' && ev.events[0].data).toBe('x');
  });

  it('a timer that fires late (a busy event loop) is not silence when bytes already wait in the socket', async () => {
    let send: (() => void) | undefined;
    script = (_req, res) => {
      sse(res);
      send = () => res.write('data: {"late":1}\n\n');
    };
    const leg = await open();
    const r = new LegReader(leg.body);
    const read = r.next(50);
    // The replica's bytes reach the client socket's kernel buffer, then the event loop is kept busy past the
    // 50 ms timer: when it turns again, the timer is due and the bytes are unread.
    send?.();
    const busyUntil = Date.now() + 150;
    while (Date.now() < busyUntil) {
      // a sidecar busy with other streams
    }
    try {
      const x = await read;
      expect(x.type).toBe('events');
      if (x.type === 'events') expect(x.events.map((e) => e.data)).toEqual(['{"late":1}']);
      // A real silence afterwards is still reported.
      expect((await r.next(50)).type).toBe('idle');
    } finally {
      r.fence(); // an open leg would keep client.close() in afterAll waiting
    }
  });

  it('keeps chunks that arrive before a reader attaches', async () => {
    script = (_req, res) => {
      sse(res);
      res.end('data: early\n\n');
    };
    const leg = await open();
    await tick(50);
    const r = new LegReader(leg.body);
    const ev = await r.next(1000);
    expect(ev.type === 'events' && ev.events[0].data).toBe('early');
    expect((await r.next(1000)).type).toBe('end');
  });

  it('a socket cut mid-body is a reset, not an end', async () => {
    script = (_req, res) => {
      sse(res);
      res.write('data: one\n\n');
      setTimeout(() => res.socket?.resetAndDestroy(), 20);
    };
    const r = new LegReader((await open()).body);
    expect((await r.next(1000)).type).toBe('events');
    expect((await r.next(1000)).type).toBe('reset');
  });

  it('bounds memory: an event that never ends is treated as a broken leg', async () => {
    const big = Buffer.alloc(64 * 1024, 0x61);
    script = (_req, res) => {
      sse(res);
      res.write('data: ');
      for (let i = 0; i < Math.ceil(MAX_PARTIAL_EVENT_BYTES / big.length) + 2; i++) res.write(big);
    };
    const r = new LegReader((await open()).body);
    let out = await r.next(1000);
    while (out.type === 'events') out = await r.next(1000);
    expect(out.type).toBe('reset');
    if (out.type === 'reset') expect(String(out.error)).toContain('larger than');
    r.fence();
  });

  it('a reader that does not read pauses the upstream socket (backpressure reaches the server)', async () => {
    let blocked: Promise<number>;
    script = (_req, res) => {
      sse(res);
      blocked = new Promise((resolve) => {
        let written = 0;
        const chunk = Buffer.from(`data: ${'x'.repeat(16 * 1024)}\n\n`);
        const pump = () => {
          while (written < 64 * 1024 * 1024) {
            written += chunk.length;
            if (!res.write(chunk)) return void resolve(written);
          }
          resolve(written);
        };
        pump();
      });
    };
    const r = new LegReader((await open()).body);
    const written = await blocked!;
    await tick(200);
    // The server's writes stopped well short of what it wanted to send: the socket is paused.
    expect(written).toBeLessThan(64 * 1024 * 1024);
    expect((await r.next(1000)).type).toBe('events');
    r.fence();
  });

  it('fence() aborts an open leg: the server sees its client go', async () => {
    let closed!: Promise<void>;
    script = (_req, res) => {
      sse(res);
      res.write('data: one\n\n');
      closed = new Promise((resolve) => res.on('close', () => resolve()));
    };
    const r = new LegReader((await open()).body);
    expect((await r.next(1000)).type).toBe('events');
    r.fence();
    await closed;
    expect((await r.next(10)).type).toBe('end');
  });

  it('an abort before the response head rejects with a stable code', async () => {
    script = () => undefined; // never answers
    const ac = new LegAbort();
    const pending = open(ac);
    setTimeout(() => ac.abort(), 30);
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LegOpenError);
    expect((err as LegOpenError).code).toBe('GW_ERR_LEG_OPEN_ABORTED');
    expect((err as LegOpenError).name).toBe('LegOpenError');
  });
});
