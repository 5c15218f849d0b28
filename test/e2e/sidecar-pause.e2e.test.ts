// A sidecar that stops answering for a moment (a long GC pause, CPU throttling, a loaded node) must not be
// bypassed: Envoy's health check on the ext_proc cluster is what turns "sidecar dead" into plain proxying
// (docs/envoy.md (d)), and if a check times out during a pause, the chat requests of the next second go to
// the router without the sidecar, so without crash protection, and nothing tells the client.
// Here the sidecar runs in this jest process: a busy loop freezes it for PAUSE_MS while a child process keeps
// sending requests through Envoy; every one of them must reach the sidecar (its request_end record) and Envoy
// must count no fail-open (http.front_chat.ext_proc.failure_mode_allowed). And the longer check timeout must
// not slow down the case the check exists for: a killed sidecar is still bypassed within about one interval.
import { type ChildProcess, spawn } from 'node:child_process';
import * as path from 'node:path';
import { EXT_PROC_HEALTH_CHECK_TIMEOUT_SECONDS } from '../../tools/stack/envoy-config';
import { waitForExtProcHealth } from '../../tools/stack/envoy-process';
import { chatBody, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';

jest.setTimeout(60_000);

/** Longer than the old 1 s check timeout plus one interval: a check always falls inside it and times out. */
const PAUSE_MS = 2200;
const REQUESTS = 40;
const SPACING_MS = 100;

// A client that does not share the paused event loop: one streamed request every SPACING_MS, then one JSON line
// per request (its id, status, whether [DONE] arrived).
const CLIENT = `
const http = require('node:http');
const [url, n, spacing, prefix] = process.argv.slice(1);
const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'pause' }] });
const one = (id) => new Promise((resolve) => {
  const req = http.request(url + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json',
    'x-request-id': id, 'x-fake-answer-tokens': '2,3' } }, (res) => {
    let raw = '';
    res.on('data', (d) => (raw += d));
    res.on('end', () => resolve({ id, status: res.statusCode, done: raw.includes('data: [DONE]') }));
    res.on('error', (e) => resolve({ id, status: res.statusCode, error: e.message }));
  });
  req.on('error', (e) => resolve({ id, error: e.message }));
  req.end(body);
});
const runs = [];
for (let k = 0; k < Number(n); k++) runs.push(new Promise((r) => setTimeout(r, k * Number(spacing))).then(() => one(prefix + k)));
Promise.all(runs).then((rs) => { for (const r of rs) console.log(JSON.stringify(r)); });
`;

interface ChildResult {
  id: string;
  status?: number;
  done?: boolean;
  error?: string;
}

function runClient(url: string, prefix: string): { started: Promise<void>; results: Promise<ChildResult[]> } {
  const child = spawn(process.execPath, ['-e', CLIENT, url, String(REQUESTS), String(SPACING_MS), prefix], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const started = new Promise<void>((r) => child.once('spawn', () => r()));
  const results = new Promise<ChildResult[]>((resolve, reject) => {
    child.once('exit', (code) =>
      code === 0
        ? resolve(
            out
              .trim()
              .split('\n')
              .map((l) => JSON.parse(l)),
          )
        : reject(new Error(`client exited ${code}`)),
    );
  });
  return { started, results };
}

async function envoyStat(s: TestStack, name: string): Promise<number> {
  const body = await fetch(`${s.envoy.adminUrl}/stats?filter=${encodeURIComponent(`^${name.replace(/\./g, '\\.')}$`)}`).then((r) =>
    r.text(),
  );
  const m = /: (\d+)/.exec(body);
  if (!m) throw new Error(`Envoy has no stat ${name}`);
  return Number(m[1]);
}

let stack: TestStack | undefined;
let sidecarProcess: ChildProcess | undefined;
afterEach(async () => {
  sidecarProcess?.kill('SIGKILL');
  sidecarProcess = undefined;
  await stack?.stop();
  stack = undefined;
});

test('a sidecar frozen for 2.2 s is waited for, not bypassed: every request reaches it, no fail-open', async () => {
  const s = (stack = await startTestStack({ env: { LOG_LEVEL: 'info' } }));
  const prefix = `pause-${process.pid}-`;
  const client = runClient(s.url, prefix);
  await client.started;
  // Let the client get going (about 0.5 s of requests), then freeze the sidecar's event loop.
  await new Promise((r) => setTimeout(r, 600));
  const checksBefore = await envoyStat(s, 'cluster.ext_proc.health_check.attempt');
  const until = Date.now() + PAUSE_MS;
  while (Date.now() < until) {
    // busy: the sidecar (and its grpc.health.v1 answer) cannot run
  }
  const results = await client.results;
  // The checks go on through the pause: the one it held answered late (within the check timeout), and the next
  // ones on time (one a second). Waited for, up to 10 s, rather than counted at a moment a loaded machine sets.
  let checks = await envoyStat(s, 'cluster.ext_proc.health_check.attempt');
  for (const deadline = Date.now() + 10_000; checks < checksBefore + 2 && Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, 200));
    checks = await envoyStat(s, 'cluster.ext_proc.health_check.attempt');
  }
  const failedChecks = await envoyStat(s, 'cluster.ext_proc.health_check.failure');
  const bypassed = await envoyStat(s, 'http.front_chat.ext_proc.failure_mode_allowed');
  const ends = new Set(s.logs.filter((l) => l.event === 'request_end').map((l) => l.request_id));
  const missing = results.filter((r) => !ends.has(r.id)).map((r) => r.id.slice(prefix.length));
  expect({ failedChecks, bypassed, missing }).toEqual({ failedChecks: 0, bypassed: 0, missing: [] });
  // The checks kept running through the pause (it was not a window without any), and none failed.
  expect(checks).toBeGreaterThanOrEqual(checksBefore + 2);
  expect(results.filter((r) => r.status !== 200 || !r.done)).toEqual([]);
});

