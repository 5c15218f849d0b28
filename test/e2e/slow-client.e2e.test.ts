// A client that stops reading in the middle of a large answer (issue: "backpressure respected in both
// directions: a slow client must not make the sidecar buffer without bound"). What was measured, and why the
// two halves differ, is in docs/envoy.md "A client that stops reading".
//
// - The sidecar alone, its gRPC peer not reading: the sidecar stops writing (grpc-js backpressure), stops
//   reading the leg (LegReader pauses the socket) and the engine stops generating. Nothing grows anywhere.
// - Through the real Envoy 1.40: the backpressure never reaches the sidecar. Envoy's ext_proc side stream
//   ignores the watermarks, reads the whole StreamedImmediateResponse and holds it: since the chat hop
//   (docs/envoy.md (g)), in the inner HTTP/2 stream's send buffer, where the overload manager's memory cap can
//   reset it (test/e2e/non-reading-clients). Our side stays flat; Envoy grows by the unread part of the answer
//   (this answer is far below the default cap).
//
// Both halves end with the client reading again: every token arrives, once, in order.

import fs from 'node:fs';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '../../src/config/env';
import { extProcServiceDefinition } from '../../src/extproc/proto';
import { createLogger } from '../../src/obs/logger';
import { type Sidecar, startSidecar } from '../../src/sidecar';
import { answerFor } from '../../tools/fake-engine/answer';
import { type FakeEngine, type SeenRequest, startFakeEngine } from '../../tools/fake-engine/server';
import { chatBody, newRequestId, reassemble } from '../support/client';
import { captureLogs, type LogCapture } from '../support/log-capture';
import { startTestStack, type TestStack } from '../support/stack';

const MiB = 1024 * 1024;
const BODY = chatBody();
/** The answer's text: the fake engine's answer is a pure function of the conversation and its size. */
const expectedContent = (tokens: number) => answerFor(BODY.messages, { reasoning: 0, content: tokens }).contentTokens.join('');
/** Token chunks as fast as the machine goes: 200 per timer tick. */
const fastAnswer = (tokens: number) => ({ 'x-fake-answer-tokens': `0,${tokens}`, 'x-fake-token-ms': '0', 'x-fake-burst': '200' });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Samples tokensSent once a second until two samples agree (the engine is waiting or done). */
async function tokensWhenSettled(record: () => SeenRequest | undefined, timeoutMs: number): Promise<number> {
  const until = Date.now() + timeoutMs;
  let before = -1;
  for (;;) {
    await sleep(1000);
    const now = record()?.tokensSent ?? 0;
    if (now > 0 && now === before) return now;
    if (Date.now() > until) throw new Error(`engine still generating after ${timeoutMs} ms (${now} tokens)`);
    before = now;
  }
}

/** Waits until the engine has ended its response (closedAt is set when the response closes). */
async function engineFinished(record: () => SeenRequest | undefined, timeoutMs: number): Promise<SeenRequest> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const r = record();
    if (r?.closedAt !== undefined) return r;
    if (Date.now() > until)
      throw new Error(
        `engine not finished after ${timeoutMs} ms (${r?.tokensSent ?? 0} tokens): does Envoy push back now? see docs/envoy.md`,
      );
    await sleep(100);
  }
}

/** Buffers the test process holds (engine + sidecar + clients): where any sidecar-side buffering would show. */
const arrayBufferBytes = () => process.memoryUsage().arrayBuffers;

/** The complete-stream contract, on the raw SSE bytes: every token once and in order, one finish, [DONE]. */
function expectWholeAnswer(sse: string, tokens: number): void {
  const r = reassemble(sse);
  expect(r.errors).toEqual([]);
  expect(r.ids).toHaveLength(1);
  expect(r.roleChunks).toBe(1);
  expect(r.chunks.filter((c) => c.choices?.[0]?.delta?.content)).toHaveLength(tokens);
  expect(r.content === expectedContent(tokens)).toBe(true); // not toBe(): a 30 MB diff is no help
  expect(r.finishReasons).toEqual(['stop']);
  expect(r.done).toBe(true);
  expect(sse.endsWith('data: [DONE]\n\n')).toBe(true);
}

