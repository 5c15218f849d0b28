// The whole life of one in-scope streaming chat completion whose response the sidecar originates, top-down:
// run() -> leg 1 attempts (re-run whole before the first delta) -> the commit point -> on a failure after
// it, ONE continuation leg from the delivered text, or the interruption event. The state is one field
// (request-state.ts) changed only by move(); every decision is a pure function in src/recovery/; how a
// request gives up is give-up.ts; its log records are request-record.ts.
//
// Every leg is fenced when superseded: cancelLeg() aborts it (the replica frees the slot) and no byte it
// still sends reaches the client.
import type { ProcessorStream } from '../extproc/processor-stream';
import type { Logger } from '../obs/logger';
import { idempotencyKeyOf } from '../openai/tool-call-ids';
import type { ReprefillResult, ReprefillSlot } from '../recovery/admission';
import { DONE_EVENT } from '../recovery/interruption';
import { decidePostCommit, decidePreCommit } from '../recovery/planner';
import { classifyCase } from '../recovery/prefix-builders';
import { estimateTokens, promptText, type RecoveredTokens } from '../recovery/token-estimate';
import { legRequestHeaders, upstreamHost } from '../request/forward-headers';
import { StreamTracker } from '../sse/tracker';
import { LegAbort, LegOpenError, type LegResponse } from '../upstream/client';
import { admitRecovery } from './admit';
import type { GatewayContext, InScopeRequest } from './context';
import { continueFromPrefix } from './continuation';
import { Delivery } from './delivery';
import { answerError, endForShutdown, interruptStream, passFailureThrough } from './give-up';
import type { LegFailure, LegOutcome } from './leg-loop';
import { runLeg1Attempt } from './leg1-attempt';
import { requestEndRecord, transitionRecord } from './request-record';
import { canMove, IllegalTransitionError, isTerminal, type RequestState } from './request-state';

export class OriginatedResponse {
  state: RequestState = 'prefill';
  attempt = 0;
  legs = 0;
  tracker = new StreamTracker();
  readonly delivery: Delivery;
  readonly log: Logger;
  readonly requestId: string | undefined;
  readonly started = Date.now();
  firstDeltaAt: number | null = null;
  upstreamStatus: number | null = null;
  outcome = 'in-progress';
  reason: string | undefined;
  recovered: RecoveredTokens | null = null;
  countMethod: 'tokenize' | 'estimate' = 'estimate';
  /** Whether the current attempt's 200 event-stream headers are held (sent at the commit point). */
  attemptHadHeaders = false;
  failedAt = 0;
  private abort: LegAbort | null = null;
  /** The re-prefill slot of the recovery leg in flight (a retry or the continuation), until its first token. */
  private slot: ReprefillSlot | null = null;
  /** Gives up waiting for a slot (client gone, shutdown). */
  private cancelWait: (() => void) | null = null;
  /** The replica that served the last leg (from the egress listener), which a recovery leg asks to avoid. */
  lastHost: string | undefined;
  /** Leg 1's model revision from its response header (else its system_fingerprint: modelRevision). */
  leg1HeaderRevision: string | undefined;
  /** Client-named requests get tool_call ids derived from the name (src/openai/tool-call-ids.ts). */
  readonly toolCallKey: string | undefined;

  constructor(
    readonly ctx: GatewayContext,
    stream: ProcessorStream,
    readonly req: InScopeRequest,
  ) {
    this.delivery = new Delivery(stream);
    this.requestId = req.clientHeaders['x-request-id'];
    this.log = ctx.log.child({ request_id: this.requestId });
    this.toolCallKey = idempotencyKeyOf(req.clientHeaders);
  }

  /** The model revision of the answer the client is getting (leg 1's), if any source named it. */
  get modelRevision(): string | undefined {
    return this.leg1HeaderRevision ?? this.tracker.systemFingerprint ?? undefined;
  }

  /** The one way the state changes. Moving from a terminal state is ignored (a late event after the end). */
  move(to: RequestState): void {
    if (isTerminal(this.state)) return;
    if (!canMove(this.state, to)) throw new IllegalTransitionError(this.state, to);
    this.state = to;
  }

  get gone(): boolean {
    return this.state === 'gone';
  }

  get shuttingDown(): boolean {
    return this.state === 'shutting-down';
  }

  /** Drain deadline: cancel the current leg or wait; the failure path then ends the stream explicitly. */
  shutdown(): void {
    if (isTerminal(this.state) || this.shuttingDown) return;
    this.move('shutting-down');
    this.cancelLeg();
  }

  /** The client disconnected (the ext_proc glue tells us): cancel the current upstream attempt now. */
  clientGone(reason: string): void {
    this.cancelLeg();
    if (isTerminal(this.state)) return;
    this.move('gone');
    this.setOutcome('client-disconnected', reason);
  }

