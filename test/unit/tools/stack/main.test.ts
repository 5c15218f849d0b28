// `npm run stack` plumbing (tools/stack/main.ts) with stand-ins for the sidecar and the fake engine (the
// STACK_SIDECAR_MAIN / STACK_FAKE_ENGINE_MAIN dev knobs), and the real Envoy: READY protocol, what the
// sidecar is told, routing through the front listener, SIGTERM shutdown, a child dying on its own.
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureEnvoy } from '../../../../tools/stack/envoy-binary';
import { freePort, isPortOpen } from '../../../../tools/stack/ports';

jest.setTimeout(60_000);

const STACK_MAIN = path.resolve(__dirname, '../../../../tools/stack/main.js');

// Stand-in sidecar: a TCP listener on $PORT (enough for Envoy's TCP health check); records its env and pid.
const SIDECAR_STANDIN = `
const net = require('net'); const fs = require('fs');
const srv = net.createServer((s) => s.on('error', () => {}));
srv.listen(Number(process.env.PORT), '127.0.0.1', () => {
  fs.writeFileSync(process.env.STANDIN_DIR + '/sidecar.json', JSON.stringify({ pid: process.pid, env: process.env }));
  console.log('some startup noise');
  console.log('SIDECAR listening ' + srv.address().port);
  if (process.env.STANDIN_DIE_AFTER_MS) setTimeout(() => process.exit(3), Number(process.env.STANDIN_DIE_AFTER_MS));
});
process.on('SIGTERM', () => process.exit(0));
`;

// Stand-in fake engine: answers every request with its name; records its argv and pid.
const ENGINE_STANDIN = `
const http = require('http'); const fs = require('fs');
const a = process.argv.slice(2); const arg = (f) => a[a.indexOf(f) + 1];
const name = arg('--name');
const srv = http.createServer((q, s) => { s.writeHead(200, { 'content-type': 'text/plain' }); s.end('engine ' + name + ' ' + q.url); });
srv.listen(Number(arg('--port')), '127.0.0.1', () => {
  fs.writeFileSync(process.env.STANDIN_DIR + '/' + name + '.json', JSON.stringify({ pid: process.pid, argv: a }));
  console.log('FAKE_ENGINE ' + name + ' listening http://127.0.0.1:' + srv.address().port);
});
process.on('SIGTERM', () => process.exit(0));
`;

