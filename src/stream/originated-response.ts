// The per-request state machine for an in-scope streaming chat completion whose response the sidecar
// originates. Phases: prefill (nothing delivered; a failed attempt is re-run whole) -> decode (the first
// delta was delivered: committed) -> done | interrupted. After the commit point a failure is answered with
// ONE continuation leg built from the delivered text, or with the interruption event.
//
// Every upstream leg is fenced when superseded: its request is aborted (the replica frees the slot) and no
// byte it still sends reaches the client.
import type { ClientStream } from '../extproc/client-stream';
import { clientErrorBody, clientErrorHeaders, type ClientErrorCode } from '../errors';
import { clientResponseHeaders, isResetBeforeHeaders, isRouterTierUnreachable, legRequestHeaders, upstreamHost } from '../request/forward-headers';
import type { ReprefillResult, ReprefillSlot, RefusalReason } from '../recovery/admission';
import { planContinuationRequest } from '../recovery/continuation-request';
import { interruptionEvent, DONE_EVENT } from '../recovery/interruption';
import { decidePostCommit, decidePreCommit, reprefillTooCostly, type FailureKind } from '../recovery/planner';
import { classifyCase, familyFor } from '../recovery/prefix-builders';
import { estimateTokens, promptText, type Recovered } from '../recovery/token-estimate';
import { StreamTracker } from '../sse/tracker';
import { LegAbort, LegOpenError, type LegResponse } from '../upstream/client';
import { LegReader } from '../upstream/leg-reader';
import { countRecovered } from '../upstream/tokenizer';
import type { Logger } from '../obs/logger';
import type { GatewayContext } from './context';
import { Delivery } from './delivery';
import { Leg1Relay, type Leg1RelayHost, type LegOutcome } from './leg1-relay';
import { relayLeg2 } from './leg2-relay';
import { relayVerbatim } from './verbatim';

export interface InScopeRequest {
  path: string;
  clientHeaders: Record<string, string>;
  rawBody: Buffer;
  payload: any;
  multimodal: boolean;
  /** response_format json_*: held whole until finish (BUFFER_STRUCTURED_OUTPUT), re-run on failure. */
  structured: boolean;
}

export type Phase = 'prefill' | 'decode' | 'done' | 'interrupted';

/** Sent to a committed stream while its recovery waits for a re-prefill slot (an SSE comment). */
const RECOVERY_WAIT_COMMENT = Buffer.from(': waiting for recovery capacity\n\n');
const KEEPALIVE_MS = 5000;


export class OriginatedResponse {
  phase: Phase = 'prefill';
  attempt = 0;
  legs = 0;
  tracker = new StreamTracker();
  /** Whether the current attempt produced 200 event-stream headers (held until the commit point). */
  private attemptHadHeaders = false;
  readonly delivery: Delivery;
  private readonly log: Logger;
  private readonly requestId: string | undefined;
  private readonly started = Date.now();
  private firstDeltaAt: number | null = null;
  private failedAt = 0;
  private abort: LegAbort | null = null;
  private gone = false;
  private upstreamStatus: number | null = null;
  private outcome = 'in-progress';
  private reason: string | undefined;
  private recovered: Recovered | null = null;
  private countMethod: 'tokenize' | 'estimate' = 'estimate';

  constructor(private readonly ctx: GatewayContext, client: ClientStream, private readonly req: InScopeRequest) {
    this.delivery = new Delivery(client);
    this.requestId = req.clientHeaders['x-request-id'];
    this.log = ctx.log.child({ request_id: this.requestId });
  }

  private shuttingDown = false;
  /** The re-prefill slot of the recovery leg in flight (a retry or the continuation), until its first token. */
  private slot: ReprefillSlot | null = null;
  /** Gives up waiting for a slot (client gone, shutdown). */
  private cancelWait: (() => void) | null = null;
  /** The host that served the last leg (from the egress listener), which a recovery leg asks to avoid. */
  private lastHost: string | undefined;

  /** Drain deadline: abort the current leg; the failure path then ends the stream explicitly. */
  shutdown(): void {
    if (this.gone || this.shuttingDown) return;
    this.shuttingDown = true;
    this.cancelWait?.();
    this.abort?.abort();
  }

