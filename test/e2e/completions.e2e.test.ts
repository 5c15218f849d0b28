// POST /v1/completions through the real Envoy and the sidecar: a crash at every token gives the client the
// uninterrupted stream byte for byte; a burst of streams crashed together is rescued; the official openai clients
// (Node, and Python where the project's .venv has it) read a rescued stream as one completion and an interrupted one
// as the documented APIError; what is out of scope (echo, ...) is passed through. The engine is the fake engine's
// reading of vLLM's and SGLang's completions serving code (tools/fake-engine/text-completion.ts).
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import OpenAI from 'openai';
import { resetFaults } from '../../tools/fake-engine/faults';
import { completionAnswer } from '../../tools/fake-engine/text-completion';
import { type ClientResult, completionsBody, newRequestId, postCompletions } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { seenFor } from './helpers';
import { expectOneCompletionStream } from './matrix/completions-matrix';

jest.setTimeout(120_000);

const CONTENT = 24;
const SIZE = { 'x-fake-answer-tokens': `0,${CONTENT}` };
const size = { reasoning: 0, content: CONTENT };
let stack: TestStack;

beforeAll(async () => {
  resetFaults();
  stack = await startTestStack({
    replicas: 2,
    env: {
      CONTINUATION_MODEL: 'generic-test',
      TOKENIZE_URL: '{engine0}/tokenize',
      TOKENIZE_TIMEOUT_MS: '3000',
      RECOVERY_BUDGET_PERCENT: '100',
      // 100 streams on two shared cores: a starved leg must not read as a stall (the suites' default is 1 s).
      STALL_IDLE_TIMEOUT_SECONDS: '5',
    },
  });
});
afterAll(async () => {
  await stack?.stop();
});
// Fault scripts are counted per header value: each test starts afresh.
beforeEach(() => resetFaults());

/** The raw stream with its one id replaced: two runs differ in nothing else. */
function withoutId(r: ClientResult): string {
  expect(r.ids).toHaveLength(1);
  return r.raw.split(r.ids[0]).join('<id>');
}

