// The load generator: C concurrent streaming chat completions against one URL, closed loop for a given
// duration (every "worker" starts its next stream when the previous one ended, until the deadline), and per
// stream: time to first byte / first token, the arrival time of every SSE data event, total time, bytes and
// errors. It runs in its own child process (forked by run.ts, commands over IPC) so that its CPU is not
// counted to, and does not steal from, the process that serves the streams more than it must.
import { Pool } from 'undici';

export interface LoadSpec {
  /** Base URL (http://127.0.0.1:port); the path /v1/chat/completions is appended. */
  url: string;
  concurrency: number;
  /** Workers start new streams until this many ms after the load began. */
  durationMs: number;
  /** Worker i starts after i * rampMs / C ms (spreads the connection storm). */
  rampMs: number;
  /** Extra request headers (x-fake-token-ms, x-fake-answer-tokens, ...). */
  headers?: Record<string, string>;
  /** Per-stream headers (e.g. a unique fault script); index = stream number in this run. */
  headersFor?: (n: number) => Record<string, string>;
  /** Stop after this many streams in total (0 = unbounded, duration decides). */
  maxStreams?: number;
  /** Hard cap for one stream (ms). */
  streamTimeoutMs?: number;
  /**
   * Each stream asks its own question: the user message of stream n is `${distinctPrompt} ${n}` (the fake
   * engine's answer is a pure function of the conversation, so every stream has a different expected text).
   */
  distinctPrompt?: string;
  /** Keep what each stream received: the reasoning + content text, the first chunk's id, the finish_reasons. */
  collectText?: boolean;
  /** Call onStreaming once this many streams have received their first delta. */
  notifyStreaming?: number;
  onStreaming?: () => void;
}

export interface StreamRecord {
  /** Stream number in this run (the order in which streams started). */
  n: number;
  /** Wall-clock time (epoch ms, fractional) at which the request was sent: `events` are relative to it. */
  startEpochMs: number;
  status: number;
  /** ms from the request start to the response headers / to the first content (or reasoning) delta. */
  ttfbMs: number;
  ttftMs: number;
  totalMs: number;
  bytes: number;
  /** Arrival time (ms since the request start) of every data event except [DONE]. */
  events: number[];
  /** Index in `events` of the first content/reasoning delta (-1: none). */
  firstDelta: number;
  deltas: number;
  finish: boolean;
  done: boolean;
  error?: string;
  /** With collectText: the id of the first chunk, the reasoning + content text, the finish_reasons seen. */
  id?: string;
  text?: string;
  finishes?: number;
}

export interface LoadResult {
  streams: StreamRecord[];
  wallMs: number;
  /** CPU the generator process used during the run (user+system ms). */
  cpuMs: number;
}

const DELTA = /"(?:content|reasoning_content)":"[^"]/;
const FINISH = /"finish_reason":"/;
const ERROR = /^\{"error":/;

function isError(rec: StreamRecord): string | undefined {
  if (rec.error) return rec.error;
  if (rec.status !== 200) return `status ${rec.status}`;
  if (!rec.finish) return 'no finish_reason';
  if (!rec.done) return 'no [DONE]';
  return undefined;
}

export function streamError(rec: StreamRecord): string | undefined {
  return isError(rec);
}

/** The request body of stream n. */
export function requestMessages(spec: Pick<LoadSpec, 'distinctPrompt'>, n: number): Array<{ role: string; content: string }> {
  return [
    { role: 'user', content: spec.distinctPrompt !== undefined ? `${spec.distinctPrompt} ${n}` : 'Benchmark: tell me about continuation.' },
  ];
}

function requestBody(spec: LoadSpec, n: number): string {
  return JSON.stringify({ model: 'bench-model', stream: true, messages: requestMessages(spec, n) });
}

/** Adds one data event's text, id and finish_reasons to the record (collectText). */
function collect(rec: StreamRecord, data: string): void {
  let j: any;
  try {
    j = JSON.parse(data);
  } catch {
    rec.error ??= `unparseable event: ${data.slice(0, 80)}`;
    return;
  }
  if (rec.id === undefined && typeof j.id === 'string') rec.id = j.id;
  for (const c of j.choices ?? []) {
    const d = c.delta ?? {};
    rec.text = (rec.text ?? '') + (d.reasoning_content ?? d.reasoning ?? '') + (d.content ?? '');
    if (c.finish_reason) rec.finishes = (rec.finishes ?? 0) + 1;
  }
}

async function oneStream(pool: Pool, spec: LoadSpec, n: number, body: string, onFirstDelta?: () => void): Promise<StreamRecord> {
  const t0 = performance.now();
  const rec: StreamRecord = {
    n,
    startEpochMs: performance.timeOrigin + t0,
    status: 0,
    ttfbMs: -1,
    ttftMs: -1,
    totalMs: 0,
    bytes: 0,
    events: [],
    firstDelta: -1,
    deltas: 0,
    finish: false,
    done: false,
  };
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error('stream timeout')), spec.streamTimeoutMs ?? 120_000);
  try {
    const res = await pool.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', ...spec.headers, ...spec.headersFor?.(n) },
      body,
      signal: ac.signal,
    });
    rec.status = res.statusCode;
    rec.ttfbMs = performance.now() - t0;
    let buf = '';
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      const at = performance.now() - t0;
      rec.bytes += chunk.length;
      buf += chunk.toString('utf8');
      let end: number;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (!block.startsWith('data:')) continue;
        const data = block.slice(5).trimStart();
        if (data === '[DONE]') {
          rec.done = true;
          continue;
        }
        rec.events.push(Math.round(at * 100) / 100);
        if (ERROR.test(data)) {
          // The interruption's stable reason when there is one (the event's message is the same for every reason).
          rec.error ??= `error event: ${/"reason":"([^"]+)"/.exec(data)?.[1] ?? data.slice(0, 160)}`;
          continue;
        }
        if (spec.collectText) collect(rec, data);
        if (DELTA.test(data)) {
          if (rec.firstDelta < 0) {
            rec.firstDelta = rec.events.length - 1;
            rec.ttftMs = at;
            onFirstDelta?.();
          }
          rec.deltas++;
        }
        if (FINISH.test(data)) rec.finish = true;
      }
    }
  } catch (e) {
    rec.error = `transport: ${(e as Error).message}`;
  } finally {
    clearTimeout(timer);
  }
  rec.totalMs = performance.now() - t0;
  const err = isError(rec);
  if (err) rec.error = err;
  return rec;
}

