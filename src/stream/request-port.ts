// What the request's steps (leg1/, src/continuation/, give-up.ts, the relays) may see of the request they
// serve: read-only views, and the few callbacks through which the request does what only it may (send a leg,
// hold a re-prefill slot, deliver to the client). OriginatedResponse builds them; no step imports it, and none
// can reach the client but through `deliver`, which the request implements.
import type { GatewayConfig } from '../config/env';
import type { Leg1IdLedger } from '../continuation/token-ids/leg1-ledger';
import type { Decision } from '../obs/decisions';
import type { Logger } from '../obs/logger';
import type { Metrics } from '../obs/metrics';
import type { RequestTrace } from '../obs/tracing';
import type { FailureCause, RecoveryRefusal } from '../recovery/reasons';
import type { StreamTracker } from '../sse/tracker';
import type { TextTokenizer } from '../templates/model-tokenizer';
import type { TemplateProvider } from '../templates/provider';
import type { LegOpenError, LegResponse } from '../upstream/client';
import type { RequestCancellation } from './cancellation';
import type { InScopeRequest } from './context';
import type { Outgoing } from './legs/leg-loop';

/** The request's tracker as a step sees it: everything it says, nothing that changes it (the request applies). */
export type TrackerView = Omit<Readonly<StreamTracker>, 'apply'>;

/** The request's cancellation as a step sees it: it can wait on it, not cancel. */
export type CancellationView = Pick<RequestCancellation, 'cancelled' | 'cause' | 'signal' | 'onCancel' | 'sleep'>;

/** Admission's refusal as the request sees it (null: a slot is held). */
export type Refusal = { reason: RecoveryRefusal; retryAfterMs?: number } | null;

export type CountMethod = 'tokenizer' | 'tokenize' | 'estimate' | 'engine-usage' | 'token-ids';

/** What every step reads of the process it runs in: the frozen settings, the metrics, the request's logger. */
export interface StepEnv {
  readonly config: GatewayConfig;
  readonly metrics: Metrics;
  readonly log: Logger;
}

/** What a give-up before the first delta reads (give-up.ts). */
export interface GiveUpView {
  readonly config: GatewayConfig;
  readonly log: Logger;
  readonly structured: boolean;
  /** The current attempt's 200 event-stream headers are held (sent at the commit point). */
  readonly attemptHadHeaders: boolean;
  /** Leg 1 attempts sent so far. */
  readonly attempt: number;
  /** What each failed attempt and leg died of, in order (src/recovery/give-up-detail.ts). */
  readonly causes: readonly FailureCause[];
}

/** Sending a leg (legs/leg-sender.ts, through the request, which fences it when superseded). */
export type OpenLeg = (
  url: string,
  requestId: string | undefined,
  body: Buffer,
  continuation?: boolean,
  path?: string,
) => Promise<LegResponse | LegOpenError>;

/** One leg 1 attempt up to its response head (leg1/leg1-attempt.ts). */
export interface Leg1Port {
  readonly config: GatewayConfig;
  readonly log: Logger;
  readonly requestId: string | undefined;
  readonly rawBody: Buffer;
  readonly attempt: number;
  /** The earlier attempts' causes (a give-up from the head names them, src/recovery/give-up-detail.ts). */
  readonly causes: readonly FailureCause[];
  /** FIRST_DELTA_DEADLINE_SECONDS after the request arrived. */
  readonly firstDeltaDue: number;
  readonly cancellation: CancellationView;
  readonly openLeg: OpenLeg;
  /** Fences the leg in flight (a first-delta deadline passed). */
  cancelLeg(): void;
}

/** The continuation legs (src/continuation/continuation.ts, src/continuation/template/leg2-prepare.ts). */
export interface ContinuationPort extends StepEnv {
  readonly req: InScopeRequest;
  readonly tracker: TrackerView;
  readonly requestId: string | undefined;
  readonly cancellation: CancellationView;
  /** The CONTINUATION_MODEL in effect (configured, or detected with `auto`). */
  readonly continuationModel: string | undefined;
  /** CHAT_TEMPLATE (src/templates/provider.ts) and TOKENIZER (src/templates/model-tokenizer.ts), when set. */
  readonly chatTemplate: TemplateProvider | undefined;
  readonly tokenizer: TextTokenizer | undefined;
  /** The replica that served the last leg, which a recovery leg asks to avoid. */
  readonly lastHost: string | undefined;
  /** Leg 1's model revision (its header, else its system_fingerprint). */
  readonly modelRevision: string | undefined;
  /** Who sent the request, as the brake tells `repeat` failures apart (a digest, never logged). */
  readonly source: string;
  /** When the leg 1 attempt the client is reading was sent (ms since the epoch): the engine rendered its prompt then. */
  readonly leg1SentAt: number;
  /** When the failure the recovery in flight answers was seen (ms since the epoch). */
  readonly failedAt: number;
  readonly toolCallKey: string | undefined;
  /** Leg 1's token ids (src/continuation/token-ids/), when it was asked for them; else why not (`tokenIdsOff`). */
  readonly tokenIds: Leg1IdLedger | undefined;
  readonly tokenIdsOff: string | undefined;
  readonly trace: RequestTrace;
  readonly openLeg: OpenLeg;
  isGone(): boolean;
  /** A re-prefill slot for this leg (held by the request until settled); null when granted. */
  admit(promptTokens: number, deliveredTokens: number): Promise<Refusal>;
  /** The leg's first generated token: its re-prefill slot is settled. */
  onFirstToken(): void;
  /** The request's delivery (sent: the request passed its commit point). */
  deliver(out: readonly Outgoing[]): Promise<void> | undefined;
  /** A decision record with the request's phase (request-record.ts). */
  logTransition(decision: Decision, extra?: Record<string, unknown>): void;
}
