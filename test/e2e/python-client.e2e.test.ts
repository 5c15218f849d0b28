// The official OpenAI Python client (openai 2.x, test/python/requirements.txt) against the real stack:
// a recovered stream is one ordinary completion, an interruption raises openai.APIError with the
// machine-readable code. test/python/openai_stream.py does the consuming and prints what the client saw.
//
// Needs the project's .venv with openai (scripts/python-deps.sh; jest's global setup runs it). When the venv cannot be
// made or pip cannot install (no network), the suite is skipped and says why.
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { seenFor, uninterrupted } from './helpers';

const ROOT = path.resolve(__dirname, '..', '..', '..'); // dist/test/e2e -> repository root
const CLIENT = path.join(ROOT, 'test', 'python', 'openai_stream.py');
const DEPS = path.join(ROOT, 'scripts', 'python-deps.sh');
const SIZE = { 'x-fake-answer-tokens': '30,40' };

interface PyResult {
  content: string;
  /** --endpoint responses: every event's type and sequence number, the last status, response.failed's error. */
  types?: string[];
  sequence_numbers?: number[];
  status?: string | null;
  failure?: null | Record<string, unknown>;
  reasoning?: string;
  finish_reasons?: string[];
  ids: string[];
  error: null | { type: string | null; code: string | null; message: string; exception: string; status: number | null; body: any };
}

/** The venv's python with the pinned openai, or why not. Fast path: already installed; else the script. */
function findPython(): { python: string } | { why: string } {
  const venvPy = path.join(ROOT, '.venv', 'bin', 'python');
  const pin = /^openai==(\S+)$/m.exec(fs.readFileSync(path.join(ROOT, 'test', 'python', 'requirements.txt'), 'utf8'))?.[1];
  if (pin && fs.existsSync(venvPy)) {
    // importlib.metadata, not `import openai` (seconds on a loaded machine).
    const probe = spawnSync(
      venvPy,
      ['-c', `import importlib.metadata as m, sys; sys.exit(0 if m.version('openai') == ${JSON.stringify(pin)} else 1)`],
      { timeout: 30_000 },
    );
    if (probe.status === 0) return { python: venvPy };
  }
  // Bounded: a machine without network must skip in reasonable time, not wait out pip's default retries.
  const r = spawnSync('bash', [DEPS], {
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, PIP_RETRIES: '1', PIP_DEFAULT_TIMEOUT: '20' },
  });
  if (r.status === 0) return { python: r.stdout.trim().split('\n').at(-1)! };
  const detail = `${r.error?.message ?? ''} ${String(r.stderr ?? '')
    .trim()
    .split('\n')
    .slice(-3)
    .join(' | ')}`.trim();
  return { why: `scripts/python-deps.sh failed (exit ${r.status ?? r.signal}): ${detail}` };
}

const found = findPython();
const PYTHON = 'python' in found ? found.python : '';
const SKIP_REASON = 'why' in found ? found.why : '';
if (SKIP_REASON) {
  // eslint-disable-next-line no-console
  console.warn(`python-client suite SKIPPED: ${SKIP_REASON}`);
}
const suite = SKIP_REASON ? describe.skip : describe;
const skipNote = SKIP_REASON ? ` [SKIPPED: python venv/pip unavailable: ${SKIP_REASON.slice(0, 200)}]` : '';

function runPythonClient(
  baseUrl: string,
  fault: string | undefined,
  headers: Record<string, string>,
  extraArgs: string[] = [],
): Promise<PyResult> {
  const args = [
    CLIENT,
    '--base-url',
    `${baseUrl}/v1`,
    ...(fault ? ['--fault', fault] : []),
    ...Object.entries(headers).flatMap(([k, v]) => ['--header', `${k}=${v}`]),
    ...extraArgs,
  ];
  return new Promise((resolve, reject) => {
    execFile(PYTHON, args, { timeout: 120_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      const line = stdout.trim().split('\n').at(-1) ?? '';
      if (err || !line.startsWith('{')) return reject(new Error(`openai_stream.py failed: ${err?.message ?? ''}\n${stderr}\n${stdout}`));
      resolve(JSON.parse(line));
    });
  });
}

