// The whole life of one in-scope streaming chat completion whose response the sidecar originates, top-down:
// run() -> leg 1 attempts (re-run whole before the first delta) -> the commit point -> on a failure after it,
// continuation legs from the delivered text, or the interruption event. This module owns the client side:
// the state (request-state.ts, changed only by move()), the tracker of what was delivered, the only
// ClientSide (client-side.ts), and how the request ends: finish(ending) records the Ending and delivers it,
// once. Every other module here is a step that returns a value (leg1/: attempt, retry; src/continuation/; give-up;
// and the relays, whose bytes come back through deliver()) or an adapter (legs/leg-sender, admit, client-side,
// verbatim); every decision is a pure function in src/recovery/.
//
// Every leg is fenced when superseded: cancelLeg() aborts it (the replica frees the slot) and no byte it still
// sends reaches the client. A client that leaves and the drain deadline are one cancellation (cancellation.ts).

import { decideAfterLeg1Failure, runContinuationLeg } from '../continuation/continuation';
import { withDecisionEvents } from '../obs/decision-events';
import type { Decision } from '../obs/decisions';
import type { Logger } from '../obs/logger';
import { NO_TRACING, type RequestTrace } from '../obs/tracing';
import { causeOf } from '../recovery/give-up-detail';
import { StreamTracker } from '../sse/tracker';
import { RECOVERY_WAIT_COMMENT, RecoverySlot } from './admit';
import { RequestCancellation } from './cancellation';
import { ClientSide, type ClientWire } from './client-side';
import type { GatewayContext, InScopeRequest } from './context';
import { type Ending, endingForCancel, finalResponse, type Outcome, outcomeOf, stateFor } from './ending';
import { internalError, logInterruption } from './give-up';
import { startLeg1Attempt } from './leg1/leg1-attempt';
import { relayLeg1 } from './leg1/leg1-relay';
import { retryOrGiveUp } from './leg1/leg1-retry';
import type { LegFailure, LegOutcome, Outgoing } from './legs/leg-loop';
import { LegSender } from './legs/leg-sender';
import { newFacts, type PhaseSnapshot, phaseOf, reportRequestEnd, transitionRecord } from './request-record';
import { canMove, IllegalTransitionError, isCommitted, type RequestState } from './request-state';
import { type RequestActions, RequestView } from './request-view';

export class OriginatedResponse {
  private current: RequestState = 'prefill';
  /** How the request ended (finish()); the outcome is derived from it. */
  private ending: Ending | undefined;
  private tracker: StreamTracker;
  /** What the request records of itself as it goes (request-record.ts): its records and its end read it. */
  private readonly facts = newFacts();
  private readonly client: ClientSide;
  private readonly sender: LegSender;
  private readonly slot: RecoverySlot;
  /** The request as its steps see it (request-view.ts). */
  private readonly view: RequestView;
  private readonly log: Logger;
  private readonly trace: RequestTrace;
  /** The client left, or the drain deadline shut the request down. */
  readonly cancellation = new RequestCancellation();

  constructor(
    private readonly ctx: GatewayContext,
    wire: ClientWire,
    req: InScopeRequest,
  ) {
    this.client = new ClientSide(wire);
    this.tracker = new StreamTracker(ctx.config.maxContinuationPrefixBytes);
    this.trace = (ctx.tracing ?? NO_TRACING).request(req.clientHeaders, req.payload.model, req.payload.max_tokens);
    // Its decision records are also the request span's events (src/obs/decision-events.ts).
    const child = ctx.log.child({ request_id: req.clientHeaders['x-request-id'] });
    this.log = withDecisionEvents(child, this.trace, ctx.tracing?.enabled === true);
    this.sender = new LegSender(ctx, req, this.trace, this.cancellation, this.facts.started);
    this.slot = new RecoverySlot(ctx, this.log, this.cancellation);
    this.view = new RequestView(ctx, req, this.facts, this.sender, this.log, this.trace, this.cancellation, this.actions());
    // The leg in flight is the first thing a cancellation stops (openLeg refuses new ones after it).
    this.cancellation.onCancel(() => this.sender.cancel());
  }

  get state(): RequestState {
    return this.current;
  }

  /** Past the commit point: the first delta (and everything before it) reached the client. */
  get committed(): boolean {
    return isCommitted(this.current);
  }

  /** request_end's outcome: derived from the Ending; `in-progress` until there is one. */
  get outcome(): Outcome | 'in-progress' {
    return this.ending ? outcomeOf(this.ending) : 'in-progress';
  }

  private get gone(): boolean {
    return this.cancellation.cause === 'client-gone';
  }

  /** The output the client has (reasoning, content, tool calls), as a token estimate. */
  private delivered(): number {
    return this.tracker.deliveredTokenEstimate(this.ctx.config.cjkCharsPerToken, this.ctx.config.otherCharsPerToken);
  }

