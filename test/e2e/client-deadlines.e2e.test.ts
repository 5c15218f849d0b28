// A client's body has a deadline, and what a client chooses is bounded in every log line (issue 39), through
// the real Envoy binary: raw sockets send a chat request's headers and then no body, or one byte a second;
// past Envoy's request timeout on the front listener (requestBodyTimeoutSeconds, 3 s here, 60 s by default)
// each gets a 408 and its connection closes, and no engine ever sees the request. A 10 KB X-Request-Id is
// served as any request, and Envoy's access log and the sidecar's records carry its head with the cut visible.
import * as net from 'node:net';
import { CUT_MARKER } from '../../tools/stack/envoy-config';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '5,10' };
const BODY_TIMEOUT_SECONDS = 3;

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({ requestBodyTimeoutSeconds: BODY_TIMEOUT_SECONDS, env: { LOG_LEVEL: 'info' } });
});
afterAll(async () => stack?.stop());

/**
 * A chat request over a raw socket: its headers at once, then `body` as `drip` says (null: never), until the
 * server answers and closes. Resolves with what the server sent. The 60 s guard is far above the deadline:
 * only "never" fails it.
 */
function rawRequest(id: string, body: string, drip: 'none' | 'byte-per-second'): Promise<{ closed: boolean; got: string; sent: number }> {
  const port = Number(new URL(stack.url).port);
  return new Promise((resolve) => {
    let got = '';
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\nx-request-id: ${id}\r\n` +
          `x-fake-answer-tokens: 5,10\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`,
      );
      if (drip === 'byte-per-second')
        timer = setInterval(() => {
          if (sent < body.length && !s.destroyed) s.write(body[sent++]);
        }, 1000);
    });
    s.on('data', (d) => {
      got += d;
    });
    s.on('error', () => undefined);
    const guard = setTimeout(() => {
      s.destroy();
      done(false);
    }, 60_000);
    const done = (closed: boolean) => {
      clearInterval(timer);
      clearTimeout(guard);
      resolve({ closed, got, sent });
    };
    s.on('close', () => done(true));
  });
}

test('stalled bodies and bodies at one byte a second: 408, closed, and no engine sees them (one and a burst of 40)', async () => {
  const body = JSON.stringify(chatBody());
  const ids = Array.from({ length: 40 }, (_, i) => newRequestId(i % 4 === 0 ? 'drip' : 'stall'));
  const results = await Promise.all(ids.map((id, i) => rawRequest(id, body, i % 4 === 0 ? 'byte-per-second' : 'none')));
  for (const [i, r] of results.entries()) {
    expect(r.closed).toBe(true);
    expect(r.got).toMatch(/^HTTP\/1\.1 408 /);
    expect(seenFor(stack, ids[i])).toEqual([]);
    expect(stack.records({ request_id: ids[i], decision: 'ATTEMPT' })).toEqual([]);
    // The trickling ones sent part of their body, never all of it.
    if (i % 4 === 0) expect(r.sent).toBeLessThan(body.length);
  }
  // The front listener's access log says why: Envoy's request timeout.
  await new Promise((r) => setTimeout(r, 1500)); // the stdout access log is flushed every second
  const lines = stack.envoy.logs().split('\n');
  for (const id of ids) expect(lines.find((l) => l.includes(`rid=${id} `) && l.includes(' front '))).toMatch(/code=408 /);
  // A client that sends its request at once is unaffected, however long its answer takes.
  expectOneCompleteStream(await postChat(stack.url, chatBody(), SIZE));
}, 90_000);

test("the deadline is the request's only: an answer that starts after it, or lasts longer than it, is untouched", async () => {
  // The timer is disarmed once the request went on whole (Envoy: "the last byte of the request is sent
  // upstream"), not when the answer ends: 6 s of answer (300 tokens at 20 ms) and an answer 4 s late pass.
  const long = await postChat(stack.url, chatBody(), { 'x-fake-answer-tokens': '0,300', 'x-fake-token-ms': '20' });
  expectOneCompleteStream(long);
  const late = await postChat(stack.url, chatBody(), { ...SIZE, 'x-fake-fault': 'slow@4000' });
  expectOneCompleteStream(late);
}, 60_000);

test('a 10 KB X-Request-Id: served; Envoy logs its first 128 characters and the cut marker, the sidecar its head and length', async () => {
  const id = `req-${'a'.repeat(10 * 1024)}`;
  const r = await postChat(stack.url, chatBody(), { ...SIZE, 'x-request-id': id });
  expectOneCompleteStream(r);
  await new Promise((res) => setTimeout(res, 1500)); // the access log's flush
  const lines = stack.envoy
    .logs()
    .split('\n')
    .filter((l) => l.includes('rid=req-aaaa'));
  expect(lines.length).toBeGreaterThanOrEqual(2); // the front listener and the chat hop, at least
  for (const l of lines) {
    expect(l).toContain(`rid=${id.slice(0, 128)}${CUT_MARKER} `);
    expect(l.length).toBeLessThan(1024);
  }
  // The sidecar's records: the head and the length it had, never the whole value.
  const records = stack.logs.filter((x) => typeof x.request_id === 'string' && x.request_id.startsWith('req-aaaa'));
  expect(records.length).toBeGreaterThan(0);
  for (const x of records) expect(x.request_id).toBe(`${id.slice(0, 128)}...[cut ${id.length}]`);
  for (const x of stack.logs) expect(JSON.stringify(x).length).toBeLessThan(4096);
});

test('a model name of 10 KB: the sidecar records its head with the cut visible', async () => {
  const model = `m-${'x'.repeat(10 * 1024)}`;
  const id = newRequestId('long-model');
  // The fake engine answers with the model it was asked for: the upstream's model is the long one too.
  const r = await postChat(stack.url, chatBody({ model }), { ...SIZE, 'x-request-id': id });
  expectOneCompleteStream(r);
  const end = await stack.waitForEnd(id);
  expect(end.model).toBe(`${model.slice(0, 128)}...[cut ${model.length}]`);
});
