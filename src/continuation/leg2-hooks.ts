// What every continuation leg's hooks on the leg loop share, whichever way leg 2 was asked: by text
// (template/leg2-relay.ts) or by token ids (token-ids/leg2-relay.ts). Both legs come after the commit point, so
// they are timed and fail alike: silence is waited out as the reference gateway does (STALL_IDLE_TIMEOUT_SECONDS
// a period, never longer than MAX_STALL_SECONDS in total, no first-delta deadline), a failure holds nothing back,
// and the request's gone-check, first bytes and delivery are the host's. They differ only in what they make of
// each event and when their answer is finished (finished, atFinish, onEvent): one base, so the two ways of
// continuing cannot drift apart on how a continuation waits, fails or reaches the client.
import type { GatewayConfig } from '../config/env';
import type { Logger } from '../obs/logger';
import type { Metrics } from '../obs/metrics';
import { decideOnSilence, type FailureKind, type SilenceDecision } from '../recovery/planner';
import type { ObservedEvent } from '../sse/tracker';
import type { LegFailure, LegHooks, Outgoing, Silence } from '../stream/legs/leg-loop';

/** What a continuation leg's hooks read of the request, on either path. */
export interface Leg2HooksHost {
  readonly config: Pick<GatewayConfig, 'stallIdleTimeoutMs' | 'maxStallMs'>;
  readonly metrics: Metrics;
  readonly log: Logger;
  isGone(): boolean;
  onFirstBytes(): void;
  /** The request's delivery (after the commit point: sent). */
  deliver(out: readonly Outgoing[]): Promise<void> | undefined;
}

/** A continuation leg's LegHooks, but for what it makes of each event and when its answer is finished. */
export abstract class Leg2Hooks<H extends Leg2HooksHost> implements LegHooks {
  readonly leg = 2;
  readonly metrics: Metrics;
  readonly log: Logger;

  constructor(protected readonly h: H) {
    this.metrics = h.metrics;
    this.log = h.log;
  }

  abstract finished(): boolean;

  abstract onEvent(event: ObservedEvent, raw: Buffer): readonly Outgoing[] | LegFailure;

  isGone(): boolean {
    return this.h.isGone();
  }

  idlePeriodMs(): number {
    return this.h.config.stallIdleTimeoutMs;
  }

  onSilence(s: Silence): SilenceDecision {
    const cfg = this.h.config;
    const limits = { stallIdleTimeoutMs: cfg.stallIdleTimeoutMs, maxStallMs: cfg.maxStallMs, firstDeltaTimeoutMs: 0 };
    return decideOnSilence({ ...s, committed: true, leg: 2, recoverable: true, ...limits });
  }

  failed(failure: FailureKind, detail?: string): LegFailure {
    return { type: 'failed', failure, detail };
  }

  onFirstBytes(): void {
    this.h.onFirstBytes();
  }

  deliver(out: readonly Outgoing[]): Promise<void> | undefined {
    return this.h.deliver(out);
  }
}
