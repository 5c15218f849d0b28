// `npm run demo` as the README uses it (issue 18 item 9): the README's `x-fake-fault: crash@30` line sent again
// and again crashes and continues every time (the demo's engines count a fault script per client request), and
// a rescued stream reports the usage of the uninterrupted one (the demo wires the fake engines' /tokenize as
// TOKENIZE_URL, through Envoy's egress). The stack is the real process tree: Envoy, the sidecar, two engines;
// SIGINT, and nothing it started is left. Its first screen (issue 38) warns of nothing: the demo serves a chat
// template the sidecar verifies every continuation against (tools/stack/demo-config.ts), its /tokenize calls
// are all answered 200, and the README's `jq 'select(.decision)'` line shows TRIGGERED, ATTEMPT (leg 2) and
// SUCCEEDED of one crashed stream, with the real jq when it is installed.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as path from 'node:path';
import { postChat } from '../support/client';
import { killTagged, PROC_TAG_VAR, waitUntilGone } from '../support/processes';

jest.setTimeout(120_000);

const STACK_MAIN = path.resolve(__dirname, '../../tools/stack/main.js');
const tag = crypto.randomUUID();
let proc: ChildProcess | undefined;
let url = '';
let adminUrl = '';
let stderr = '';

/** The README's request, asking for usage; x-fake-token-ms only makes the fake engine faster. */
const BODY = { model: 'demo', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hello' }] };
const FAST = { 'x-fake-token-ms': '5' };

/** The stack's stderr, piped (not a terminal): one JSON object per line, each with its `process`. */
function stderrRecords(): any[] {
  // The last piece may be a line still being written: only complete lines.
  return stderr
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line));
}

/** The sidecar's JSON log records, from the stack's stderr (`{"process":"sidecar",...}`). */
function sidecarRecords(filter: Record<string, unknown>): any[] {
  return stderrRecords().filter((r) => r.process === 'sidecar' && Object.entries(filter).every(([k, v]) => r[k] === v));
}