  /** Called by the ext_proc glue when the client disconnects: abort the current upstream attempt now. */
  clientGone(reason: string): void {
    if (this.gone || this.phase === 'done' || this.phase === 'interrupted') return;
    this.gone = true;
    this.cancelWait?.();
    this.abort?.abort();
    this.setOutcome('client-disconnected', reason);
  }

  async run(): Promise<void> {
    const streams = this.ctx.streams;
    streams.active++;
    this.ctx.inFlight.add(this);
    try {
      await this.runLeg1Attempts();
    } catch (e) {
      // A bug must not leave the client hanging: end with the interruption event (or a reset if nothing
      // can be written any more) and log the error with its stack.
      this.log.error({ err: e }, 'unexpected error in originated response');
      this.setOutcome('error', 'gateway-internal-error');
      await this.interrupt('gateway-internal-error').catch(() => this.delivery.reset('gateway-internal-error'));
    } finally {
      streams.active--;
      this.ctx.inFlight.delete(this);
      this.ctx.metrics.requestEnded({ legs: this.legs, recoveredTokens: this.recovered?.totalRecovered ?? 0, retried: this.attempt > 1, firstDeltaSent: this.firstDeltaAt !== null });
      this.cancelWait?.();
      this.settleSlot('neutral');
      this.abort?.abort();
      this.logEnd();
    }
  }

  private async runLeg1Attempts(): Promise<void> {
    for (;;) {
      this.attempt++;
      this.logTransition('ATTEMPT', { leg: 1 });
      const out = await this.runLeg1Attempt();
      this.settleSlot(out.type === 'failed' && !this.gone && !this.shuttingDown ? 'failed' : 'neutral');
      if (out.type === 'gone' || this.gone) return;
      if (out.type === 'finished') return this.setOutcome(this.attempt > 1 ? 'completed-after-retry' : 'completed');
      if (out.type === 'responded') return this.setOutcome('passed-through-status');
      if (this.shuttingDown) return await this.endForShutdown();
      if (this.delivery.committed) return await this.onPostCommitFailure(out);
      this.ctx.metrics.interruption(out.failure, 'prefill');
      const d = decidePreCommit({ failure: out.failure, attempt: this.attempt, maxAttempts: this.ctx.config.maxAttempts });
      if (d.action === 'pass-through') return await this.passFailureThrough(out, d.reason);
      // A retry re-prefills the prompt: it waits for a slot like any recovery.
      const promptTokens = estimateTokens(promptText(this.req.payload), this.ctx.config.cjkCharsPerToken, this.ctx.config.otherCharsPerToken);
      const refused = await this.admitRecovery(promptTokens, 0);
      if (this.gone) return;
      if (this.shuttingDown) return await this.endForShutdown();
      if (refused) return await this.passFailureThrough(out, `recovery-${refused.reason}`, refused.retryAfterMs);
      this.ctx.metrics.recovery('retry', 'started');
      this.logTransition('RETRY', { failure: out.failure, detail: out.detail });
      this.delivery.discardAttempt();
      this.tracker = new StreamTracker();
    }
  }

  /**
   * Asks for a re-prefill slot (RECOVERY_* settings, src/recovery/admission.ts), waiting for one if needed.
   * Returns null once the slot is held (this.slot), or why the recovery may not start.
   */
  private async admitRecovery(promptTokens: number, deliveredTokens: number): Promise<{ reason: RefusalReason | 'too-costly'; retryAfterMs?: number } | null> {
    const phase = this.delivery.committed ? 'decode' : 'prefill';
    const refusedBecause = (reason: RefusalReason | 'too-costly', extra: Record<string, unknown>) => {
      this.ctx.metrics.recoveryRefused(reason, phase);
      this.log.warn({ decision: 'RECOVERY_REFUSED', reason, phase, ...extra }, 'recovery not started');
    };
    const max = this.ctx.config.maxRecoveryPromptTokens;
    if (reprefillTooCostly(promptTokens, deliveredTokens, max)) {
      refusedBecause('too-costly', { reprefill_tokens: promptTokens + deliveredTokens, max_recovery_prompt_tokens: max });
      return { reason: 'too-costly' };
    }
    const ticket = this.ctx.admission.request();
    this.cancelWait = ticket.cancel;
    // While it waits, a committed stream gets SSE comments (ignored by clients) so that nothing between the
    // client and us takes the silence for a dead connection.
    const keepalive = this.delivery.committed ? setInterval(() => void this.delivery.write(RECOVERY_WAIT_COMMENT), KEEPALIVE_MS) : undefined;
    const a = await ticket.result;
    clearInterval(keepalive);
    this.cancelWait = null;
    if (!a.admitted) {
      if (a.reason !== 'cancelled') refusedBecause(a.reason, { waited_ms: a.waitedMs });
      return { reason: a.reason, retryAfterMs: a.retryAfterMs };
    }
    if (this.gone || this.shuttingDown) {
      a.slot.settle('neutral');
      return { reason: 'cancelled' };
    }
    this.slot = a.slot;
    if (a.waitedMs > 0) this.log.info({ decision: 'RECOVERY_ADMITTED', phase, waited_ms: a.waitedMs }, 'recovery admitted after waiting for a re-prefill slot');
    return null;
  }

