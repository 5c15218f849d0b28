// One leg 1 attempt: send the original request, read what its response head says (src/upstream/leg-head.ts),
// then relay the event stream (leg1-relay.ts) or end the request with the engine's own answer. The first-delta
// deadlines (the attempt's FIRST_DELTA_TIMEOUT_SECONDS, the request's FIRST_DELTA_DEADLINE_SECONDS) are armed
// here, for the wait for headers (and an error body), and read by the leg loop after them; the request's
// cancellation disarms them (a shutdown is not a timeout).
import { revisionFromHeaders } from '../recovery/model-revision';
import type { FailureKind } from '../recovery/planner';
import { clientResponseHeaders } from '../request/forward-headers';
import { LegOpenError } from '../upstream/client';
import { classifyLegHead } from '../upstream/leg-head';
import { LegReader } from '../upstream/leg-reader';
import { answerError, gatewayError, routerUnreachable } from './give-up';
import type { LegOutcome } from './leg-loop';
import { relayLeg1 } from './leg1-relay';
import type { Leg1Port } from './request-port';
import { relayVerbatim } from './verbatim';

export async function runLeg1Attempt(r: Leg1Port): Promise<LegOutcome> {
  const cfg = r.ctx.config;
  const id = r.requestId && r.attempt > 1 ? `${r.requestId}-a${r.attempt}` : r.requestId;
  r.noteHead(null);
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

async function attempt(r: Leg1Port, id: string | undefined, timers: AttemptTimers): Promise<LegOutcome> {
  const cfg = r.ctx.config;
  const { deadline, requestDeadline, disarm } = timers;
  const res = await r.openLeg(cfg.downstreamUrl, id, r.req.rawBody);
  const head = res instanceof LegOpenError ? null : classifyLegHead(res.status, res.headers);
  // An engine's error body is read within the deadlines too; an event stream has the leg loop's.
  if (head !== 'overloaded' && head !== 'server-error') disarm();
  if (r.cancellation.cancelled) {
    // Answered in the same turn as the cancellation: nothing of it is used (the caller ends the request).
    disarm();
    if (!(res instanceof LegOpenError)) res.body.destroy();
    return r.gone ? { type: 'gone' } : { type: 'failed', failure: 'reset', detail: 'shutdown' };
  }
  if (res instanceof LegOpenError) {
    const expired = timers.expired();
    if (res.kind === 'aborted' && expired !== null) return { type: 'failed', failure: expired, detail: 'no response headers' };
    if (res.kind === 'connect') return await routerUnreachable(r, 'egress-connect-failed');
    return { type: 'failed', failure: res.kind === 'headers-timeout' ? 'headers-timeout' : 'reset', detail: res.kind };
  }
  if (head === null) throw new Error('unreachable: a response without a head');
  if (head !== 'event-stream') r.noteHead({ status: res.status, eventStream: false });
  const flags = String(res.headers['x-gateway-upstream-flags']);
  switch (head) {
    case 'event-stream':
      r.noteHead({ status: res.status, eventStream: true, revision: revisionFromHeaders(res.headers, cfg.modelRevisionHeader) });
      r.delivery.setHeaders(200, clientResponseHeaders(res.headers));
      return relayLeg1({ ...leg1Host(r), firstDeltaDeadline: deadline, requestDeadline }, new LegReader(res.body));
    case 'not-event-stream':
      // A 200 that is no event stream (text/plain, a non-streamed JSON answer) would reach an SDK as an empty
      // stream and no error. Not re-run: the replica may well have generated a whole answer, and one that
      // ignores `stream` will do it again.
      res.body.destroy();
      r.settleSlot({ kind: 'unusable-answer' });
      r.log.warn({ decision: 'FAILED', reason: 'not-event-stream', status: 200 }, 'a 200 without an event stream: 502');
      await answerError(r, gatewayError(502, 'upstream_failed', 'The upstream answered without an event stream.', 'not-event-stream'));
      return { type: 'responded' };
    case 'router-unreachable':
      res.body.destroy();
      return await routerUnreachable(r, 'router-tier-unreachable', flags);
    case 'reset-before-headers':
      res.body.destroy();
      return { type: 'failed', failure: 'reset', detail: `reset-before-headers:${flags}` };
    case 'overloaded':
    case 'server-error': {
      // Nothing was generated, or nothing of it delivered (a 500, 502 or 504 before any byte): the sidecar
      // re-runs it, under the same admission, backoff and deadline as a 503 (Envoy's retry policy would multiply
      // attempts against a failing pool). If it does not, the client gets this answer unchanged.
      const body = await res.body.readAll(65536);
      disarm();
      const expired = timers.expired();
      if (expired !== null) return { type: 'failed', failure: expired, detail: `status-${res.status}, body unread` };
      return {
        type: 'failed',
        failure: res.status === 503 ? 'overloaded' : 'server-error',
        detail: `status-${res.status}`,
        engineAnswer: { status: res.status, headers: clientResponseHeaders(res.headers), body },
      };
    }
    case 'other-answer':
      r.settleSlot({ kind: 'engine-answer', status: res.status });
      if (r.finish({ kind: 'passed-through' })) await relayVerbatim(r.delivery, res, () => r.gone);
      else res.body.destroy();
      return r.gone ? { type: 'gone' } : { type: 'responded' };
  }
}

/** What the leg 1 relay may see and do of this request. */
function leg1Host(r: Leg1Port) {
  return {
    ctx: r.ctx,
    log: r.log,
    delivery: r.delivery,
    tracker: r.tracker,
    structured: r.req.structured,
    toolCallKey: r.toolCallKey,
    isGone: () => r.gone,
    commit: () => r.commit(),
    onFirstToken: () => {
      r.settleSlot({ kind: 'first-token' });
      r.trace.legFirstToken();
    },
    endAfterFinish: (how: string) => r.endAfterFinish(how),
    onDryRunTrigger: (failure: FailureKind, silentMs: number) => r.onDryRunTrigger(failure, silentMs),
  };
}
