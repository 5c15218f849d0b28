// One leg 1 attempt up to its response head: send the original request and read what the head says
// (src/upstream/leg-head.ts): an event stream for the request to relay (leg1-relay.ts), a failure to re-run
// or give up on, or an Ending (the engine's own answer, the router tier unreachable). The first-delta
// deadlines (the attempt's FIRST_DELTA_TIMEOUT_SECONDS, the request's FIRST_DELTA_DEADLINE_SECONDS) are armed
// here, for the wait for headers (and an error body), and read by the leg loop after them; the request's
// cancellation disarms them (a shutdown is not a timeout).
import { revisionFromHeaders } from '../../recovery/model-revision';
import type { SlotEnd } from '../../recovery/slot-evidence';
import { clientResponseHeaders } from '../../request/forward-headers';
import { LegOpenError, type LegResponse } from '../../upstream/client';
import { classifyLegHead, type LegHead } from '../../upstream/leg-head';
import { LegReader } from '../../upstream/leg-reader';
import type { Ending } from '../ending';
import { gatewayError, routerUnreachable } from '../give-up';
import type { ResponseHead } from '../held-output';
import type { LegFailure } from '../legs/leg-loop';
import type { Leg1Port } from '../request-port';

/** What the attempt's head said, and what follows from it. `status`: the upstream's (request_end's upstream_status). */
export type AttemptStart = { status: number | null } & (
  | {
      type: 'stream';
      /** The 200 event-stream head, held until the commit point. */
      head: ResponseHead;
      /** Leg 1's model revision from MODEL_REVISION_HEADER, if the engine sent one. */
      revision: string | undefined;
      reader: LegReader;
      /** When this attempt's first delta is due (FIRST_DELTA_TIMEOUT_SECONDS), or null. */
      firstDeltaDeadline: number | null;
      requestDeadline: number;
    }
  | LegFailure
  | { type: 'gone' }
  /** The request ends here; `slot`: what the answer says of the pool, for the re-prefill slot. */
  | { type: 'ended'; ending: Ending; slot: SlotEnd }
);

export async function startLeg1Attempt(r: Leg1Port): Promise<AttemptStart> {
  const cfg = r.config;
  const id = r.requestId && r.attempt > 1 ? `${r.requestId}-a${r.attempt}` : r.requestId;
  // Two deadlines, armed here for the wait for headers and read by the leg loop after them: this attempt's
  // (FIRST_DELTA_TIMEOUT_SECONDS, from its start: engines may hold their headers back during prefill) and the
  // request's (FIRST_DELTA_DEADLINE_SECONDS, from its arrival, whatever the number of attempts).
  const deadline = cfg.firstDeltaTimeoutMs > 0 ? Date.now() + cfg.firstDeltaTimeoutMs : null;
  const requestDeadline = r.firstDeltaDue;
  let expired: 'first-delta-timeout' | 'first-delta-deadline' | null = null;
  const arm = (at: number, why: NonNullable<typeof expired>) =>
    setTimeout(
      () => {
        expired ??= why;
        r.cancelLeg();
      },
      Math.max(0, at - Date.now()),
    );
  const timers = [arm(requestDeadline, 'first-delta-deadline'), ...(deadline === null ? [] : [arm(deadline, 'first-delta-timeout')])];
  let unsubscribe: () => void = () => undefined;
  const disarm = () => {
    for (const t of timers) clearTimeout(t);
    unsubscribe();
  };
  unsubscribe = r.cancellation.onCancel(disarm);
  try {
    return await attempt(r, id, { deadline, requestDeadline, expired: () => expired, disarm });
  } finally {
    // However the attempt ended, a thrown error included: no timer outlives it (each would hold the process).
    disarm();
  }
}

interface AttemptTimers {
  deadline: number | null;
  requestDeadline: number;
  expired: () => 'first-delta-timeout' | 'first-delta-deadline' | null;
  disarm: () => void;
}