describe('the sidecar alone, its gRPC peer not reading', () => {
  // What Envoy would do with flow control on the ext_proc stream: a grpc-js client stands in for it.
  const TOKENS = 100_000; // ~29 MB of SSE, far beyond every buffer on the way (loopback sockets hold ~4 MB)
  let engine: FakeEngine;
  let sidecar: Sidecar;
  let capture: LogCapture;
  beforeAll(async () => {
    engine = await startFakeEngine({ name: 'replica-a' });
    capture = captureLogs();
    const config = loadConfig({
      CONTINUATION_MODEL: 'generic-test',
      STALL_IDLE_TIMEOUT_SECONDS: '1',
      ADMIN_PORT: '0',
      PORT: '0',
      DOWNSTREAM_URL: engine.url,
      LOG_LEVEL: 'info',
    });
    sidecar = await startSidecar(config, createLogger(config.logLevel, capture.sink));
  });
  afterAll(async () => {
    await sidecar?.close(1000);
    await engine?.close();
  });

  it('stops the engine while the peer waits, then delivers every token', async () => {
    const id = newRequestId('slow-grpc');
    const Client = grpc.makeGenericClientConstructor(extProcServiceDefinition(), 'ExternalProcessor');
    const client = new Client(`127.0.0.1:${sidecar.port}`, grpc.credentials.createInsecure()) as any;
    const call: grpc.ClientDuplexStream<any, any> = client.Process();
    const sse: Buffer[] = [];
    let gotHeaders!: () => void;
    const headers = new Promise<void>((r) => (gotHeaders = r));
    const ended = new Promise<void>((resolve, reject) => {
      call.on('data', (m: any) => {
        const sir = m.streamed_immediate_response;
        if (sir?.headers_response) gotHeaders();
        if (sir?.body_response) {
          sse.push(sir.body_response.body);
          if (sir.body_response.end_of_stream) resolve();
        }
      });
      call.on('error', reject);
    });
    ended.catch(() => undefined); // awaited below; a failure before that must not be an unhandled rejection
    const requestHeaders = {
      ':method': 'POST',
      ':path': '/v1/chat/completions',
      'content-type': 'application/json',
      'x-request-id': id,
      ...fastAnswer(TOKENS),
    };
    call.write({
      request_headers: {
        headers: { headers: Object.entries(requestHeaders).map(([key, v]) => ({ key, raw_value: Buffer.from(v) })) },
        end_of_stream: false,
      },
    });
    call.write({ request_body: { body: Buffer.from(JSON.stringify(BODY)), end_of_stream: true } });
    const buffersBefore = arrayBufferBytes();
    try {
      await headers;
      call.pause(); // grpc-js stops reading the HTTP/2 stream: no more window for the sidecar

      const seen = () => engine.requests.find((r) => r.headers['x-request-id'] === id);
      const settled = await tokensWhenSettled(seen, 20_000);
      // Measured: the engine stops after 14,400-14,800 tokens (~4.2 MB: mostly the loopback socket's kernel
      // buffers, plus the sidecar's 16 queued leg chunks and 16 gRPC messages). Half the answer leaves room
      // for larger kernel buffers while still proving that the answer's size does not matter.
      expect(settled).toBeLessThan(TOKENS / 2);
      expect(seen()!.closedAt).toBeUndefined();
      // Measured: +0.7 MiB. Whatever the sidecar queues (leg chunks, gRPC messages) is Buffers.
      expect(arrayBufferBytes() - buffersBefore).toBeLessThan(16 * MiB);

      call.resume();
      await ended;
    } finally {
      call.cancel(); // a no-op once the answer ended; otherwise the sidecar's close() would wait for the call
      client.close();
    }
    expectWholeAnswer(Buffer.concat(sse).toString('utf8'), TOKENS);
    expect(await capture.waitForEnd(id)).toMatchObject({ outcome: 'completed', legs: 1 });
  });
});

