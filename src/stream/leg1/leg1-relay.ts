// Leg 1's hooks on the leg loop: the original event bytes, untouched (tool_call ids aside, with an
// Idempotency-Key), marked with the commit point where the first delta is (for held structured output: the
// finish), and held back while a tool call is incomplete (BUFFER_TOOL_CALLS). It decides nothing about
// recovery and writes nothing: the loop reports how the leg ended and the request plans and delivers from there.

import type { GatewayConfig } from '../../config/env';
import type { Leg1IdLedger } from '../../continuation/token-ids/leg1-ledger';
import type { Decision } from '../../obs/decisions';
import type { Logger } from '../../obs/logger';
import type { Metrics } from '../../obs/metrics';
import { withIdempotentToolCallIds } from '../../openai/tool-call-ids';
import { classifyCase } from '../../recovery/interrupted-case';
import { decideOnSilence, type FailureKind, holdsUntilCommit, type SilenceDecision } from '../../recovery/planner';
import type { SseEvent } from '../../sse/parser';
import type { ObservedEvent } from '../../sse/tracker';
import type { LegReader } from '../../upstream/leg-reader';
import { type LegFailure, type LegHooks, type LegOutcome, type Outgoing, readLeg, type Silence } from '../legs/leg-loop';
import type { TrackerView } from '../request-port';

/**
 * The most a request holds back (a buffered tool call, held structured output) before giving up the
 * protection and delivering as it streams: memory per stream stays bounded whatever the engine sends.
 */
export const MAX_HELD_BYTES = 4 * 1024 * 1024;

/** What the relay may see of the request it serves, and the request's two callbacks. */
export interface Leg1Host {
  readonly config: GatewayConfig;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The request's tracker, read-only: the request applies what it delivers. */
  readonly tracker: TrackerView;
  /** Held whole until finish (BUFFER_STRUCTURED_OUTPUT). */
  readonly structured: boolean;
  /** How leg 1's events are read, when not as chat chunks (a Responses stream). */
  readonly readEvent?: (ev: SseEvent) => ObservedEvent;
  /** Derive tool_call ids from this key (src/openai/tool-call-ids.ts); the chunks that carry ids are re-encoded. */
  readonly toolCallKey: string | undefined;
  /** Leg 1's token ids, read from each chunk before the fields the gateway asked for are stripped. */
  readonly tokenIds?: Leg1IdLedger;
  isGone(): boolean;
  /** The request passed its commit point (read from its state). */
  committed(): boolean;
  /**
   * The attempt produced its first token: a retry's re-prefill is over. Usually the commit point too, but held
   * structured output commits only at its finish, long after the prefill.
   */
  onFirstToken(): void;
  /** The request's delivery: held before the commit point, sent after it. */
  deliver(out: readonly Outgoing[]): Promise<void> | undefined;
  /** A decision record with the request's phase (src/stream/request-record.ts). */
  logTransition(decision: Decision, extra: Record<string, unknown>): void;
}

/** The first-delta deadlines of this attempt (leg1-attempt.ts arms them for the wait for its head). */
export interface FirstDeltaDeadlines {
  /** When this attempt's first delta is due (FIRST_DELTA_TIMEOUT_SECONDS), or null (no per-attempt limit). */
  readonly firstDeltaDeadline: number | null;
  /** When the request's first delta is due, whatever the attempt (FIRST_DELTA_DEADLINE_SECONDS). */
  readonly requestDeadline: number;
}

/** The part of leg 1's output held back (an incomplete tool call). */
interface Hold {
  raw: Buffer[];
  obs: ObservedEvent[];
  bytes: number;
}

export function relayLeg1(h: Leg1Host, due: FirstDeltaDeadlines, reader: LegReader): Promise<LegOutcome> {
  return readLeg(reader, new Leg1Relay(h, due));
}

/** Leg 1's LegHooks: one attempt's state, current within one read (the request's tracker is updated per read). */
class Leg1Relay implements LegHooks {
  readonly leg = 1;
  readonly metrics: Metrics;
  readonly log: Logger;
  readonly read: ((ev: SseEvent) => ObservedEvent) | undefined;
  /**
   * BUFFER_TOOL_CALLS: a tool call cannot be continued part-way, so it is held until complete; if the leg dies
   * meanwhile, the continuation starts from the state before it. Holding only buys something when a
   * continuation can follow (reference: it needs CONTINUATION_ENABLED=true).
   */
  private readonly bufferToolCalls: boolean;
  private toolHold: Hold | null = null;
  /**
   * The deadlines before the first delta end at the attempt's first token (for held structured output long
   * before the commit point): what follows is a generation in progress, not a wait for one.
   */
  private tokenSeen = false;
  private sawFinish = false;
  private commitMarked = false;
  private heldBytes = 0;

  constructor(
    private readonly h: Leg1Host,
    private readonly due: FirstDeltaDeadlines,
  ) {
    this.metrics = h.metrics;
    this.log = h.log;
    this.read = h.readEvent;
    // A Responses stream's continuation writes text only (src/endpoints/responses/leg2-write.ts): a tool call
    // held back could never be continued, so it is relayed as it comes.
    this.bufferToolCalls = h.config.bufferToolCalls && h.config.continuationEnabled && h.readEvent === undefined;
  }

  isGone(): boolean {
    return this.h.isGone();
  }

  finished(): boolean {
    return this.sawFinish;
  }

  deliver(out: readonly Outgoing[]): Promise<void> | undefined {
    return this.h.deliver(out);
  }

