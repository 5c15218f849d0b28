// `npm run stack` as people and tools stop it, with streams in flight (a stalled leg, a client that
// disconnects, a slow stream): SIGTERM, SIGINT, SIGHUP (the terminal closed), SIGKILL of the stack process
// alone, a test runner's SIGTERM-then-SIGKILL to the whole process group, and the sidecar's primary killed.
// After each, /proc must show no process the stack started. And two stacks at once, and back to back while
// the first still drains: every port is ephemeral.
import { type ChildProcess, spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import { killTagged, PROC_TAG_VAR, type Proc, taggedProcesses, waitUntilGone } from '../support/processes';

jest.setTimeout(90_000);

const STACK_MAIN = path.resolve(__dirname, '../../tools/stack/main.js');
/** Stack, two engines, primary + 2 workers, Envoy, a watchdog per direct child (4). */
const EXPECTED_PROCESSES = 11;

interface Stack {
  tag: string;
  proc: ChildProcess;
  url: string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: string[] = [];
afterEach(() => {
  for (const tag of started.splice(0)) killTagged(tag);
});

async function startStack(env: Record<string, string> = {}): Promise<Stack> {
  const tag = crypto.randomUUID();
  started.push(tag);
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['DOWNSTREAM_URL', 'CONTINUATION_URL', 'CONTINUATION_MODEL', 'LISTEN_PORT', 'PORT', 'ADMIN_PORT', 'ENVOY_ADMIN_PORT'])
    delete clean[k];
  // detached: its own process group, as a terminal or a test runner starts `npm run stack`.
  const proc = spawn(process.execPath, [STACK_MAIN], {
    env: {
      ...clean,
      [PROC_TAG_VAR]: tag,
      // These tests read the `[stack] ports:` line (the format a terminal gets).
      STACK_LOG_FORMAT: 'prefixed',
      WORKERS: '2',
      LOG_LEVEL: 'warn',
      STALL_IDLE_TIMEOUT_SECONDS: '60',
      DRAIN_TIMEOUT_SECONDS: '2',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    proc.on('exit', (code, signal) => r({ code, signal })),
  );
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^READY (\S+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    void exit.then((e) => reject(new Error(`stack exited (${e.code}/${e.signal}) before READY:\n${err}`)));
  });
  return { tag, proc, url, stderr: () => err, exit };
}

interface InFlight {
  /** Resolves once response bytes have arrived. */
  started: Promise<void>;
  /** Resolves when the response ends or fails (never rejects). */
  ended: Promise<void>;
  abort(): void;
}

function stream(url: string, headers: Record<string, string>): InFlight {
  const body = JSON.stringify({ model: 'demo', stream: true, messages: [{ role: 'user', content: 'hello' }] });
  let onStart: () => void = () => undefined;
  let onEnd: () => void = () => undefined;
  const started = new Promise<void>((r) => (onStart = r));
  const ended = new Promise<void>((r) => (onEnd = r));
  const req = http.request(
    `${url}/v1/chat/completions`,
    { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } },
    (res) => {
      res.once('data', () => onStart());
      res.on('data', () => undefined);
      res.on('end', onEnd);
      res.on('error', onEnd);
      res.on('close', onEnd);
    },
  );
  req.on('error', onEnd);
  req.end(body);
  return { started, ended, abort: () => req.destroy() };
}

/** A stalled leg, a slow stream, and a client that disconnects mid-answer: all in flight on return. */
async function putTrafficInFlight(url: string): Promise<InFlight[]> {
  const stalled = stream(url, { 'x-fake-fault': 'stall@3', 'x-fake-token-ms': '20' });
  const slow = stream(url, { 'x-fake-answer-tokens': '400,400', 'x-fake-token-ms': '100' });
  const leaving = stream(url, { 'x-fake-answer-tokens': '400,400', 'x-fake-token-ms': '100' });
  await Promise.all([stalled.started, slow.started, leaving.started]);
  leaving.abort();
  // The stall: the engine went quiet after token 3; let the sidecar be waiting on it.
  await new Promise((r) => setTimeout(r, 300));
  return [stalled, slow, leaving];
}

/** Every process the stack started, while it runs (sanity check that the /proc scan sees them). */
function expectRunning(st: Stack): Proc[] {
  const procs = taggedProcesses(st.tag);
  expect(procs.length).toBeGreaterThanOrEqual(EXPECTED_PROCESSES);
  return procs;
}

async function expectAllGone(st: Stack, withinMs: number): Promise<void> {
  const left = await waitUntilGone(st.tag, withinMs);
  expect(left.map((p) => `${p.pid} (ppid ${p.ppid}) ${p.cmd}`)).toEqual([]);
}

const elapsedSince = (t0: number): number => Date.now() - t0;

describe('npm run stack: every process it started is gone however it is stopped', () => {
  test('idle, SIGTERM: exits 0 within 2 s', async () => {
    const st = await startStack();
    expectRunning(st);
    const t0 = Date.now();
    st.proc.kill('SIGTERM');
    expect(await st.exit).toEqual({ code: 0, signal: null });
    expect(elapsedSince(t0)).toBeLessThan(2000);
    await expectAllGone(st, 5000);
  });

  test('SIGTERM with streams in flight: the drain deadline (DRAIN_TIMEOUT_SECONDS=2) ends it, exit 0', async () => {
    const st = await startStack();
    const traffic = await putTrafficInFlight(st.url);
    expectRunning(st);
    const t0 = Date.now();
    st.proc.kill('SIGTERM');
    expect(await st.exit).toEqual({ code: 0, signal: null });
    // 2 s of drain, up to 3 s more for the interruption events and the close, Envoy and the engines last;
    // the stack's own deadline for the sidecar (DRAIN_TIMEOUT_SECONDS + 7 s, then SIGKILL) bounds it.
    expect(elapsedSince(t0)).toBeLessThan(2000 + 7000);
    await expectAllGone(st, 5000);
    await Promise.all(traffic.map((t) => t.ended));
  });

  test('SIGINT with streams in flight: everything stops at once', async () => {
    const st = await startStack();
    await putTrafficInFlight(st.url);
    const t0 = Date.now();
    st.proc.kill('SIGINT');
    expect((await st.exit).code).toBe(0);
    await expectAllGone(st, 5000);
    expect(elapsedSince(t0)).toBeLessThan(5000);
  });

  test('SIGHUP to its process group (the terminal closed), streams in flight: drains and stops', async () => {
    const st = await startStack();
    await putTrafficInFlight(st.url);
    const t0 = Date.now();
    process.kill(-st.proc.pid!, 'SIGHUP');
    expect((await st.exit).code).toBe(0);
    await expectAllGone(st, 5000);
    expect(elapsedSince(t0)).toBeLessThan(2000 + 7000);
  });

  test('SIGKILL of the stack process alone, streams in flight: its children are gone within 5 s', async () => {
    const st = await startStack();
    await putTrafficInFlight(st.url);
    const before = expectRunning(st);
    st.proc.kill('SIGKILL');
    await st.exit;
    await expectAllGone(st, 5000);
    expect(before.length).toBeGreaterThanOrEqual(EXPECTED_PROCESSES);
  });

  test("a test runner's stop: SIGTERM to the process group, SIGKILL 3 s later, with the default 30 s drain", async () => {
    const st = await startStack({ DRAIN_TIMEOUT_SECONDS: '30' });
    await putTrafficInFlight(st.url);
    process.kill(-st.proc.pid!, 'SIGTERM');
    await new Promise((r) => setTimeout(r, 3000));
    try {
      process.kill(-st.proc.pid!, 'SIGKILL');
    } catch {
      // the stack was already gone
    }
    await st.exit;
    await expectAllGone(st, 5000);
  });

  test("the sidecar's primary SIGKILLed: its workers exit at once, the stack stops the rest and exits 1", async () => {
    const st = await startStack();
    await putTrafficInFlight(st.url);
    const procs = expectRunning(st);
    const primary = procs.find((p) => p.ppid === st.proc.pid && /\/dist\/src\/main\.js$/.test(p.cmd))!;
    const workers = procs.filter((p) => p.ppid === primary.pid);
    expect(workers).toHaveLength(2);
    process.kill(primary.pid, 'SIGKILL');
    const alive = new Set(workers.map((w) => w.pid));
    const t0 = Date.now();
    while (alive.size && elapsedSince(t0) < 3000) {
      for (const pid of alive) if (!taggedProcesses(st.tag).some((p) => p.pid === pid)) alive.delete(pid);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect([...alive]).toEqual([]);
    expect(elapsedSince(t0)).toBeLessThan(1500);
    expect((await st.exit).code).toBe(1);
    expect(st.stderr()).toMatch(/sidecar exited unexpectedly/);
    await expectAllGone(st, 5000);
  });
});

describe('ports: two stacks on one machine', () => {
  test('a port set explicitly and taken: the sidecar stops before forking a worker, nothing is left', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      await expect(startStack({ ADMIN_PORT: String(port) })).rejects.toThrow(
        /EADDRINUSE.*sidecar exited unexpectedly|sidecar exited .*EADDRINUSE/s,
      );
      await expectAllGone({ tag: started[started.length - 1] } as Stack, 5000);
    } finally {
      taken.close();
    }
  });

  test('at once, then a third while the first still drains: each starts and serves', async () => {
    const [a, b] = await Promise.all([startStack({ DRAIN_TIMEOUT_SECONDS: '30' }), startStack()]);
    expect(a.url).not.toBe(b.url);
    for (const st of [a, b]) expect((await fetch(`${st.url}/v1/models`)).status).toBe(200);
    // The ports line names every port, and no fixed production default is among them.
    const ports = /\[stack\] ports: (.*)/.exec(a.stderr())?.[1] ?? '';
    expect(ports).toMatch(
      /front 127\.0\.0\.1:\d+, envoy admin \d+, egress \d+, sidecar ext_proc \d+, sidecar admin \d+, replica-a \d+, replica-b \d+/,
    );
    expect(ports).not.toMatch(/\b(8080|9090|50051)\b/);

    const slow = stream(a.url, { 'x-fake-answer-tokens': '400,400', 'x-fake-token-ms': '100' });
    await slow.started;
    a.proc.kill('SIGTERM'); // drains while the stream lasts (40 s): its ports are still held
    const c = await startStack();
    expect((await fetch(`${c.url}/v1/models`)).status).toBe(200);
    expect(a.proc.exitCode).toBeNull(); // the overlap was real

    a.proc.kill('SIGTERM'); // a second signal: stop now
    for (const st of [b, c]) st.proc.kill('SIGTERM');
    expect((await a.exit).code).toBe(130);
    for (const st of [b, c]) expect((await st.exit).code).toBe(0);
    for (const st of [a, b, c]) await expectAllGone(st, 5000);
  });
});
