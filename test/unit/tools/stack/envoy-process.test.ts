// Runs the real Envoy with the generated bootstrap against stand-ins: an HTTP "router" and a TCP "sidecar"
// (enough for the TCP health check). Checks what the sidecar relies on: egress proxying, the
// x-gateway-upstream-flags header on the router's own replies and on Envoy's local 503, before-headers retries
// landing on another replica, passthrough routes, fail-open when the sidecar is down, start/stop hygiene.
import * as http from 'node:http';
import * as net from 'node:net';
import { ensureEnvoy } from '../../../../tools/stack/envoy-binary';
import {
  extProcHealthFlags,
  type RunningEnvoy,
  type StartEnvoyOptions,
  startEnvoy,
  waitForExtProcHealth,
} from '../../../../tools/stack/envoy-process';
import { freePort, freePorts, isPortOpen } from '../../../../tools/stack/ports';

jest.setTimeout(60_000);

interface Upstream {
  port: number;
  hits: Array<{ method: string; url: string; body: string; headers: http.IncomingHttpHeaders }>;
  close(): Promise<void>;
}

/** An HTTP server answering `status` with a small body that names it. */
async function upstream(name: string, status = 200): Promise<Upstream> {
  const hits: Upstream['hits'] = [];
  const srv = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const body = Buffer.concat(parts).toString();
      hits.push({ method: req.method ?? '', url: req.url ?? '', body, headers: req.headers });
      // Tries to forge the flags header: the egress route must overwrite it.
      res.writeHead(status, { 'content-type': 'text/plain', 'x-gateway-upstream-flags': 'forged' });
      res.end(`${name} ${status} ${req.method} ${req.url} ${body}`);
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as net.AddressInfo).port;
  return {
    port,
    hits,
    close: () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  };
}

/** A TCP listener standing in for the sidecar (the ext_proc cluster's TCP health check only connects). */
async function tcpSidecar(port = 0): Promise<{ port: number; close(): Promise<void> }> {
  const socks = new Set<net.Socket>();
  const srv = net.createServer((s) => {
    socks.add(s);
    s.on('close', () => socks.delete(s));
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => srv.listen(port, '127.0.0.1', () => r()));
  return {
    port: (srv.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        for (const s of socks) s.destroy();
        srv.close(() => r());
      }),
  };
}