interface Stack {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  ready: Promise<string>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let dir: string;
let envoyBin: string;

beforeAll(async () => {
  envoyBin = process.env.ENVOY_BIN ?? (await ensureEnvoy());
});
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-stack-test-'));
  fs.writeFileSync(path.join(dir, 'sidecar.js'), SIDECAR_STANDIN);
  fs.writeFileSync(path.join(dir, 'engine.js'), ENGINE_STANDIN);
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function startStack(env: NodeJS.ProcessEnv): Stack {
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['DOWNSTREAM_URL', 'CONTINUATION_URL', 'CONTINUATION_MODEL', 'CONTINUATION_ENGINE', 'LISTEN_PORT', 'PORT'])
    delete clean[k];
  const proc = spawn(process.execPath, [STACK_MAIN], {
    env: {
      ...clean,
      ENVOY_BIN: envoyBin,
      // These tests read `[name] line` (the format a terminal gets); demo.e2e reads the piped JSON lines.
      STACK_LOG_FORMAT: 'prefixed',
      STACK_SIDECAR_MAIN: path.join(dir, 'sidecar.js'),
      STACK_FAKE_ENGINE_MAIN: path.join(dir, 'engine.js'),
      // The stand-in sidecar is a plain TCP listener, not a gRPC health server.
      ENVOY_EXT_PROC_HEALTH_CHECK: 'tcp',
      STANDIN_DIR: dir,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.on('exit', (code, signal) => r({ code, signal })),
  );
  const ready = new Promise<string>((resolve, reject) => {
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^READY (\S+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    void exit.then((e) => reject(new Error(`stack exited (${e.code}/${e.signal}) before READY:\n${err}`)));
  });
  ready.catch(() => undefined);
  return { proc, stdout: () => out, stderr: () => err, ready, exit };
}

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let b = '';
        res.on('data', (d: Buffer) => (b += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: b }));
      })
      .on('error', reject);
  });
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function gone(pid: number, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

describe('npm run stack (tools/stack/main.ts)', () => {
  it('demo mode: two fake engines, sidecar told the egress URL, READY alone on stdout, SIGTERM stops all and exits 0', async () => {
    // No LISTEN_PORT: the stack binds an ephemeral port and names it on READY (a port picked free here and
    // bound by Envoy a moment later was once taken by another jest worker in between).
    const st = startStack({ CONTINUATION_ENGINE: 'vllm' });
    try {
      const url = await st.ready;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const listenPort = Number(new URL(url).port);
      expect(st.stdout()).toBe(`READY ${url}\n`);
      expect(st.stderr()).toContain('[sidecar] some startup noise');
      expect(st.stderr()).toMatch(/CONTINUATION_MODEL=fake-engine\/demo-reasoner CHAT_TEMPLATE=/);

      const sc = JSON.parse(fs.readFileSync(path.join(dir, 'sidecar.json'), 'utf8')) as { pid: number; env: Record<string, string> };
      expect(sc.env.DOWNSTREAM_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(sc.env.CONTINUATION_URL).toBeUndefined();
      // A careful operator's configuration (issue 38): the served template, verified; the engines' /tokenize dialect.
      expect(sc.env.CONTINUATION_MODEL).toBe('fake-engine/demo-reasoner');
      expect(sc.env.CHAT_TEMPLATE).toMatch(/\/tools\/fake-engine\/demo-model\/chat_template\.jinja$/);
      expect(fs.existsSync(sc.env.CHAT_TEMPLATE)).toBe(true);
      expect(sc.env.TOKENIZE_DIALECT).toBe('vllm');
      expect(sc.env.PORT).toMatch(/^\d+$/);
      const engines = ['replica-a', 'replica-b'].map(
        (n) => JSON.parse(fs.readFileSync(path.join(dir, `${n}.json`), 'utf8')) as { pid: number; argv: string[] },
      );
      for (const [i, e] of engines.entries()) {
        expect(e.argv).toEqual(
          expect.arrayContaining([
            '--name',
            ['replica-a', 'replica-b'][i],
            '--dialect',
            'vllm',
            '--chat-template',
            sc.env.CHAT_TEMPLATE,
            '--reasoning-parser',
            'markers',
            '--token-ms',
            '40',
          ]),
        );
      }

      // Non-chat path through the front listener, round-robin over both replicas.
      const bodies = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const r = await get(`http://127.0.0.1:${listenPort}/v1/models`);
        expect(r.status).toBe(200);
        bodies.add(r.body);
      }
      expect(bodies).toEqual(new Set(['engine replica-a /v1/models', 'engine replica-b /v1/models']));
      // The sidecar's DOWNSTREAM_URL is Envoy's egress, which reaches the same tier.
      expect((await get(`${sc.env.DOWNSTREAM_URL}/v1/models`)).body).toMatch(/^engine replica-[ab] \/v1\/models$/);

      st.proc.kill('SIGTERM');
      expect(await st.exit).toEqual({ code: 0, signal: null });
      for (const pid of [sc.pid, ...engines.map((e) => e.pid)]) expect(await gone(pid)).toBe(true);
      expect(await isPortOpen(listenPort)).toBe(false);
    } finally {
      st.proc.kill('SIGKILL');
    }
  });

  it('DOWNSTREAM_URL list + CONTINUATION_URL: no fake engines, continuation egress for the sidecar', async () => {
    const mk = (name: string): Promise<http.Server> =>
      new Promise((r) => {
        const s = http.createServer((q, res) => res.end(`${name} ${q.url}`));
        s.listen(0, '127.0.0.1', () => r(s));
      });
    const [r1, r2, c1] = await Promise.all([mk('r1'), mk('r2'), mk('c1')]);
    const port = (s: http.Server): number => (s.address() as net.AddressInfo).port;
    const st = startStack({
      DOWNSTREAM_URL: `http://127.0.0.1:${port(r1)}, http://localhost:${port(r2)}/`,
      CONTINUATION_URL: `http://127.0.0.1:${port(c1)}`,
      CONTINUATION_MODEL: 'my-model',
    });
    try {
      await st.ready;
      expect(fs.existsSync(path.join(dir, 'replica-a.json'))).toBe(false);
      const sc = JSON.parse(fs.readFileSync(path.join(dir, 'sidecar.json'), 'utf8')) as { env: Record<string, string> };
      expect(sc.env.CONTINUATION_MODEL).toBe('my-model');
      expect(sc.env.CONTINUATION_URL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(sc.env.CONTINUATION_URL).not.toBe(sc.env.DOWNSTREAM_URL);
      expect((await get(`${sc.env.CONTINUATION_URL}/x`)).body).toBe('c1 /x');
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) seen.add((await get(`${sc.env.DOWNSTREAM_URL}/y`)).body);
      expect(seen).toEqual(new Set(['r1 /y', 'r2 /y']));
      st.proc.kill('SIGINT');
      expect((await st.exit).code).toBe(0);
    } finally {
      st.proc.kill('SIGKILL');
      for (const s of [r1, r2, c1]) s.close();
    }
  });

  it('a child dying on its own stops the rest and exits non-zero with a clear message', async () => {
    const st = startStack({ STANDIN_DIE_AFTER_MS: '1500' });
    try {
      const listenPort = Number(new URL(await st.ready).port);
      const engines = ['replica-a', 'replica-b'].map(
        (n) => (JSON.parse(fs.readFileSync(path.join(dir, `${n}.json`), 'utf8')) as { pid: number }).pid,
      );
      const e = await st.exit;
      expect(e.code).not.toBe(0);
      expect(st.stderr()).toMatch(/sidecar exited unexpectedly \(exit code 3\)/);
      for (const pid of engines) expect(await gone(pid)).toBe(true);
      expect(await isPortOpen(listenPort)).toBe(false);
    } finally {
      st.proc.kill('SIGKILL');
    }
  });

  it('LISTEN_PORT set: the front listener binds that port and READY names it', async () => {
    // A port picked free here can be taken by another jest worker before Envoy binds it: that one case is
    // retried with another port (Envoy's own "Address already in use"), anything else fails the test.
    for (let attempt = 1; ; attempt++) {
      const listenPort = await freePort();
      const st = startStack({ LISTEN_PORT: String(listenPort) });
      try {
        expect(await st.ready).toBe(`http://127.0.0.1:${listenPort}`);
        expect((await get(`http://127.0.0.1:${listenPort}/v1/models`)).status).toBe(200);
        st.proc.kill('SIGTERM');
        expect(await st.exit).toEqual({ code: 0, signal: null });
        return;
      } catch (e) {
        st.proc.kill('SIGKILL');
        await st.exit;
        if (attempt >= 3 || !/Address already in use/.test(String((e as Error).message))) throw e;
      } finally {
        st.proc.kill('SIGKILL');
      }
    }
  });

  it('bad DOWNSTREAM_URL: exits 1 naming the variable, starts nothing', async () => {
    const st = startStack({ DOWNSTREAM_URL: 'https://router:8443' });
    const e = await st.exit;
    expect(e.code).toBe(1);
    expect(st.stderr()).toMatch(/DOWNSTREAM_URL: .*only http:\/\/ is supported/);
    expect(fs.existsSync(path.join(dir, 'sidecar.json'))).toBe(false);
  });
});