  /** The recovery leg in flight reached its first token ('ok'), failed before it, or was cancelled. */
  private settleSlot(result: ReprefillResult): void {
    const slot = this.slot;
    this.slot = null;
    slot?.settle(result);
  }

  private async openLeg(url: string, requestId: string | undefined, body: Buffer): Promise<LegResponse | LegOpenError> {
    this.abort = new LegAbort();
    this.legs++;
    // A recovery leg asks the egress listener to avoid the host the failed leg was on (docs/envoy.md (h)).
    const headers = legRequestHeaders(this.req.clientHeaders, requestId, this.legs > 1 ? this.lastHost : undefined);
    try {
      const res = await this.ctx.upstream.open(url + this.req.path, headers, body, this.abort);
      this.lastHost = upstreamHost(res.headers) ?? this.lastHost;
      return res;
    } catch (e) {
      if (e instanceof LegOpenError) return e;
      throw e;
    }
  }

  private async runLeg1Attempt(): Promise<LegOutcome> {
    const cfg = this.ctx.config;
    const id = this.requestId && this.attempt > 1 ? `${this.requestId}-a${this.attempt}` : this.requestId;
    this.attemptHadHeaders = false;
    const attemptStart = Date.now();
    // FIRST_DELTA_TIMEOUT_SECONDS counts from the attempt's start: engines may hold their response headers
    // back during prefill, so the wait for headers is part of it.
    let firstDeltaExpired = false;
    const firstDeltaTimer =
      cfg.firstDeltaTimeoutMs > 0
        ? setTimeout(() => {
            firstDeltaExpired = true;
            this.abort?.abort();
          }, cfg.firstDeltaTimeoutMs)
        : undefined;
    const res = await this.openLeg(cfg.downstreamUrl, id, this.req.rawBody);
    clearTimeout(firstDeltaTimer);
    if (this.gone) return { type: 'gone' };
    if (res instanceof LegOpenError) {
      if (firstDeltaExpired) return { type: 'failed', failure: 'first-delta-timeout', detail: 'no response headers' };
      if (res.kind === 'connect') return await this.routerUnreachable('egress-connect-failed');
      return { type: 'failed', failure: res.kind === 'headers-timeout' ? 'headers-timeout' : 'reset', detail: res.kind };
    }
    this.upstreamStatus = res.status;
    const ctype = String(res.headers['content-type'] ?? '');
    if (res.status !== 200 || !ctype.includes('text/event-stream')) {
      if (isRouterTierUnreachable(res.headers)) {
        res.body.destroy();
        return await this.routerUnreachable(`router-tier-unreachable:${String(res.headers['x-gateway-upstream-flags'])}`);
      }
      if (isResetBeforeHeaders(res.headers)) {
        // Envoy's own reply for a replica that reset or closed before its headers: nothing was generated.
        res.body.destroy();
        return { type: 'failed', failure: 'reset', detail: `reset-before-headers:${String(res.headers['x-gateway-upstream-flags'])}` };
      }
      if (res.status === 503) {
        // The replica or router is overloaded or draining and generated nothing. The sidecar re-runs it (not
        // Envoy's retry policy, which would multiply attempts against a failing pool); if it does not, the
        // client gets this answer unchanged.
        const body = await res.body.readAll(65536);
        return { type: 'failed', failure: 'overloaded', detail: 'status-503', engineAnswer: { status: res.status, headers: clientResponseHeaders(res.headers), body } };
      }
      // Anything but an event stream is passed through unchanged (the engine's own 4xx/5xx, say).
      this.settleSlot(res.status >= 500 || res.status === 429 ? 'failed' : 'ok');
      await relayVerbatim(this.delivery, res, () => this.gone);
      return this.gone ? { type: 'gone' } : { type: 'responded' };
    }
    this.delivery.setHeaders(200, clientResponseHeaders(res.headers));
    this.attemptHadHeaders = true;
    return new Leg1Relay(this.leg1Host(), new LegReader(res.body), attemptStart).run();
  }

