// 100 clients that never read, against Envoy's memory cap (docs/envoy.md (g)), next to clients that read.
//
// Without the cap each of them would make Envoy hold its whole answer (docs/envoy.md (e)): 100 x 14.5 MB here.
// With it, the overload manager resets the streams holding the most memory when Envoy's heap nears the cap:
// Envoy stays under the cap, every non-reading client is cut, and the reading clients get their whole
// answers on their first leg.

import fs from 'node:fs';
import net from 'node:net';
import { request } from 'undici';
import { answerFor } from '../../tools/fake-engine/answer';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';

const MiB = 1024 * 1024;
const CAP = 256 * MiB;
const NON_READERS = 100;
/** ~14.5 MB of SSE each, as fast as the machine goes: 1.45 GB together, well past the cap. */
const NON_READER_TOKENS = 50_000;
const READERS = 5;
/**
 * The readers' answers last ~10 s or more, across the non-reader phase, and are under 1 MiB whole (~0.55 MB):
 * Envoy tracks, and may cut, only a stream that holds 1 MiB or more, which a reader cannot reach even when two
 * loaded cores keep it from reading for a while. (4,000 tokens, ~1.1 MB, got a starved reader cut once in CI.)
 */
const READER_TOKENS = 2000;
const BODY = chatBody();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rssBytes = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

describe('clients that do not read, against the memory cap', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // Stall timer above any CPU-starved pause of the readers' legs (2 cores, 100 answers in flight): a false
    // stall would switch a reader to a second leg, which is whole too but not "untouched".
    // Headers and first-delta budgets above the test's own: 100 answers of 50,000 tokens as fast as two shared
    // cores go can hold a late non-reader's first bytes past the 60 s defaults (a 504 `upstream_timeout` seen
    // in CI), and this test is about Envoy's memory, not about those timers.
    stack = await startTestStack({
      replicas: 1,
      maxHeapBytes: CAP,
      env: {
        LOG_LEVEL: 'info',
        STALL_IDLE_TIMEOUT_SECONDS: '15',
        UPSTREAM_HEADERS_TIMEOUT_SECONDS: '200',
        FIRST_DELTA_DEADLINE_SECONDS: '200',
      },
    });
  });
  afterAll(async () => stack?.stop());

  it('keeps Envoy under the cap, resets the non-readers and leaves the readers whole', async () => {
    // A new connection per admin call: a kept-alive one that Envoy closed meanwhile fails the next call
    // with ECONNRESET (seen under load).
    const admin = async (path: string): Promise<string> => {
      const r = await request(`${stack.envoy.adminUrl}${path}`, { reset: true });
      return r.body.text();
    };
    const stat = async (name: string): Promise<number> => {
      const text = await admin(`/stats?filter=^${name.replace(/\./g, '\\.')}$`);
      return Number(/: (\d+)$/m.exec(text)?.[1] ?? 0);
    };
    const heap = async () => Number(JSON.parse(await admin('/memory')).allocated);
    const rss0 = rssBytes(stack.envoy.pid);

    const readerIds = Array.from({ length: READERS }, () => newRequestId('reader'));
    const readers = readerIds.map((id) =>
      postChat(stack.url, BODY, { 'x-request-id': id, 'x-fake-answer-tokens': `0,${READER_TOKENS}`, 'x-fake-token-ms': '5' }),
    );
    await sleep(500); // the readers are streaming before the first non-reader arrives

    const port = Number(new URL(stack.url).port);
    const nonReaders = Array.from({ length: NON_READERS }, () => new NonReader(port, newRequestId('non-reader')));

    // Sample Envoy until every non-reader has been cut (or the budget is gone).
    let peakHeap = 0;
    let peakRss = 0;
    // Until every non-reader's answer is either all handed to Envoy (the sidecar's request ended) or cut.
    const until = Date.now() + 120_000;
    const ended = () => nonReaders.every((c) => stack.logs.some((l) => l.event === 'request_end' && l.request_id === c.id));
    while (Date.now() < until) {
      peakHeap = Math.max(peakHeap, await heap());
      peakRss = Math.max(peakRss, rssBytes(stack.envoy.pid));
      if (ended()) break;
      await sleep(200);
    }
    const readerResults = await Promise.all(readers);
    expect(stack.envoyExit).toBeUndefined(); // Envoy itself survived (its last output is printed if not)
    const nonReaderResults = await Promise.all(nonReaders.map((c) => c.readToEnd(30_000)));
    const ends = await Promise.all(nonReaders.map((c) => stack.waitForEnd(c.id, 30_000)));
    // Read once every client has its end: Envoy may still reset a stream whose whole answer the sidecar has
    // handed over (and logged) while Envoy holds its tail.
    const resets = await stat('envoy.overload_actions.reset_high_memory_stream.count');
    process.stderr.write(
      `non-reading clients: Envoy heap peak ${(peakHeap / MiB).toFixed(1)} MiB (cap ${CAP / MiB} MiB), ` +
        `VmRSS +${((peakRss - rss0) / MiB).toFixed(1)} MiB, ${resets} streams reset, ` +
        `non-readers read ${(nonReaderResults.reduce((n, r) => n + r.bytes, 0) / MiB).toFixed(1)} MiB once resumed (kernel socket buffers)\n`,
    );

    // Envoy stayed under the cap (the unbounded case holds 1.45 GB).
    expect(peakHeap).toBeLessThan(CAP);
    expect(peakRss - rss0).toBeLessThan(CAP);
    // The cap cuts the non-readers that hold the most of Envoy's memory, largest first, while the heap is
    // above half the cap; how many depends on how fast the answers arrive (two shared cores). Each cut one
    // ends without its last chunk; every other one is whole once it reads, and the sidecar recorded it
    // `completed`. A cut one was seen by the sidecar as its client going (`client-disconnected`), or, when
    // the sidecar had already handed Envoy the whole answer and Envoy was still holding its tail, `completed`:
    // the outcome says what the sidecar delivered to Envoy; Envoy's access log says what became of it.
    const cut = nonReaderResults.filter((r) => !r.complete);
    if (peakHeap > CAP / 2) expect(resets).toBeGreaterThan(0);
    expect(cut).toHaveLength(resets);
    nonReaderResults.forEach((r, i) => {
      if (r.status !== 200)
        process.stderr.write(
          `non-reader ${nonReaders[i].id}: HTTP ${r.status}: ${JSON.stringify(stack.logs.filter((l) => l.request_id === nonReaders[i].id))}\n`,
        );
    });
    for (const r of nonReaderResults) expect(r.status).toBe(200);
    ends.forEach((e, i) => {
      if (nonReaderResults[i].complete) expect(e).toMatchObject({ outcome: 'completed' });
      else expect(['client-disconnected', 'completed']).toContain(e.outcome);
    });
    // Envoy names every cut one in its access log: the front hop's line for it has the overload flag.
    const accessLog = stack.envoy.logs().split('\n');
    const cutIds = nonReaders.filter((_, i) => !nonReaderResults[i].complete).map((c) => c.id);
    const flaggedOm = cutIds.filter((id) => accessLog.some((l) => l.includes(`rid=${id} `) && /flags=\S*OM/.test(l)));
    expect(flaggedOm).toEqual(cutIds);
    // The readers were untouched: whole answers, on their first leg.
    const expected = answerFor(BODY.messages, { reasoning: 0, content: READER_TOKENS }).contentTokens.join('');
    const cutReaders = readerResults.filter((r) => r.transportError !== null || !r.done);
    if (cutReaders.length > 0)
      process.stderr.write(`Envoy counters:\n${await admin('/stats?usedonly&filter=flood|reset|overload|timeout')}\n`);
    readerResults.forEach((r, i) => {
      if (r.transportError === null && r.done) return;
      // What Envoy and the sidecar saw of a reader that was cut: the lines that tell why.
      const id = readerIds[i];
      const envoyLines = stack.envoy
        .logs()
        .split('\n')
        .filter((l) => l.includes(id) || /\]\[(warning|error|critical)\]/.test(l));
      process.stderr.write(
        `reader ${id} cut (${r.transportError}) after ${r.content.length} chars:\n` +
          `${envoyLines.slice(-20).join('\n')}\n${JSON.stringify(stack.logs.filter((l) => l.request_id === id))}\n`,
      );
    });
    for (const r of readerResults) {
      expect(r.status).toBe(200);
      expect(r.transportError).toBeNull();
      expect(r.errors).toEqual([]);
      expect(r.content === expected).toBe(true);
      expect(r.finishReasons).toEqual(['stop']);
      expect(r.done).toBe(true);
    }
    for (const id of readerIds) expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed', legs: 1 });
  }, 240_000);
});

