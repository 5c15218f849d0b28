// The whole life of one in-scope streaming chat completion whose response the sidecar originates, top-down:
// run() -> leg 1 attempts (re-run whole before the first delta) -> the commit point -> on a failure after
// it, ONE continuation leg from the delivered text, or the interruption event. The state is one field
// (request-state.ts) changed only by move(), privately; how the request ends is a value (ending.ts) that
// finish() records, the only writer of the outcome, and report() turns into the end-of-request metrics and
// the request_end record (request-record.ts), once. Every decision is a pure function in src/recovery/; how a
// request gives up is give-up.ts.
//
// Every leg is fenced when superseded: cancelLeg() aborts it (the replica frees the slot) and no byte it
// still sends reaches the client. A client that leaves and the drain deadline are one cancellation
// (cancellation.ts): every wait of the request subscribes to it, and endCancelled() ends the request for it.

import type { ProcessorStream } from '../extproc/processor-stream';
import { withDecisionEvents } from '../obs/decision-events';
import type { Decision } from '../obs/decisions';
import type { Logger } from '../obs/logger';
import { NO_TRACING, type RequestTrace } from '../obs/tracing';
import { idempotencyKeyOf } from '../openai/tool-call-ids';
import type { ReprefillSlot } from '../recovery/admission';
import { causeOf } from '../recovery/give-up-detail';
import { classifyCase } from '../recovery/interrupted-case';
import { DONE_EVENT } from '../recovery/interruption';
import { decidePostCommit, decidePreCommit, type FailureKind, parseRetryAfter, retryBackoffMs } from '../recovery/planner';
import type { FailureCause } from '../recovery/reasons';
import { requestSource } from '../recovery/request-source';
import { type SlotEnd, slotEvidence } from '../recovery/slot-evidence';
import { estimateTokens, promptText, type RecoveredTokens } from '../recovery/token-estimate';
import { legRequestHeaders, upstreamHost } from '../request/forward-headers';
import { StreamTracker } from '../sse/tracker';
import { LegAbort, LegOpenError, type LegResponse } from '../upstream/client';
import { admitRecovery } from './admit';
import { RequestCancellation } from './cancellation';
import { continuationModelOf, type GatewayContext, type InScopeRequest } from './context';
import { continueFromPrefix } from './continuation';
import { Delivery } from './delivery';
import { type Ending, type Outcome, outcomeOf, reasonOf, stateFor } from './ending';
import { answerError, deliveredTokens, endCancelled, gatewayError, interruptStream, passFailureThrough } from './give-up';
import type { LegFailure, LegOutcome } from './leg-loop';
import { runLeg1Attempt } from './leg1-attempt';
import type { AttemptHead, ContinuationPort, CountMethod, Leg1Port, Refusal } from './request-port';
import { type PhaseSnapshot, requestEndRecord, transitionRecord } from './request-record';
import { canMove, IllegalTransitionError, type RequestState } from './request-state';

export class OriginatedResponse implements Leg1Port, ContinuationPort {
  private current: RequestState = 'prefill';
  /** How the request ended (finish()); the outcome is derived from it. */
  private ending: Ending | undefined;
  attempt = 0;
  legs = 0;
  tracker: StreamTracker;
  readonly delivery: Delivery;
  readonly log: Logger;
  readonly requestId: string | undefined;
  readonly started = Date.now();
  /** FIRST_DELTA_DEADLINE_SECONDS after the request arrived: its first delta, or an explicit error, by then. */
  readonly firstDeltaDue: number;
  /** When the latest leg 1 attempt was sent: its engine rendered the uninterrupted prompt as of then. */
  leg1SentAt = this.started;
  /** When the first delta went out: the commit point, set by commit() only. */
  private committedAt: number | null = null;
  private upstreamStatus: number | null = null;
  private recovered: RecoveredTokens | null = null;
  private countMethod: CountMethod = 'estimate';
  /** Whether the current attempt's 200 event-stream headers are held (sent at the commit point). */
  private heldHeaders = false;
  private failureSeenAt = 0;
  private abort: LegAbort | null = null;
  /** The re-prefill slot of the recovery leg in flight (a retry or the continuation), until its first token. */
  private slot: ReprefillSlot | null = null;
  /** The client left, or the drain deadline shut the request down. */
  readonly cancellation = new RequestCancellation();
  /** The replica that served the last leg (from the egress listener), which a recovery leg asks to avoid. */
  lastHost: string | undefined;
  /** Leg 1's model revision from its response header (else its system_fingerprint: modelRevision). */
  private leg1HeaderRevision: string | undefined;
  /** How the previous leg 1 attempt failed before its first token (the brake's `repeat` evidence). */
  private previousFailure: FailureKind | undefined;
  /** What each failed attempt and leg died of, in order: a give-up names them all (give-up.ts). */
  readonly causes: FailureCause[] = [];
  /** Client-named requests get tool_call ids derived from the name (src/openai/tool-call-ids.ts). */
  readonly toolCallKey: string | undefined;
  /** This request's spans (src/obs/tracing.ts: a no-op unless an OTLP endpoint is configured). */
  readonly trace: RequestTrace;