  /** What the leg1 relay may see and do of this request. */
  private leg1Host(): Leg1RelayHost {
    return {
      ctx: this.ctx,
      log: this.log,
      delivery: this.delivery,
      tracker: this.tracker,
      structured: this.req.structured,
      isGone: () => this.gone,
      firstDeltaSent: () => this.firstDeltaAt !== null,
      commit: () => this.commit(),
      endAfterFinish: (how) => this.endAfterFinish(how),
    };
  }

  private async commit(): Promise<void> {
    this.settleSlot('ok');
    this.phase = 'decode';
    this.firstDeltaAt = Date.now();
    this.ctx.metrics.observeFirstDelta((this.firstDeltaAt - this.started) / 1000);
    await this.delivery.commit();
    this.logTransition('FIRST_DELTA', { ttfd_ms: this.firstDeltaAt - this.started });
  }

  /** The answer is complete; the leg ended or went quiet afterwards. Close the stream cleanly. */
  private async endAfterFinish(how: string): Promise<LegOutcome> {
    this.settleSlot('ok');
    await this.delivery.end(this.tracker.doneSeen ? undefined : DONE_EVENT);
    this.phase = 'done';
    if (how !== 'eof') this.log.info({ how }, 'leg ended after finish_reason');
    return { type: 'finished' };
  }

  private async routerUnreachable(reason: string): Promise<LegOutcome> {
    // Reference behaviour: 429, not 5xx, so front proxies that retry 5xx do not hammer an unreachable tier.
    this.settleSlot('failed');
    const status = this.ctx.config.unreachableStatus;
    const body = clientErrorBody({ code: 'router_unreachable', message: 'The inference router tier is unreachable.', requestId: this.requestId, retryable: true, reason });
    this.log.warn({ decision: 'FAILED', reason, status }, 'router tier unreachable');
    await this.delivery.respond(status, clientErrorHeaders(1000), body);
    this.reason = reason;
    return { type: 'responded' };
  }

  /**
   * Pre-commit failure that will not be retried. Nothing reached the client yet, headers included, so the
   * give-up is an HTTP error it can act on (JSON body, `retryable`, `Retry-After`), never `200` and then a
   * reset. The engine's own answers (its last 503, an in-band error event) pass through unchanged, unless
   * admission refused the retry: then the 503 is the gateway's, saying why.
   */
  private async passFailureThrough(out: Extract<LegOutcome, { type: 'failed' }>, reason: string, retryAfterMs = 1000): Promise<void> {
    this.phase = 'interrupted';
    this.setOutcome('failed-before-first-delta', `${out.failure}:${reason}`);
    this.log.warn({ decision: 'PASSTHROUGH_FAILURE', failure: out.failure, detail: out.detail, reason }, 'failure before the first delta passed through');
    if (this.req.structured && this.attemptHadHeaders) {
      // Held structured output is never released incomplete: one valid document or the error.
      this.delivery.discardHeldBody();
      await this.delivery.end(interruptionEvent({ requestId: this.requestId, deliveredOutputTokens: 0, reason: `${out.failure}:${reason}`, partialOutput: false }));
      return;
    }
    const refused = reason.startsWith('recovery-');
    if (out.engineAnswer && !refused) return await this.delivery.respond(out.engineAnswer.status, out.engineAnswer.headers, out.engineAnswer.body);
    if (this.attemptHadHeaders && (out.failure === 'error-event' || out.failure === 'abort-finish')) {
      if (out.heldToolCall) this.delivery.hold(out.heldToolCall);
      await this.delivery.end(Buffer.concat([out.failingEvent ?? Buffer.alloc(0), DONE_EVENT]));
      return;
    }
    const timeout = out.failure === 'headers-timeout' || out.failure === 'first-delta-timeout';
    const [status, code]: [number, ClientErrorCode] = refused ? [503, 'recovery_unavailable'] : timeout ? [504, 'upstream_timeout'] : [502, 'upstream_failed'];
    const message = refused
      ? `The upstream failed before responding (${out.failure}) and the gateway could not re-run the request now (${reason}).`
      : `The upstream failed before responding (${out.failure}).`;
    this.delivery.discardAttempt();
    await this.delivery.respond(status, clientErrorHeaders(retryAfterMs), clientErrorBody({ code, message, requestId: this.requestId, retryable: true, reason: `${out.failure}:${reason}` }));
  }

