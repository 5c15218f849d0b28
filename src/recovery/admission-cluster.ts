// Recovery admission across cluster workers (WORKERS > 1): the primary holds the one AdmissionAuthority and
// the workers ask it over Node's cluster IPC, so RECOVERY_MAX_CONCURRENT means "re-prefills in flight for the
// whole sidecar", as with one process, and the brake sees every worker's failing legs. A request costs one
// IPC round trip (well under a millisecond), and only recoveries ask: the relaying path never does.
//
// The adaptive limit's baseline is leg 1 first-token latency while no recovery is in flight or waiting
// anywhere. The workers batch their samples (one message per 250 ms), so they cannot be judged when they
// arrive: the primary tells every worker when that state changes, and a worker keeps only samples taken
// while it held.
import type { Worker } from 'node:cluster';
import type {
  Admission,
  AdmissionAuthority,
  AdmissionTicket,
  RecoveryAdmission,
  RefusalReason,
  ReprefillResult,
  ReprefillSlot,
} from './admission';

/** Worker -> primary. */
export type AdmissionRequestMessage =
  | { type: 'admission'; op: 'request'; id: number; streams: number }
  | { type: 'admission'; op: 'cancel'; id: number }
  | { type: 'admission'; op: 'settle'; id: number; result: ReprefillResult }
  | { type: 'admission'; op: 'streams'; streams: number }
  /** Leg 1 first attempts' first-token latency since the last report (the adaptive limit's baseline). */
  | { type: 'admission'; op: 'first-token'; meanMs: number; count: number };

/** Primary -> worker: the answer to a request (a slot stays in the primary until settled). */
export type AdmissionAnswerMessage = {
  type: 'admission';
  op: 'answer';
  id: number;
  answer: { admitted: true; waitedMs: number } | { admitted: false; reason: RefusalReason; retryAfterMs: number; waitedMs: number };
};

/** Primary -> worker: recoveries in flight or waiting anywhere (quiet: none), sent on every change. */
export type AdmissionQuietMessage = { type: 'admission'; op: 'quiet'; quiet: boolean };

export type AdmissionToWorker = AdmissionAnswerMessage | AdmissionQuietMessage;

const STREAMS_REPORT_MS = 250;

/** The primary's side: one authority for all workers; a worker that dies gives back what it held. */
export class AdmissionHub {
  /** Per worker: streams it reported, tickets waiting, slots held (by the worker's request id). */
  private readonly workers = new Map<
    number,
    { streams: number; waiting: Map<number, AdmissionTicket>; held: Map<number, ReprefillSlot> }
  >();

  /** `broadcast`: sends a message to every worker (the quiet state, see the header). */
  constructor(
    makeAuthority: (activeStreams: () => number) => AdmissionAuthority,
    broadcast: (m: AdmissionQuietMessage) => void = () => undefined,
  ) {
    this.authority = makeAuthority(() => {
      let n = 0;
      for (const w of this.workers.values()) n += w.streams;
      return n;
    });
    this.authority.onQuietChange(() => broadcast(this.quietMessage()));
  }

  /** The quiet state now: for a worker that has just started (it assumes quiet until told). */
  quietMessage(): AdmissionQuietMessage {
    return { type: 'admission', op: 'quiet', quiet: this.authority.quiet };
  }

  readonly authority: AdmissionAuthority;

  /** Handles one message from a worker; returns false when it is not an admission message. */
  onMessage(worker: Worker, m: AdmissionRequestMessage): boolean {
    if (m?.type !== 'admission') return false;
    const w = this.state(worker.id);
    switch (m.op) {
      case 'streams':
        w.streams = m.streams;
        return true;
      case 'first-token':
        this.authority.observeQuietFirstTokens(m.meanMs, m.count);
        return true;
      case 'request': {
        w.streams = m.streams;
        const ticket = this.authority.request();
        w.waiting.set(m.id, ticket);
        void ticket.result.then((a) => {
          w.waiting.delete(m.id);
          if (a.admitted) w.held.set(m.id, a.slot);
          const answer: AdmissionAnswerMessage = {
            type: 'admission',
            op: 'answer',
            id: m.id,
            answer: a.admitted
              ? { admitted: true, waitedMs: a.waitedMs }
              : { admitted: false, reason: a.reason, retryAfterMs: a.retryAfterMs, waitedMs: a.waitedMs },
          };
          if (!worker.isConnected()) return this.release(worker.id);
          worker.send(answer);
        });
        return true;
      }
      case 'cancel':
        w.waiting.get(m.id)?.cancel();
        return true;
      case 'settle':
        w.held.get(m.id)?.settle(m.result);
        w.held.delete(m.id);
        return true;
    }
  }