  /** The model revision of the answer the client is getting (leg 1's header, else its system_fingerprint). */
  private get modelRevision(): string | undefined {
    return this.facts.leg1HeaderRevision ?? this.tracker.systemFingerprint ?? undefined;
  }

  /** The one way the state changes, before the await that delivers it; an illegal move throws (a bug). */
  private move(to: RequestState): void {
    if (!canMove(this.current, to)) throw new IllegalTransitionError(this.current, to);
    this.current = to;
  }

  /** Drain deadline: whatever the request waits on ends now; it then ends with the interruption event or a 503. */
  shutdown(): void {
    if (!this.ending) this.cancellation.cancel('shutdown');
  }

  /** The client disconnected (the ext_proc glue tells us): every upstream leg and wait ends now. */
  clientGone(detail: string): void {
    this.cancellation.cancel('client-gone');
    if (!this.ending) void this.finish({ kind: 'client-gone', detail });
  }

  async run(): Promise<void> {
    this.ctx.inFlight.add(this);
    try {
      await this.runLeg1Attempts();
    } catch (e) {
      // A bug must not leave the client hanging: the interruption event (a 500 before the commit point), or a
      // reset if it came while an ending was delivered (that ending stands); logged with its stack.
      this.log.error({ err: e }, 'unexpected error in originated response');
      await (this.ending ? Promise.reject(e) : this.finish(internalError(this.committed))).catch(() =>
        this.client.reset('gateway-internal-error'),
      );
    } finally {
      this.ctx.inFlight.delete(this);
      this.sender.cancel();
      this.slot.settle({ kind: 'cancelled' }); // still held: its leg never settled it, which says nothing
      const end = { phase: this.phase(), ending: this.ending, tracker: this.tracker, facts: this.facts, delivered: this.delivered() };
      reportRequestEnd(this.ctx.metrics, this.log, this.trace, end);
    }
  }

  /**
   * Records how the request ends (moving it to the state that Ending leaves it in) and delivers it: once. After a
   * client that left nothing is delivered (false); any other second ending is a bug and throws.
   */
  async finish(e: Ending): Promise<boolean> {
    if (this.ending?.kind === 'client-gone') {
      if (e.kind === 'passed-through') e.answer.body.destroy();
      return false;
    }
    if (this.ending) throw new IllegalTransitionError(this.current, stateFor(e));
    this.move(stateFor(e));
    this.ending = e;
    if (e.kind !== 'complete' && e.kind !== 'passed-through') this.sender.cancel(); // a passed-through body is still read
    const delivered = this.delivered();
    logInterruption(this.log, e, delivered, this.facts.causes);
    const end = finalResponse(e, this.view.endFacts(e, delivered));
    if (end !== null) await this.client.end(end, () => this.gone);
    return true;
  }

  /**
   * A leg's output, in order: its events go into the tracker; its bytes are held before the commit point (the
   * item marked `commit` passes it) and sent after it; nothing once the request has ended.
   */
  private readonly deliver = (items: readonly Outgoing[]): Promise<void> | undefined => {
    if (this.current === 'prefill') return this.holdUntilCommit(items);
    if (this.current !== 'decode' && this.current !== 'continuing') return undefined;
    const bytes: Buffer[] = [];
    for (const it of items) {
      for (const o of it.events) this.tracker.apply(o);
      bytes.push(it.bytes);
    }
    return this.client.send(bytes.length === 1 ? bytes[0] : Buffer.concat(bytes));
  };

  private async holdUntilCommit(items: readonly Outgoing[]): Promise<void> {
    for (let i = 0; i < items.length; i++) {
      for (const o of items[i].events) this.tracker.apply(o);
      this.client.hold(items[i].bytes);
      if (items[i].commit && (await this.commit())) return await this.deliver(items.slice(i + 1));
    }
  }

  /** The commit point: the first delta goes out, with the held head and events before it. */
  private async commit(): Promise<boolean> {
    this.slot.settle({ kind: 'first-token' });
    if (this.gone) return false; // left while an earlier event of the same read was written: the leg loop ends next
    this.move('decode');
    this.facts.committedAt = Date.now();
    const ttfd = this.facts.committedAt - this.facts.started;
    this.ctx.metrics.observeFirstDelta(ttfd / 1000);
    if (this.facts.attempt === 1) this.ctx.admission.observeFirstToken?.(ttfd); // the adaptive limit's baseline
    await this.client.release();
    this.logTransition('FIRST_DELTA', { ttfd_ms: ttfd });
    return true;
  }