  private async onPostCommitFailure(out: Extract<LegOutcome, { type: 'failed' }>): Promise<void> {
    const { failure, detail } = out;
    const cfg = this.ctx.config;
    const t = this.tracker;
    const kase = classifyCase(t.toolCallsSeen, t.reasoning, t.content);
    this.logTransition('TRIGGERED', { failure, detail, case: kase });
    this.failedAt = Date.now();
    this.ctx.metrics.interruption(failure, 'decode');
    const input = {
      failure,
      leg: 1 as const,
      toolCallDelivered: t.toolCallsSeen,
      recoverableText: t.reasoning !== '' || t.content !== '',
      continuationConfigured: cfg.continuationModel !== undefined,
      continuationEnabled: cfg.continuationEnabled,
    };
    const d = decidePostCommit(input);
    if (d.action === 'interrupt') {
      if (d.reason === 'continuation-disabled') this.log.info({ decision: 'SKIPPED', reason: d.reason, case: kase }, 'dry run: continuation detected but CONTINUATION_ENABLED=false');
      return await this.interrupt(d.reason, out.heldToolCall);
    }
    await this.continueFromPrefix(out.heldToolCall);
  }

  /** `heldToolCall`: an incomplete tool call held back at the failure, dropped if a continuation starts. */
  private async continueFromPrefix(heldToolCall: Buffer | undefined): Promise<void> {
    const cfg = this.ctx.config;
    const rates = { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken };
    const counted = await countRecovered(cfg.tokenizeUrl, this.req.payload, this.tracker.reasoning, this.tracker.content, rates, (why) =>
      this.log.warn({ decision: 'TOKENIZE_FALLBACK', reason: why }, 'tokenize failed, using the character estimate'),
      cfg.tokenizeTimeoutMs,
    );
    if (this.gone) return;
    this.countMethod = counted.method;
    const plan = planContinuationRequest(this.req.payload, this.tracker, { continuationModel: cfg.continuationModel ?? '', engine: cfg.engine, rates, recovered: counted });
    if (plan.kind === 'skip') {
      this.log.info({ decision: 'SKIPPED', reason: plan.reason }, 'no continuation leg');
      return await this.interrupt(plan.reason, heldToolCall);
    }
    const refused = await this.admitRecovery(counted.promptTokens, counted.totalRecovered);
    if (this.gone) return;
    if (refused) return await this.interrupt(this.shuttingDown ? 'gateway-shutdown' : `recovery-${refused.reason}`, heldToolCall);
    if (heldToolCall) this.log.info({ decision: 'HELD_TOOL_CALL_DISCARDED', bytes: heldToolCall.length }, 'tool call held at the failure: the continuation starts before it');
    this.recovered = plan.recovered;
    this.logTransition('ATTEMPT', {
      leg: 2,
      case: plan.case,
      family: familyFor(cfg.continuationModel ?? '').name,
      recovered_reasoning_tokens: plan.recovered.reasoningTokens,
      recovered_content_tokens: plan.recovered.contentTokens,
      budget_fields: plan.budgetFields,
    });
    const res = await this.openLeg(cfg.continuationUrl, this.requestId ? `${this.requestId}-c1` : undefined, Buffer.from(JSON.stringify(plan.body)));
    if (this.gone) return;
    if (res instanceof LegOpenError) {
      this.settleSlot(res.kind === 'aborted' ? 'neutral' : 'failed');
      return await this.interrupt(this.shuttingDown ? 'gateway-shutdown' : `leg2-failed-to-start:${res.kind}`);
    }
    if (res.status !== 200) {
      this.settleSlot('failed');
      res.body.destroy();
      return await this.interrupt(`leg2-status-${res.status}`);
    }
    const out = await relayLeg2({
      ctx: this.ctx,
      log: this.log,
      reader: new LegReader(res.body),
      delivery: this.delivery,
      tracker: this.tracker,
      recovered: plan.recovered,
      multimodal: this.req.multimodal,
      clientWantsUsage: this.req.payload?.stream_options?.include_usage === true,
      accounting: { legs: 2, method: this.countMethod },
      isGone: () => this.gone,
      onFirstByte: () => this.ctx.metrics.observeRecoveryLatency((Date.now() - this.failedAt) / 1000),
      onFirstToken: () => this.settleSlot('ok'),
    });
    this.settleSlot(out.type === 'failed' && !this.shuttingDown ? 'failed' : 'neutral');
    if (out.type === 'gone') return;
    if (out.type === 'finished') {
      this.phase = 'done';
      this.ctx.metrics.recovery('continuation', 'succeeded');
      this.logTransition('SUCCEEDED', { leg: 2 });
      return this.setOutcome('completed-after-continuation');
    }
    this.ctx.metrics.recovery('continuation', 'failed');
    const d = decidePostCommit({ failure: out.type === 'failed' ? out.failure : 'reset', leg: 2, toolCallDelivered: false, recoverableText: true, continuationConfigured: true, continuationEnabled: true });
    await this.interrupt(this.shuttingDown ? 'gateway-shutdown' : d.action === 'interrupt' ? d.reason : 'leg2-failed');
  }