describe('through the real Envoy, the client not reading', () => {
  const TOKENS = 100_000; // ~29 MB of SSE: enough to see where it goes, next to ~4 MB of kernel buffers
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ replicas: 1, env: { LOG_LEVEL: 'info' } });
  });
  afterAll(async () => stack?.stop());

  it('keeps the sidecar flat, Envoy holds the unread answer, and the client gets every token', async () => {
    const id = newRequestId('slow-client');
    const envoyBefore = rssBytes(stack.envoy.pid);
    const heapBefore = await envoyHeap(stack);
    const buffersBefore = arrayBufferBytes();
    const client = new RawHttpClient(Number(new URL(stack.url).port));
    client.post(
      '/v1/chat/completions',
      { 'content-type': 'application/json', 'x-request-id': id, ...fastAnswer(TOKENS) },
      JSON.stringify(BODY),
    );
    try {
      // The engine produces the whole answer with the client reading nothing: Envoy does not push back.
      const seen = await engineFinished(() => stack.engines[0].requests.find((r) => r.headers['x-request-id'] === id), 25_000);
      expect(seen.tokensSent).toBe(TOKENS);
      const buffersGrowth = arrayBufferBytes() - buffersBefore;
      const envoyHeld = (await envoyHeap(stack)) - heapBefore;
      // The client connection holds at most its 32 KiB watermark: the front hop stopped reading the chat hop.
      const frontBuffered = await envoyGauge(stack, 'http.front.downstream_cx_tx_bytes_buffered');
      const envoyGrowth = rssBytes(stack.envoy.pid) - envoyBefore;

      client.resume();
      const res = await client.response();
      expect(res.status).toBe(200);
      expectWholeAnswer(res.body.toString('utf8'), TOKENS);
      const produced = res.body.length;

      // Our side stays flat while the whole answer went through it (measured: +0.03 to +4.3 MiB of Buffers).
      expect(buffersGrowth).toBeLessThan(32 * MiB);
      // Where the answer was: Envoy's heap (measured: all of it but the ~4 MB the loopback sockets hold), not
      // the client connection's buffer. Should this fail because the engine stopped, Envoy now propagates the
      // client's backpressure to ext_proc: update docs/envoy.md and assert what the first describe does.
      expect(envoyHeld).toBeGreaterThan(produced / 2);
      expect(frontBuffered).toBeLessThan(1024 * 1024);
      // Envoy's RSS grows by about one byte per unread byte (measured: +26.6 MiB for these 27.5 MiB, +85 MiB
      // for 83 MiB): bounded by the answer's size, not amplified. The 32 MiB are allocator slack.
      expect(envoyGrowth).toBeLessThan(produced + 32 * MiB);
    } finally {
      client.destroy();
    }
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed', legs: 1 });
  });
});

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** Bytes tcmalloc has handed out in Envoy (admin /memory "allocated"): what the fixed_heap monitor watches. */
async function envoyHeap(stack: TestStack): Promise<number> {
  return Number(JSON.parse(await (await fetch(`${stack.envoy.adminUrl}/memory`)).text()).allocated);
}

async function envoyGauge(stack: TestStack, name: string): Promise<number> {
  const text = await (await fetch(`${stack.envoy.adminUrl}/stats?filter=^${name.replace(/\./g, '\\.')}$`)).text();
  const m = new RegExp(`^${name.replace(/\./g, '\\.')}: (\\d+)$`, 'm').exec(text);
  if (!m) throw new Error(`Envoy has no stat ${name}`);
  return Number(m[1]);
}

/**
 * HTTP/1.1 over a bare socket that is paused from the start: nothing is read until resume(), so only the
 * kernel's socket buffers stand between Envoy and a client that does not read.
 */
class RawHttpClient {
  private readonly socket: net.Socket;
  private readonly parts: Buffer[] = [];
  private readonly done: Promise<void>;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.pause();
    this.done = new Promise((resolve, reject) => {
      let tail = '';
      this.socket.on('data', (c: Buffer) => {
        this.parts.push(c);
        // The last chunk of a chunked body; the connection itself stays open (keep-alive).
        tail = (tail + c.toString('latin1')).slice(-32);
        if (tail.endsWith('data: [DONE]\n\n\r\n0\r\n\r\n')) resolve();
      });
      this.socket.on('error', reject);
      this.socket.on('close', () => reject(new Error('connection closed before the end of the body')));
    });
    this.done.catch(() => undefined); // awaited by response(); a test that failed earlier never gets there
  }

  post(path: string, headers: Record<string, string>, body: string): void {
    const head = Object.entries({ host: 'gateway', 'content-length': String(Buffer.byteLength(body)), ...headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    this.socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n${body}`);
  }

  resume(): void {
    this.socket.resume();
  }

  async response(): Promise<{ status: number; body: Buffer }> {
    await this.done;
    const raw = Buffer.concat(this.parts);
    const headEnd = raw.indexOf('\r\n\r\n');
    const head = raw.subarray(0, headEnd).toString('latin1');
    expect(head).toMatch(/\r\ntransfer-encoding: chunked/i);
    return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), body: dechunk(raw.subarray(headEnd + 4)) };
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** Decodes an HTTP/1.1 chunked body (no trailers, which Envoy does not add here). */
function dechunk(raw: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = raw.indexOf('\r\n', at);
    const size = parseInt(raw.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) throw new Error(`bad chunk size at byte ${at}`);
    if (size === 0) return Buffer.concat(out);
    out.push(raw.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}
