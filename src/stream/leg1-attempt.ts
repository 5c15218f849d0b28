// One leg 1 attempt: send the original request, read what its response head says (src/upstream/leg-head.ts),
// then relay the event stream (leg1-relay.ts) or end the request with the engine's own answer. The
// first-delta deadline (FIRST_DELTA_TIMEOUT_SECONDS) is armed here once, for the wait for headers, and read by
// the leg loop after them.
import { revisionFromHeaders } from '../recovery/model-revision';
import { clientResponseHeaders } from '../request/forward-headers';
import { LegOpenError } from '../upstream/client';
import { classifyLegHead } from '../upstream/leg-head';
import { LegReader } from '../upstream/leg-reader';
import { routerUnreachable } from './give-up';
import type { LegOutcome } from './leg-loop';
import { relayLeg1 } from './leg1-relay';
import type { OriginatedResponse } from './originated-response';
import { relayVerbatim } from './verbatim';

export async function runLeg1Attempt(r: OriginatedResponse): Promise<LegOutcome> {
  const cfg = r.ctx.config;
  const id = r.requestId && r.attempt > 1 ? `${r.requestId}-a${r.attempt}` : r.requestId;
  r.attemptHadHeaders = false;
  // FIRST_DELTA_TIMEOUT_SECONDS counts from the attempt's start (engines may hold their headers back during
  // prefill): one deadline, armed here for the wait for headers and read by the leg loop after them.
  const deadline = cfg.firstDeltaTimeoutMs > 0 ? Date.now() + cfg.firstDeltaTimeoutMs : null;
  const timer = deadline === null ? undefined : setTimeout(() => r.cancelLeg(), cfg.firstDeltaTimeoutMs);
  const res = await r.openLeg(cfg.downstreamUrl, id, r.req.rawBody);
  clearTimeout(timer);
  if (r.gone) return { type: 'gone' };
  if (res instanceof LegOpenError) {
    if (res.kind === 'aborted' && deadline !== null && Date.now() >= deadline && !r.shuttingDown)
      return { type: 'failed', failure: 'first-delta-timeout', detail: 'no response headers' };
    if (res.kind === 'connect') return await routerUnreachable(r, 'egress-connect-failed');
    return { type: 'failed', failure: res.kind === 'headers-timeout' ? 'headers-timeout' : 'reset', detail: res.kind };
  }
  r.upstreamStatus = res.status;
  const flags = String(res.headers['x-gateway-upstream-flags']);
  switch (classifyLegHead(res.status, res.headers)) {
    case 'event-stream':
      r.leg1HeaderRevision = revisionFromHeaders(res.headers, cfg.modelRevisionHeader);
      r.delivery.setHeaders(200, clientResponseHeaders(res.headers));
      r.attemptHadHeaders = true;
      return relayLeg1({ ...leg1Host(r), firstDeltaDeadline: deadline }, new LegReader(res.body));
    case 'router-unreachable':
      res.body.destroy();
      return await routerUnreachable(r, `router-tier-unreachable:${flags}`);
    case 'reset-before-headers':
      res.body.destroy();
      return { type: 'failed', failure: 'reset', detail: `reset-before-headers:${flags}` };
    case 'overloaded': {
      // Nothing was generated; the sidecar re-runs it (Envoy's retry policy would multiply attempts against a
      // failing pool). If it does not, the client gets this answer unchanged.
      const body = await res.body.readAll(65536);
      return {
        type: 'failed',
        failure: 'overloaded',
        detail: 'status-503',
        engineAnswer: { status: res.status, headers: clientResponseHeaders(res.headers), body },
      };
    }
    case 'other-answer':
      r.settleSlot(res.status >= 500 || res.status === 429 ? 'failed' : 'ok');
      r.move('answered');
      await relayVerbatim(r.delivery, res, () => r.gone);
      return r.gone ? { type: 'gone' } : { type: 'responded' };
  }
}

/** What the leg 1 relay may see and do of this request. */
function leg1Host(r: OriginatedResponse) {
  return {
    ctx: r.ctx,
    log: r.log,
    delivery: r.delivery,
    tracker: r.tracker,
    structured: r.req.structured,
    toolCallKey: r.toolCallKey,
    isGone: () => r.gone,
    commit: () => r.commit(),
    onFirstToken: () => r.settleSlot('ok'),
    endAfterFinish: (how: string) => r.endAfterFinish(how),
  };
}
