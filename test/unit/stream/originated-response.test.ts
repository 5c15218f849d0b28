// The per-request core without Envoy: a fake ext_proc stream (what the client would get), a fake upstream
// (legs scripted chunk by chunk), real admission and real (short) timers. Each case runs in milliseconds
// and follows one path of the state machine end to end: commit, retry, continuation, interruption,
// shutdown, client gone.
import type { AdmissionAuthority } from '../../../src/recovery/admission';
import { IllegalTransitionError } from '../../../src/stream/request-state';
import { LegOpenError } from '../../../src/upstream/client';
import { reassemble } from '../../support/client';
import { chunk, ROLE, startCore as setup } from '../../support/core-fakes';

const ANSWER = {
  kind: 'engine-answer',
  as: 'status',
  reason: 'overloaded:attempts-exhausted',
  answer: { status: 503, headers: {}, body: Buffer.from('busy') },
} as const;

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

  it('a re-run waits its backoff (RETRY_BACKOFF_SECONDS, equal jitter: at least half the step)', async () => {
    const t = setup({ RETRY_BACKOFF_SECONDS: '0.2' });
    (await t.upstream.next(0)).failBeforeHead(new LegOpenError('reset'));
    const failedAt = Date.now();
    const second = await t.upstream.next(1);
    expect(Date.now() - failedAt).toBeGreaterThanOrEqual(95);
    second.head().events(ROLE, chunk({ content: 'x' }), chunk({}, 'stop'), '[DONE]');
    second.end();
    await t.done;
    const retry = t.logs.find((l) => l.decision === 'RETRY');
    expect(retry.backoff_ms).toBeGreaterThanOrEqual(100);
    expect(retry.backoff_ms).toBeLessThanOrEqual(200);
  });

  it("a 500 before any byte is re-run like a 503, after the engine's Retry-After when it is the longer wait", async () => {
    const t = setup({ RETRY_BACKOFF_SECONDS: '0' });
    const first = await t.upstream.next(0);
    first.head(500, { 'content-type': 'application/json', 'retry-after': '1' });
    first.body.push(Buffer.from('{"error":"boom"}'));
    first.end();
    const failedAt = Date.now();
    const second = await t.upstream.next(1);
    expect(Date.now() - failedAt).toBeGreaterThanOrEqual(990);
    second.head().events(ROLE, chunk({ content: 'x' }), chunk({}, 'stop'), '[DONE]');
    second.end();
    await t.done;
    expect(t.r.outcome).toBe('completed-after-retry');
    expect(t.logs.find((l) => l.decision === 'RETRY')).toMatchObject({ failure: 'server-error', retry_after_ms: 1000, backoff_ms: 1000 });
  });

  it('a Retry-After beyond RETRY_AFTER_MAX_SECONDS: no re-run, the engine answer passes unchanged', async () => {
    const t = setup({ RETRY_AFTER_MAX_SECONDS: '2' });
    const first = await t.upstream.next(0);
    first.head(503, { 'content-type': 'application/json', 'retry-after': '30' });
    first.body.push(Buffer.from('{"error":"busy"}'));
    first.end();
    await t.done;
    expect(t.upstream.legs).toHaveLength(1);
    expect(t.stream.status).toBe(503);
    expect(t.stream.headers['retry-after']).toBe('30');
    expect(t.stream.body).toBe('{"error":"busy"}');
    expect(t.logs.find((l) => l.event === 'request_end')?.reason).toBe('overloaded:retry-after-too-long');
  });

  it('FIRST_DELTA_DEADLINE_SECONDS: one deadline for every attempt, then 504, however many attempts are left', async () => {
    const t = setup({ FIRST_DELTA_DEADLINE_SECONDS: '0.4', MAX_ATTEMPTS: '50', RETRY_BACKOFF_SECONDS: '0.01' });
    // Every attempt resets at once: re-run after re-run until the deadline leaves no room for another.
    for (let i = 0; ; i++) {
      const leg = await Promise.race([t.upstream.next(i), t.done.then(() => null)]);
      if (leg === null) break;
      leg.failBeforeHead(new LegOpenError('reset'));
    }
    expect(t.upstream.legs.length).toBeGreaterThan(1);
    expect(t.upstream.legs.length).toBeLessThan(50);
    expect(t.stream.status).toBe(502);
    expect(JSON.parse(t.stream.body).error.reason).toBe('reset:deadline-exceeded');
  });

  it('FIRST_DELTA_DEADLINE_SECONDS: an attempt still waiting for its first delta is cut at the deadline: 504', async () => {
    const t = setup({ FIRST_DELTA_DEADLINE_SECONDS: '0.2', MAX_ATTEMPTS: '5' });
    const leg = await t.upstream.next(0);
    leg.head().events(ROLE); // headers and the role chunk, then a prefill that never ends
    await t.done;
    expect(leg.aborted).toBe(true);
    expect(t.upstream.legs).toHaveLength(1);
    expect(t.stream.status).toBe(504);
    expect(JSON.parse(t.stream.body).error).toMatchObject({ code: 'upstream_timeout', reason: 'first-delta-deadline:deadline-exceeded' });
  });

  it('FIRST_DELTA_DEADLINE_SECONDS ends at the first token: held structured output generates past it', async () => {
    const t = setup({ FIRST_DELTA_DEADLINE_SECONDS: '0.1', BUFFER_STRUCTURED_OUTPUT: 'true', STALL_IDLE_TIMEOUT_SECONDS: '1' }, true);
    const leg = await t.upstream.next(0);
    leg.head().events(ROLE, chunk({ content: '{"a"' }));
    await new Promise((r) => setTimeout(r, 250));
    leg.events(chunk({ content: ': 1}' }), chunk({}, 'stop'), '[DONE]');
    leg.end();
    await t.done;
    expect(t.stream.status).toBe(200);
    expect(reassemble(t.stream.body).content).toBe('{"a": 1}');
  });

  it('the dry run (CONTINUATION_ENABLED=false): a stall is logged TRIGGERED and SKIPPED once, and leg 1 relayed on', async () => {
    const t = setup({ CONTINUATION_ENABLED: 'false' });
    const leg = await t.upstream.next(0);
    leg.head().events(ROLE, chunk({ content: 'Slow' }));
    await new Promise((r) => setTimeout(r, 180)); // more than three stall periods of 50 ms
    leg.events(chunk({ content: ' but whole' }), chunk({}, 'stop'), '[DONE]');
    leg.end();
    await t.done;
    expect(t.upstream.legs).toHaveLength(1);
    const got = reassemble(t.stream.body);
    expect(got.content).toBe('Slow but whole');
    expect(got.errors).toEqual([]);
    expect(t.r.outcome).toBe('completed');
    expect(t.logs.filter((l) => l.decision === 'TRIGGERED')).toEqual([expect.objectContaining({ failure: 'stall', dry_run: true })]);
    expect(t.logs.filter((l) => l.decision === 'SKIPPED')).toEqual([expect.objectContaining({ reason: 'continuation-disabled' })]);
    // WAITING: once at warn for the silence, its later periods at debug
    const waiting = t.logs.filter((l) => l.decision === 'WAITING');
    expect(waiting.length).toBeGreaterThanOrEqual(2);
    expect(waiting.filter((l) => l.level === 'warn')).toHaveLength(1);
    expect(waiting.slice(1).every((l) => l.level === 'debug')).toBe(true);
  });

  it('an ending is recorded once: a second one throws, except after a client that left (nothing more is delivered)', async () => {
    const t = setup();
    // `complete` before the commit point would be prefill -> done: an illegal move.
    await expect(t.r.finish({ kind: 'complete', after: 'first-attempt' })).rejects.toThrow(IllegalTransitionError);
    expect(t.r.outcome).toBe('in-progress');
    t.r.clientGone('x');
    expect(t.r.state).toBe('gone');
    expect(t.r.outcome).toBe('client-disconnected');
    expect(await t.r.finish(ANSWER)).toBe(false);
    expect(t.r.outcome).toBe('client-disconnected');
    const u = setup();
    expect(await u.r.finish(ANSWER)).toBe(true);
    await expect(u.r.finish({ kind: 'client-gone', detail: 'late' })).rejects.toThrow(IllegalTransitionError);
    expect(u.r.outcome).toBe('failed-before-first-delta');
    expect(u.stream.status).toBe(503);
    expect(u.stream.body).toBe('busy');
    u.r.clientGone('after the end');
    expect(u.r.outcome).toBe('failed-before-first-delta');
    (await t.upstream.next(0)).head();
    await t.done;
  });
});
