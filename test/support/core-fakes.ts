// The per-request core without Envoy (src/stream/originated-response.ts): a fake ext_proc stream (what the
// client would get), a fake upstream (legs scripted chunk by chunk), real admission and real (short) timers.
import { loadConfig } from '../../src/config/env';
import { createLogger } from '../../src/obs/logger';
import { Metrics } from '../../src/obs/metrics';
import { AdmissionAuthority, admissionSettings } from '../../src/recovery/admission';
import type { GatewayContext } from '../../src/stream/context';
import { OriginatedResponse } from '../../src/stream/originated-response';
import type { LegAbort, LegResponse } from '../../src/upstream/client';
import { LegBody } from '../../src/upstream/leg-body';

/** What Envoy would pass on to the client. */
export class FakeStream {
  status: number | null = null;
  headers: Record<string, string> = {};
  body = '';
  ended = false;
  resetWith: string | null = null;
  isClosed = false;
  /** Every call the core made on the stream, in order (a client that left must see none after it left). */
  calls = 0;
  sendResponseHeaders(status: number, headers: Record<string, string>): void {
    this.calls++;
    this.status = status;
    this.headers = headers;
  }
  sendResponseBody(b: Buffer, end: boolean): undefined {
    this.calls++;
    this.body += b.toString('utf8');
    if (end) this.ended = true;
    return undefined;
  }
  reset(why: string): void {
    this.calls++;
    this.resetWith = why;
  }
}

/** One scripted leg: the test pushes its head and chunks when it wants. */
export class FakeLeg {
  readonly body = new LegBody();
  aborted = false;
  /** Ended by the test's own fault (crash, failBeforeHead): there is nothing left to abort. */
  failed = false;
  headers: Record<string, string> = {};
  sent: any;
  private respond!: (r: LegResponse) => void;
  private reject!: (e: unknown) => void;
  readonly response = new Promise<LegResponse>((res, rej) => ((this.respond = res), (this.reject = rej)));
  head(status = 200, headers: Record<string, string> = { 'content-type': 'text/event-stream' }): this {
    this.respond({ status, headers, body: this.body });
    return this;
  }
  events(...data: unknown[]): this {
    for (const d of data) this.body.push(Buffer.from(`data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`));
    return this;
  }
  end(): void {
    this.body.finish();
  }
  crash(): void {
    this.failed = true;
    this.body.fail(Object.assign(new Error('other side closed'), { code: 'ECONNRESET' }));
  }
  failBeforeHead(e: unknown): void {
    this.failed = true;
    this.reject(e);
  }
}

export class FakeUpstream {
  readonly legs: FakeLeg[] = [];
  private waiting: ((l: FakeLeg) => void)[] = [];
  open(_url: string, headers: Record<string, string>, body: Buffer, abort: LegAbort): Promise<LegResponse> {
    const leg = new FakeLeg();
    leg.headers = headers;
    leg.sent = JSON.parse(body.toString('utf8'));
    leg.body.bindAbort(() => (leg.aborted = true));
    abort.onAbort(() => {
      leg.aborted = true;
      leg.body.destroy();
    });
    this.legs.push(leg);
    this.waiting.shift()?.(leg);
    return leg.response;
  }
  /** The next leg the request opens (or the one it already opened). */
  next(i: number): Promise<FakeLeg> {
    if (this.legs[i]) return Promise.resolve(this.legs[i]);
    return new Promise((r) => this.waiting.push(r));
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

export const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: 'chatcmpl-1',
  model: 'm',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
export const ROLE = chunk({ role: 'assistant', content: '' });

/** One request through the core, already running (`done` settles when it has ended). */
export function startCore(env: Record<string, string> = {}, structured = false) {
  const config = loadConfig({
    DOWNSTREAM_URL: 'http://egress.test',
    CONTINUATION_MODEL: 'generic-test',
    STALL_IDLE_TIMEOUT_SECONDS: '0.05',
    LOG_LEVEL: 'silent',
    ...env,
  });
  const logs: any[] = [];
  const log = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line)) });
  const streams = { active: 0 };
  const upstream = new FakeUpstream();
  const ctx: GatewayContext = {
    config,
    log,
    upstream,
    admission: new AdmissionAuthority(admissionSettings(config), () => streams.active),
    streams,
    metrics: new Metrics(),
    drain: { draining: false },
    inFlight: new Set(),
  };
  const stream = new FakeStream();
  const payload = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hello' }] };
  const r = new OriginatedResponse(ctx, stream, {
    endpoint: 'chat',
    path: '/v1/chat/completions',
    clientHeaders: { 'x-request-id': 'rid', 'content-type': 'application/json' },
    rawBody: Buffer.from(JSON.stringify(payload)),
    payload,
    multimodal: false,
    structured,
  });
  const done = r.run();
  const decisions = () => logs.filter((l) => l.decision).map((l) => l.decision);
  return { r, ctx, stream, upstream, done, logs, decisions };
}

export type Core = ReturnType<typeof startCore>;

/** Lets the core run until nothing is left to do now (pending I/O and timers aside). */
export const settle = () => new Promise((r) => setImmediate(r));