  constructor(
    readonly ctx: GatewayContext,
    stream: ProcessorStream,
    readonly req: InScopeRequest,
  ) {
    this.delivery = new Delivery(stream);
    this.tracker = new StreamTracker(ctx.config.maxContinuationPrefixBytes);
    this.requestId = req.clientHeaders['x-request-id'];
    this.trace = (ctx.tracing ?? NO_TRACING).request(req.clientHeaders, req.payload.model, req.payload.max_tokens);
    // Its decision records are also the request span's events (src/obs/decision-events.ts).
    this.log = withDecisionEvents(ctx.log.child({ request_id: this.requestId }), this.trace, ctx.tracing?.enabled === true);
    this.toolCallKey = idempotencyKeyOf(req.clientHeaders);
    this.firstDeltaDue = this.started + ctx.config.firstDeltaDeadlineMs;
    // The leg in flight is the first thing a cancellation stops (openLeg refuses new ones after it).
    this.cancellation.onCancel(() => this.abort?.abort());
  }

  /** Who sent this request, as the brake tells `repeat` failures apart (a digest, never logged). */
  get source(): string {
    return requestSource(this.req.clientHeaders, this.req.rawBody);
  }

  /** The model revision of the answer the client is getting (leg 1's), if any source named it. */
  get modelRevision(): string | undefined {
    return this.leg1HeaderRevision ?? this.tracker.systemFingerprint ?? undefined;
  }

  /**
   * The one way the state changes; an illegal move, from a terminal state included, throws (run() then ends the
   * request as a bug). Each move is made before the await that delivers it, so a client that leaves during
   * that await cannot make it late.
   */
  private move(to: RequestState): void {
    if (!canMove(this.current, to)) throw new IllegalTransitionError(this.current, to);
    this.current = to;
  }

  get state(): RequestState {
    return this.current;
  }

  get firstDeltaAt(): number | null {
    return this.committedAt;
  }

  /** request_end's outcome: derived from the Ending; `in-progress` until there is one. */
  get outcome(): Outcome | 'in-progress' {
    return this.ending ? outcomeOf(this.ending) : 'in-progress';
  }

  get reason(): string | undefined {
    return this.ending ? reasonOf(this.ending) : undefined;
  }

  /**
   * Records how the request ends and moves it to the state that Ending leaves it in, before the await that
   * delivers it. Once: after a client that left (false: deliver nothing more); any other second ending is a
   * bug and throws, like an illegal move.
   */
  finish(e: Ending): boolean {
    if (this.ending?.kind === 'client-gone') return false;
    if (this.ending) throw new IllegalTransitionError(this.current, stateFor(e));
    this.move(stateFor(e));
    this.ending = e;
    return true;
  }

  get gone(): boolean {
    return this.cancellation.cause === 'client-gone';
  }

  get shuttingDown(): boolean {
    return this.cancellation.cause === 'shutdown';
  }

  /**
   * Drain deadline: whatever the request waits on ends now, and so does any wait it starts later; it then ends
   * with the interruption event (committed) or a 503 (endCancelled).
   */
  shutdown(): void {
    if (this.ending) return;
    this.cancellation.cancel('shutdown');
  }

  /** The client disconnected (the ext_proc glue tells us): every upstream leg and wait ends now. */
  clientGone(detail: string): void {
    this.cancellation.cancel('client-gone');
    if (!this.ending) this.finish({ kind: 'client-gone', detail });
  }

