// The one read loop for a leg. Leg 1 (the original answer) and leg 2 (the continuation) read, time and end
// the same way; they differ only in what they do with each event, which is their LegHooks (the wrapping
// style of undici's handlers). Every silence goes to the planner (decideOnSilence); every way a leg can end
// comes back as one LegOutcome; the leg is fenced (its socket aborted, nothing more read) on the way out.

import type { Logger } from '../obs/logger';
import type { FailureKind, SilenceDecision } from '../recovery/planner';
import { type ObservedEvent, StreamTracker } from '../sse/tracker';
import type { LegReader } from '../upstream/leg-reader';
import type { GatewayContext } from './context';

/** How a leg ended, from the state machine's point of view. */
export type LegOutcome =
  | { type: 'finished' } // finish_reason seen and the stream ended (or went quiet) after it
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
  | { type: 'responded' } // a non-streaming answer (an error status) was passed through
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
  readonly ctx: GatewayContext;
  readonly log: Logger;
  readonly leg: 1 | 2;
  isGone(): boolean;
  /** How long the next read may wait before it counts as silence (ms). */
  idlePeriodMs(): number;
  onSilence(s: Silence): SilenceDecision;
  /** The leg's answer is complete (a normal finish_reason was seen). */
  finished(): boolean;
  /** Closes the client's stream after a complete answer. */
  endAfterFinish(how: string): Promise<LegOutcome>;
  /** A failure of this leg, with what the leg holds back at that moment (leg 1: a tool call). */
  failed(failure: FailureKind, detail?: string, failingEvent?: Buffer): LegFailure;
  /** One classified event (not malformed, not a failure); bytes for the client go to `out`. A failure it returns ends the leg. */
  // biome-ignore lint/suspicious/noConfusingVoidType: most hooks return nothing; a failure ends the leg
  onEvent(o: ObservedEvent, raw: Buffer, out: Buffer[]): Promise<LegFailure | void> | LegFailure | void;
  /** Writes what onEvent produced, honouring backpressure. */
  write(out: Buffer[]): Promise<void> | undefined;
  /** The first bytes of this leg arrived. */
  onFirstBytes?(): void;
  /** A malformed event was skipped (counted for the request's record). */
  onMalformed?(): void;
  /** The dry run's stall (decideOnSilence `skip`): reported once per silence, and the leg read on. */
  onSkipped?(failure: FailureKind, silentMs: number): void;
}

export async function readLeg(reader: LegReader, h: LegHooks): Promise<LegOutcome> {
  const legStart = Date.now();
  /** The last complete event (silence is counted from events, not bytes: a partial event is still silence). */
  let lastByte = legStart;
  /** Where the current wait began: the last event, or the end of the previous silent period. */
  let waitFrom = legStart;
  let stalledMs = 0;
  let first = true;
  // One WAITING at warn per silence (the later periods of the same silence at debug), one dry-run report.
  let waitingLogged = false;
  let skipReported = false;
  try {
    for (;;) {
      const period = h.idlePeriodMs();
      // One deadline per period, counted from waitFrom: a period never restarts because the caller was busy.
      const deadline = waitFrom + period;
      const r = await reader.next(period > 0 ? Math.max(1, deadline - Date.now()) : 0);
      if (h.isGone()) return { type: 'gone' };
      if (r.type === 'idle') {
        // A timer may fire a millisecond before Date.now() reaches its deadline: what was waited for is the
        // deadline, so a silence of exactly the stall timer is never read as one millisecond short of it.
        const now = Math.max(Date.now(), deadline);
        // Only the silent part of this period counts (it may have started before the last event).
        stalledMs += now - Math.max(lastByte, waitFrom);
        waitFrom = now;
        if (h.finished()) return await h.endAfterFinish('stall-after-finish');
        const d = h.onSilence({
          anyBytes: reader.anyBytes,
          silentForMs: now - lastByte,
          totalStalledMs: stalledMs,
          sinceLegStartMs: now - legStart,
        });
        if (d.action === 'fail') return h.failed(d.failure, reader.partialBytes ? `partial-event(${reader.partialBytes}B)` : undefined);
        if (d.action === 'skip' && !skipReported) {
          skipReported = true;
          h.onSkipped?.(d.failure, now - lastByte);
        }
        const waiting = { decision: 'WAITING', leg: h.leg, silent_ms: now - lastByte, stalled_ms: stalledMs };
        if (waitingLogged) h.log.debug(waiting, `leg${h.leg} still silent: waiting`);
        else h.log.warn(waiting, `leg${h.leg} silent, not actionable: waiting`);
        waitingLogged = true;
        continue;
      }
      if (r.type === 'end' || r.type === 'reset') {
        if (h.finished()) return await h.endAfterFinish(r.type === 'end' ? 'eof' : 'reset-after-finish');
        if (r.type === 'end' && !reader.anyBytes) return { ...h.failed('eof', 'empty-body'), emptyBody: true };
        const detail =
          r.type === 'reset' ? errorCode(r.error) : reader.partialBytes ? `eof-mid-event(${reader.partialBytes}B)` : 'clean-eof';
        return h.failed(r.type === 'end' ? 'eof' : 'reset', detail);
      }
      if (first) {
        first = false;
        h.onFirstBytes?.();
      }
      lastByte = Date.now();
      waitFrom = lastByte;
      waitingLogged = false;
      skipReported = false;
      const out: Buffer[] = [];
      for (const ev of r.events) {
        const o = StreamTracker.read(ev);
        if (o.kind === 'malformed') {
          h.ctx.metrics.malformedEvent();
          h.onMalformed?.();
          h.log.warn({ decision: 'MALFORMED_EVENT', leg: h.leg, bytes: ev.raw.length }, 'malformed SSE event skipped');
          continue;
        }
        const failure: FailureKind | null =
          o.kind === 'error' ? 'error-event' : o.kind === 'chunk' && o.finishReason === 'abort' ? 'abort-finish' : null;
        if (failure) {
          // What came before the failing event in this read still belongs to the client.
          if (out.length) await h.write(out);
          return h.failed(failure, undefined, ev.raw);
        }
        // `[DONE]` before any finish_reason is an unfinished answer, a failure like a clean EOF: forwarded, an SDK
        // would stop reading there and take the truncated answer for a complete one.
        if (o.kind === 'done' && !h.finished()) {
          if (out.length) await h.write(out);
          return h.failed('eof', 'done-without-finish');
        }
        const refused = await h.onEvent(o, ev.raw, out);
        if (refused) {
          if (out.length) await h.write(out);
          return refused;
        }
      }
      if (out.length) {
        const full = h.write(out);
        if (full) await full;
      }
    }
  } finally {
    reader.fence();
  }
}

function errorCode(e: unknown): string {
  const err = e as { code?: string; message?: string };
  return err?.code ?? err?.message ?? 'reset';
}
