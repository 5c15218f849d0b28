// `npm run demo` as the README uses it (issue 18 item 9): the README's `x-fake-fault: crash@30` line sent again
// and again crashes and continues every time (the demo's engines count a fault script per client request), and
// a rescued stream reports the usage of the uninterrupted one (the demo wires the fake engines' /tokenize as
// TOKENIZE_URL, through Envoy's egress). The stack is the real process tree: Envoy, the sidecar, two engines;
// SIGINT, and nothing it started is left.
import { type ChildProcess, spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as path from 'node:path';
import { postChat } from '../support/client';
import { killTagged, PROC_TAG_VAR, waitUntilGone } from '../support/processes';

jest.setTimeout(120_000);

const STACK_MAIN = path.resolve(__dirname, '../../tools/stack/main.js');
const tag = crypto.randomUUID();
let proc: ChildProcess | undefined;
let url = '';
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
});