async function until<T>(what: string, fn: () => T | undefined, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of [
    'DOWNSTREAM_URL',
    'CONTINUATION_URL',
    'CONTINUATION_MODEL',
    'TOKENIZE_URL',
    'LISTEN_PORT',
    'PORT',
    'ADMIN_PORT',
    'ENVOY_ADMIN_PORT',
  ])
    delete env[k];
  // As `npm run demo` starts it (its own process group), with a short stall timer so the test does not wait.
  proc = spawn(process.execPath, [STACK_MAIN], {
    env: { ...env, [PROC_TAG_VAR]: tag, STALL_IDLE_TIMEOUT_SECONDS: '5' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  url = await until('READY', () => /^READY (\S+)$/m.exec(out)?.[1], 60_000);
  adminUrl = await until('ADMIN', () => /^READY \S+\nADMIN (\S+)$/m.exec(out)?.[1]);
});

afterAll(async () => {
  if (proc && proc.exitCode === null && proc.signalCode === null) {
    const exited = new Promise((r) => proc!.once('exit', r));
    proc.kill('SIGINT');
    await exited;
  }
  const left = await waitUntilGone(tag, 15_000);
  killTagged(tag);
  expect(left).toEqual([]);
});

/** Records that warn or fail (any process's), and Envoy access-log lines with a 4xx/5xx status. */
function alarms(): string[] {
  return stderrRecords()
    .filter((r) => ['warn', 'error', 'fatal'].includes(r.level) || (r.process === 'envoy' && / code=[45]\d\d /.test(r.msg ?? '')))
    .map((r) => JSON.stringify(r));
}

test('the first screen: no warning, the template path verified, the admin URL beside READY', async () => {
  expect(alarms()).toEqual([]);
  expect(sidecarRecords({ decision: 'FAMILY_TEMPLATE_PATH' })).toEqual([expect.objectContaining({ check: 'template' })]);
  const metrics = await fetch(`${adminUrl}/metrics`);
  expect(metrics.status).toBe(200);
  expect(await metrics.text()).toMatch(/^continuation_gateway_draining 0$/m);
});

test('the demo wires TOKENIZE_URL to the egress listener', () => {
  // Piped, every stderr line is a JSON object (npm run demo 2>&1 | jq): the stack's own and the children's.
  const sources = new Set(stderrRecords().map((r) => r.process));
  expect(['stack', 'sidecar'].filter((x) => !sources.has(x))).toEqual([]);
  expect(
    stderrRecords().find((r) => r.process === 'stack' && /^demo: TOKENIZE_URL=http:\/\/127\.0\.0\.1:\d+\/tokenize /.test(r.msg)),
  ).toBeDefined();
});

test("the README's crash@30, sent three times: each one crashes and is continued, with the uninterrupted run's usage", async () => {
  const ref = await postChat(url, BODY, FAST);
  expect(ref.status).toBe(200);
  expect(ref.finishReasons).toEqual(['stop']);
  expect(ref.usage.prompt_tokens).toBeGreaterThan(0);
  for (let i = 1; i <= 3; i++) {
    const r = await postChat(url, BODY, { ...FAST, 'x-fake-fault': 'crash@30' });
    expect(r.status).toBe(200);
    expect(r.errors).toEqual([]);
    expect(r.ids).toHaveLength(1);
    expect(r.finishReasons).toEqual(['stop']);
    expect(r.reasoning).toBe(ref.reasoning);
    expect(r.content).toBe(ref.content);
    // Exact usage: the same counts an uninterrupted run reports (the estimate said prompt 2 for the engine's 8).
    expect({
      prompt_tokens: r.usage.prompt_tokens,
      completion_tokens: r.usage.completion_tokens,
      total_tokens: r.usage.total_tokens,
    }).toEqual({
      prompt_tokens: ref.usage.prompt_tokens,
      completion_tokens: ref.usage.completion_tokens,
      total_tokens: ref.usage.total_tokens,
    });
    expect(r.usage.continuation).toMatchObject({ legs: 2, method: 'tokenize' });
    const ends = await until(`request_end ${i}`, () => {
      const e = sidecarRecords({ event: 'request_end', outcome: 'completed-after-continuation' });
      return e.length >= i ? e : undefined;
    });
    expect(ends[i - 1]).toMatchObject({ legs: 2, accounting: 'tokenize' });
  }
  expect(sidecarRecords({ decision: 'TRIGGERED' })).toHaveLength(3);
  expect(sidecarRecords({ decision: 'SUCCEEDED' })).toHaveLength(3);
  expect(sidecarRecords({ decision: 'TOKENIZE_FALLBACK' })).toEqual([]);
  // Every leg 2 followed the demo's template and was verified against it before it was sent.
  expect(sidecarRecords({ decision: 'ATTEMPT', leg: 2 })).toEqual(
    Array.from({ length: 3 }, () => expect.objectContaining({ source: 'template', family: 'template' })),
  );
  // The README's crash example printed no warning and no error status (the crashed leg's reset is the demo).
  await until('the access log', () => (stderrRecords().some((r) => r.process === 'envoy' && / front /.test(r.msg)) ? true : undefined));
  expect(alarms()).toEqual([]);
});

test("the README's `npm run demo 2>&1 >/dev/null | jq 'select(.decision)'` shows TRIGGERED, ATTEMPT and SUCCEEDED of a crashed stream", () => {
  const complete = `${stderr.slice(0, stderr.lastIndexOf('\n') + 1)}`;
  const jq = spawnSync('jq', ['-c', 'select(.decision)'], { input: complete, encoding: 'utf8' });
  let selected: any[];
  if (jq.error) {
    process.stderr.write('demo.e2e: no jq installed; selecting as `jq select(.decision)` would (JSON.parse per line)\n');
    selected = stderrRecords().filter((r) => r.decision !== undefined && r.decision !== null && r.decision !== false);
  } else {
    expect(jq.status).toBe(0);
    selected = jq.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  }
  const crashed = selected.find((r) => r.decision === 'TRIGGERED')?.request_id;
  expect(crashed).toBeDefined();
  const decisions = selected.filter((r) => r.request_id === crashed).map((r) => `${r.decision}${r.leg ? ` leg ${r.leg}` : ''}`);
  expect(decisions).toEqual(['ATTEMPT leg 1', 'FIRST_DELTA', 'TRIGGERED', 'ATTEMPT leg 2', 'SUCCEEDED leg 2']);
  // The ATTEMPT of leg 2 arrives as the sidecar's object, its own `source` (leg 2's design) beside the stack's `process`.
  expect(selected.find((r) => r.request_id === crashed && r.decision === 'ATTEMPT' && r.leg === 2)).toMatchObject({
    process: 'sidecar',
    source: 'template',
  });
});