  /** Fences the current leg (superseded, timed out, or the request is ending). */
  cancelLeg(): void {
    this.abort?.abort();
  }

  async run(): Promise<void> {
    this.ctx.inFlight.add(this);
    try {
      await this.runLeg1Attempts();
    } catch (e) {
      // A bug must not leave the client hanging: end with the interruption event (or a reset if nothing can
      // be written any more) and log the error with its stack.
      this.log.error({ err: e }, 'unexpected error in originated response');
      // Already ended (the bug came while delivering it): the delivery is cut, the recorded ending stands.
      const end = this.ending
        ? Promise.reject(e)
        : this.delivery.committed
          ? interruptStream(this, 'gateway-internal-error')
          : answerError(this, gatewayError(500, 'gateway_error', 'The gateway failed unexpectedly.', 'gateway-internal-error'));
      await end.catch(() => this.delivery.reset('gateway-internal-error'));
    } finally {
      this.ctx.inFlight.delete(this);
      this.cancelLeg();
      this.settleSlot({ kind: 'cancelled' }); // still held: its leg never settled it, which says nothing
      this.report();
      this.trace.end(this);
    }
  }

  /** The end of the request, once: its metrics and its request_end record, both from the recorded Ending. */
  private report(): void {
    let ending = this.ending;
    if (!ending) {
      // Every path records an Ending; a request without one is a bug, counted as such, never as a success.
      this.log.error({ phase: this.current }, 'request ended without an ending');
      ending = { kind: 'interrupted', reason: 'gateway-internal-error', partialOutput: this.delivery.committed };
    }
    const totalMs = Date.now() - this.started;
    const m = this.ctx.metrics;
    if (ending.kind === 'interrupted') m.interruptionEvent(ending.reason);
    m.requestEnded({
      legs: this.legs,
      recoveredTokens: this.recovered?.totalRecovered ?? 0,
      retried: this.attempt > 1,
      firstDeltaSent: this.committedAt !== null,
    });
    m.requestOutcome(outcomeOf(ending), totalMs / 1000);
    this.log.info(
      requestEndRecord(this.phase(), {
        tracker: this.tracker,
        deliveredOutputTokens: deliveredTokens(this),
        recovered: this.recovered,
        countMethod: this.countMethod,
        outcome: outcomeOf(ending),
        reason: reasonOf(ending),
        causes: this.causes,
        upstreamStatus: this.upstreamStatus,
        ttfdMs: this.committedAt === null ? null : this.committedAt - this.started,
        totalMs,
      }),
      'request_end',
    );
  }

  /** Where the request stands, for every log record (request-record.ts). */
  private phase(): PhaseSnapshot {
    return {
      completionId: this.tracker.id,
      state: this.current,
      cancelled: this.cancellation.cause ?? null,
      attempt: this.attempt,
      legs: this.legs,
      replica: this.lastHost ?? null,
      firstDeltaSent: this.committedAt !== null,
      modelRevision: this.modelRevision ?? null,
    };
  }