/** A raw HTTP/1.1 client that sends a streamed chat request and reads nothing until readToEnd(). */
class NonReader {
  private readonly socket: net.Socket;
  private readonly parts: Buffer[] = [];
  private readonly closed: Promise<void>;

  constructor(
    port: number,
    readonly id: string,
  ) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.pause();
    this.closed = new Promise((resolve) => {
      this.socket.on('data', (c: Buffer) => this.parts.push(c));
      this.socket.on('error', () => resolve()); // a reset connection: what the cap does
      this.socket.on('close', () => resolve());
    });
    const body = JSON.stringify(BODY);
    const head = {
      host: 'gateway',
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'x-request-id': id,
      'x-fake-answer-tokens': `0,${NON_READER_TOKENS}`,
      'x-fake-token-ms': '0',
      'x-fake-burst': '200',
    };
    this.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\n${Object.entries(head)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n${body}`,
    );
  }

  /** Reads what Envoy still has for us, until the connection ends (or timeoutMs). */
  async readToEnd(timeoutMs: number): Promise<{ status: number; bytes: number; complete: boolean }> {
    this.socket.resume();
    const timer = setTimeout(() => this.socket.destroy(), timeoutMs);
    await this.closed;
    clearTimeout(timer);
    this.socket.destroy();
    const raw = Buffer.concat(this.parts);
    const tail = raw.subarray(-32).toString('latin1');
    return {
      status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw.subarray(0, 16).toString('latin1'))?.[1]),
      bytes: raw.length,
      // The last chunk of a chunked body: the answer was delivered whole.
      complete: tail.endsWith('\r\n0\r\n\r\n'),
    };
  }
}
