// A seeded fuzz run through the real Envoy (issue 19 item 8): hostile client bodies, methods and headers, and a
// hostile engine (every fault the fake engine knows, scripted over successive legs, with garbage-sized answers).
// Reproducible: FUZZ_SEED and FUZZ_CASES pick the run (the failing case's number and seed are printed).
// Asserted for every request: it ends (no hang past a bound); nothing after `[DONE]`, never two; an in-scope
// stream ends explicitly (complete, the interruption event, or an HTTP error with a JSON body); no corrected
// usage count is negative; a body at MAX_BODY_JSON_DEPTH is in scope and one past it (or 10,000 deep) is not;
// no method but POST is ever in scope. For the run: the sidecar and Envoy are still up, the sidecar's memory stays bounded,
// connections that send nothing (or headers that never end) are closed by Envoy, and a marker hidden in every
// text-bearing field never appears in the sidecar's log.
import * as net from 'node:net';
import { request } from 'undici';
import { DEFAULT_MAX_JSON_DEPTH } from '../../src/request/scope';
import { prng } from '../../tools/fake-engine/answer';
import { resetFaults } from '../../tools/fake-engine/faults';
import { reassemble } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';

jest.setTimeout(10 * 60 * 1000);

const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const CASES = Number(process.env.FUZZ_CASES ?? 1500);
// What one run of CASES may add to the jest process (sidecar, engines, clients): 200 KB values and 3,000-deep
// bodies must not be kept. Measured alone on Node 24: +416 MiB (179 -> 595 MiB; RSS keeps garbage).
const RSS_RISE_BOUND = 1024 * 2 ** 20;
const CONCURRENCY = 16;
/** Hidden in every text a client controls; the log must never carry it. */
const MARK = 'FzMk7q';
const PER_REQUEST_BOUND_MS = 30_000;

type Rnd = () => number;
const pick = <T>(r: Rnd, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rnd, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

function deep(depth: number, leaf: unknown): unknown {
  let v = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
  return v;
}

function randomValue(r: Rnd, depth = 0): unknown {
  switch (int(r, 0, 11)) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return pick(r, [0, -1, 1, 2, 1e20, -1e20, 3.5, Number.MAX_SAFE_INTEGER]);
    case 3:
      return `${MARK} ${'x'.repeat(int(r, 0, 50))}`;
    case 4:
      return `${MARK}${'é漢🙂\u0000\u202e'.repeat(int(r, 1, 20))}`;
    case 5:
      return depth > 3 ? MARK : [randomValue(r, depth + 1), MARK];
    case 6:
      return depth > 3 ? MARK : { [MARK]: randomValue(r, depth + 1), text: MARK };
    case 7:
      return deep(int(r, 10, 3000), MARK);
    case 8:
      return 'A'.repeat(int(r, 1000, 200_000)) + MARK;
    case 9:
      return pick(r, ['true', 'false', '1', '', ' ', 'null']);
    case 10:
      return [];
    default:
      return {};
  }
}

const FIELDS = [
  'model',
  'stream',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'n',
  'stream_options',
  'tools',
  'tool_choice',
  'response_format',
  'chat_template_kwargs',
  'reasoning_effort',
  'stop',
  'user',
  'seed',
  'logprobs',
  'continue_final_message',
  `x_${MARK}`,
];

const FAULTS = [
  'crash@N',
  'fin@N',
  'eof@N',
  'stall@N:300',
  'stall@N',
  'error@N',
  'abort@N',
  'malformed@N',
  'done@N',
  'trickle@N:50',
  'nodone@0',
  'status@400',
  'status@429',
  'status@500',
  'status@503:1',
  'slow@300',
  'crash-before-headers',
  'hang',
  'plain',
  'negative-usage',
];

/** A whole chat body nested exactly `depth` levels deep (in an extra field), written as text: JSON.stringify
 * cannot build 10,000 levels. */
function deepBody(r: Rnd, depth: number): string {
  const text = JSON.stringify({ ...validBody(r), x_deep: 'X' });
  return text.replace('"X"', `{"k":${'['.repeat(depth - 2)}"${MARK}"${']'.repeat(depth - 2)}}`);
}

interface Case {
  n: number;
  method: string;
  headers: Record<string, string>;
  body: string | Buffer;
  /** Sent as a streaming chat request the gateway should take in scope (when the engine can parse it). */
  streaming: boolean;
  /** Where the scope decision is known in advance: asserted. */
  scope?: 'in' | 'out';
}

function validBody(r: Rnd): Record<string, unknown> {
  return {
    model: 'm',
    stream: true,
    messages: [
      ...(r() < 0.3 ? [{ role: 'system', content: `be brief ${MARK}` }] : []),
      { role: 'user', content: `question ${MARK} ${int(r, 0, 1e6)}` },
    ],
    ...(r() < 0.5 ? { stream_options: { include_usage: true } } : {}),
    ...(r() < 0.3 ? { max_tokens: int(r, 1, 300) } : {}),
  };
}

