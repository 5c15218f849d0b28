// Issue 19 through the real Envoy: deep JSON at and past MAX_BODY_JSON_DEPTH with faults, every method but
// POST proxied natively, a 200 that is no event stream, negative usage from the engine, and a client connection
// that never sends a byte. "Natively" is checked against the engine itself: what the client gets through the
// gateway is what the same request gets straight from the engine.
import * as net from 'node:net';
import { request } from 'undici';
import { DEFAULT_MAX_JSON_DEPTH } from '../../src/request/scope';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor, uninterrupted } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '20,40' };

/** A chat body whose `field` nests so that the whole body is exactly `depth` levels deep (the body is level 1). */
function bodyOfDepth(depth: number, field: 'x_deep' | 'tools', extra: Record<string, unknown> = {}): string {
  const arrays = (n: number) => `${'['.repeat(n)}"leaf"${']'.repeat(n)}`;
  // x_deep: the body (1), {k: ...} (2), then depth - 2 arrays. tools: the body, the list, the tool, its
  // function and its parameters (5), then depth - 5 arrays. Written as text: JSON.stringify cannot build 10,000.
  const value =
    field === 'x_deep'
      ? `{"k":${arrays(depth - 2)}}`
      : `[{"type":"function","function":{"name":"lookup","parameters":{"k":${arrays(depth - 5)}}}}]`;
  const base = JSON.stringify(chatBody({ ...extra, [field]: 'X' }));
  return base.replace('"X"', value);
}

/** Depth of a JSON text, counted the plain way (for the test's own check of bodyOfDepth). */
function depthOf(text: string): number {
  let d = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') max = Math.max(max, ++d);
    else if (c === ']' || c === '}') d--;
  }
  return max;
}

async function rawRequest(url: string, method: string, body: string | undefined, headers: Record<string, string>) {
  const res = await request(`${url}/v1/chat/completions`, { method: method as 'GET', headers, body });
  const text = await res.body.text();
  return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), text };
}

