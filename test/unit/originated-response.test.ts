// The per-request core without Envoy: a fake ext_proc stream (what the client would get), a fake upstream
// (legs scripted chunk by chunk), real admission and real (short) timers. Each case runs in milliseconds
// and follows one path of the state machine end to end: commit, retry, continuation, interruption,
// shutdown, client gone.
import { loadConfig } from '../../src/config/env';
import { createLogger } from '../../src/obs/logger';
import { Metrics } from '../../src/obs/metrics';
import { AdmissionAuthority, admissionSettings } from '../../src/recovery/admission';
import type { GatewayContext } from '../../src/stream/context';
import { OriginatedResponse } from '../../src/stream/originated-response';
import { IllegalTransitionError } from '../../src/stream/request-state';
import { type LegAbort, LegOpenError, type LegResponse } from '../../src/upstream/client';
import { LegBody } from '../../src/upstream/leg-body';
import { reassemble } from '../support/client';

/** What Envoy would pass on to the client. */
class FakeStream {
  status: number | null = null;
  headers: Record<string, string> = {};
  body = '';
  ended = false;
  resetWith: string | null = null;
  isClosed = false;
  sendResponseHeaders(status: number, headers: Record<string, string>): void {
    this.status = status;
    this.headers = headers;
  }
  sendResponseBody(b: Buffer, end: boolean): undefined {
    this.body += b.toString('utf8');
    if (end) this.ended = true;
    return undefined;
  }
  reset(why: string): void {
    this.resetWith = why;
  }
}

/** One scripted leg: the test pushes its head and chunks when it wants. */
class FakeLeg {
  readonly body = new LegBody();
  aborted = false;
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
    this.body.fail(Object.assign(new Error('other side closed'), { code: 'ECONNRESET' }));
  }
  failBeforeHead(e: unknown): void {
    this.reject(e);
  }
}

