// One cancellation signal per request, with a typed cause: the client left, or the drain deadline
// (Sidecar.drain) shut the request down. Everything the request waits on subscribes to it (the leg in flight,
// the backoff before a re-run, the wait for a re-prefill slot, the /tokenize call, the first-delta timers), so
// a cancellation ends each `await` at once, including one that starts after it: a subscriber that arrives
// late is called at once, and so is an AbortSignal asked for late.
//
// Not an AbortController per request on purpose (docs/performance.md: the hot path builds none); the
// standard AbortSignal is made only for the APIs that take one (undici, admission), on first use.

export type CancelCause = 'client-gone' | 'shutdown';

const NOTHING = () => undefined;

export class RequestCancellation {
  private why: CancelCause | undefined;
  private listeners: Array<(cause: CancelCause) => void> = [];
  private controller: AbortController | undefined;

  get cause(): CancelCause | undefined {
    return this.why;
  }

  get cancelled(): boolean {
    return this.why !== undefined;
  }

  /**
   * The first call fires every subscriber. A client that leaves after a shutdown still changes the cause (then
   * nothing more may be written); nothing changes it back.
   */
  cancel(cause: CancelCause): void {
    if (this.why === cause || this.why === 'client-gone') return;
    const first = this.why === undefined;
    this.why = cause;
    if (!first) return;
    this.controller?.abort(cause);
    const listeners = this.listeners;
    this.listeners = [];
    for (const fn of listeners) fn(cause);
  }

  /** Calls `fn` once at the cancellation (at once if it already happened); the result unsubscribes. */
  onCancel(fn: (cause: CancelCause) => void): () => void {
    if (this.why !== undefined) {
      fn(this.why);
      return NOTHING;
    }
    this.listeners.push(fn);
    return () => {
      const i = this.listeners.indexOf(fn);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /** The same cancellation as an AbortSignal (its reason is the cause), for APIs that take one. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.why !== undefined) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /** Waits `ms` (a backoff before a re-run); the cancellation ends the wait at once. */
  sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.cancelled) return Promise.resolve();
    return new Promise((resolve) => {
      let stop: () => void = NOTHING;
      const timer = setTimeout(() => {
        stop();
        resolve();
      }, ms);
      stop = this.onCancel(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