  private async runLeg1Attempts(): Promise<void> {
    for (;;) {
      this.attempt++;
      this.logTransition('ATTEMPT', { leg: 1 });
      const out = await runLeg1Attempt(this);
      this.trace.legEnded(out.type, out.type === 'failed' ? out.failure : undefined);
      this.settleSlot(
        out.type === 'failed' && !this.cancellation.cancelled
          ? { kind: 'failed', failure: out.failure, previous: this.previousFailure, source: this.source, leg: 'leg1' }
          : { kind: 'cancelled' },
      );
      if (out.type === 'failed') {
        this.previousFailure = out.failure;
        this.causes.push(causeOf(out.failure, out.emptyBody));
      }
      if (out.type === 'finished' || out.type === 'responded') return; // ended (finish) by the attempt
      if (out.type === 'gone' || this.cancellation.cancelled) return await endCancelled(this);
      if (this.delivery.committed) return await this.onPostCommitFailure(out);
      this.ctx.metrics.legFailure(out.failure, 'prefill');
      const cfg = this.ctx.config;
      const retryAfterMs = parseRetryAfter(out.engineAnswer?.headers['retry-after'], Date.now());
      const d = decidePreCommit({
        failure: out.failure,
        attempt: this.attempt,
        maxAttempts: cfg.maxAttempts,
        remainingMs: this.firstDeltaDue - Date.now(),
        backoffMs: retryBackoffMs(this.attempt, cfg.retryBackoffMs, cfg.retryBackoffMaxMs),
        retryAfterMs,
        retryAfterMaxMs: cfg.retryAfterMaxMs,
      });
      if (d.action === 'pass-through') return await passFailureThrough(this, out, d.reason);
      // The backoff first, holding no re-prefill slot; then the slot: a retry re-prefills the prompt, so it
      // waits for one like any recovery. Both within the request's deadline.
      await this.pause(d.waitMs);
      if (this.cancellation.cancelled) return await endCancelled(this);
      const refused = await this.admit(
        estimateTokens(promptText(this.req.payload), cfg.cjkCharsPerToken, cfg.otherCharsPerToken),
        0,
        this.firstDeltaDue,
      );
      if (this.cancellation.cancelled) return await endCancelled(this);
      if (refused?.reason === 'deadline') return await passFailureThrough(this, out, 'deadline-exceeded');
      if (refused) return await passFailureThrough(this, out, `recovery-${refused.reason}`, refused.retryAfterMs);
      this.ctx.metrics.recovery('retry', 'started');
      this.logTransition('RETRY', {
        failure: out.failure,
        detail: out.detail,
        backoff_ms: d.waitMs,
        ...(retryAfterMs !== undefined ? { retry_after_ms: retryAfterMs } : {}),
      });
      this.delivery.discardAttempt();
      this.tracker = new StreamTracker(this.ctx.config.maxContinuationPrefixBytes);
    }
  }

  /** Waits before a re-run; the request's cancellation ends the wait at once. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      let stop: () => void = () => undefined;
      const timer = setTimeout(() => {
        stop();
        resolve();
      }, ms);
      stop = this.cancellation.onCancel(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  get attemptHadHeaders(): boolean {
    return this.heldHeaders;
  }

  get failedAt(): number {
    return this.failureSeenAt;
  }

  noteHead(head: AttemptHead | null): void {
    this.heldHeaders = head?.eventStream === true;
    if (head === null) return;
    this.upstreamStatus = head.status;
    if (head.eventStream) this.leg1HeaderRevision = head.revision;
  }

  noteContinuation(recovered: RecoveredTokens, countMethod: CountMethod): void {
    this.recovered = recovered;
    this.countMethod = countMethod;
  }

  noteFailure(): void {
    this.failureSeenAt = Date.now();
  }

  noteCause(cause: FailureCause): void {
    this.causes.push(cause);
  }

  /** A re-prefill slot, waiting at most until `due` (the first-delta deadline of a retry): then `deadline`. */
  async admit(promptTokens: number, deliveredTokens: number, due?: number): Promise<Refusal> {
    let late = false;
    let timer: NodeJS.Timeout | undefined;
    const a = await admitRecovery(this, promptTokens, deliveredTokens, (cancel) => {
      if (due !== undefined)
        timer = setTimeout(
          () => {
            late = true;
            cancel();
          },
          Math.max(0, due - Date.now()),
        );
    });
    clearTimeout(timer);
    if ('slot' in a) {
      this.slot = a.slot;
      return null;
    }
    if (late && a.reason === 'cancelled') return { reason: 'deadline' as const };
    return a;
  }

  /**
   * How the recovery leg in flight ended for its re-prefill slot (first token, failure before it, cancelled):
   * the one place a slot is settled, with the evidence slotEvidence() reads from that fact. Later calls for
   * the same leg do nothing.
   */
  settleSlot(end: SlotEnd): void {
    const slot = this.slot;
    this.slot = null;
    slot?.settle(slotEvidence(end));
  }

