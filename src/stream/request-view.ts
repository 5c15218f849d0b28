// The request as its steps see it: one read-only view (request-port.ts names the slice each step takes), and
// the few callbacks through which the request acts for them (send a leg, hold a re-prefill slot, deliver).
// Built once by the request (originated-response.ts); every getter reads the request's current value, and
// nothing here changes it.
import { Leg1IdLedger } from '../continuation/token-ids/leg1-ledger';
import { leg1Body, leg1IdsDecision } from '../continuation/token-ids/leg1-request';
import type { Decision } from '../obs/decisions';
import type { Logger } from '../obs/logger';
import type { RequestTrace } from '../obs/tracing';
import { idempotencyKeyOf } from '../openai/tool-call-ids';
import { type NextRequest, nextRequest } from '../recovery/next-request';
import type { FailureCause } from '../recovery/reasons';
import { requestSource } from '../recovery/request-source';
import type { SlotEnd } from '../recovery/slot-evidence';
import type { RequestCancellation } from './cancellation';
import { continuationModelOf, type GatewayContext, type InScopeRequest } from './context';
import type { EndFacts, Ending } from './ending';
import type { Outgoing } from './legs/leg-loop';
import type { LegSender } from './legs/leg-sender';
import type { ContinuationPort, GiveUpView, Leg1Port, OpenLeg, Refusal, TrackerView } from './request-port';
import type { RequestFacts } from './request-record';

/** What only the request can do or know, handed to its view. */
export interface RequestActions {
  tracker(): TrackerView;
  committed(): boolean;
  attemptHadHeaders(): boolean;
  modelRevision(): string | undefined;
  readonly openLeg: OpenLeg;
  readonly deliver: (out: readonly Outgoing[]) => Promise<void> | undefined;
  admit(promptTokens: number, deliveredTokens: number, due?: number): Promise<Refusal>;
  settleSlot(end: SlotEnd): void;
  cancelLeg(): void;
  logTransition(decision: Decision, extra?: Record<string, unknown>): void;
}

export class RequestView implements Leg1Port, ContinuationPort, GiveUpView {
  readonly requestId: string | undefined;
  readonly toolCallKey: string | undefined;
  readonly firstDeltaDue: number;
  readonly tokenIds: Leg1IdLedger | undefined;
  readonly tokenIdsOff: string | undefined;
  /** Leg 1's body: the client's, with the fields that ask for token ids when they are asked. */
  private readonly leg1Body: Buffer;

  constructor(
    private readonly ctx: GatewayContext,
    readonly req: InScopeRequest,
    private readonly facts: Readonly<RequestFacts>,
    private readonly sender: LegSender,
    readonly log: Logger,
    readonly trace: RequestTrace,
    readonly cancellation: RequestCancellation,
    private readonly act: RequestActions,
  ) {
    this.requestId = req.clientHeaders['x-request-id'];
    this.toolCallKey = idempotencyKeyOf(req.clientHeaders);
    this.firstDeltaDue = facts.started + ctx.config.firstDeltaDeadlineMs;
    // By ids for chat streams only: a completion continues its prompt as text (src/completions/), and a
    // Responses stream's leg 1 is the engine's own Responses stream, which carries no ids.
    const ids =
      req.endpoint === 'chat'
        ? leg1IdsDecision(ctx.config.engine, ctx.config.tokenIdsContinuation, req.payload)
        : { off: `endpoint-${req.endpoint}` };
    this.tokenIds = 'ask' in ids ? new Leg1IdLedger(ids.ask) : undefined;
    this.tokenIdsOff = 'off' in ids ? ids.off : undefined;
    this.leg1Body = 'ask' in ids ? leg1Body(req.payload, ids.ask) : req.rawBody;
  }

  get config() {
    return this.ctx.config;
  }
  get metrics() {
    return this.ctx.metrics;
  }
  get rawBody(): Buffer {
    return this.leg1Body;
  }
  /** A Responses stream reads leg 1's events its own way (src/endpoints/responses/leg1-read.ts). */
  get readEvent() {
    return this.req.responses?.read;
  }
  get structured(): boolean {
    return this.req.structured;
  }
  get tracker(): TrackerView {
    return this.act.tracker();
  }
  get attempt(): number {
    return this.facts.attempt;
  }
  get causes(): readonly FailureCause[] {
    return this.facts.causes;
  }
  get attemptHadHeaders(): boolean {
    return this.act.attemptHadHeaders();
  }
  get continuationModel(): string | undefined {
    return continuationModelOf(this.ctx);
  }
  get chatTemplate() {
    return this.ctx.chatTemplate;
  }
  get tokenizer() {
    return this.ctx.tokenizer;
  }
  get lastHost(): string | undefined {
    return this.sender.lastHost;
  }
  get leg1SentAt(): number {
    return this.sender.leg1SentAt;
  }
  get failedAt(): number {
    return this.facts.failedAt;
  }
  get modelRevision(): string | undefined {
    return this.act.modelRevision();
  }
  /** Who sent the request, as the brake tells `repeat` failures apart (a digest, never logged). */
  get source(): string {
    return requestSource(this.req.clientHeaders, this.req.rawBody);
  }
  get openLeg(): OpenLeg {
    return this.act.openLeg;
  }

  /** What the request knows as it delivers `e` (ending.ts EndFacts): an interruption's next request is built here. */
  endFacts(e: Ending, deliveredOutputTokens: number): EndFacts {
    const nextRequest = e.kind === 'interrupted' && e.partialOutput ? this.nextRequest() : undefined;
    return {
      requestId: this.requestId,
      deliveredOutputTokens,
      doneSeen: this.tracker.doneSeen,
      nextRequest,
      responses: this.req.responses,
    };
  }

  /**
   * The interruption event's ready continuation request (src/recovery/next-request.ts), from what the client has now;
   * undefined when there is none. Never throws: the interruption event goes out whatever happens here.
   */
  nextRequest(): NextRequest | undefined {
    // A Responses request with no chat form (src/endpoints/responses/to-chat.ts): nothing to continue from.
    if (this.req.responses?.notContinuable !== undefined) return undefined;
    const cfg = this.ctx.config;
    const target = {
      continuationModel: this.continuationModel ?? '',
      engine: cfg.engine,
      served: this.chatTemplate?.served(),
      clock: { leg1At: new Date(this.leg1SentAt), now: new Date() },
    };
    const rates = { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken };
    try {
      return nextRequest(this.req, this.tracker, { maxBytes: cfg.interruptionNextRequestMaxBytes, rates, target });
    } catch (e) {
      this.log.warn({ err: e }, 'no next request for the interruption event');
      return undefined;
    }
  }

  isGone(): boolean {
    return this.cancellation.cause === 'client-gone';
  }
  committed(): boolean {
    return this.act.committed();
  }
  deliver(out: readonly Outgoing[]): Promise<void> | undefined {
    return this.act.deliver(out);
  }
  admit(promptTokens: number, deliveredTokens: number, due?: number): Promise<Refusal> {
    return this.act.admit(promptTokens, deliveredTokens, due);
  }
  settleSlot(end: SlotEnd): void {
    this.act.settleSlot(end);
  }
  /** A leg's first generated token: its re-prefill is over (the slot is settled) and its span says so. */
  onFirstToken(): void {
    this.act.settleSlot({ kind: 'first-token' });
    this.trace.legFirstToken();
  }
  cancelLeg(): void {
    this.act.cancelLeg();
  }
  logTransition(decision: Decision, extra: Record<string, unknown> = {}): void {
    this.act.logTransition(decision, extra);
  }
}
