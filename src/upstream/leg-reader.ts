// Reads one leg's SSE body as whole events, with an idle timer the caller chooses per read.
//
// An idle timeout does not cancel anything: the caller decides whether silence means "stalled" or "keep
// waiting" and may simply call next() again. fence() ends the leg for good: the leg is aborted (undici
// closes the socket, so the replica sees the client go and frees the slot) and anything the dead leg still
// had in flight is never surfaced.
//
// Chunks arrive as plain calls from the leg's dispatch handler (leg-body.ts), with no Readable in between:
// this is the hottest path of the gateway (docs/performance.md). They queue here while the caller is busy
// (writing to a slow client, say) and are handed over together on the next read; past a few queued chunks
// the upstream socket is paused, so backpressure still reaches the replica.
import { type SseEvent, SseParser } from '../sse/parser';
import type { LegBody, LegBodySink } from './leg-body';

/** The largest single SSE event a leg may send (a chat chunk is a few hundred bytes). */
export const MAX_PARTIAL_EVENT_BYTES = 1024 * 1024;

/** Chunks queued before the upstream socket is paused. */
const QUEUE_HIGH_WATER = 16;

export type LegRead = { type: 'events'; events: SseEvent[] } | { type: 'idle' } | { type: 'end' } | { type: 'reset'; error: unknown };

export class LegReader implements LegBodySink {
  /** Comments and blank lines cost no memory per byte (issue 39: an engine flooding keep-alives). */
  private readonly parser = new SseParser(true);
  private queue: Buffer[] = [];
  private ended = false;
  private failure: { error: unknown } | null = null;
  private wake: ((idle: boolean) => void) | null = null;
  private fenced = false;
  /** Bytes read from this leg, and whether any arrived (stall timers start at the first byte). */
  bytes = 0;

  constructor(private readonly body: LegBody) {
    body.attach(this);
  }

  // LegBodySink: called by the leg body.
  data(chunk: Buffer): boolean {
    if (this.fenced) return false;
    this.queue.push(chunk);
    this.notify();
    return this.queue.length < QUEUE_HIGH_WATER;
  }

  end(): void {
    this.ended = true;
    this.notify();
  }

  error(error: unknown): void {
    this.failure ??= { error };
    this.notify();
  }

  get anyBytes(): boolean {
    return this.bytes > 0;
  }

  /**
   * Waits for the next complete events; timeoutMs <= 0 waits without limit. The limit is one deadline for the
   * call: bytes that do not complete an event (a partial event trickling in) do not push it back.
   */
  async next(timeoutMs: number): Promise<LegRead> {
    const until = timeoutMs > 0 ? Date.now() + timeoutMs : 0;
    for (;;) {
      if (this.fenced) return { type: 'end' };
      if (this.queue.length) {
        let events: SseEvent[] = [];
        for (const c of this.takeQueued()) {
          const got = this.parser.push(c);
          if (events.length === 0) events = got;
          else for (const e of got) events.push(e);
        }
        if (events.length) return { type: 'events', events };
        // An "event" that never ends is not SSE: bounded memory, treated like a broken connection.
        if (this.parser.bufferedBytes > MAX_PARTIAL_EVENT_BYTES)
          return { type: 'reset', error: new Error(`SSE event larger than ${MAX_PARTIAL_EVENT_BYTES} bytes`) };
        continue;
      }
      if (this.failure) return { type: 'reset', error: this.failure.error };
      if (this.ended) return { type: 'end' };
      const left = until ? until - Date.now() : 0;
      if (until && left <= 0) return { type: 'idle' };
      if (await this.waitForChunk(left)) return { type: 'idle' };
    }
  }

  /** Raw bytes as they come, for bodies that are not SSE (a passed-through error answer); no idle limit. */
  async nextChunks(): Promise<{ type: 'bytes'; bytes: Buffer } | { type: 'end' } | { type: 'reset'; error: unknown }> {
    for (;;) {
      if (this.fenced) return { type: 'end' };
      if (this.queue.length) {
        const chunks = this.takeQueued();
        return { type: 'bytes', bytes: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks) };
      }
      if (this.failure) return { type: 'reset', error: this.failure.error };
      if (this.ended) return { type: 'end' };
      await this.waitForChunk(0);
    }
  }

  /** Hands over the queued chunks (counted) and lets the upstream socket flow again. */
  private takeQueued(): Buffer[] {
    const chunks = this.queue;
    this.queue = [];
    this.body.resume();
    for (const c of chunks) this.bytes += c.length;
    return chunks;
  }

  /** Resolves true when timeoutMs passed with nothing new, false as soon as something arrived. */
  private waitForChunk(timeoutMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const wake = (idle: boolean) => {
        if (timer && !idle) clearTimeout(timer);
        resolve(idle);
      };
      // A timer runs before the event loop polls sockets. When the loop was busy (a sidecar under a burst),
      // the timer fires late and the replica's next bytes may already sit unread in the socket: the verdict
      // waits one poll phase (setImmediate runs after it), so the sidecar does not take its own slowness for
      // a stalled replica and start a needless recovery leg. Only this wait's verdict: a later wait is not
      // woken by it.
      const timer = timeoutMs > 0 ? setTimeout(() => setImmediate(() => this.wake === wake && this.notify(true)), timeoutMs) : undefined;
      this.wake = wake;
    });
  }

  /** Empty `data:` events the parser skipped (at most one per chunk is read; each counts as malformed). */
  get emptyDataSkipped(): number {
    return this.parser.emptyDataSkipped;
  }

  /** Comment-only events the parser skipped (at most one per chunk is read: src/sse/keep-alives.ts). */
  get commentsSkipped(): number {
    return this.parser.commentsSkipped;
  }

  /** Bytes of an event that the leg never finished (dropped, never delivered). */
  get partialBytes(): number {
    return this.parser.bufferedBytes;
  }

  fence(): void {
    if (this.fenced) return;
    this.fenced = true;
    this.queue = [];
    // A leg that ended cleanly has nothing to abort; one still open is aborted.
    this.body.destroy();
    this.notify();
  }

  private notify(idle = false): void {
    const w = this.wake;
    this.wake = null;
    w?.(idle);
  }
}