test('a crash at every token: the client gets the uninterrupted stream, byte for byte', async () => {
  const prompt = 'Byte for byte, the keeper said';
  const N = completionAnswer(prompt, size).length;
  const body = completionsBody({ max_tokens: N + 1 }, prompt);
  const ref = await postCompletions(stack.url, body, SIZE);
  expectOneCompletionStream(ref);
  expect(ref.content).toBe(completionAnswer(prompt, size).join(''));
  const results = await Promise.all(
    Array.from({ length: N + 1 }, async (_, at) => {
      const id = newRequestId(`cmpl-crash-${at}`);
      const r = await postCompletions(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': `crash@${at}` });
      return { at, same: withoutId(r) === withoutId(ref), legs: seenFor(stack, id).map((s) => s.continuation) };
    }),
  );
  expect(results.filter((x) => !x.same)).toEqual([]);
  // Index 0: nothing delivered, re-run whole; every later index: leg 1 and one continuation leg.
  expect(results.map((x) => x.legs)).toEqual(results.map((x) => (x.at === 0 ? [false, false] : [false, true])));
});

test('a burst: 100 streams, the replica serving most of them falls over, every stream complete', async () => {
  const n = 100;
  let started = 0;
  let allStarted!: () => void;
  const everyStreamStarted = new Promise<void>((r) => (allStarted = r));
  // 80 tokens at 50 ms: every stream is still streaming when the replica falls over, also on two loaded cores.
  const long = { reasoning: 0, content: 80 };
  const slow = { 'x-fake-answer-tokens': '0,80', 'x-fake-token-ms': '50' };
  const runs = Array.from({ length: n }, async (_, k) => {
    const prompt = `Burst stream ${k}: the keeper said`;
    let first = true;
    const r = await postCompletions(
      stack.url,
      completionsBody({ max_tokens: 100 }, prompt),
      { ...slow, 'x-request-id': newRequestId(`burst${k}`) },
      () => {
        if (first && ++started === n) allStarted();
        first = false;
      },
    );
    if (first && ++started === n) allStarted();
    return { r, expected: completionAnswer(prompt, long).join('') };
  });
  await everyStreamStarted;
  // The replica serving the most of the burst falls over: its streams are reset now, and it answers 503 for a
  // moment (new legs are re-run elsewhere).
  const liveOn = (e: (typeof stack.engines)[number]) =>
    e.requests.filter((q) => q.headers['x-request-id']?.startsWith('burst') && q.closedAt === undefined).length;
  const victim = [...stack.engines].sort((a, b) => liveOn(b) - liveOn(a))[0];
  const live = liveOn(victim);
  victim.failFor(500);
  const done = await Promise.all(runs);
  expect(live).toBeGreaterThan(0);
  // eslint-disable-next-line no-console
  console.log(`completions burst: ${n} streams, ${live} cut on the replica that fell over`);
  const broken = done.filter(
    ({ r, expected }) => r.status !== 200 || r.errors.length > 0 || r.finishReasons.length !== 1 || r.content !== expected,
  );
  expect(broken.map(({ r }) => ({ status: r.status, errors: r.errors.map((e) => e.reason), finish: r.finishReasons }))).toEqual([]);
  for (const { r } of done) expectOneCompletionStream(r);
  // The crash cut streams mid-answer, and continuation legs carried them.
  expect(stack.records({ decision: 'SUCCEEDED' }).length).toBeGreaterThanOrEqual(live);
});

describe('the official openai Node client (client.completions.create, stream: true)', () => {
  const client = () => new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: 'x', maxRetries: 0 });

  async function read(prompt: string, maxTokens: number, headers: Record<string, string>) {
    let text = '';
    const finishes: string[] = [];
    let error: unknown = null;
    try {
      const stream = await client().completions.create({ model: 'test-model', prompt, stream: true, max_tokens: maxTokens }, { headers });
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          text += c.text;
          if (c.finish_reason) finishes.push(c.finish_reason);
        }
      }
    } catch (e) {
      error = e;
    }
    return { text, finishes, error };
  }

  test('rescued: one ordinary completion, equal to the answer', async () => {
    const prompt = 'The Node client reads';
    const id = newRequestId('node-rescued');
    const r = await read(prompt, 100, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@9' });
    expect(seenFor(stack, id).map((s) => s.continuation)).toEqual([false, true]);
    expect(r.error).toBeNull();
    expect(r.text).toBe(completionAnswer(prompt, size).join(''));
    expect(r.finishes).toEqual(['stop']);
  });

  test('interrupted (the budget spent at the crash): the documented APIError with the interruption code', async () => {
    const prompt = 'The Node client is interrupted';
    const N = completionAnswer(prompt, size).length;
    // max_tokens N and a crash after the last token: nothing is left for a continuation leg.
    const r = await read(prompt, N, { ...SIZE, 'x-fake-fault': `crash@${N}` });
    expect(r.error).toBeInstanceOf(OpenAI.APIError);
    expect((r.error as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({
      code: 'upstream_decode_interrupted',
      reason: 'budget-exhausted',
      partial_output: true,
    });
    expect(r.text).toBe(completionAnswer(prompt, size).join(''));
    expect(r.finishes).toEqual([]);
  });
});

test('out of scope (echo, logprobs, suffix, n, a list prompt): passed through, never originated', async () => {
  for (const [extra, reason] of [
    [{ echo: true }, 'completions-echo'],
    [{ logprobs: 1 }, 'completions-logprobs'],
    [{ suffix: ' end' }, 'completions-suffix'],
    [{ n: 2 }, 'multiple-choices'],
  ] as const) {
    const id = newRequestId(`cmpl-out-${reason}`);
    const body = completionsBody({ max_tokens: 100, ...extra });
    const r = await postCompletions(stack.url, body, { ...SIZE, 'x-request-id': id });
    expect(r.status).toBe(200);
    expect(seenFor(stack, id).map((s) => s.body)).toEqual([body]);
    expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })).toMatchObject([{ reason }]);
  }
  // /v1/responses reaches the sidecar (Envoy routes it to the hop): on SGLang (this stack's engine) it is in scope
  // now, originated rather than passed through (test/e2e/responses.e2e.test.ts has both engines' rescue).
  const responses = newRequestId('responses-in');
  const res = await fetch(`${stack.url}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': responses },
    body: JSON.stringify({ model: 'test-model', stream: true, input: 'hi' }),
  });
  expect(res.status).toBe(200);
  expect(await res.text()).toContain('event: response.completed\n');
  expect(stack.records({ request_id: responses, decision: 'PASSTHROUGH' })).toEqual([]);
  const list = newRequestId('cmpl-out-list');
  await postCompletions(stack.url, completionsBody({ prompt: ['a', 'b'] }), { 'x-request-id': list });
  expect(stack.records({ request_id: list, decision: 'PASSTHROUGH' })).toMatchObject([{ reason: 'completions-prompt-not-text' }]);
});

// The official Python client, when the project's .venv has the pinned openai (test/e2e/python-client.e2e.test.ts
// installs it through scripts/python-deps.sh; this suite only uses it).
const ROOT = path.resolve(__dirname, '..', '..', '..');
const PYTHON = path.join(ROOT, '.venv', 'bin', 'python');
const pythonReady =
  fs.existsSync(PYTHON) &&
  spawnSync(PYTHON, ['-c', 'import importlib.metadata as m; m.version("openai")'], { timeout: 30_000 }).status === 0;
if (!pythonReady) console.warn('completions: Python client tests SKIPPED: .venv has no openai (run scripts/python-deps.sh)');
const pySuite = pythonReady ? describe : describe.skip;

pySuite('the official openai Python client (client.completions.create, stream=True)', () => {
  function runPython(prompt: string, maxTokens: number, fault: string): Promise<any> {
    const args = [path.join(ROOT, 'test', 'python', 'openai_stream.py'), '--base-url', `${stack.url}/v1`, '--endpoint', 'completions'];
    args.push('--prompt', prompt, '--max-tokens', String(maxTokens), '--fault', fault, '--header', `x-fake-answer-tokens=0,${CONTENT}`);
    return new Promise((resolve, reject) =>
      execFile(PYTHON, args, { timeout: 120_000, encoding: 'utf8' }, (err, stdout, stderr) => {
        const line = stdout.trim().split('\n').at(-1) ?? '';
        if (err || !line.startsWith('{')) return reject(new Error(`openai_stream.py failed: ${err?.message ?? ''}\n${stderr}`));
        resolve(JSON.parse(line));
      }),
    );
  }

  test('rescued: one completion; interrupted: openai.APIError with the interruption code', async () => {
    const rescuedPrompt = 'The Python client reads';
    const cutPrompt = 'The Python client is interrupted';
    const N = completionAnswer(cutPrompt, size).length;
    const [rescued, cut] = await Promise.all([runPython(rescuedPrompt, 100, 'crash@7;-'), runPython(cutPrompt, N, `crash@${N};-`)]);
    expect(rescued).toMatchObject({ error: null, finish_reasons: ['stop'], content: completionAnswer(rescuedPrompt, size).join('') });
    expect(rescued.ids).toHaveLength(1);
    expect(cut.error).toMatchObject({ exception: 'APIError', code: 'upstream_decode_interrupted', status: null });
    expect(cut.error.body).toMatchObject({ reason: 'budget-exhausted', partial_output: true });
    expect(cut.finish_reasons).toEqual([]);
  });
});
