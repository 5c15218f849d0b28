// The fake engine's prefill time: --prefill-ms, a fixed wait before a chat answer starts (a replica whose prefill
// does not depend on its load: a fast pool), and the slow-prefill mode --prefill-ms-per-concurrent, a replica
// whose first token comes later the more prefills it is already running, as a real engine's does when
// re-prefills pile up on it after a crash (the prompt compute is shared). Both 0 by default: the first token
// then comes at the token interval.

/** One prefill admitted: how long until its first token, and a `done` to call then (or when it ends first). */
export interface Prefill {
  readonly delayMs: number;
  done(): void;
}

/** Prefills in progress on one replica. */
export class PrefillLoad {
  private running = 0;

  constructor(
    private readonly msPerConcurrent: number,
    private readonly fixedMs = 0,
  ) {}

  get inProgress(): number {
    return this.running;
  }

  /** A prefill arriving now waits fixedMs + msPerConcurrent x the prefills in progress, itself included. */
  begin(): Prefill {
    const fixed = Number.isFinite(this.fixedMs) ? Math.max(this.fixedMs, 0) : 0;
    if (!(this.msPerConcurrent > 0)) return { delayMs: fixed, done: () => undefined };
    this.running++;
    let finished = false;
    return {
      delayMs: fixed + this.msPerConcurrent * this.running,
      done: () => {
        if (finished) return;
        finished = true;
        this.running--;
      },
    };
  }
}
