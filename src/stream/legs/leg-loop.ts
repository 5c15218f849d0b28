// The one read loop for a leg. Leg 1 (the original answer) and leg 2 (the continuation) read, time and end
// the same way; they differ only in what they make of each event, which is their LegHooks (the wrapping
// style of undici's handlers). A hook returns what the client should get (Outgoing: bytes, and the events
// they tell the request's tracker); the loop hands each read's worth to the request's deliver(), the one
// way to the client. Every silence goes to the planner (decideOnSilence); every way a leg can end comes
// back as one LegOutcome; the leg is fenced (its socket aborted, nothing more read) on the way out.

import type { Logger } from '../../obs/logger';
import type { Metrics } from '../../obs/metrics';
import type { FailureKind, SilenceDecision } from '../../recovery/planner';
import { gateEvent, type LegFinishState } from '../../sse/finish-gate';
import { keepAliveDue } from '../../sse/keep-alives';
import type { SseEvent } from '../../sse/parser';
import { type ObservedEvent, StreamTracker } from '../../sse/tracker';
import type { LegReader } from '../../upstream/leg-reader';

/** Bytes for the client and the events they carry (applied to the request's tracker when delivered). */
export interface Outgoing {
  readonly bytes: Buffer;
  readonly events: readonly ObservedEvent[];
  /** Leg 1 before the commit point: this item is the first delta (the commit point is reached with it). */
  readonly commit?: boolean;
}

/** How a leg ended after its answer's finish_reason: the stream's end, a reset, or silence. */
export type FinishedHow = 'eof' | 'reset-after-finish' | 'stall-after-finish';

/** How a leg ended, from the state machine's point of view. */
export type LegOutcome =
  | { type: 'finished'; how: FinishedHow } // finish_reason seen and the stream ended (or went quiet) after it
  | {
      type: 'failed';
      failure: FailureKind;
      detail?: string;
      /** The engine's in-band error or abort event, passed on if the request gives up before the first delta. */
      failingEvent?: Buffer;
      /** A tool call held back (BUFFER_TOOL_CALLS) when the leg failed. */
      heldToolCall?: Buffer;
      /** The engine's own answer (a 503 before any body), passed on unchanged if no retry follows. */
      engineAnswer?: { status: number; headers: Record<string, string>; body: Buffer };
      /** The body ended cleanly before a single byte of it: an empty answer (src/recovery/give-up-detail.ts). */
      emptyBody?: boolean;
    }
  | { type: 'gone' }; // the client left

export type LegFailure = Extract<LegOutcome, { type: 'failed' }>;

/** The planner's view of one silence on this leg (decideOnSilence's input minus the settings). */
export interface Silence {
  anyBytes: boolean;
  silentForMs: number;
  totalStalledMs: number;
  sinceLegStartMs: number;
}

export interface LegHooks {
  readonly metrics: Pick<Metrics, 'malformedEvent' | 'droppedAfterFinish' | 'engineCommentsDropped'>;
  readonly log: Logger;
  readonly leg: 1 | 2;
  /** How this leg's events are read (default: as chat completion chunks; a Responses stream's leg 1 its own way). */
  readonly read?: (ev: SseEvent) => ObservedEvent;
  isGone(): boolean;
  /** How long the next read may wait before it counts as silence (ms). */
  idlePeriodMs(): number;
  onSilence(s: Silence): SilenceDecision;
  /** The leg's answer is complete (a normal finish_reason was seen, in this leg's own events). */
  finished(): boolean;
  /** The answer is complete: what the leg still holds back for the client (leg 2's first words), or why not. */
  atFinish?(): Outgoing[] | LegFailure;
  /** A failure of this leg, with what the leg holds back at that moment (leg 1: a tool call). */
  failed(failure: FailureKind, detail?: string, failingEvent?: Buffer): LegFailure;
  /** One classified event (not malformed, not a failure): what the client gets of it, or a failure that ends the leg. */
  onEvent(o: ObservedEvent, raw: Buffer): readonly Outgoing[] | LegFailure;
  /** The request's delivery of what onEvent produced (held or sent); a promise under backpressure. */
  deliver(out: readonly Outgoing[]): Promise<void> | undefined;
  /** The first bytes of this leg arrived. */
  onFirstBytes?(): void;
  /** The dry run's stall (decideOnSilence `skip`): reported once per silence, and the leg read on. */
  onSkipped?(failure: FailureKind, silentMs: number): void;
}