  /**
   * Sends a leg. A recovery leg asks the egress listener to avoid the replica the failed leg was on
   * (docs/envoy.md (h)); a continuation also asks for leg 1's model revision.
   */
  async openLeg(url: string, requestId: string | undefined, body: Buffer, continuation = false): Promise<LegResponse | LegOpenError> {
    if (this.cancellation.cancelled) return new LegOpenError('aborted');
    this.abort = new LegAbort();
    this.legs++;
    if (!continuation) this.leg1SentAt = Date.now();
    const revisionHeader = this.ctx.config.modelRevisionHeader;
    const revision =
      continuation && revisionHeader && this.modelRevision ? { header: revisionHeader, value: this.modelRevision } : undefined;
    const traceHeaders = this.trace.legStarted({ sent: this.legs, attempt: this.attempt, continuation });
    const headers = legRequestHeaders(this.req.clientHeaders, requestId, {
      avoidHost: this.legs > 1 ? this.lastHost : undefined,
      revision,
      traceHeaders,
    });
    try {
      const res = await this.ctx.upstream.open(url + this.req.path, headers, body, this.abort);
      this.lastHost = upstreamHost(res.headers) ?? this.lastHost;
      this.trace.legAnswered(res.status, upstreamHost(res.headers));
      return res;
    } catch (e) {
      if (e instanceof LegOpenError) {
        this.trace.legFailedToOpen(e.kind);
        return e;
      }
      throw e;
    }
  }

  /** The commit point: the first delta goes out, with the held headers and events before it. */
  async commit(): Promise<void> {
    this.settleSlot({ kind: 'first-token' });
    if (this.gone) return; // left while an earlier event of the same read was written: the leg loop ends next
    this.move('decode');
    this.committedAt = Date.now();
    this.ctx.metrics.observeFirstDelta((this.committedAt - this.started) / 1000);
    if (this.attempt === 1) this.ctx.admission.observeFirstToken?.(this.committedAt - this.started); // the adaptive limit's baseline
    await this.delivery.commit();
    this.logTransition('FIRST_DELTA', { ttfd_ms: this.committedAt - this.started });
  }

  /** The answer is complete; the leg ended or went quiet afterwards. Close the stream cleanly. */
  async endAfterFinish(how: string): Promise<LegOutcome> {
    this.settleSlot({ kind: 'first-token' });
    if (this.finish({ kind: 'complete', after: this.attempt > 1 ? 'retry' : 'first-attempt' }))
      await this.delivery.end(this.tracker.doneSeen ? undefined : DONE_EVENT);
    if (how !== 'eof') this.log.info({ how }, 'leg ended after finish_reason');
    return { type: 'finished' };
  }

  /**
   * CONTINUATION_ENABLED=false: leg 1 stalled where a continuation would have followed. Detected and logged as
   * TRIGGERED then SKIPPED (the reason a continuation would give), and nothing else: the dry run never changes
   * a stream, leg 1 is relayed for as long as it lives.
   */
  onDryRunTrigger(failure: FailureKind, silentMs: number): void {
    const t = this.tracker;
    const kase = classifyCase(t.toolCallsSeen, t.reasoning, t.content);
    this.logTransition('TRIGGERED', { failure, detail: `silent ${silentMs} ms`, case: kase, dry_run: true });
    this.ctx.metrics.legFailure(failure, 'decode');
    this.log.info(
      { decision: 'SKIPPED', reason: 'continuation-disabled', case: kase, dry_run: true },
      'dry run: continuation detected but CONTINUATION_ENABLED=false; leg 1 relayed on',
    );
  }

  private async onPostCommitFailure(out: LegFailure): Promise<void> {
    const t = this.tracker;
    const kase = classifyCase(t.toolCallsSeen, t.reasoning, t.content);
    this.logTransition('TRIGGERED', { failure: out.failure, detail: out.detail, case: kase });
    this.failureSeenAt = Date.now();
    this.ctx.metrics.legFailure(out.failure, 'decode');
    const cfg = this.ctx.config;
    const d = decidePostCommit({
      failure: out.failure,
      leg: 1,
      toolCallDelivered: t.toolCallsSeen,
      recoverableText: t.reasoningChars > 0 || t.contentChars > 0,
      continuationConfigured: continuationModelOf(this.ctx) !== undefined,
      continuationEnabled: cfg.continuationEnabled,
      prefixTooLarge: t.prefixCapped,
    });
    if (d.action === 'interrupt') {
      if (d.reason === 'continuation-disabled')
        this.log.info(
          { decision: 'SKIPPED', reason: d.reason, case: kase },
          'dry run: continuation detected but CONTINUATION_ENABLED=false',
        );
      return await interruptStream(this, d.reason, out.heldToolCall);
    }
    this.move('continuing');
    await continueFromPrefix(this, out.heldToolCall);
  }

  logTransition(decision: Decision, extra: Record<string, unknown> = {}): void {
    this.log.info(transitionRecord(this.phase(), decision, extra), decision); // also a span event
  }
}