class FakeUpstream {
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

const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: 'chatcmpl-1',
  model: 'm',
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const ROLE = chunk({ role: 'assistant', content: '' });

function setup(env: Record<string, string> = {}, structured = false) {
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
    upstream: upstream as any,
    admission: new AdmissionAuthority(admissionSettings(config), () => streams.active),
    streams,
    metrics: new Metrics(),
    drain: { draining: false },
    inFlight: new Set(),
  };
  const stream = new FakeStream();
  const payload = { model: 'm', stream: true, messages: [{ role: 'user', content: 'hello' }] };
  const r = new OriginatedResponse(ctx, stream as any, {
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

describe('OriginatedResponse (fake upstream, fake Envoy stream)', () => {
  it('a clean answer: held until the first delta, then relayed byte for byte; state done', async () => {
    const t = setup();
    const leg = await t.upstream.next(0);
    leg.head().events(ROLE);
    await new Promise((r) => setImmediate(r));
    expect(t.stream.status).toBeNull(); // the role chunk alone is not a delta: nothing sent yet
    expect(t.r.state).toBe('prefill');
    leg.events(chunk({ content: 'Hi' }), chunk({}, 'stop'), '[DONE]');
    leg.end();
    await t.done;
    expect(t.stream.status).toBe(200);
    expect(t.stream.ended).toBe(true);
    const got = reassemble(t.stream.body);
    expect(got.content).toBe('Hi');
    expect(got.finishReasons).toEqual(['stop']);
    expect(t.r.state).toBe('done');
    expect(t.r.outcome).toBe('completed');
    expect(t.decisions()).toEqual(['ATTEMPT', 'FIRST_DELTA']);
  });

  it('a reset before the first delta is re-run whole: the client sees the second attempt only', async () => {
    const t = setup();
    const first = await t.upstream.next(0);
    first.head().events(ROLE);
    first.crash();
    const second = await t.upstream.next(1);
    expect(second.headers['x-request-id']).toBe('rid-a2');
    second.head().events(ROLE, chunk({ content: 'Again' }), chunk({}, 'stop'), '[DONE]');
    second.end();
    await t.done;
    const got = reassemble(t.stream.body);
    expect(got.roleChunks).toBe(1);
    expect(got.content).toBe('Again');
    expect(t.r.outcome).toBe('completed-after-retry');
    expect(t.decisions()).toEqual(['ATTEMPT', 'RETRY', 'ATTEMPT', 'FIRST_DELTA']);
  });

  it('a reset after the first delta: one continuation from the delivered text, avoiding the failed replica', async () => {
    const t = setup();
    const leg1 = await t.upstream.next(0);
    leg1
      .head(200, { 'content-type': 'text/event-stream', 'x-gateway-upstream-host': '10.0.0.1:8000' })
      .events(ROLE, chunk({ content: 'The answer' }));
    await new Promise((r) => setImmediate(r));
    expect(t.r.state).toBe('decode');
    leg1.crash();
    const leg2 = await t.upstream.next(1);
    expect(t.r.state).toBe('continuing');
    expect(leg2.headers['x-request-id']).toBe('rid-c1');
    expect(leg2.headers['x-gateway-avoid-host']).toBe('10.0.0.1:8000');
    expect(leg2.sent.continue_final_message).toBe(true);
    expect(leg2.sent.messages.at(-1)).toEqual({ role: 'assistant', content: '<think></think>The answer' });
    leg2
      .head()
      .events({ ...ROLE, id: 'other' }, { ...chunk({ content: ' is 42.' }), id: 'other' }, { ...chunk({}, 'stop'), id: 'other' }, '[DONE]');
    leg2.end();
    await t.done;
    const got = reassemble(t.stream.body);
    expect(got.content).toBe('The answer is 42.');
    expect(got.ids).toEqual(['chatcmpl-1']);
    expect(got.roleChunks).toBe(1);
    expect(t.r.outcome).toBe('completed-after-continuation');
    expect(t.r.state).toBe('done');
  });

  it('a failing continuation ends with the interruption event (there is never a third leg)', async () => {
    const t = setup();
    const leg1 = await t.upstream.next(0);
    leg1.head().events(ROLE, chunk({ content: 'Part' }));
    await new Promise((r) => setImmediate(r));
    leg1.crash();
    const leg2 = await t.upstream.next(1);
    leg2.head().events(ROLE);
    leg2.crash();
    await t.done;
    const got = reassemble(t.stream.body);
    expect(got.content).toBe('Part');
    expect(got.errors).toEqual([
      expect.objectContaining({ code: 'upstream_decode_interrupted', reason: 'leg2-reset', partial_output: true }),
    ]);
    expect(got.done).toBe(true);
    expect(t.r.state).toBe('interrupted');
    expect(t.upstream.legs).toHaveLength(2);
  });

  it('attempts exhausted before the first delta: an HTTP 502 with a JSON error and Retry-After, never 200 and a reset', async () => {
    const t = setup({ MAX_ATTEMPTS: '1' });
    const leg = await t.upstream.next(0);
    leg.head().events(ROLE);
    leg.crash();
    await t.done;
    expect(t.stream.status).toBe(502);
    expect(t.stream.headers['retry-after']).toBe('1');
    expect(JSON.parse(t.stream.body).error).toMatchObject({
      code: 'upstream_failed',
      request_id: 'rid',
      retryable: true,
      reason: 'reset:attempts-exhausted',
    });
    expect(t.stream.resetWith).toBeNull();
    expect(t.r.state).toBe('answered');
  });

  it('the drain deadline during decode: the leg is cancelled and the stream ends with gateway-shutdown', async () => {
    const t = setup();
    const leg = await t.upstream.next(0);
    leg.head().events(ROLE, chunk({ content: 'Some' }));
    await new Promise((r) => setImmediate(r));
    t.r.shutdown();
    await t.done;
    expect(leg.aborted).toBe(true);
    expect(reassemble(t.stream.body).errors).toEqual([expect.objectContaining({ reason: 'gateway-shutdown' })]);
    expect(t.r.state).toBe('interrupted');
    expect(t.upstream.legs).toHaveLength(1);
  });

  it('the client leaves during prefill: the leg is aborted at once, nothing is sent, outcome client-disconnected', async () => {
    const t = setup();
    const leg = await t.upstream.next(0);
    t.r.clientGone('client-cancelled');
    expect(leg.aborted).toBe(true);
    leg.head();
    await t.done;
    expect(t.stream.status).toBeNull();
    expect(t.r.state).toBe('gone');
    expect(t.r.outcome).toBe('client-disconnected');
  });

  it('a stall after delivered text (STALL_IDLE_TIMEOUT_SECONDS) is continued like a reset', async () => {
    const t = setup();
    const leg1 = await t.upstream.next(0);
    leg1.head().events(ROLE, chunk({ content: 'Slow' }));
    const leg2 = await t.upstream.next(1); // ~50 ms of silence later
    expect(leg1.aborted).toBe(true); // a stalled leg is fenced (aborted) before leg 2 is sent
    leg2.head().events(chunk({ content: ' down' }), chunk({}, 'stop'), '[DONE]');
    leg2.end();
    await t.done;
    expect(reassemble(t.stream.body).content).toBe('Slow down');
    expect(t.logs.find((l) => l.decision === 'TRIGGERED')).toMatchObject({ failure: 'stall' });
  });

  it('a retry holds its re-prefill slot until its first token, even when held structured output commits only at the finish', async () => {
    const t = setup({ BUFFER_STRUCTURED_OUTPUT: 'true' }, true);
    const authority = t.ctx.admission as AdmissionAuthority;
    (await t.upstream.next(0)).failBeforeHead(new LegOpenError('reset'));
    const retry = await t.upstream.next(1);
    expect(authority.inFlight).toBe(1);
    retry.head().events(ROLE, chunk({ content: '{"a"' }));
    await new Promise((r) => setImmediate(r));
    expect(t.stream.status).toBeNull(); // still held: nothing committed
    expect(authority.inFlight).toBe(0); // but the prefill is over
    retry.events(chunk({ content: ': 1}' }), chunk({}, 'stop'), '[DONE]');
    retry.end();
    await t.done;
    expect(reassemble(t.stream.body).content).toBe('{"a": 1}');
  });

  it('the state machine rejects an illegal move, and a late move after the end is ignored', async () => {
    const t = setup();
    expect(() => t.r.move('done')).toThrow(IllegalTransitionError);
    t.r.clientGone('x');
    expect(() => t.r.move('decode')).not.toThrow();
    expect(t.r.state).toBe('gone');
    (await t.upstream.next(0)).head();
    await t.done;
  });
});
