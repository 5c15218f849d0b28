// One leg's response, taken straight from undici's dispatcher as a handler (onConnect, onHeaders, onData,
// onComplete, onError) instead of through `request()`'s Readable body.
//
// Why: every relayed token passes here. A Readable costs a buffer list, nextTick'd 'readable'/'readMore'
// passes and event emission per chunk (measured: docs/performance.md); a handler gets the socket's chunk in
// a plain call and hands it on in another. Backpressure stays: a consumer that says "enough" pauses the
// socket (undici's own pause/resume), and chunks that arrive before a consumer attaches are kept, bounded by
// that same pause.

import type { Dispatcher } from 'undici';
import { util as undiciUtil } from 'undici';
import { ERROR_CODES, GatewayError } from '../errors';

/** Where body chunks go once someone reads the leg. `data` returns false to pause the upstream socket. */
export interface LegBodySink {
  data(chunk: Buffer): boolean;
  end(): void;
  error(error: unknown): void;
}

export type LegHeaders = Record<string, string | string[] | undefined>;

/** Chunks kept before a consumer attaches, past which the socket is paused. */
const PENDING_HIGH_WATER = 16;

export class LegBody {
  private sink: LegBodySink | null = null;
  private pending: Buffer[] = [];
  private state: 'open' | 'ended' | 'failed' = 'open';
  private failure: unknown = null;
  private paused = false;
  private destroyed = false;
  private resumeSocket: (() => void) | null = null;
  private abortRequest: ((err: Error) => void) | null = null;

  /** Set by the dispatch handler: undici's abort for this request (at connect) and its resume (at the head). */
  bindAbort(abort: (err: Error) => void): void {
    this.abortRequest = abort;
    if (this.destroyed) abort(new LegAbortedError());
  }

  bindResume(resume: () => void): void {
    this.resumeSocket = resume;
  }

  /** Called by the handler; returns false to pause the socket. */
  push(chunk: Buffer): boolean {
    if (this.destroyed) return false;
    if (this.sink) {
      const more = this.sink.data(chunk);
      if (!more) this.paused = true;
      return more;
    }
    this.pending.push(chunk);
    if (this.pending.length >= PENDING_HIGH_WATER) {
      this.paused = true;
      return false;
    }
    return true;
  }

  finish(): void {
    if (this.state !== 'open') return;
    this.state = 'ended';
    if (this.sink && !this.destroyed) this.sink.end();
  }

  fail(error: unknown): void {
    if (this.state !== 'open') return;
    this.state = 'failed';
    this.failure = error;
    if (this.sink && !this.destroyed) this.sink.error(error);
  }

  /** Starts delivering to `sink`: first what arrived before, then the end or failure if already known. */
  attach(sink: LegBodySink): void {
    if (this.sink) throw new Error('leg body already has a reader');
    this.sink = sink;
    const pending = this.pending;
    this.pending = [];
    let more = true;
    for (const c of pending) more = sink.data(c) && more;
    if (this.state === 'ended') sink.end();
    else if (this.state === 'failed') sink.error(this.failure);
    else if (!more) this.paused = true;
    else if (this.paused) this.resume();
  }

  /** The consumer has room again. */
  resume(): void {
    if (!this.paused || this.destroyed) return;
    this.paused = false;
    this.resumeSocket?.();
  }

  /**
   * Ends the leg for good: an unfinished response is aborted (undici closes the socket, so the replica sees
   * its client go and frees the slot); nothing more is delivered.
   */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.pending = [];
    if (this.state !== 'open') return;
    this.state = 'failed';
    const err = new LegAbortedError();
    this.failure = err;
    this.abortRequest?.(err);
    // A reader waiting for the next chunk learns it now, not at its next idle timer (a client that left
    // while the leg was silent used to hold the request until STALL_IDLE_TIMEOUT_SECONDS).
    this.sink?.error(err);
  }

  /** Reads the whole body, keeping at most `limit` bytes (error bodies); a broken body keeps what came. */
  readAll(limit: number): Promise<Buffer> {
    return new Promise((resolve) => {
      const parts: Buffer[] = [];
      let n = 0;
      const done = () => resolve(Buffer.concat(parts));
      this.attach({
        data: (c) => {
          if (n < limit) parts.push(n + c.length > limit ? c.subarray(0, limit - n) : c);
          n += c.length;
          return true;
        },
        end: done,
        error: done,
      });
    });
  }
}

export class LegAbortedError extends GatewayError {
  readonly code = ERROR_CODES.legAborted;
  constructor() {
    super('leg aborted by the gateway');
  }
}

/** The dispatch handler for one leg: resolves with the response head, then feeds its LegBody. */
export class LegDispatchHandler implements Dispatcher.DispatchHandler {
  readonly body = new LegBody();
  private started = false;

  constructor(
    private readonly cancel: { readonly aborted: boolean },
    private readonly onHead: (status: number, headers: LegHeaders, body: LegBody) => void,
    private readonly onFail: (error: unknown) => void,
  ) {}

  onConnect(abort: (err?: Error) => void): void {
    this.body.bindAbort(abort);
    if (this.cancel.aborted) this.body.destroy();
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true; // 1xx: undici keeps reading for the final head
    this.started = true;
    this.body.bindResume(resume);
    this.onHead(statusCode, undiciUtil.parseHeaders(rawHeaders) as LegHeaders, this.body);
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.body.push(chunk);
  }

  onComplete(): void {
    this.body.finish();
  }

  onError(error: Error): void {
    if (this.started) this.body.fail(error);
    else this.onFail(error);
  }
}
