// `npm run demo` stopped as people and supervisors stop it (issue 38), through the real processes: npm as the
// parent (it forwards SIGINT and SIGTERM to the script it runs), started in a process group of its own as a
// terminal or a supervisor starts it, tools/stack/run.sh, the stack runner, Envoy, the sidecar and the two fake
// engines, with 20 slow streams in flight. A signal to the whole group or to npm alone is one stop: SIGTERM
// lets every stream finish (or, past DRAIN_TIMEOUT_SECONDS, end with the interruption event `gateway-shutdown`),
// SIGINT ends every open stream at once with that event; never a cut. Only a deliberate second signal goes
// further. Afterwards no process, no /tmp/envoy-gw-* folder and no listening port is left, also when a child,
// the stack runner or npm itself was SIGKILLed. (The engines are the fake engine: tools/fake-engine.)
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { type ClientResult, postChat } from '../support/client';
import { killTagged, PROC_TAG_VAR, taggedProcesses, waitUntilGone } from '../support/processes';
import { expectInterruption, expectOneCompleteStream } from './helpers';

jest.setTimeout(120_000);

/** The repository (this file runs as dist/test/e2e/*.js): run.sh finds dist/tools/stack/main.js from there. */
const REPO = path.resolve(__dirname, '../../..');
const RUN_SH = path.join(REPO, 'tools', 'stack', 'run.sh');
const STREAMS = 20;
const NPM = spawnSync('npm', ['--version'], { encoding: 'utf8' }).status === 0 ? 'npm' : undefined;
if (!NPM) process.stderr.write('stack-signals.e2e: skipped, no `npm` on PATH to be the parent process\n');
const maybe = NPM ? describe : describe.skip;