/** Runs one load level and returns every stream's record. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const pool = new Pool(spec.url, {
    connections: spec.concurrency,
    pipelining: 1,
    headersTimeout: 120_000,
    bodyTimeout: 120_000,
    keepAliveTimeout: 30_000,
  });
  const body = spec.distinctPrompt === undefined ? requestBody(spec, 0) : undefined;
  let streaming = 0;
  const onFirstDelta = () => {
    if (++streaming === spec.notifyStreaming) spec.onStreaming?.();
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const streams: StreamRecord[] = [];
  let started = 0;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const worker = async (i: number): Promise<void> => {
    await sleep((i * spec.rampMs) / spec.concurrency);
    // maxStreams set: exactly that many streams, whatever the duration; else closed loop until the deadline.
    while (spec.maxStreams ? started < spec.maxStreams : performance.now() - t0 < spec.durationMs) {
      const n = started++;
      streams.push(await oneStream(pool, spec, n, body ?? requestBody(spec, n), onFirstDelta));
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, (_, i) => worker(i)));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  await pool.close().catch(() => undefined);
  return { streams, wallMs, cpuMs: (cpu.user + cpu.system) / 1000 };
}

// ---------------------------------------------------------------------------------------------------------------
// Child-process entry: { type: 'run', spec, faultPrefix? } -> { type: 'result', result } | { type: 'error' }
// (and { type: 'streaming', atEpochMs } first when spec.notifyStreaming is set).
// Functions cannot cross IPC, so a per-stream fault script is described by data: `uniqueFault` (e.g.
// "crash@30") becomes "crash@30;-" followed by n further ";-" entries, a value no other stream carries (the
// fake engine consumes fault scripts per header value).
// ---------------------------------------------------------------------------------------------------------------

export interface RunMessage {
  type: 'run';
  spec: Omit<LoadSpec, 'headersFor' | 'onStreaming'>;
  uniqueFault?: string;
}

export function uniqueFaultHeader(fault: string, n: number): string {
  return `${fault};-${';-'.repeat(n)}`;
}

if (require.main === module && process.send) {
  process.on('message', (m: RunMessage | { type: 'exit' }) => {
    if (m.type === 'exit') {
      process.disconnect?.();
      process.exit(0);
    }
    if (m.type !== 'run') return;
    const spec: LoadSpec = { ...m.spec };
    if (spec.notifyStreaming)
      spec.onStreaming = () => process.send?.({ type: 'streaming', atEpochMs: performance.timeOrigin + performance.now() });
    if (m.uniqueFault) {
      const fault = m.uniqueFault;
      spec.headersFor = (n) => ({ 'x-fake-fault': uniqueFaultHeader(fault, n) });
    }
    runLoad(spec).then(
      (result) => process.send?.({ type: 'result', result }),
      (e) => process.send?.({ type: 'error', message: (e as Error).stack ?? String(e) }),
    );
  });
  process.send({ type: 'ready' });
}