function request(url: string, method = 'GET', body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// Envoy's own listeners on port 0: it binds ephemeral ports and startEnvoy reads them back (a port picked free
// here and bound by Envoy a moment later can be taken by another jest worker in between).
async function baseOptions(extProcPort: number, routerPorts: number[]): Promise<StartEnvoyOptions> {
  return {
    envoyBin: process.env.ENVOY_BIN ?? (await ensureEnvoy()),
    listenPort: 0,
    adminPort: 0,
    egressPort: 0,
    extProcHost: '127.0.0.1',
    extProcPort,
    routerTier: routerPorts.map((port) => ({ host: '127.0.0.1', port })),
    stallTimeoutSeconds: 20,
    maxStallSeconds: 300,
  };
}

describe('freePort', () => {
  it('returns a port that can be bound', async () => {
    const p = await freePort();
    expect(p).toBeGreaterThan(0);
    const s = net.createServer();
    await new Promise<void>((r, j) => {
      s.once('error', j);
      s.listen(p, '127.0.0.1', () => r());
    });
    expect(await isPortOpen(p)).toBe(true);
    await new Promise<void>((r) => s.close(() => r()));
    expect(await isPortOpen(p)).toBe(false);
    const many = await freePorts(5);
    expect(new Set(many).size).toBe(5);
  });
});

describe('startEnvoy against stand-ins', () => {
  let routerA: Upstream;
  let sidecar: { port: number; close(): Promise<void> };
  let envoy: RunningEnvoy;

  beforeAll(async () => {
    routerA = await upstream('router-a');
    sidecar = await tcpSidecar();
    envoy = await startEnvoy(await baseOptions(sidecar.port, [routerA.port]));
  });
  afterAll(async () => {
    await envoy?.stop();
    await routerA?.close();
    await sidecar?.close();
  });

  it('is ready: admin LIVE, listeners bound, ext_proc host healthy', async () => {
    expect(envoy.adminUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(envoy.egressUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(envoy.continuationEgressUrl).toBeUndefined();
    expect((await request(`${envoy.adminUrl}/ready`)).body.trim()).toBe('LIVE');
    expect(await isPortOpen(envoy.listenPort)).toBe(true);
    expect(await extProcHealthFlags(envoy.adminUrl)).toEqual(['healthy']);
  });

  it('egress proxies to the router tier and marks the router\'s own replies with flags "-"', async () => {
    const r = await request(`${envoy.egressUrl}/v1/chat/completions?x=1`, 'POST', '{"stream":true}');
    expect(r.status).toBe(200);
    expect(r.body).toBe('router-a 200 POST /v1/chat/completions?x=1 {"stream":true}');
    expect(r.headers['x-gateway-upstream-flags']).toBe('-');
    expect(r.headers['x-envoy-upstream-service-time']).toBeDefined();
  });

  it('front: non-chat paths are proxied natively (no ext_proc stream)', async () => {
    const r = await request(`http://127.0.0.1:${envoy.listenPort}/v1/models`);
    expect(r.status).toBe(200);
    expect(r.body).toBe('router-a 200 GET /v1/models ');
  });

  it('logs() holds the access log with flags and codes', async () => {
    await request(`${envoy.egressUrl}/logged`);
    const deadline = Date.now() + 5000;
    while (!/egress GET \/logged HTTP\/1\.1 rid=\S+ code=200 flags=-/.test(envoy.logs()) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(envoy.logs()).toMatch(/egress GET \/logged HTTP\/1\.1 rid=\S+ code=200 flags=- /);
  });

  it('sidecar down: health check marks it unhealthy and chat requests are proxied natively (fail-open)', async () => {
    await sidecar.close();
    await waitForExtProcHealth(envoy.adminUrl, false, 5000);
    const r = await request(`http://127.0.0.1:${envoy.listenPort}/v1/chat/completions`, 'POST', '{"stream":true,"messages":[]}');
    expect(r.status).toBe(200);
    expect(r.body).toBe('router-a 200 POST /v1/chat/completions {"stream":true,"messages":[]}');
    // Back up on the same port: healthy again after one successful check.
    sidecar = await tcpSidecar(sidecar.port);
    await waitForExtProcHealth(envoy.adminUrl, true, 5000);
  });

  it('waitForExtProcHealth times out with a clear error', async () => {
    await expect(waitForExtProcHealth(envoy.adminUrl, false, 300)).rejects.toThrow(
      /did not mark the ext_proc host unhealthy within 300 ms \(last health_flags: healthy\)/,
    );
  });
});

describe('router tier failures seen through egress', () => {
  let sidecar: { port: number; close(): Promise<void> };
  const running: RunningEnvoy[] = [];
  const ups: Upstream[] = [];

  beforeAll(async () => {
    sidecar = await tcpSidecar();
  });
  afterAll(async () => {
    await Promise.all(running.map((e) => e.stop()));
    await Promise.all(ups.map((u) => u.close()));
    await sidecar.close();
  });

  it("nothing listens on the router port: Envoy's local 503 carries the flags (UF, URX after retries)", async () => {
    const dead = await freePort();
    const e = await startEnvoy(await baseOptions(sidecar.port, [dead]));
    running.push(e);
    const r = await request(`${e.egressUrl}/v1/chat/completions`, 'POST', '{}');
    expect(r.status).toBe(503);
    const flags = String(r.headers['x-gateway-upstream-flags']);
    expect(flags).not.toBe('-');
    expect(flags.split(',')).toEqual(expect.arrayContaining(['UF', 'URX']));
  });

  it('the router\'s own 5xx is passed on with flags "-", a 503 too: Envoy does not retry it (the sidecar does, under its admission)', async () => {
    const broken = await upstream('router-broken', 500);
    const busy = await upstream('router-busy', 503);
    ups.push(broken, busy);
    const e = await startEnvoy(await baseOptions(sidecar.port, [broken.port]));
    running.push(e);
    const r = await request(`${e.egressUrl}/v1/chat/completions`, 'POST', '{}');
    expect(r.status).toBe(500);
    expect(r.body).toContain('router-broken 500');
    expect(r.headers['x-gateway-upstream-flags']).toBe('-');
    expect(broken.hits).toHaveLength(1); // 500 is never retried
    const e2 = await startEnvoy(await baseOptions(sidecar.port, [busy.port]));
    running.push(e2);
    const r2 = await request(`${e2.egressUrl}/v1/chat/completions`, 'POST', '{}');
    expect(r2.status).toBe(503);
    expect(r2.body).toContain('router-busy 503');
    // One engine request per leg: a 503 is not multiplied by Envoy's retry policy against a failing pool.
    expect(busy.hits).toHaveLength(1);
    expect(r2.headers['x-gateway-upstream-flags']).toBe('-');
  });

  it('one of two replicas is down: the before-headers retry lands on the other one', async () => {
    const alive = await upstream('router-alive');
    ups.push(alive);
    const dead = await freePort();
    const e = await startEnvoy(await baseOptions(sidecar.port, [dead, alive.port]));
    running.push(e);
    for (let i = 0; i < 6; i++) {
      const r = await request(`${e.egressUrl}/v1/chat/completions`, 'POST', `{"i":${i}}`);
      expect(r.status).toBe(200);
      expect(r.body).toBe(`router-alive 200 POST /v1/chat/completions {"i":${i}}`);
    }
    expect(alive.hits).toHaveLength(6);
  });

  it("bodies above Envoy's 1 MiB default buffer stay retryable (request_body_buffer_limit)", async () => {
    const alive = await upstream('router-alive-big');
    ups.push(alive);
    const dead = await freePort();
    // One worker: round robin then deterministically tries the dead replica first on the first request.
    const e = await startEnvoy({ ...(await baseOptions(sidecar.port, [dead, alive.port])), concurrency: 1 });
    running.push(e);
    const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(3 * 1024 * 1024) }] });
    for (let i = 0; i < 2; i++) {
      const r = await request(`${e.egressUrl}/v1/chat/completions`, 'POST', big);
      expect(r.status).toBe(200);
      expect(r.body.length).toBe('router-alive-big 200 POST /v1/chat/completions '.length + big.length);
    }
  });

  it('a router reset mid-answer reaches the sidecar at once (delayed_close_timeout 0 on egress)', async () => {
    const srv = http.createServer((_q, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: 1\n\n');
      setTimeout(() => res.socket?.destroy(), 100);
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    try {
      const e = await startEnvoy(await baseOptions(sidecar.port, [(srv.address() as net.AddressInfo).port]));
      running.push(e);
      const t0 = Date.now();
      const outcome = await new Promise<string>((resolve) => {
        const req = http.request(`${e.egressUrl}/v1/chat/completions`, { method: 'POST', agent: false }, (res) => {
          res.on('data', () => undefined);
          res.on('end', () => resolve('end'));
          res.on('error', () => resolve('aborted'));
          res.on('aborted', () => resolve('aborted'));
        });
        req.on('error', () => resolve('aborted'));
        req.end('{}');
      });
      expect(outcome).toBe('aborted');
      // Envoy's default (1 s delayed close) would make this >= 1100 ms.
      expect(Date.now() - t0).toBeLessThan(700);
    } finally {
      srv.closeAllConnections();
      srv.close();
    }
  });

  it('continuation split: the continuation egress reaches the continuation tier', async () => {
    const main = await upstream('router-main');
    const cont = await upstream('router-cont');
    ups.push(main, cont);
    const o = await baseOptions(sidecar.port, [main.port]);
    const e = await startEnvoy({
      ...o,
      continuationEgressPort: 0,
      continuationTier: [{ host: 'localhost', port: cont.port }],
    });
    running.push(e);
    expect(e.continuationEgressUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await request(`${e.egressUrl}/v1/chat/completions`, 'POST', '{}')).body).toContain('router-main');
    expect((await request(`${e.continuationEgressUrl}/v1/chat/completions`, 'POST', '{}')).body).toContain('router-cont');
  });
});

describe('startEnvoy failures and stop()', () => {
  it('times out waiting for an absent sidecar, with the log tail in the error, and leaves no process', async () => {
    // A known admin port, to see it closed afterwards (the one test here that names a port for Envoy to bind).
    const o = { ...(await baseOptions(await freePort(), [await freePort()])), adminPort: await freePort() };
    const err = await startEnvoy({ ...o, startTimeoutMs: 2500 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err!.message).toMatch(/ext_proc host .* was not healthy within 2500 ms/);
    expect(err!.message).toContain('Envoy log tail');
    expect(err!.message).toMatch(/starting workers|all clusters initialized/);
    expect(await isPortOpen(o.adminPort)).toBe(false);
  });

  it("fails fast when a listener port is taken, with Envoy's own complaint", async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const taken = (blocker.address() as net.AddressInfo).port;
    try {
      const o = await baseOptions(await freePort(), [await freePort()]);
      const t0 = Date.now();
      await expect(startEnvoy({ ...o, listenPort: taken, waitForExtProcHealthy: false })).rejects.toThrow(
        /exited|address already in use|cannot bind/i,
      );
      expect(Date.now() - t0).toBeLessThan(20_000);
    } finally {
      await new Promise<void>((r) => blocker.close(() => r()));
    }
  });

  it('two Envoys at once (unique base ids); stop() ends the process', async () => {
    const sc = await tcpSidecar();
    try {
      const [a, b] = await Promise.all([startEnvoy(await baseOptions(sc.port, [1])), startEnvoy(await baseOptions(sc.port, [1]))]);
      expect(a.pid).not.toBe(b.pid);
      await Promise.all([a.stop(), b.stop()]);
      for (const e of [a, b]) {
        const info = await e.exited;
        expect(info.code === 0 || info.signal !== null).toBe(true);
        expect(() => process.kill(e.pid, 0)).toThrow();
        expect(await isPortOpen(e.listenPort)).toBe(false);
      }
      await a.stop(); // idempotent
    } finally {
      await sc.close();
    }
  });
});