  /** The one place a leg (or the wait for a slot) is cancelled. */
  cancelLeg(): void {
    this.cancelWait?.();
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
      this.setOutcome('error', 'gateway-internal-error');
      const end = this.delivery.committed
        ? interruptStream(this, 'gateway-internal-error')
        : answerError(
            this,
            500,
            { code: 'gateway_error', message: 'The gateway failed unexpectedly.', reason: 'gateway-internal-error' },
            1000,
          );
      await end.catch(() => this.delivery.reset('gateway-internal-error'));
    } finally {
      this.ctx.inFlight.delete(this);
      this.ctx.metrics.requestEnded({
        legs: this.legs,
        recoveredTokens: this.recovered?.totalRecovered ?? 0,
        retried: this.attempt > 1,
        firstDeltaSent: this.firstDeltaAt !== null,
      });
      this.cancelLeg();
      this.settleSlot('neutral');
      this.log.info(requestEndRecord(this), 'request_end');
    }
  }

  private async runLeg1Attempts(): Promise<void> {
    for (;;) {
      this.attempt++;
      this.logTransition('ATTEMPT', { leg: 1 });
      const out = await runLeg1Attempt(this);
      this.settleSlot(out.type === 'failed' && !this.gone && !this.shuttingDown ? 'failed' : 'neutral');
      if (out.type === 'gone' || this.gone) return;
      if (out.type === 'finished') return this.setOutcome(this.attempt > 1 ? 'completed-after-retry' : 'completed');
      if (out.type === 'responded') return this.setOutcome('passed-through-status');
      if (this.shuttingDown) return await endForShutdown(this);
      if (this.delivery.committed) return await this.onPostCommitFailure(out);
      this.ctx.metrics.legFailure(out.failure, 'prefill');
      const d = decidePreCommit({ failure: out.failure, attempt: this.attempt, maxAttempts: this.ctx.config.maxAttempts });
      if (d.action === 'pass-through') return await passFailureThrough(this, out, d.reason);
      // A retry re-prefills the prompt: it waits for a slot like any recovery.
      const cfg = this.ctx.config;
      const refused = await this.admit(estimateTokens(promptText(this.req.payload), cfg.cjkCharsPerToken, cfg.otherCharsPerToken), 0);
      if (this.gone) return;
      if (this.shuttingDown) return await endForShutdown(this);
      if (refused) return await passFailureThrough(this, out, `recovery-${refused.reason}`, refused.retryAfterMs);
      this.ctx.metrics.recovery('retry', 'started');
      this.logTransition('RETRY', { failure: out.failure, detail: out.detail });
      this.delivery.discardAttempt();
      this.tracker = new StreamTracker();
    }
  }

  async admit(promptTokens: number, deliveredTokens: number) {
    const a = await admitRecovery(this, promptTokens, deliveredTokens, (cancel) => (this.cancelWait = cancel));
    this.cancelWait = null;
    if ('slot' in a) {
      this.slot = a.slot;
      return null;
    }
    return a;
  }

  /** The recovery leg in flight reached its first token ('ok'), failed before it, or was cancelled. */
  settleSlot(result: ReprefillResult): void {
    const slot = this.slot;
    this.slot = null;
    slot?.settle(result);
  }

  /**
   * Sends a leg. A recovery leg asks the egress listener to avoid the replica the failed leg was on
   * (docs/envoy.md (h)); a continuation also asks for leg 1's model revision.
   */
  async openLeg(url: string, requestId: string | undefined, body: Buffer, continuation = false): Promise<LegResponse | LegOpenError> {
    this.abort = new LegAbort();
    this.legs++;
    const revisionHeader = this.ctx.config.modelRevisionHeader;
    const revision =
      continuation && revisionHeader && this.modelRevision ? { header: revisionHeader, value: this.modelRevision } : undefined;
    const headers = legRequestHeaders(this.req.clientHeaders, requestId, {
      avoidHost: this.legs > 1 ? this.lastHost : undefined,
      revision,
    });
    try {
      const res = await this.ctx.upstream.open(url + this.req.path, headers, body, this.abort);
      this.lastHost = upstreamHost(res.headers) ?? this.lastHost;
      return res;
    } catch (e) {
      if (e instanceof LegOpenError) return e;
      throw e;
    }
  }

  /** The commit point: the first delta goes out, with the held headers and events before it. */
  async commit(): Promise<void> {
    this.settleSlot('ok');
    if (!this.shuttingDown) this.move('decode');
    this.firstDeltaAt = Date.now();
    this.ctx.metrics.observeFirstDelta((this.firstDeltaAt - this.started) / 1000);
    await this.delivery.commit();
    this.logTransition('FIRST_DELTA', { ttfd_ms: this.firstDeltaAt - this.started });
  }

  /** The answer is complete; the leg ended or went quiet afterwards. Close the stream cleanly. */
  async endAfterFinish(how: string): Promise<LegOutcome> {
    this.settleSlot('ok');
    await this.delivery.end(this.tracker.doneSeen ? undefined : DONE_EVENT);
    this.move('done');
    if (how !== 'eof') this.log.info({ how }, 'leg ended after finish_reason');
    return { type: 'finished' };
  }

  private async onPostCommitFailure(out: LegFailure): Promise<void> {
    const t = this.tracker;
    const kase = classifyCase(t.toolCallsSeen, t.reasoning, t.content);
    this.logTransition('TRIGGERED', { failure: out.failure, detail: out.detail, case: kase });
    this.failedAt = Date.now();
    this.ctx.metrics.legFailure(out.failure, 'decode');
    const cfg = this.ctx.config;
    const d = decidePostCommit({
      failure: out.failure,
      leg: 1,
      toolCallDelivered: t.toolCallsSeen,
      recoverableText: t.reasoning !== '' || t.content !== '',
      continuationConfigured: cfg.continuationModel !== undefined,
      continuationEnabled: cfg.continuationEnabled,
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

  setOutcome(outcome: string, reason?: string): void {
    if (this.outcome !== 'in-progress' && outcome !== 'client-disconnected') return;
    this.outcome = outcome;
    this.reason = reason ?? this.reason;
  }

  logTransition(decision: string, extra: Record<string, unknown> = {}): void {
    this.log.info(transitionRecord(this, decision, extra), decision);
  }
}