describe('hostile requests and engines (issue 19)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { STALL_IDLE_TIMEOUT_SECONDS: '1', RETRY_BACKOFF_SECONDS: '0.01' } });
  });
  afterAll(async () => stack?.stop());
  beforeEach(() => resetFaults());

  test('the test bodies are as deep as they say', () => {
    for (const d of [DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_JSON_DEPTH + 1, 10_000]) {
      expect(depthOf(bodyOfDepth(d, 'x_deep'))).toBe(d);
      expect(depthOf(bodyOfDepth(d, 'tools'))).toBe(d);
      expect(() => JSON.parse(bodyOfDepth(d, 'tools'))).not.toThrow();
    }
  });

  describe('deep JSON', () => {
    test('at MAX_BODY_JSON_DEPTH, a crash mid-answer is continued: one complete stream, the uninterrupted text', async () => {
      const body = bodyOfDepth(DEFAULT_MAX_JSON_DEPTH, 'x_deep');
      const ref = await uninterrupted(stack, body, SIZE);
      const id = newRequestId('deep-at-limit');
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@25' });
      expectOneCompleteStream(r);
      expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
      expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
      // Leg 2 carried the deep field, re-serialized.
      expect(seenFor(stack, id).filter((s) => s.continuation)).toHaveLength(1);
    });

    test('at MAX_BODY_JSON_DEPTH, deep tools and a crash before the first token: re-run, complete', async () => {
      const body = bodyOfDepth(DEFAULT_MAX_JSON_DEPTH, 'tools');
      const id = newRequestId('deep-tools-at-limit');
      const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@0' });
      expectOneCompleteStream(r);
      expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-retry', attempt: 2 });
    });

    // Past the limit the gateway is absent: the engine's fault reaches the client as it would without it.
    for (const [name, depth, field, fault] of [
      ['one level past the limit, a crash mid-answer', DEFAULT_MAX_JSON_DEPTH + 1, 'x_deep', 'crash@25'],
      ['a 10,000-deep array, a crash mid-answer', 10_000, 'x_deep', 'crash@25'],
      ['10,000-deep tools, a crash before the first token', 10_000, 'tools', 'crash@0'],
      ['one level past the limit in tools, a crash before the first token', DEFAULT_MAX_JSON_DEPTH + 1, 'tools', 'crash@0'],
    ] as const) {
      test(`${name}: proxied natively (json-too-deep), the crash unrescued, nothing originated`, async () => {
        const id = newRequestId('deep-past');
        const r = await postChat(stack.url, bodyOfDepth(depth, field), { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault });
        // The engine's 200, its chunks up to the crash, then the cut: no continuation, no interruption event.
        expect(r.status).toBe(200);
        expect(r.transportError).not.toBeNull();
        expect(r.errors).toEqual([]);
        expect(r.finishReasons).toEqual([]);
        expect(r.done).toBe(false);
        const seen = seenFor(stack, id);
        expect(seen).toHaveLength(1);
        expect(seen[0].fault).toBe(fault);
        expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })).toEqual([
          expect.objectContaining({ reason: 'json-too-deep', detail: `deeper than ${DEFAULT_MAX_JSON_DEPTH}` }),
        ]);
        expect(stack.records({ request_id: id, event: 'request_end' })).toEqual([]);
        expect(stack.logs.filter((l) => /RangeError|Maximum call stack/.test(JSON.stringify(l)))).toEqual([]);
      });
    }
  });

  describe('only POST is in scope', () => {
    // Each with the body of an in-scope chat request, compared with the engine's own answer to the same request.
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'HEAD']) {
      test(`${method} with an in-scope body: what the engine answers without the gateway`, async () => {
        const body = JSON.stringify(chatBody());
        const id = newRequestId(`method-${method}`);
        const headers = { 'content-type': 'application/json', ...SIZE };
        const direct = await rawRequest(stack.engines[0].url, method, body, { ...headers, 'x-request-id': `direct-${id}` });
        const via = await rawRequest(stack.url, method, body, { ...headers, 'x-request-id': id });
        expect(via.status).toBe(direct.status);
        expect(via.status).not.toBe(200);
        expect(via.contentType).not.toContain('text/event-stream');
        expect(via.text).toBe(direct.text);
        // The engine saw the client's own method, not a POST the gateway made of it.
        const seen = seenFor(stack, id);
        expect(seen.map((s) => s.method)).toEqual([method]);
        expect(stack.records({ request_id: id, event: 'request_end' })).toEqual([]);
        expect(stack.records({ request_id: id, decision: 'PASSTHROUGH' })).toEqual([
          expect.objectContaining({ reason: 'method-not-post', detail: method }),
        ]);
      });
    }
  });

  test('a 200 that is no event stream: an HTTP 502 with a stable code, never an empty stream', async () => {
    const id = newRequestId('plain');
    const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'plain' });
    expect(r.status).toBe(502);
    expect(String(r.headers['content-type'])).toContain('application/json');
    expect(JSON.parse(r.raw).error).toMatchObject({ code: 'upstream_failed', reason: 'not-event-stream', retryable: true, request_id: id });
    expect(r.raw).not.toContain('fake-engine');
    // Not re-run: the engine may have generated a whole answer that it did not stream.
    expect(seenFor(stack, id)).toHaveLength(1);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'failed-before-first-delta', reason: 'not-event-stream' });
  });

  test('negative usage from the continuation leg never reaches the corrected usage', async () => {
    const body = chatBody({ stream_options: { include_usage: true } });
    const ref = await uninterrupted(stack, body, SIZE);
    const id = newRequestId('negative-usage');
    const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': 'crash@5;negative-usage' });
    expectOneCompleteStream(r);
    expect(r.reasoning + r.content).toBe(ref.reasoning + ref.content);
    expect(seenFor(stack, id).map((s) => s.fault)).toEqual(['crash@5', 'negative-usage']);
    const u = r.usage;
    for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens', 'reasoning_tokens']) expect(u[k]).toBeGreaterThanOrEqual(0);
    // As for a leg 2 without usage: the recovered tokens, the original prompt's count.
    expect(u.completion_tokens).toBe(u.continuation.recovered_tokens);
    expect(u.prompt_tokens).toBeGreaterThan(0);
    expect(u.total_tokens).toBe(u.prompt_tokens + u.completion_tokens);
  });

  test('a connection that never sends a byte is closed; headers that never complete get a 408', async () => {
    const port = Number(new URL(stack.url).port);
    const probe = (send: string | null) =>
      new Promise<{ closed: boolean; got: string }>((resolve) => {
        let got = '';
        const s = net.connect(port, '127.0.0.1', () => send && s.write(send));
        s.on('data', (d) => {
          got += d;
        });
        s.on('error', () => undefined);
        s.on('close', () => resolve({ closed: true, got }));
        // Far above the 10 s Envoy is configured with: only "never" fails this.
        setTimeout(() => {
          s.destroy();
          resolve({ closed: false, got });
        }, 40_000).unref();
      });
    const [silent, partial] = await Promise.all([probe(null), probe('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n')]);
    expect(silent).toEqual({ closed: true, got: '' });
    expect(partial.closed).toBe(true);
    expect(partial.got).toMatch(/^HTTP\/1\.1 408 /);
    // A client that sends its request at once is unaffected.
    expectOneCompleteStream(await postChat(stack.url, chatBody(), SIZE));
  }, 60_000);
});