  /** A worker exited: its waiting requests are cancelled and its slots freed (neither a success nor a failure). */
  release(workerId: number): void {
    const w = this.workers.get(workerId);
    if (!w) return;
    this.workers.delete(workerId);
    for (const t of w.waiting.values()) t.cancel();
    for (const s of w.held.values()) s.settle('neutral');
  }

  private state(id: number) {
    let w = this.workers.get(id);
    if (!w) {
      w = { streams: 0, waiting: new Map(), held: new Map() };
      this.workers.set(id, w);
    }
    return w;
  }
}

/**
 * A worker's side: asks the primary; reports its stream count for RECOVERY_BUDGET_PERCENT and, batched on the
 * same timer, its leg 1 first-token latencies (no IPC message per request on the relaying path).
 */
export class RemoteAdmission implements RecoveryAdmission {
  private nextId = 0;
  private readonly pending = new Map<number, (a: Admission) => void>();
  private reported = -1;
  private firstTokenSumMs = 0;
  private firstTokenCount = 0;
  /** No recovery in flight or waiting anywhere, as the primary last said, and none of ours (requested, held). */
  private clusterQuiet = true;
  /** Our requests from asking until refused or until their slot is settled (by request id). */
  private readonly own = new Set<number>();

  constructor(
    private readonly streams: { readonly active: number },
    private readonly send: (m: AdmissionRequestMessage) => boolean,
  ) {
    setInterval(() => {
      if (this.firstTokenCount > 0) {
        this.send({
          type: 'admission',
          op: 'first-token',
          meanMs: this.firstTokenSumMs / this.firstTokenCount,
          count: this.firstTokenCount,
        });
        this.firstTokenSumMs = 0;
        this.firstTokenCount = 0;
      }
      if (this.streams.active === this.reported) return;
      this.reported = this.streams.active;
      this.send({ type: 'admission', op: 'streams', streams: this.reported });
    }, STREAMS_REPORT_MS).unref();
  }

  /** Kept only while quiet: the primary's state, and our own requests before it has heard of them. */
  observeFirstToken(ms: number): void {
    if (!this.clusterQuiet || this.own.size > 0) return;
    this.firstTokenSumMs += ms;
    this.firstTokenCount++;
  }

  /** A message from the primary. */
  receive(m: AdmissionToWorker): void {
    if (m.op === 'quiet') this.clusterQuiet = m.quiet;
    else this.answer(m);
  }

  request(signal?: AbortSignal): AdmissionTicket {
    const id = ++this.nextId;
    this.own.add(id);
    const result = new Promise<Admission>((resolve) => this.pending.set(id, resolve));
    const cancel = () => this.pending.has(id) && this.send({ type: 'admission', op: 'cancel', id });
    if (signal?.aborted || !this.send({ type: 'admission', op: 'request', id, streams: this.streams.active })) {
      // Cancelled already, or no primary to ask (it is gone; the worker exits): no recovery.
      this.answer({
        type: 'admission',
        op: 'answer',
        id,
        answer: { admitted: false, reason: 'cancelled', retryAfterMs: 1000, waitedMs: 0 },
      });
    }
    if (signal && this.pending.has(id)) {
      // The request's cancellation (client gone, shutdown) gives up the wait, as the ticket's cancel does.
      signal.addEventListener('abort', cancel, { once: true });
      void result.then(() => signal.removeEventListener('abort', cancel));
    }
    return { result, cancel };
  }

  /** The primary's answer. A slot granted after its request was given up on is handed straight back. */
  answer(m: AdmissionAnswerMessage): void {
    const resolve = this.pending.get(m.id);
    this.pending.delete(m.id);
    const a = m.answer;
    if (!a.admitted) {
      this.own.delete(m.id);
      return resolve?.(a);
    }
    let done = false;
    const slot: ReprefillSlot = {
      settle: (result) => {
        if (done) return;
        done = true;
        this.own.delete(m.id);
        this.send({ type: 'admission', op: 'settle', id: m.id, result });
      },
    };
    if (!resolve) return slot.settle('neutral');
    resolve({ admitted: true, slot, waitedMs: a.waitedMs });
  }
}