function makeCase(n: number): Case {
  const r = prng(SEED * 100_003 + n);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': `fuzz-${SEED}-${n}` };
  const kind = r();
  const body: Record<string, unknown> = validBody(r);
  let raw: string | Buffer | undefined;
  let method = 'POST';
  let scope: Case['scope'];
  if (kind < 0.42) {
    // A hostile engine: a fault on each of up to three legs, answers of any size.
    const steps = Array.from({ length: int(r, 1, 3) }, () => pick(r, FAULTS).replace('N', String(int(r, 0, 60))));
    headers['x-fake-fault'] = steps.join(';');
    headers['x-fake-answer-tokens'] = `${int(r, 0, 40)},${int(r, 0, 120)}`;
  } else if (kind < 0.74) {
    // A hostile client body: wrong types, deep nesting, huge values, in up to three fields.
    for (let i = int(r, 1, 3); i > 0; i--) body[pick(r, FIELDS)] = randomValue(r);
    if (r() < 0.2) headers['x-fake-fault'] = `crash@${int(r, 0, 20)}`;
  } else if (kind < 0.82) {
    // Bytes that are not the JSON they claim to be.
    const text = JSON.stringify(body);
    raw = pick(r, [
      Buffer.concat([Buffer.from(text.slice(0, int(r, 0, text.length))), Buffer.from([0xff, 0xfe, 0xc3])]),
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]),
      `not json ${MARK}`,
      text.replace('"stream":true', '"stream":true,"stream":"no"'),
      '',
    ]);
  } else if (kind < 0.9) {
    // Deep JSON at the limit (in scope), one past it and far past it (proxied natively), with a crash or not.
    const depth = pick(r, [DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_JSON_DEPTH + 1, 10_000, 100_000]);
    raw = deepBody(r, depth);
    scope = depth <= DEFAULT_MAX_JSON_DEPTH ? 'in' : 'out';
    if (r() < 0.6) headers['x-fake-fault'] = pick(r, ['crash@0', `crash@${int(r, 1, 30)}`, `eof@${int(r, 1, 30)}`]);
  } else if (kind < 0.95) {
    // Every other method, with the in-scope body: never originated.
    method = pick(r, ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'HEAD']);
    scope = 'out';
  } else {
    // Hostile headers (never the request id: an id is logged, by design).
    headers[`x-${MARK.toLowerCase()}`] = `${MARK} ${'v'.repeat(int(r, 0, 6000))}`;
    headers.authorization = `Bearer ${MARK}-secret`;
    headers['idempotency-key'] = `${MARK}-${n}`;
  }
  const bodyOut = raw ?? JSON.stringify(body);
  const streaming = (raw === undefined || scope === 'in') && method === 'POST' && body.stream === true;
  return { n, method, headers, body: bodyOut, streaming, ...(scope ? { scope } : {}) };
}

/** A raw connection that sends `bytes` and then nothing; `closed` is false if it is still open after 40 s. */
const openIdle = (url: string) => (bytes: string) => {
  const s = net.connect(Number(new URL(url).port), '127.0.0.1', () => bytes && s.write(bytes));
  s.on('error', () => undefined);
  s.resume(); // reads (and drops) Envoy's 408: a paused socket never sees its end
  const closed = new Promise<boolean>((resolve) => {
    s.on('close', () => resolve(true));
    setTimeout(() => {
      s.destroy();
      resolve(false);
    }, 40_000).unref();
  });
  return { closed };
};

interface Seen {
  n: number;
  status: number;
  raw: string;
  error?: string;
}