const NO_BYTES = Buffer.alloc(0);

/** The answer is complete: what the leg still holds is delivered, and the leg ends `finished`. */
async function finishLeg(h: LegHooks, how: FinishedHow): Promise<LegOutcome> {
  const rest = h.atFinish?.() ?? [];
  if (!Array.isArray(rest)) return rest as LegFailure;
  if (rest.length > 0) await h.deliver(rest);
  return { type: 'finished', how };
}

export async function readLeg(reader: LegReader, h: LegHooks): Promise<LegOutcome> {
  const silence = new SilenceCount();
  const after = new AfterFinish(h);
  let first = true;
  try {
    for (;;) {
      const period = h.idlePeriodMs();
      // One deadline per period, counted from where the wait began: a period never restarts because the caller was busy.
      const deadline = silence.waitFrom + period;
      const r = await reader.next(period > 0 ? Math.max(1, deadline - Date.now()) : 0);
      if (h.isGone()) return { type: 'gone' };
      if (r.type === 'idle') {
        const ended = await onIdle(reader, h, silence, deadline);
        if (ended) return ended;
        continue;
      }
      if (r.type === 'end' || r.type === 'reset') return await onEnd(reader, h, r);
      if (first) {
        first = false;
        h.onFirstBytes?.();
      }
      silence.eventsArrived();
      const ended = await onEvents(h, r.events, after);
      if (ended) return ended;
    }
  } finally {
    reader.fence();
    h.metrics.engineCommentsDropped(after.commentsDropped + reader.commentsSkipped);
    h.metrics.malformedEvent(reader.emptyDataSkipped);
  }
}

/**
 * The leg's silence, counted from complete events (not bytes: a partial event is still silence): how long this
 * silence and all of the leg's silences lasted, one WAITING at warn per silence, one dry-run report.
 */
class SilenceCount {
  readonly legStart = Date.now();
  /** The last complete event. */
  lastEvent = this.legStart;
  /** Where the current wait began: the last event, or the end of the previous silent period. */
  waitFrom = this.legStart;
  stalledMs = 0;
  waitingLogged = false;
  skipReported = false;

  eventsArrived(): void {
    this.lastEvent = Date.now();
    this.waitFrom = this.lastEvent;
    this.waitingLogged = false;
    this.skipReported = false;
  }

  /** A period waited out in silence until `now`: the planner's view of it. */
  periodEnded(now: number, anyBytes: boolean): Silence {
    // Only the silent part of this period counts (it may have started before the last event).
    this.stalledMs += now - Math.max(this.lastEvent, this.waitFrom);
    this.waitFrom = now;
    return { anyBytes, silentForMs: now - this.lastEvent, totalStalledMs: this.stalledMs, sinceLegStartMs: now - this.legStart };
  }
}

/** A silent period ended: the leg finished, failed, or is waited on (undefined). */
async function onIdle(reader: LegReader, h: LegHooks, silence: SilenceCount, deadline: number): Promise<LegOutcome | undefined> {
  // A timer may fire a millisecond before Date.now() reaches its deadline: what was waited for is the deadline, so
  // a silence of exactly the stall timer is never read as one millisecond short of it.
  const now = Math.max(Date.now(), deadline);
  const s = silence.periodEnded(now, reader.anyBytes);
  if (h.finished()) return await finishLeg(h, 'stall-after-finish');
  const d = h.onSilence(s);
  if (d.action === 'fail') return h.failed(d.failure, reader.partialBytes ? `partial-event(${reader.partialBytes}B)` : undefined);
  if (d.action === 'skip' && !silence.skipReported) {
    silence.skipReported = true;
    h.onSkipped?.(d.failure, s.silentForMs);
  }
  const waiting = { decision: 'WAITING', leg: h.leg, silent_ms: s.silentForMs, stalled_ms: s.totalStalledMs };
  if (silence.waitingLogged) h.log.debug(waiting, `leg${h.leg} still silent: waiting`);
  else h.log.warn(waiting, `leg${h.leg} silent, not actionable: waiting`);
  silence.waitingLogged = true;
  return undefined;
}

