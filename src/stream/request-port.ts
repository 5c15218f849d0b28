// What the request's helpers (give-up.ts, continuation.ts, leg1-attempt.ts) may see and do of the request they
// serve: narrow interfaces that OriginatedResponse implements, so that the helpers never import the class that
// imports them (no cycle in src/stream, not even a type-only one).
import type { Decision } from '../obs/decisions';
import type { Logger } from '../obs/logger';

import type { RequestTrace } from '../obs/tracing';
import type { FailureKind } from '../recovery/planner';
import type { FailureCause, RecoveryRefusal } from '../recovery/reasons';
import type { SlotEnd } from '../recovery/slot-evidence';
import type { RecoveredTokens } from '../recovery/token-estimate';
import type { StreamTracker } from '../sse/tracker';
import type { LegOpenError, LegResponse } from '../upstream/client';
import type { RequestCancellation } from './cancellation';
import type { GatewayContext, InScopeRequest } from './context';
import type { Delivery } from './delivery';
import type { Ending } from './ending';
import type { LegOutcome } from './leg-loop';

/** Admission's refusal as the request sees it (null: a slot is held). */
export type Refusal = { reason: RecoveryRefusal; retryAfterMs?: number } | null;

export type CountMethod = 'tokenizer' | 'tokenize' | 'estimate' | 'engine-usage';

/** How a request ends without its answer (give-up.ts). */
export interface GiveUpPort {
  readonly ctx: GatewayContext;
  readonly log: Logger;
  readonly delivery: Delivery;
  readonly tracker: StreamTracker;
  readonly req: InScopeRequest;
  readonly requestId: string | undefined;
  readonly cancellation: RequestCancellation;
  readonly attemptHadHeaders: boolean;
  /** Leg 1 attempts sent so far. */
  readonly attempt: number;
  /** What each failed attempt and leg died of, in order (src/recovery/give-up-detail.ts). */
  readonly causes: readonly FailureCause[];
  /** Records how the request ends (ending.ts); false: the client left first, deliver nothing. */
  finish(ending: Ending): boolean;
  settleSlot(end: SlotEnd): void;
  cancelLeg(): void;
}

/** Sending legs: leg 1's attempts and the continuation legs. */
interface LegSender extends GiveUpPort {
  readonly toolCallKey: string | undefined;
  readonly gone: boolean;
  readonly trace: RequestTrace;
  openLeg(url: string, requestId: string | undefined, body: Buffer, continuation?: boolean): Promise<LegResponse | LegOpenError>;
}

/** What a leg 1 attempt's response head said (leg1-attempt.ts reports it as soon as it is read). */
export interface AttemptHead {
  status: number;
  /** A 200 event stream: its headers are held, to be sent at the commit point. */
  eventStream: boolean;
  /** Leg 1's model revision from MODEL_REVISION_HEADER, if the engine sent one. */
  revision?: string;
}

/** One leg 1 attempt (leg1-attempt.ts). */
export interface Leg1Port extends LegSender {
  readonly attempt: number;
  readonly firstDeltaDue: number;
  /** A new attempt starts (nothing of its head is known) / its head was read. */
  noteHead(head: AttemptHead | null): void;
  commit(): Promise<void>;
  endAfterFinish(how: string): Promise<LegOutcome>;
  onDryRunTrigger(failure: FailureKind, silentMs: number): void;
}

/** The continuation legs (continuation.ts). */
export interface ContinuationPort extends LegSender {
  readonly lastHost: string | undefined;
  readonly modelRevision: string | undefined;
  /** Who sent the request, as the brake tells `repeat` failures apart (a digest, never logged). */
  readonly source: string;
  /** The continuation leg about to be sent: what it recovers, and how that was counted. */
  noteContinuation(recovered: RecoveredTokens, countMethod: CountMethod): void;
  /** A continuation leg failed after answering and another follows: recovery latency counts from now. */
  noteFailure(): void;
  /** A continuation leg failed: what of (the give-up's `causes`). */
  noteCause(cause: FailureCause): void;
  /** When the leg 1 attempt the client is reading was sent (ms since the epoch): the engine rendered its prompt then. */
  readonly leg1SentAt: number;
  /** When the failure the recovery in flight answers was seen (ms since the epoch). */
  readonly failedAt: number;
  admit(promptTokens: number, deliveredTokens: number, due?: number): Promise<Refusal>;
  logTransition(decision: Decision, extra?: Record<string, unknown>): void;
}