  private async runLeg1Attempts(): Promise<void> {
    const f = this.facts;
    for (;;) {
      f.attempt++;
      this.logTransition('ATTEMPT', { leg: 1 });
      const out = await this.runLeg1Attempt();
      this.trace.legEnded(out.type, out.type === 'failed' ? out.failure : undefined);
      if (out.type === 'ended') return void (await this.finish(out.ending));
      if (out.type === 'finished') return await this.complete(out.how);
      if (out.type === 'failed') {
        // Cut by the cancellation, the failure says nothing of the pool.
        const failed = {
          kind: 'failed',
          failure: out.failure,
          previous: f.previousFailure,
          source: this.view.source,
          leg: 'leg1',
        } as const;
        this.slot.settle(this.cancellation.cancelled ? { kind: 'cancelled' } : failed);
        f.previousFailure = out.failure;
        f.causes.push(causeOf(out.failure, out.emptyBody));
      }
      if (out.type === 'gone' || this.cancellation.cancelled) return await this.endCancelled();
      if (this.committed) return await this.continueAfter(out);
      const next = await retryOrGiveUp(this.view, out);
      if ('end' in next) return void (await this.finish(next.end));
      if ('cancelled' in next) return await this.endCancelled();
      this.client.newAttempt(null);
      this.tracker = new StreamTracker(this.ctx.config.maxContinuationPrefixBytes);
      this.view.tokenIds?.reset();
    }
  }

  /** One leg 1 attempt: its head (leg1/leg1-attempt.ts), then its event stream (leg1/leg1-relay.ts). */
  private async runLeg1Attempt(): Promise<LegOutcome | { type: 'ended'; ending: Ending }> {
    const start = await startLeg1Attempt(this.view);
    if (start.status !== null) this.facts.upstreamStatus = start.status;
    if (start.type === 'ended') this.slot.settle(start.slot);
    if (start.type !== 'stream') return start;
    this.client.newAttempt(start.head);
    this.facts.leg1HeaderRevision = start.revision;
    return relayLeg1(this.view, start, start.reader);
  }

  /** The answer is complete; the leg ended or went quiet afterwards. */
  private async complete(how: string): Promise<void> {
    this.slot.settle({ kind: 'first-token' });
    if (how !== 'eof') this.log.info({ how }, 'leg ended after finish_reason');
    await this.finish({ kind: 'complete', after: this.facts.attempt > 1 ? 'retry' : 'first-attempt' });
  }

  /** A failure after the commit point: the continuation legs, or the interruption event. */
  private async continueAfter(out: LegFailure): Promise<void> {
    this.facts.failedAt = Date.now();
    const interrupted = decideAfterLeg1Failure(this.view, out);
    if (interrupted) return void (await this.finish(interrupted));
    this.move('continuing');
    for (let n = 1; ; n++) {
      const leg = await runContinuationLeg(this.view, n, n === 1 ? out.heldToolCall : undefined);
      if (leg.slot) this.slot.settle(leg.slot);
      if (leg.cause) this.facts.causes.push(leg.cause);
      if (leg.sent) this.facts.sent = { ...leg.sent, unverified: leg.sent.unverified || this.facts.sent?.unverified === true };
      if ('cancelled' in leg.next || this.cancellation.cancelled) return await this.endCancelled();
      if ('end' in leg.next) return void (await this.finish(leg.next.end));
      this.facts.failedAt = Date.now(); // recovery latency of the next leg counts from this failure
    }
  }

  /** The request was cancelled: a client that left gets nothing more; a shutdown ends it explicitly. */
  private async endCancelled(): Promise<void> {
    const cause = this.cancellation.cause;
    const ending = cause === undefined || this.ending ? undefined : endingForCancel(cause, this.committed);
    if (ending) await this.finish(ending);
  }

  /** What only the request can do for its steps (request-view.ts). */
  private actions(): RequestActions {
    return {
      tracker: () => this.tracker,
      committed: () => this.committed,
      attemptHadHeaders: () => this.client.attemptHadHeaders,
      modelRevision: () => this.modelRevision,
      deliver: this.deliver,
      openLeg: (url, requestId, body, continuation = false, path) => {
        const revision = continuation ? this.modelRevision : undefined;
        return this.sender.open({ url, requestId, body, continuation, attempt: this.facts.attempt, revision, path });
      },
      // While a committed stream waits for a re-prefill slot, its client gets SSE comments (ignored by clients),
      // so that nothing between takes the silence for a dead connection.
      admit: (promptTokens, deliveredTokens, due) => {
        const keepalive = this.committed ? () => void this.deliver([{ bytes: RECOVERY_WAIT_COMMENT, events: [] }]) : undefined;
        return this.slot.admit(promptTokens, deliveredTokens, { committed: this.committed, due, keepalive });
      },
      settleSlot: (end) => this.slot.settle(end),
      cancelLeg: () => this.sender.cancel(),
      logTransition: (d, extra) => this.logTransition(d, extra),
    };
  }

  private logTransition(decision: Decision, extra: Record<string, unknown> = {}): void {
    this.log.info(transitionRecord(this.phase(), decision, extra), decision); // also a span event
  }

  /** Where the request stands, for every log record (request-record.ts). */
  private phase(): PhaseSnapshot {
    return phaseOf(this.current, this.facts, this.tracker, this.sender, this.cancellation.cause, this.modelRevision);
  }
}