async function attempt(r: Leg1Port, id: string | undefined, timers: AttemptTimers): Promise<AttemptStart> {
  const res = await r.openLeg(r.config.downstreamUrl, id, r.rawBody);
  const head = res instanceof LegOpenError ? null : classifyLegHead(res.status, res.headers);
  // An engine's error body is read within the deadlines too; an event stream has the leg loop's.
  if (head !== 'overloaded' && head !== 'server-error') timers.disarm();
  if (r.cancellation.cancelled) {
    // Answered in the same turn as the cancellation: nothing of it is used (the caller ends the request).
    timers.disarm();
    if (!(res instanceof LegOpenError)) res.body.destroy();
    const gone = r.cancellation.cause === 'client-gone';
    return gone ? { status: null, type: 'gone' } : { status: null, type: 'failed', failure: 'reset', detail: 'shutdown' };
  }
  if (res instanceof LegOpenError) return notOpened(r, res, timers);
  if (head === null) throw new Error('unreachable: a response without a head');
  return await fromHead(r, res, head, timers);
}

/** No response head: a failure to re-run (or the request's deadline), or no router host at all. */
function notOpened(r: Leg1Port, e: LegOpenError, timers: AttemptTimers): AttemptStart {
  const expired = timers.expired();
  if (e.kind === 'aborted' && expired !== null) return { status: null, type: 'failed', failure: expired, detail: 'no response headers' };
  if (e.kind === 'connect')
    return { status: null, type: 'ended', ending: routerUnreachable(r, 'egress-connect-failed'), slot: { kind: 'unusable-answer' } };
  return { status: null, type: 'failed', failure: e.kind === 'headers-timeout' ? 'headers-timeout' : 'reset', detail: e.kind };
}

/** What the head says (src/upstream/leg-head.ts), as the request acts on it. */
async function fromHead(r: Leg1Port, res: LegResponse, head: LegHead, timers: AttemptTimers): Promise<AttemptStart> {
  const status = res.status;
  const flags = String(res.headers['x-gateway-upstream-flags']);
  const ended = (ending: Ending, slot: SlotEnd): AttemptStart => ({ status, type: 'ended', ending, slot });
  switch (head) {
    case 'event-stream':
      return {
        status,
        type: 'stream',
        head: { status: 200, headers: clientResponseHeaders(res.headers) },
        revision: revisionFromHeaders(res.headers, r.config.modelRevisionHeader),
        reader: new LegReader(res.body),
        firstDeltaDeadline: timers.deadline,
        requestDeadline: timers.requestDeadline,
      };
    case 'not-event-stream':
      // A 200 that is no event stream (text/plain, a non-streamed JSON answer) would reach an SDK as an empty
      // stream and no error. Not re-run: the replica may well have generated a whole answer, and one that
      // ignores `stream` will do it again.
      res.body.destroy();
      r.log.warn(
        { decision: 'FAILED', reason: 'not-event-stream', status: 200, attempts: r.attempt, causes: r.causes },
        'a 200 without an event stream: 502',
      );
      return ended(gatewayError(502, 'upstream_failed', 'The upstream answered without an event stream.', 'not-event-stream'), {
        kind: 'unusable-answer',
      });
    case 'router-unreachable':
      res.body.destroy();
      return ended(routerUnreachable(r, 'router-tier-unreachable', flags), { kind: 'unusable-answer' });
    case 'reset-before-headers':
      res.body.destroy();
      return { status, type: 'failed', failure: 'reset', detail: `reset-before-headers:${flags}` };
    case 'overloaded':
    case 'server-error':
      return await engineError(res, timers);
    case 'other-answer':
      return ended({ kind: 'passed-through', answer: res }, { kind: 'engine-answer', status });
  }
}

/**
 * Nothing was generated, or nothing of it delivered (a 503, or a 500, 502 or 504 before any byte): the sidecar
 * re-runs it, under the same admission, backoff and deadline as a 503 (Envoy's retry policy would multiply
 * attempts against a failing pool). If it does not, the client gets this answer unchanged.
 */
async function engineError(res: LegResponse, timers: AttemptTimers): Promise<AttemptStart> {
  const status = res.status;
  const body = await res.body.readAll(65536);
  timers.disarm();
  const expired = timers.expired();
  if (expired !== null) return { status, type: 'failed', failure: expired, detail: `status-${status}, body unread` };
  const engineAnswer = { status, headers: clientResponseHeaders(res.headers), body };
  return { status, type: 'failed', failure: status === 503 ? 'overloaded' : 'server-error', detail: `status-${status}`, engineAnswer };
}
