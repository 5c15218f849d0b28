// Reads one leg's SSE body as whole events, with an idle timer the caller chooses per read.
//
// An idle timeout does not cancel anything: the caller decides whether silence means "stalled" or "keep
// waiting" and may simply call next() again. fence() ends the leg for good: the body is destroyed (undici
// closes the socket, so the replica sees the client go and frees the slot) and anything the dead leg still
// had in flight is never surfaced.
//
// Why 'data' callbacks and not `for await`: an async iterator costs a promise and a microtask per chunk on
// the hottest path (measured: docs/performance.md). Chunks queue here while the caller is busy (writing to
// a slow client, say) and are handed over together on the next read; past a few queued chunks the body is
// paused, so backpressure still reaches the upstream socket.
import type { Readable } from 'node:stream';
import { SseParser, type SseEvent } from '../sse/parser';

/** The largest single SSE event a leg may send (a chat chunk is a few hundred bytes). */
export const MAX_PARTIAL_EVENT_BYTES = 1024 * 1024;

/** Chunks queued before the body is paused (backpressure to the upstream). */
const QUEUE_HIGH_WATER = 16;

export type LegRead =
  | { type: 'events'; events: SseEvent[] }
  | { type: 'idle' }
  | { type: 'end' }
  | { type: 'reset'; error: unknown };

export class LegReader {
  private readonly parser = new SseParser();
  private queue: Buffer[] = [];
  private ended = false;
  private failure: { error: unknown } | null = null;
  private wake: (() => void) | null = null;
  private fenced = false;
  /** Bytes read from this leg, and whether any arrived (stall timers start at the first byte). */
  bytes = 0;

  constructor(private readonly body: Readable) {
    body.on('data', (chunk: Buffer) => {
      if (this.fenced) return;
      this.queue.push(chunk);
      if (this.queue.length >= QUEUE_HIGH_WATER) body.pause();
      this.notify();
    });
    body.on('end', () => {
      this.ended = true;
      this.notify();
    });
    body.on('error', (error: unknown) => {
      this.failure ??= { error };
      this.notify();
    });
    body.on('close', () => {
      // Closed without 'end' or 'error' (destroyed underneath us): the leg is broken.
      if (!this.ended && !this.failure) this.failure = { error: new Error('upstream body closed before its end') };
      this.notify();
    });
  }

  get anyBytes(): boolean {
    return this.bytes > 0;
  }

  /** Waits for the next complete events; timeoutMs <= 0 waits without limit. */
  async next(timeoutMs: number): Promise<LegRead> {
    for (;;) {
      if (this.fenced) return { type: 'end' };
      if (this.queue.length) {
        const chunks = this.queue;
        this.queue = [];
        if (this.body.isPaused() && !this.ended) this.body.resume();
        let events: SseEvent[] = [];
        for (const c of chunks) {
          this.bytes += c.length;
          const got = this.parser.push(c);
          events = events.length ? events.concat(got) : got;
        }
        if (events.length) return { type: 'events', events };
        // An "event" that never ends is not SSE: bounded memory, treated like a broken connection.
        if (this.parser.bufferedBytes > MAX_PARTIAL_EVENT_BYTES) return { type: 'reset', error: new Error(`SSE event larger than ${MAX_PARTIAL_EVENT_BYTES} bytes`) };
        continue;
      }
      if (this.failure) return { type: 'reset', error: this.failure.error };
      if (this.ended) return { type: 'end' };
      const idle = await new Promise<boolean>((resolve) => {
        const timer = timeoutMs > 0 ? setTimeout(() => resolve(true), timeoutMs) : undefined;
        this.wake = () => {
          if (timer) clearTimeout(timer);
          resolve(false);
        };
      });
      this.wake = null;
      if (idle) return { type: 'idle' };
    }
  }

  /** Bytes of an event that the leg never finished (dropped, never delivered). */
  get partialBytes(): number {
    return this.parser.bufferedBytes;
  }

  fence(): void {
    if (this.fenced) return;
    this.fenced = true;
    this.queue = [];
    // A leg that ended cleanly has nothing to abort (destroying it would only build an abort error).
    if (!this.ended || this.body.readableLength > 0) {
      this.body.on('error', () => undefined);
      this.body.destroy();
    }
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}