  idlePeriodMs(): number {
    const cfg = this.h.config;
    // Before the first token the next silence check is due no later than the first-delta deadlines.
    if (this.h.committed() || this.tokenSeen) return cfg.stallIdleTimeoutMs;
    const { firstDeltaDeadline, requestDeadline } = this.due;
    const firstDue = firstDeltaDeadline === null ? requestDeadline : Math.min(firstDeltaDeadline, requestDeadline);
    return Math.max(1, Math.min(cfg.stallIdleTimeoutMs, firstDue - Date.now()));
  }

  onSilence(s: Silence): SilenceDecision {
    const cfg = this.h.config;
    return decideOnSilence({
      ...s,
      committed: this.h.committed(),
      leg: 1,
      recoverable: this.h.tracker.recoverable,
      stallIdleTimeoutMs: cfg.stallIdleTimeoutMs,
      maxStallMs: cfg.maxStallMs,
      firstDeltaTimeoutMs: this.tokenSeen ? 0 : cfg.firstDeltaTimeoutMs,
      untilDeadlineMs: this.tokenSeen ? null : this.due.requestDeadline - Date.now(),
      // The dry run never changes a stream: a stall is reported, and leg 1 relayed for as long as it lives.
      dryRun: !cfg.continuationEnabled,
    });
  }

  onSkipped(failure: FailureKind, silentMs: number): void {
    reportDryRunTrigger(this.h, failure, silentMs);
  }

  failed(failure: FailureKind, detail?: string, failingEvent?: Buffer): LegFailure {
    const heldToolCall = this.toolHold ? Buffer.concat(this.toolHold.raw) : undefined;
    return { type: 'failed', failure, detail, failingEvent, heldToolCall };
  }

  onEvent(o: ObservedEvent, raw: Buffer): readonly Outgoing[] {
    const ids = this.h.tokenIds;
    if (ids && o.kind === 'chunk') {
      ids.observe(o.json);
      const stripped = ids.strip(o.json);
      if (stripped === 'drop') return [];
      if (stripped) {
        raw = Buffer.from(`data: ${JSON.stringify(stripped)}\n\n`);
        o = { ...o, json: stripped };
      }
    }
    const key = this.h.toolCallKey;
    if (key && o.toolCall) {
      const rewritten = withIdempotentToolCallIds(o.json, key);
      if (rewritten) raw = Buffer.from(`data: ${JSON.stringify(rewritten)}\n\n`);
    }
    if (this.toolHold === null && !(o.toolCall && this.bufferToolCalls && o.finishReason === null)) return [this.emit(raw, [o])];
    return this.holdToolCall(o, raw);
  }

  /** A tool call in progress is held until it completes (or grows past MAX_HELD_BYTES). */
  private holdToolCall(o: ObservedEvent, raw: Buffer): readonly Outgoing[] {
    this.toolHold ??= { raw: [], obs: [], bytes: 0 };
    const hold = this.toolHold;
    hold.raw.push(raw);
    hold.obs.push(o);
    hold.bytes += raw.length;
    const tooLarge = hold.bytes > MAX_HELD_BYTES;
    if (tooLarge) {
      // Bounded memory: a tool call this large is released as it is and no longer protected.
      this.metrics.bufferOverflow('tool-call');
      this.log.warn({ decision: 'HOLD_LIMIT', what: 'tool-call', bytes: hold.bytes }, 'held tool call too large: released unbuffered');
    }
    if (o.finishReason === null && o.kind !== 'done' && !tooLarge) return [];
    this.toolHold = null;
    return [this.emit(Buffer.concat(hold.raw), hold.obs)];
  }

  /** One item for the client; before the commit point, marked as the commit point where it is one. */
  private emit(raw: Buffer, obs: ObservedEvent[]): Outgoing {
    if (obs.some((o) => o.finishReason !== null)) this.sawFinish = true;
    if (this.commitMarked) return { bytes: raw, events: obs };
    this.heldBytes += raw.length;
    const complete = obs.some((o) => o.finishReason !== null || o.kind === 'done');
    const delta = obs.some((o) => o.hasDelta || o.usage);
    const overflow = this.heldBytes > MAX_HELD_BYTES;
    if (overflow && this.h.structured) {
      this.metrics.bufferOverflow('structured-output');
      const record = { decision: 'HOLD_LIMIT', what: 'structured-output', bytes: this.heldBytes };
      this.log.warn(record, 'held output too large: delivered unbuffered');
    }
    if ((delta || complete) && !this.tokenSeen) {
      this.tokenSeen = true;
      this.h.onFirstToken();
    }
    this.commitMarked = !holdsUntilCommit({ structured: this.h.structured, delta, complete, overflow });
    return { bytes: raw, events: obs, commit: this.commitMarked };
  }
}

/**
 * CONTINUATION_ENABLED=false: leg 1 stalled where a continuation would have followed. Detected and logged as
 * TRIGGERED then SKIPPED (the reason a continuation would give), and nothing else: the dry run never changes
 * a stream, leg 1 is relayed for as long as it lives.
 */
function reportDryRunTrigger(h: Leg1Host, failure: FailureKind, silentMs: number): void {
  const t = h.tracker;
  const kase = classifyCase(t.toolCallsSeen, t.reasoning, t.content);
  h.logTransition('TRIGGERED', { failure, detail: `silent ${silentMs} ms`, case: kase, dry_run: true });
  h.metrics.legFailure(failure, 'decode');
  h.log.info(
    { decision: 'SKIPPED', reason: 'continuation-disabled', case: kase, dry_run: true },
    'dry run: continuation detected but CONTINUATION_ENABLED=false; leg 1 relayed on',
  );
}
