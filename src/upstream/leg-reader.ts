// Reads one leg's SSE body as whole events, with an idle timer the caller chooses per read.
//
// An idle timeout does not cancel the pending read: the caller decides whether silence means "stalled" or
// "keep waiting" and may simply call next() again. fence() ends the leg for good: the body is destroyed
// (undici closes the socket, so the replica sees the client go and frees the slot) and anything the dead
// leg still had in flight is never surfaced.
import type { Readable } from 'node:stream';
import { SseParser, type SseEvent } from '../sse/parser';

/** The largest single SSE event a leg may send (a chat chunk is a few hundred bytes). */
export const MAX_PARTIAL_EVENT_BYTES = 1024 * 1024;

export type LegRead =
  | { type: 'events'; events: SseEvent[] }
  | { type: 'idle' }
  | { type: 'end' }
  | { type: 'reset'; error: unknown };

export class LegReader {
  private readonly parser = new SseParser();
  private readonly it: AsyncIterator<Buffer>;
  private pending: Promise<IteratorResult<Buffer>> | null = null;
  private fenced = false;
  /** Bytes read from this leg, and whether any arrived (stall timers start at the first byte). */
  bytes = 0;

  constructor(private readonly body: Readable) {
    this.it = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  get anyBytes(): boolean {
    return this.bytes > 0;
  }

  /** Waits for the next complete events; timeoutMs <= 0 waits without limit. */
  async next(timeoutMs: number): Promise<LegRead> {
    for (;;) {
      if (this.fenced) return { type: 'end' };
      this.pending ??= this.it.next();
      let timer: NodeJS.Timeout | undefined;
      const idle = new Promise<'idle'>((resolve) => {
        if (timeoutMs > 0) timer = setTimeout(() => resolve('idle'), timeoutMs);
      });
      let r: IteratorResult<Buffer> | 'idle';
      try {
        r = await Promise.race([this.pending, idle]);
      } catch (error) {
        this.pending = null;
        return { type: 'reset', error };
      } finally {
        if (timer) clearTimeout(timer);
      }
      if (r === 'idle') return { type: 'idle' };
      this.pending = null;
      if (r.done) return { type: 'end' };
      this.bytes += r.value.length;
      const events = this.parser.push(r.value);
      if (events.length) return { type: 'events', events };
      // An "event" that never ends is not SSE: bounded memory, treated like a broken connection.
      if (this.parser.bufferedBytes > MAX_PARTIAL_EVENT_BYTES) return { type: 'reset', error: new Error(`SSE event larger than ${MAX_PARTIAL_EVENT_BYTES} bytes`) };
      // A partial event: keep reading under the same idle budget semantics (fresh timer is fine: bytes
      // did arrive, so the leg is not idle).
    }
  }

  /** Bytes of an event that the leg never finished (dropped, never delivered). */
  get partialBytes(): number {
    return this.parser.bufferedBytes;
  }

  fence(): void {
    if (this.fenced) return;
    this.fenced = true;
    // The pending read will reject with an abort error; nobody awaits it any more.
    this.pending?.catch(() => undefined);
    this.body.on('error', () => undefined);
    this.body.destroy();
  }
}