// Importing openai costs a couple of CPU seconds per process, so the clients of both stacks run at
// once in beforeAll (their fault scripts are distinct header values, so they do not share fault state) and
// the tests assert on what each saw.
suite(`official openai Python client${skipNote}`, () => {
  let enabled: TestStack;
  let disabled: TestStack;
  const ids = { recovered: newRequestId('py-recovered'), interrupted: newRequestId('py-interrupted') };
  let recovered: PyResult;
  let status503: PyResult;
  let interrupted: PyResult;

  beforeAll(async () => {
    [enabled, disabled] = await Promise.all([startTestStack(), startTestStack({ env: { CONTINUATION_ENABLED: 'false' } })]);
    resetFaults();
    [recovered, status503, interrupted] = await Promise.all([
      runPythonClient(enabled.url, 'crash@30', { ...SIZE, 'x-request-id': ids.recovered }),
      runPythonClient(enabled.url, 'status@503;status@503;status@503', SIZE),
      runPythonClient(disabled.url, 'crash@5', { ...SIZE, 'x-request-id': ids.interrupted }),
    ]);
    // Three Python interpreters importing openai beside two stacks: ~5 s alone, 30+ s on two loaded cores.
  }, 180_000);
  afterAll(async () => {
    await Promise.all([enabled?.stop(), disabled?.stop()]);
  });

  test('continuation enabled, replica killed at token 30: one ordinary, complete completion equal to the uninterrupted one', async () => {
    const ref = await uninterrupted(enabled, chatBody(), SIZE);
    const r = recovered;
    expect(r.error).toBeNull();
    expect(r.ids).toHaveLength(1);
    expect(r.finish_reasons).toEqual(['stop']);
    expect(r.content.length).toBeGreaterThan(0);
    expect(r.content).toBe(ref.content);
    expect(r.reasoning).toBe(ref.reasoning);
    // It really was recovered: the replica died and a continuation leg produced the rest.
    const seen = seenFor(enabled, ids.recovered);
    expect(seen.map((s) => s.continuation)).toEqual([false, true]);
    expect(seen[0].fault).toBe('crash@30');
    expect(await enabled.waitForEnd(ids.recovered)).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
  });

  test('an error status before the stream starts reaches the Python client unchanged (InternalServerError 503)', () => {
    expect(status503.content).toBe('');
    expect(status503.ids).toEqual([]);
    expect(status503.error).toMatchObject({
      exception: 'InternalServerError',
      status: 503,
      type: 'InjectedError',
      message: 'fake-engine injected status 503',
    });
  });

  test('continuation disabled, replica killed at token 5: openai.APIError with code upstream_decode_interrupted', async () => {
    const ref = await uninterrupted(disabled, chatBody(), SIZE);
    const r = interrupted;
    expect(r.error).not.toBeNull();
    // The plain APIError raised for an in-band error event (not a status or connection error subclass).
    expect(r.error).toMatchObject({ exception: 'APIError', code: 'upstream_decode_interrupted', type: 'server_error', status: null });
    expect(r.error!.message.length).toBeGreaterThan(0);
    expect(r.error!.body).toMatchObject({
      reason: 'continuation-disabled',
      partial_output: true,
      retryable: false,
      request_id: ids.interrupted,
    });
    expect(r.error!.body.delivered_output_tokens).toBeGreaterThan(0);
    // What was delivered before the interruption is a true prefix of the answer, and nothing finished.
    expect(r.finish_reasons).toEqual([]);
    expect(r.ids).toHaveLength(1);
    expect(r.reasoning).toBeDefined();
    expect(ref.reasoning.startsWith(r.reasoning!)).toBe(true);
    expect(r.reasoning!.length).toBeLessThan(ref.reasoning.length);
    expect(seenFor(disabled, ids.interrupted)).toHaveLength(1);
    expect(await disabled.waitForEnd(ids.interrupted)).toMatchObject({ outcome: 'interrupted', reason: 'continuation-disabled' });
  });
});

// POST /v1/responses (issue 35 item 2) on a vLLM and an SGLang stack (each engine's variant of the events): the
// SDK's Responses stream reads a rescued stream as one ordinary response, and a stream that cannot be continued as
// its response.failed event (no exception).
for (const dialect of ['vllm', 'sglang'] as const)
  suite(`official openai Python client, Responses API on ${dialect}${skipNote}`, () => {
    let stack: TestStack;
    let rescued: PyResult;
    let failed: PyResult;
    let reference: PyResult;
    const id = newRequestId(`py-responses-${dialect}`);

    beforeAll(async () => {
      stack = await startTestStack({
        replicas: 3,
        engine: { dialect, tokenizer: dialect },
        env: { CONTINUATION_ENGINE: dialect, TOKENIZE_URL: '{engine0}/tokenize', TOKENIZE_TIMEOUT_MS: '3000' },
      });
      resetFaults();
      const responses = ['--endpoint', 'responses'];
      [rescued, failed, reference] = await Promise.all([
        runPythonClient(stack.url, 'crash@25', { ...SIZE, 'x-request-id': id }, responses),
        runPythonClient(stack.url, 'crash@25;-', SIZE, [...responses, '--previous-response-id', 'resp_earlier']),
        runPythonClient(stack.url, undefined, SIZE, responses),
      ]);
    }, 180_000);
    afterAll(async () => stack?.stop());

    test('a replica killed at token 25: the complete response, equal to the uninterrupted one', async () => {
      expect(reference.error).toBeNull();
      expect(reference.types!.at(-1)).toBe('response.completed');
      expect(rescued.error).toBeNull();
      expect(rescued.types).toEqual(reference.types);
      expect(rescued.sequence_numbers).toEqual(rescued.types!.map((_t, i) => i));
      expect(rescued.content).toBe(reference.content);
      expect(rescued.reasoning).toBe(reference.reasoning);
      expect(rescued.status).toBe('completed');
      expect(rescued.ids).toHaveLength(1);
      expect(seenFor(stack, id).map((s) => s.path)).toEqual(['/v1/responses', '/v1/chat/completions']);
    });

    test('not continuable (previous_response_id): response.failed with the interruption error, no exception', () => {
      expect(failed.error).toBeNull();
      expect(failed.types!.at(-1)).toBe('response.failed');
      expect(failed.sequence_numbers).toEqual(failed.types!.map((_t, i) => i));
      expect(failed.status).toBe('failed');
      expect(failed.failure).toMatchObject({ code: 'upstream_decode_interrupted', message: expect.any(String) });
      expect(reference.content.startsWith(failed.content)).toBe(true);
    });
  });