  private async endForShutdown(): Promise<void> {
    if (this.delivery.committed) return await this.interrupt('gateway-shutdown');
    this.phase = 'interrupted';
    this.setOutcome('failed-before-first-delta', 'gateway-shutdown');
    this.delivery.discardAttempt();
    await this.delivery.respond(503, clientErrorHeaders(1000), clientErrorBody({ code: 'gateway_shutdown', message: 'The gateway is shutting down.', requestId: this.requestId, retryable: true }));
  }

  /**
   * Ends a committed stream with the interruption event: never a silent truncation. A tool call held back
   * at the failure is released first (the reference does so when nothing continues it).
   */
  private async interrupt(reason: string, heldToolCall?: Buffer): Promise<void> {
    this.abort?.abort();
    if (heldToolCall) {
      this.log.info({ decision: 'HELD_TOOL_CALL_RELEASED', bytes: heldToolCall.length }, 'tool call held at the failure');
      await this.delivery.write(heldToolCall);
    }
    this.phase = 'interrupted';
    this.setOutcome('interrupted', reason);
    this.ctx.metrics.interruptionEvent(reason);
    this.log.warn({ decision: 'FAILED', reason, delivered_output_tokens: this.deliveredTokens() }, 'interruption event sent');
    await this.delivery.end(interruptionEvent({ requestId: this.requestId, deliveredOutputTokens: this.deliveredTokens(), reason }));
  }

  private deliveredTokens(): number {
    const c = this.ctx.config;
    return estimateTokens(this.tracker.reasoning + this.tracker.content, c.cjkCharsPerToken, c.otherCharsPerToken);
  }

  private setOutcome(outcome: string, reason?: string): void {
    if (this.outcome !== 'in-progress' && outcome !== 'client-disconnected') return;
    this.outcome = outcome;
    this.reason = reason ?? this.reason;
  }

  private logTransition(decision: string, extra: Record<string, unknown> = {}): void {
    this.log.info({ decision, completion_id: this.tracker.id, phase: this.phase, attempt: this.attempt, legs: this.legs, first_delta_sent: this.firstDeltaAt !== null, ...extra }, decision);
  }

  private logEnd(): void {
    const now = Date.now();
    this.log.info(
      {
        event: 'request_end',
        completion_id: this.tracker.id,
        model: this.tracker.model,
        phase: this.phase,
        attempt: this.attempt,
        legs: this.legs,
        first_delta_sent: this.firstDeltaAt !== null,
        delivered_output_tokens: this.deliveredTokens(),
        delivered_reasoning_chars: this.tracker.reasoning.length,
        delivered_content_chars: this.tracker.content.length,
        recovered_tokens: this.recovered?.totalRecovered ?? 0,
        accounting: this.recovered ? this.countMethod : null,
        outcome: this.outcome,
        reason: this.reason,
        upstream_status: this.upstreamStatus,
        malformed_events: this.tracker.malformed,
        ttfd_ms: this.firstDeltaAt ? this.firstDeltaAt - this.started : null,
        total_ms: now - this.started,
      },
      'request_end',
    );
  }
}