/** The sidecar as its own process (dist/src/main.js), its legs to this Envoy's egress; resolves with its port. */
async function startSidecarProcess(s: TestStack): Promise<{ proc: ChildProcess; port: number }> {
  const proc = spawn(process.execPath, [path.resolve(__dirname, '../../src/main.js')], {
    env: {
      PATH: process.env.PATH,
      CONTINUATION_MODEL: 'generic-test',
      DOWNSTREAM_URL: s.envoy.egressUrl,
      PORT: '0',
      ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  sidecarProcess = proc;
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^SIDECAR listening (\d+)/m.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code, signal) => reject(new Error(`sidecar exited (${code}/${signal}) before listening`)));
  });
  return { proc, port };
}

test(`a killed sidecar is bypassed without waiting for the ${EXT_PROC_HEALTH_CHECK_TIMEOUT_SECONDS} s check timeout: the refused connection fails the check`, async () => {
  const s = (stack = await startTestStack({ noSidecar: true }));
  const { proc, port } = await startSidecarProcess(s);
  s.envoy.setExtProcEndpoint('127.0.0.1', port);
  await s.envoy.waitForExtProcHealthy(30_000);
  const killedAt = Date.now();
  proc.kill('SIGKILL');
  await waitForExtProcHealth(s.envoy.adminUrl, false, 10_000);
  const detectedMs = Date.now() - killedAt;
  // Not a speed target: the bound is the timeout itself. Past it, death would have been found by the timeout.
  expect(detectedMs).toBeLessThan(EXT_PROC_HEALTH_CHECK_TIMEOUT_SECONDS * 1000);
  const r = await postChat(s.url, chatBody(), { 'x-fake-answer-tokens': '2,3' });
  expect({ status: r.status, finish: r.finishReasons }).toEqual({ status: 200, finish: ['stop'] });
  process.stderr.write(`[sidecar-pause] SIGKILLed sidecar marked unhealthy after ${detectedMs} ms\n`);
});