interface Demo {
  tag: string;
  npm: ChildProcess;
  url: string;
  /** TMPDIR of the whole tree: where Envoy's envoy-gw-* folder is made. */
  tmp: string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const started: string[] = [];
const dirs: string[] = [];
afterEach(() => {
  for (const tag of started.splice(0)) killTagged(tag);
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** `npm run demo` as a user runs it (a package whose demo script is the repository's), in its own group. */
async function startDemo(env: Record<string, string> = {}): Promise<Demo> {
  const tag = crypto.randomUUID();
  started.push(tag);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stack-signals-'));
  dirs.push(dir);
  const tmp = path.join(dir, 'tmp');
  fs.mkdirSync(tmp);
  const pkg = { name: 'stack-signals', version: '1.0.0', private: true, scripts: { demo: `exec sh ${JSON.stringify(RUN_SH)}` } };
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(pkg));
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['DOWNSTREAM_URL', 'CONTINUATION_URL', 'CONTINUATION_MODEL', 'LISTEN_PORT', 'PORT', 'ADMIN_PORT', 'ENVOY_ADMIN_PORT'])
    delete clean[k];
  for (const k of Object.keys(clean)) if (k.startsWith('npm_')) delete clean[k];
  const npm = spawn(NPM as string, ['run', 'demo'], {
    cwd: dir,
    // WORKERS=2: the sidecar's primary passes each stop to its workers (over IPC): one record per worker below.
    env: { ...clean, [PROC_TAG_VAR]: tag, TMPDIR: tmp, STACK_LOG_FORMAT: 'json', LOG_LEVEL: 'info', WORKERS: '2', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let err = '';
  npm.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    npm.on('exit', (code, signal) => r({ code, signal })),
  );
  const url = await new Promise<string>((resolve, reject) => {
    npm.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^READY (\S+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    void exit.then((e) => reject(new Error(`npm run demo exited (${e.code}/${e.signal}) before READY:\n${err}`)));
  });
  return { tag, npm, url, tmp, stderr: () => err, exit };
}

/** The stack's stderr: one JSON object per line (complete lines: one being written is read next time). */
const records = (d: Demo): any[] =>
  d
    .stderr()
    .split('\n')
    .slice(0, -1)
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
const stackSaid = (d: Demo): string[] =>
  records(d)
    .filter((r) => r.process === 'stack')
    .map((r) => String(r.msg));

/** `count` slow streams (answerTokens per leg, 50 ms a token), each under way (bytes received) on return. */
async function streamsInFlight(url: string, answerTokens: number, count = STREAMS): Promise<Promise<ClientResult>[]> {
  const headers = { 'x-fake-answer-tokens': `${answerTokens},${answerTokens}`, 'x-fake-token-ms': '50' };
  const body = { model: 'demo', stream: true, messages: [{ role: 'user', content: 'hello' }] };
  const begun: Promise<void>[] = [];
  const results = Array.from({ length: count }, () => {
    let onBytes: () => void = () => undefined;
    begun.push(new Promise<void>((r) => (onBytes = r)));
    return postChat(url, body, headers, () => onBytes());
  });
  await Promise.all(begun);
  return results;
}

/** The ports the stack named on its `ports:` line. */
function portsOf(d: Demo): number[] {
  const line = stackSaid(d).find((m) => m.startsWith('ports: ')) ?? '';
  return [...line.matchAll(/:?(\d{2,5})\b/g)].map((m) => Number(m[1])).filter((p) => p > 1023);
}

const listening = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });

/** No process (by tag), no envoy-gw-* folder in its TMPDIR, no port it named still listening. */
async function expectNothingLeft(d: Demo, ports: number[]): Promise<void> {
  const left = await waitUntilGone(d.tag, 10_000);
  expect(left.map((p) => `${p.pid} (ppid ${p.ppid}) ${p.cmd}`)).toEqual([]);
  expect(fs.readdirSync(d.tmp).filter((f) => f.startsWith('envoy-gw-'))).toEqual([]);
  expect(ports.length).toBeGreaterThanOrEqual(5);
  const open = [];
  for (const p of ports) if (await listening(p)) open.push(p);
  expect(open).toEqual([]);
}

const pidOf = (d: Demo, re: RegExp): number => {
  const p = taggedProcesses(d.tag).find((x) => re.test(x.cmd));
  if (!p) throw new Error(`no process matching ${re}: ${taggedProcesses(d.tag).map((x) => x.cmd)}`);
  return p.pid;
};

maybe('npm run demo: one stop, however it is signalled', () => {
  test.each([
    ['the process group (a supervisor, kill -- -PGID)', true],
    ['npm alone', false],
  ])('SIGTERM to %s: all 20 streams finish, the drain ends them, nothing is left', async (_, group) => {
    const d = await startDemo();
    expect(fs.readdirSync(d.tmp).filter((f) => f.startsWith('envoy-gw-'))).toHaveLength(1);
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 30);
    process.kill(group ? -d.npm.pid! : d.npm.pid!, 'SIGTERM');
    for (const r of await Promise.all(streams)) expectOneCompleteStream(r);
    // npm exits as the stack did (a signal it forwarded is not its own death).
    expect(await d.exit).toEqual({ code: 0, signal: null });
    const said = stackSaid(d);
    expect(said.filter((m) => /^SIG/.test(m))).toEqual(['SIGTERM: stopping (the sidecar drains first, 30 s at most)']);
    expect(records(d).filter((r) => r.decision === 'DRAINED')).toHaveLength(2);
    expect(records(d).filter((r) => r.decision === 'DRAIN_TIMEOUT' || r.decision === 'STOP_NOW')).toEqual([]);
    await expectNothingLeft(d, ports);
  });

  test('SIGTERM: a request that arrives during the drain is passed through (proxied natively) and finishes too', async () => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 30);
    process.kill(-d.npm.pid!, 'SIGTERM');
    await until(() => records(d).some((r) => r.decision === 'DRAIN'));
    // Longer than the streams the sidecar waits for: Envoy is stopped only once it is idle (the drain's deadline).
    const late = postChat(
      d.url,
      { model: 'demo', stream: true, messages: [{ role: 'user', content: 'hello' }] },
      { 'x-fake-answer-tokens': '60,60', 'x-fake-token-ms': '50' },
    );
    for (const r of await Promise.all(streams)) expectOneCompleteStream(r);
    expectOneCompleteStream(await late);
    expect(await d.exit).toEqual({ code: 0, signal: null });
    await expectNothingLeft(d, ports);
  });

  test('SIGTERM to the group past DRAIN_TIMEOUT_SECONDS=1: every stream ends with the interruption event gateway-shutdown', async () => {
    const d = await startDemo({ DRAIN_TIMEOUT_SECONDS: '1' });
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400);
    process.kill(-d.npm.pid!, 'SIGTERM');
    for (const r of await Promise.all(streams)) expectInterruption(r, 'gateway-shutdown');
    expect(await d.exit).toEqual({ code: 0, signal: null });
    expect(records(d).filter((r) => r.decision === 'DRAIN_TIMEOUT')).toHaveLength(2);
    await expectNothingLeft(d, ports);
  });