async function send(url: string, c: Case): Promise<Seen> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), PER_REQUEST_BOUND_MS);
  try {
    const res = await request(`${url}/v1/chat/completions`, {
      method: c.method as any,
      headers: c.headers,
      body: c.body,
      signal: ac.signal,
    });
    let raw = '';
    try {
      for await (const chunk of res.body) raw += chunk.toString('utf8');
    } catch (e) {
      return { n: c.n, status: res.statusCode, raw, error: (e as Error).message };
    }
    return { n: c.n, status: res.statusCode, raw };
  } catch (e) {
    return { n: c.n, status: 0, raw: '', error: ac.signal.aborted ? 'hang' : (e as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/** What must hold for one answer; returns why not. */
function problems(c: Case, s: Seen, inScope: boolean, passedThrough: boolean): string[] {
  const out: string[] = [];
  if (s.error === 'hang') return [`no end within ${PER_REQUEST_BOUND_MS} ms`];
  // PASSTHROUGH is logged before Envoy proxies a byte: no race with the answer (request_end may come after it).
  if (c.scope === 'in' && passedThrough) out.push('passed through, although within every limit');
  if (c.scope === 'out' && (inScope || !passedThrough)) out.push(`not passed through (${c.method}), although past a limit or not a POST`);
  if (c.method !== 'POST' && s.status === 200) out.push(`${c.method} answered 200`);
  const dones = s.raw.split('data: [DONE]').length - 1;
  if (dones > 1) out.push(`${dones} [DONE]`);
  if (dones === 1 && !/data: \[DONE\]\s*$/.test(s.raw)) out.push('bytes after [DONE]');
  if (!inScope || !c.streaming) return out;
  if (s.status !== 200) {
    try {
      if (!JSON.parse(s.raw).error) out.push(`HTTP ${s.status} without an error body`);
    } catch {
      out.push(`HTTP ${s.status} with a body that is not JSON`);
    }
    return out;
  }
  const r = reassemble(s.raw);
  // The usage the gateway corrected (after a continuation); leg 1's own usage reaches the client as the engine sent it.
  if (r.usage?.continuation)
    for (const [k, v] of Object.entries(r.usage)) if (typeof v === 'number' && v < 0) out.push(`corrected usage ${k} = ${v}`);
  const complete = r.finishReasons.length === 1 && r.done && r.errors.length === 0;
  const interrupted = r.errors.length === 1 && r.done && r.finishReasons.length === 0;
  if (!complete && !interrupted)
    out.push(`no explicit end (finish ${r.finishReasons.length}, errors ${r.errors.length}, done ${r.done}, transport ${s.error ?? 'ok'})`);
  return out;
}

describe(`fuzz: ${CASES} hostile requests, seed ${SEED}`, () => {
  let stack: TestStack;
  beforeAll(async () => {
    resetFaults();
    stack = await startTestStack({
      replicas: 2,
      env: {
        CONTINUATION_MODEL: 'generic-test',
        STALL_IDLE_TIMEOUT_SECONDS: '0.3',
        MAX_STALL_SECONDS: '3',
        FIRST_DELTA_DEADLINE_SECONDS: '5',
        UPSTREAM_HEADERS_TIMEOUT_SECONDS: '4',
        RECOVERY_BUDGET_PERCENT: '100',
        RETRY_BACKOFF_SECONDS: '0.01',
        BUFFER_TOOL_CALLS: 'true',
        LOG_LEVEL: 'debug',
      },
    });
  });
  afterAll(async () => stack?.stop());

  test('every request ends, explicitly where in scope; nothing after [DONE]; the log never carries client text', async () => {
    const failures: string[] = [];
    // Connections that send nothing, or headers that never end, for the whole run: Envoy must close them.
    const idle = ['', 'POST /v1/chat/completions HTTP/1.1\r\n', 'P', 'GET / HTTP/1.1\r\nHost: x\r\nX-Slow: 1'].map(openIdle(stack.url));
    let next = 0;
    let rssPeak = 0;
    // The jest worker has run other files before this one (what they left for the GC counts in its RSS): the
    // bound is on this run's rise.
    const rss0 = process.memoryUsage().rss;
    const t0 = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < CASES) {
          const c = makeCase(next++);
          const s = await send(stack.url, c);
          const id = c.headers['x-request-id'];
          const inScope = stack.logs.some((l) => l.request_id === id && l.event === 'request_end');
          const passedThrough = stack.logs.some((l) => l.request_id === id && l.decision === 'PASSTHROUGH');
          for (const p of problems(c, s, inScope, passedThrough))
            failures.push(`case ${c.n} (seed ${SEED}, ${c.method}, fault ${c.headers['x-fake-fault'] ?? '-'}): ${p}`);
          rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
        }
      }),
    );
    const secs = (Date.now() - t0) / 1000;
    const inScope = new Set(stack.logs.filter((l) => l.event === 'request_end').map((l) => l.request_id)).size;
    console.log(
      `fuzz: ${CASES} cases (${inScope} in scope) in ${secs.toFixed(1)} s, ${failures.length} failures, rss peak ${(rssPeak / 2 ** 20).toFixed(0)} MiB (at the start ${(rss0 / 2 ** 20).toFixed(0)} MiB)`,
    );
    expect(failures.slice(0, 20)).toEqual([]);
    // Envoy's bound is 10 s (listener filter timeout, request_headers_timeout); the run may be shorter.
    const idleClosed = await Promise.all(idle.map((p) => p.closed));
    expect(idleClosed.map((c, i) => `${i}:${c}`)).toEqual(idle.map((_, i) => `${i}:true`));
    // Still up: Envoy answers, the sidecar originates.
    expect(stack.envoyExit).toBeUndefined();
    // The whole jest process (sidecar, engines, clients) stays bounded: 200 KB values and 3,000-deep bodies
    // must not be kept.
    expect(rssPeak - rss0).toBeLessThan(RSS_RISE_BOUND);
    const logText = JSON.stringify(stack.logs);
    const at = logText.indexOf(MARK);
    expect(at < 0 ? 'no marker' : logText.slice(Math.max(0, at - 200), at + 50)).toBe('no marker');
  });
});