/** The body ended or was reset: after the answer's finish_reason a normal end, else a failure. */
async function onEnd(reader: LegReader, h: LegHooks, r: { type: 'end' } | { type: 'reset'; error: unknown }): Promise<LegOutcome> {
  if (h.finished()) return await finishLeg(h, r.type === 'end' ? 'eof' : 'reset-after-finish');
  if (r.type === 'end' && !reader.anyBytes) return { ...h.failed('eof', 'empty-body'), emptyBody: true };
  const detail = r.type === 'reset' ? errorCode(r.error) : reader.partialBytes ? `eof-mid-event(${reader.partialBytes}B)` : 'clean-eof';
  return h.failed(r.type === 'end' ? 'eof' : 'reset', detail);
}

/**
 * What a leg relayed of its end (a finish, [DONE]), for the finish gate (src/sse/finish-gate.ts), and what it
 * dropped after it: counted per event, logged once per leg (an engine may send any number of them).
 */
class AfterFinish implements LegFinishState {
  done = false;
  private dropped = 0;
  /** Engine comments: when one was last relayed, how many were dropped (src/sse/keep-alives.ts). */
  private commentRelayedAt: number | null = null;
  commentsDropped = 0;
  /** Malformed events are counted each, logged once per leg (an engine may send any number). */
  malformedLogged = false;
  constructor(private readonly h: LegHooks) {}

  get finished(): boolean {
    return this.h.finished();
  }

  /** A comment arrived: relayed (true) or dropped, at most one per KEEP_ALIVE_INTERVAL_MS. */
  relayComment(): boolean {
    const now = Date.now();
    if (!keepAliveDue(this.commentRelayedAt, now)) {
      this.commentsDropped++;
      return false;
    }
    this.commentRelayedAt = now;
    return true;
  }

  drop(after: 'finish' | 'done', ev: SseEvent, o: ObservedEvent): void {
    this.h.metrics.droppedAfterFinish(after);
    if (this.dropped++ > 0) return;
    const record = { decision: 'DROPPED_AFTER_FINISH', leg: this.h.leg, after, kind: o.kind, bytes: ev.raw.length };
    this.h.log.warn(
      record,
      `engine event after the leg's ${after === 'done' ? '[DONE]' : 'finish_reason'} dropped (later ones counted only)`,
    );
  }
}

/** One read's events: what the client gets of them is delivered; a failing event ends the leg (returned). */
async function onEvents(h: LegHooks, events: readonly SseEvent[], after: AfterFinish): Promise<LegFailure | undefined> {
  const out: Outgoing[] = [];
  const endWith = async (f: LegFailure) => {
    // What came before the failing event in this read still belongs to the client.
    if (out.length) await h.deliver(out);
    return f;
  };
  for (const ev of events) {
    const o = h.read ? h.read(ev) : StreamTracker.read(ev);
    if (o.kind === 'malformed') {
      h.metrics.malformedEvent();
      out.push({ bytes: NO_BYTES, events: [o] }); // counted in the request's record, never sent
      if (!after.malformedLogged)
        h.log.warn(
          { decision: 'MALFORMED_EVENT', leg: h.leg, bytes: ev.raw.length },
          'malformed SSE event skipped (later ones counted only)',
        );
      after.malformedLogged = true;
      continue;
    }
    if (o.kind === 'other' && !after.done && !after.relayComment()) continue;
    const gate = gateEvent(o, after);
    if (gate === 'malformed-finish') return await endWith(h.failed('malformed-finish', `finish_reason:${o.malformedFinish}`));
    if (gate === 'after-finish' || gate === 'after-done') {
      after.drop(gate === 'after-done' ? 'done' : 'finish', ev, o);
      continue;
    }
    if (o.kind === 'done') after.done = true;
    const failure: FailureKind | null =
      o.kind === 'error' ? 'error-event' : o.kind === 'chunk' && o.finishReason === 'abort' ? 'abort-finish' : null;
    if (failure) return await endWith(h.failed(failure, undefined, ev.raw));
    // `[DONE]` before any finish_reason is an unfinished answer, a failure like a clean EOF: forwarded, an SDK
    // would stop reading there and take the truncated answer for a complete one.
    if (o.kind === 'done' && !h.finished()) return await endWith(h.failed('eof', 'done-without-finish'));
    const got = h.onEvent(o, ev.raw);
    if (!Array.isArray(got)) return await endWith(got as LegFailure);
    for (const x of got) out.push(x);
  }
  const full = out.length ? h.deliver(out) : undefined;
  if (full) await full; // a promise only under backpressure
  return undefined;
}

function errorCode(e: unknown): string {
  const err = e as { code?: string; message?: string };
  return err?.code ?? err?.message ?? 'reset';
}