  test.each([
    ['the process group (Ctrl-C in a terminal)', true],
    ['npm alone', false],
  ])('SIGINT to %s: every open stream ends at once with the interruption event, nothing is left', async (_, group) => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400);
    process.kill(group ? -d.npm.pid! : d.npm.pid!, 'SIGINT');
    for (const r of await Promise.all(streams)) expectInterruption(r, 'gateway-shutdown');
    expect(await d.exit).toEqual({ code: 0, signal: null });
    expect(stackSaid(d).filter((m) => /^SIG/.test(m))).toEqual([
      'SIGINT: stopping now (every open stream ends with the interruption event)',
    ]);
    expect(records(d).filter((r) => r.decision === 'STOP_NOW')).toHaveLength(2);
    await expectNothingLeft(d, ports);
  });

  test('a burst: 100 streams in flight, Ctrl-C to the group: every one ends with the interruption event', async () => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400, 100);
    process.kill(-d.npm.pid!, 'SIGINT');
    for (const r of await Promise.all(streams)) expectInterruption(r, 'gateway-shutdown');
    expect(await d.exit).toEqual({ code: 0, signal: null });
    // One STOP_NOW per worker, their counts adding up.
    const stops = records(d).filter((r) => r.decision === 'STOP_NOW');
    expect(stops).toHaveLength(2);
    expect(stops.reduce((n, r) => n + r.active_streams, 0)).toBe(100);
    await expectNothingLeft(d, ports);
  });

  test('a deliberate second signal: SIGTERM, then Ctrl-C during the drain, stops now (interruption events), exit 130', async () => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400);
    process.kill(-d.npm.pid!, 'SIGTERM');
    await until(() => records(d).some((r) => r.decision === 'DRAIN'));
    process.kill(-d.npm.pid!, 'SIGINT');
    for (const r of await Promise.all(streams)) expectInterruption(r, 'gateway-shutdown');
    expect((await d.exit).code).toBe(130);
    expect(stackSaid(d).filter((m) => /^SIG/.test(m))).toEqual([
      'SIGTERM: stopping (the sidecar drains first, 30 s at most)',
      'SIGINT: stopping now (every open stream ends with the interruption event)',
    ]);
    await expectNothingLeft(d, ports);
  });

  test('Envoy SIGKILLed: the stack stops the rest and exits 1; its folder is removed', async () => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400);
    process.kill(pidOf(d, /\/envoy -c /), 'SIGKILL');
    // The client connections went with Envoy: these streams are cut, by the kill, not by the stack.
    await Promise.all(streams);
    expect((await d.exit).code).not.toBe(0);
    expect(stackSaid(d).some((m) => /^envoy exited unexpectedly \(signal SIGKILL\)/.test(m))).toBe(true);
    await expectNothingLeft(d, ports);
  });

  test("the stack runner SIGKILLed: its children's watchdogs stop them and remove Envoy's folder", async () => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400);
    process.kill(pidOf(d, /dist\/tools\/stack\/main\.js$/), 'SIGKILL');
    await Promise.all(streams);
    await d.exit;
    await expectNothingLeft(d, ports);
  });

  test("npm's group SIGKILLed (a supervisor's last resort): the stack, in a group of its own, sees npm gone and stops now", async () => {
    const d = await startDemo();
    const ports = portsOf(d);
    const streams = await streamsInFlight(d.url, 400);
    process.kill(-d.npm.pid!, 'SIGKILL');
    for (const r of await Promise.all(streams)) expectInterruption(r, 'gateway-shutdown');
    expect(stackSaid(d).some((m) => /^the parent process \(npm\) is gone: stopping now/.test(m))).toBe(true);
    await expectNothingLeft(d, ports);
  });
});

async function until(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
