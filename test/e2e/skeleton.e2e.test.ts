// The walking skeleton through the real Envoy binary: the reference gateway's scenarios, asserted on what
// the client received and what the replicas saw.
import { resetFaults } from '../../tools/fake-engine/faults';
import type { ClientResult } from '../support/client';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { engineSawAbort, expectInterruption, expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ env: { MAX_ATTEMPTS: '1' } });
});
afterAll(async () => stack?.stop());
beforeEach(() => resetFaults());

const SIZE = { 'x-fake-answer-tokens': '30,40' };

test('happy path: the stream is relayed byte for byte (ids aside)', async () => {
  const id = newRequestId();
  const r = await postChat(stack.url, chatBody({ stream_options: { include_usage: true } }), { ...SIZE, 'x-request-id': id });
  expectOneCompleteStream(r);
  const seen = seenFor(stack, id);
  expect(seen).toHaveLength(1);
  expect(seen[0].continuation).toBe(false);
  // The engine's own bytes for this answer, fetched directly, differ only by the completion id.
  const direct = await fetch(`${stack.engines[0].url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...SIZE },
    body: JSON.stringify(chatBody({ stream_options: { include_usage: true } })),
  });
  const norm = (s: string) => s.replace(/"id":"[^"]+"/g, '"id":"X"');
  expect(norm(r.raw)).toBe(norm(await direct.text()));
  const end = await stack.waitForEnd(id);
  expect(end).toMatchObject({ outcome: 'completed', legs: 1, first_delta_sent: true, phase: 'done' });
});

test('replica killed mid-answer (socket destroyed): complete answer, identical text, one id', async () => {
  const id = newRequestId();
  const body = chatBody({ stream_options: { include_usage: true } });
  const ref = await uninterrupted(stack, body, SIZE);
  const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@45' });
  expectOneCompleteStream(r);
  expect(r.reasoning).toBe(ref.reasoning);
  expect(r.content).toBe(ref.content);
  expect(r.finishReasons).toEqual(['stop']);
  const seen = seenFor(stack, id);
  expect(seen.map((s) => s.continuation)).toEqual([false, true]);
  expect(seen[1].headers['x-request-id']).toBe(`${id}-c1`);
  expect(seen[1].body.continue_final_message).toBe(true);
  expect(seen[1].body.add_generation_prompt).toBe(false);
  expect(seen[1].body.stream_options.include_usage).toBe(true);
  // The client's chat_template_kwargs (none here) are leg 2's: they shape the generation prompt it must reproduce.
  expect(seen[1].body.chat_template_kwargs).toBeUndefined();
  expect(r.usage.completion_tokens).toBeGreaterThanOrEqual(ref.usage.completion_tokens - 5);
  expect(r.usage.completion_tokens).toBeLessThanOrEqual(ref.usage.completion_tokens + 15);
  const end = await stack.waitForEnd(id);
  expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
  const trig = stack.records({ request_id: id, decision: 'TRIGGERED' });
  expect(trig).toHaveLength(1);
  expect(trig[0]).toMatchObject({ failure: 'reset', case: 'content-done' });
});

test('thinking-partial: reset inside the reasoning continues the reasoning', async () => {
  const id = newRequestId();
  const body = chatBody();
  const ref = await uninterrupted(stack, body, SIZE);
  const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@12' });
  expectOneCompleteStream(r);
  expect(r.reasoning).toBe(ref.reasoning);
  expect(r.content).toBe(ref.content);
  const leg2 = seenFor(stack, id)[1];
  const prefix: string = leg2.body.messages.at(-1).content;
  expect(leg2.body.messages.at(-1).role).toBe('assistant');
  expect(prefix.startsWith('<think>')).toBe(true);
  expect(prefix).not.toContain('</think>');
  expect(leg2.body.chat_template_kwargs?.thinking).not.toBe(false);
  expect(stack.records({ request_id: id, decision: 'TRIGGERED' })[0]).toMatchObject({ case: 'thinking-partial' });
});

test('content-done stall: silence after content started triggers leg2; leg1 is aborted', async () => {
  const id = newRequestId();
  const body = chatBody();
  const ref = await uninterrupted(stack, body, SIZE);
  const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'stall@50' });
  expectOneCompleteStream(r);
  expect(r.content).toBe(ref.content);
  const seen = seenFor(stack, id);
  expect(seen).toHaveLength(2);
  expect(await engineSawAbort(stack, id, 0)).toBe(true); // fenced: the stalled replica saw its request go away
  expect(stack.records({ request_id: id, decision: 'TRIGGERED' })[0]).toMatchObject({ failure: 'stall' });
});

test('clean EOF without finish_reason triggers leg2', async () => {
  const id = newRequestId();
  const ref = await uninterrupted(stack, chatBody(), SIZE);
  const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'eof@20' });
  expectOneCompleteStream(r);
  expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
});

test('in-band error event and finish_reason abort mid-answer are not shown; leg2 continues', async () => {
  for (const fault of ['error@33', 'abort@33']) {
    resetFaults();
    const id = newRequestId();
    const ref = await uninterrupted(stack, chatBody(), SIZE);
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    expect(r.finishReasons).toEqual(['stop']);
  }
});

test('tool call delivered, then reset: no leg2, the interruption event', async () => {
  const id = newRequestId();
  const body = chatBody({
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }],
  });
  const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@33' });
  expect(r.toolCalls.length).toBeGreaterThan(0);
  expectInterruption(r, 'tool-call-delivered');
  expect(seenFor(stack, id)).toHaveLength(1);
});

/** A give-up before the first delta: an HTTP error the client can act on, never `200` and then a reset. */
function expectRetryableHttpError(r: ClientResult, status: number, code: string, requestId: string): void {
  expect(r.transportError).toBeNull();
  expect(r.status).toBe(status);
  expect(String(r.headers['content-type'])).toContain('application/json');
  expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(JSON.parse(r.raw).error).toMatchObject({ code, type: 'server_error', request_id: requestId, retryable: true });
}

test('role-only chunk then reset: nothing recoverable, no retry left: a 502 with a JSON error, no leg2', async () => {
  const id = newRequestId();
  const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@0' });
  expectRetryableHttpError(r, 502, 'upstream_failed', id);
  expect(r.reasoning + r.content).toBe('');
  expect(seenFor(stack, id)).toHaveLength(1);
  expect((await stack.waitForEnd(id)).outcome).toBe('failed-before-first-delta');
});

test('no chunk then clean EOF / reset: no leg2, and never a stream that just stops', async () => {
  // A reset before headers reaches Envoy as a connection terminated before the response (503 UC), which the
  // sidecar sends once more whatever MAX_ATTEMPTS (a stale pooled connection looks the same): reset twice.
  for (const fault of ['eof@0', 'crash-before-headers;crash-before-headers']) {
    resetFaults();
    const id = newRequestId();
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
    expect(r.reasoning + r.content).toBe('');
    expect(r.finishReasons).toEqual([]);
    expect(seenFor(stack, id).filter((s) => s.continuation)).toHaveLength(0);
    // Nothing delivered, no retry left (MAX_ATTEMPTS=1): an HTTP error, the headers were still held. For a
    // reset before headers this replaces Envoy's plain-text 503 with the gateway's JSON error.
    expectRetryableHttpError(r, 502, 'upstream_failed', id);
  }
});

test('max_tokens and max_completion_tokens are reduced by the recovered tokens; none added when unset', async () => {
  for (const field of ['max_tokens', 'max_completion_tokens', null]) {
    resetFaults();
    const id = newRequestId();
    const body = chatBody(field ? { [field]: 1000 } : {});
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@40' });
    expectOneCompleteStream(r);
    const leg2 = seenFor(stack, id)[1].body;
    const end = await stack.waitForEnd(id);
    if (field) {
      expect(leg2[field]).toBe(1000 - end.recovered_tokens);
      expect(leg2[field]).toBeLessThan(1000);
    } else {
      expect(leg2.max_tokens).toBeUndefined();
      expect(leg2.max_completion_tokens).toBeUndefined();
    }
  }
});

test('leg2 pauses shorter than the stall timer, then resumes: the client still gets the complete answer', async () => {
  const id = newRequestId();
  const ref = await uninterrupted(stack, chatBody(), SIZE);
  const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@20;stall@5:600' });
  expectOneCompleteStream(r);
  expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
});

test('leg2 silent longer than the stall timer (1 s here): a stall like leg 1, the stream ends as leg2-stall', async () => {
  const id = newRequestId();
  const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@20;stall@5:2500' });
  expectInterruption(r, 'leg2-stall');
  // Detected on the stall timer and fenced before the leg resumed (the reference waited it out).
  const leg2 = seenFor(stack, id)[1];
  expect(leg2.tokensSent).toBe(5);
  expect(await engineSawAbort(stack, id, 1)).toBe(true);
});

test('non-200 from the engine passes through unchanged', async () => {
  const id = newRequestId();
  const r = await postChat(stack.url, chatBody(), { 'x-request-id': id, 'x-fake-fault': 'status@400' });
  expect(r.status).toBe(400);
  expect(JSON.parse(r.raw).error).toBeDefined();
});

test('a body that is not JSON is proxied untouched and answered by the engine', async () => {
  const id = newRequestId();
  const r = await postChat(stack.url, '{"model": oops', { 'x-request-id': id });
  expect(r.status).toBe(400);
  const seen = seenFor(stack, id);
  expect(seen).toHaveLength(1);
  expect(seen[0].body).toBe('{"model": oops');
  expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })[0]).toMatchObject({ reason: 'not-json' });
});

test('out of scope (response_format json_schema, non-streaming) is proxied natively, body byte-identical', async () => {
  for (const [extra, reason] of [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } }, 'structured-output'],
    [{ stream: false }, 'not-streaming'],
  ] as const) {
    const id = newRequestId();
    const raw = JSON.stringify(chatBody(extra));
    const r = await postChat(stack.url, raw, { 'x-request-id': id });
    expect(r.status).toBe(200);
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(1);
    expect(JSON.stringify(seen[0].body)).toBe(raw);
    expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })[0]).toMatchObject({ reason });
  }
});

test('client disconnect mid-stream aborts the upstream attempt within a second', async () => {
  const id = newRequestId();
  const ac = new AbortController();
  const { request } = await import('undici');
  const res = await request(`${stack.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id, 'x-fake-token-ms': '50', ...SIZE },
    body: JSON.stringify(chatBody()),
    signal: ac.signal,
  });
  const it = res.body[Symbol.asyncIterator]();
  await it.next();
  const abortedAt = Date.now();
  ac.abort();
  await new Promise((r) => setTimeout(r, 1000));
  const seen = seenFor(stack, id);
  expect(seen).toHaveLength(1);
  expect(seen[0].clientAborted).toBe(true);
  expect(seen[0].closedAt! - abortedAt).toBeLessThan(1000);
  expect((await stack.waitForEnd(id)).outcome).toBe('client-disconnected');
});
