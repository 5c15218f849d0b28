// The continuation: a continuation leg is a new generation conditioned on the text the client already has (not
// a migration of the failed replica's state). Counted (exact via the engine's /tokenize, else estimated),
// planned (src/recovery/continuation-request.ts), admitted (a re-prefill slot), sent to a replica other than the
// failed one, and relayed with leg 1's id and corrected usage. A continuation leg that fails after answering
// (reset, stall, EOF) is followed by another one, from everything delivered so far, up to MAX_CONTINUATIONS
// (default 1: the reference's two legs at most); any other failure, or the last, ends the stream with the
// interruption event.
import { planContinuationRequest } from '../recovery/continuation-request';
import { causeOf } from '../recovery/give-up-detail';
import { revisionFromHeaders, revisionsDiffer } from '../recovery/model-revision';
import { decidePostCommit } from '../recovery/planner';
import type { InterruptReason } from '../recovery/reasons';
import { fromRunningUsage } from '../recovery/usage';
import { LegOpenError } from '../upstream/client';
import { LegReader } from '../upstream/leg-reader';
import { endCancelled, interruptStream } from './give-up';
import { prepareContinuation } from './leg2-prepare';
import { relayLeg2 } from './leg2-relay';
import type { ContinuationPort } from './request-port';

/** `heldToolCall`: an incomplete tool call held back at the failure, dropped if a continuation starts. */
export async function continueFromPrefix(r: ContinuationPort, heldToolCall: Buffer | undefined): Promise<void> {
  for (let n = 1; await continueOnce(r, n === 1 ? heldToolCall : undefined, n); n++) {
    // the next continuation leg, from what the client has now
  }
}

/** The client left or the drain deadline came (cancellation.ts): ended for that; no further leg. */
async function cancelled(r: ContinuationPort): Promise<false> {
  await endCancelled(r);
  return false;
}

/** Ends the stream with the interruption event; no further leg. */
async function endWith(r: ContinuationPort, reason: InterruptReason, heldToolCall?: Buffer): Promise<false> {
  await interruptStream(r, reason, heldToolCall);
  return false;
}

/** Continuation leg `n` (leg n + 1 of the request). True: it failed after answering and leg n + 1 may follow. */
async function continueOnce(r: ContinuationPort, heldToolCall: Buffer | undefined, n: number): Promise<boolean> {
  const cfg = r.ctx.config;
  const rates = { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken };
  const prepared = await prepareContinuation(r);
  if (r.cancellation.cancelled) return await cancelled(r);
  // The engine's own running count where it streamed one (continuous usage stats): exact, and what the client
  // last saw, so the corrected usage never goes below it.
  const counted = fromRunningUsage(r.tracker.lastUsage, r.tracker.usageCurrent, prepared.counted);
  const plan = planContinuationRequest(r.req.payload, r.tracker, {
    ...prepared.target,
    rates,
    recovered: counted,
    designed: prepared.designed,
  });
  if (plan.kind === 'skip') {
    const why = plan.design
      ? {
          family: plan.design.familyName,
          source: plan.design.source,
          engine: cfg.engine,
          phase: plan.design.phase,
          thinking: plan.design.thinking,
          detail: plan.detail,
          // Where the prompts parted: offsets and lengths, never text.
          ...(plan.diff
            ? { differs_at: plan.diff.at, expected_length: plan.diff.expectedLength, actual_length: plan.diff.actualLength }
            : {}),
          ...(prepared.verdict?.kind === 'differs' && prepared.verdict.tokenAt !== undefined
            ? { differs_at_token: prepared.verdict.tokenAt }
            : {}),
        }
      : {};
    r.log.info({ decision: 'SKIPPED', reason: plan.reason, ...why }, 'no continuation leg');
    return await endWith(r, plan.reason, heldToolCall);
  }
  const refused = await r.admit(counted.promptTokens, counted.totalRecovered);
  if (r.cancellation.cancelled) return await cancelled(r);
  if (refused) return await endWith(r, `recovery-${refused.reason}`, heldToolCall);
  if (heldToolCall)
    r.log.info(
      { decision: 'HELD_TOOL_CALL_DISCARDED', bytes: heldToolCall.length },
      'tool call held at the failure: the continuation starts before it',
    );
  r.noteContinuation(plan.recovered, counted.method);
  r.logTransition('ATTEMPT', {
    leg: n + 1,
    case: plan.case,
    family: plan.design.familyName,
    source: plan.design.source,
    verified_by: plan.design.verifiedBy,
    raw_as_arrived: plan.design.rawAsArrived,
    phase: plan.design.phase,
    leg2_split: plan.design.shape.split,
    recovered_reasoning_tokens: plan.recovered.reasoningTokens,
    recovered_content_tokens: plan.recovered.contentTokens,
    budget_fields: plan.budgetFields,
    budget_remaining: plan.budgetFields.length > 0 ? plan.body[plan.budgetFields[0]] : null,
    accounting: counted.accounting,
  });
  const res = await r.openLeg(
    cfg.continuationUrl,
    r.requestId ? `${r.requestId}-c${n}` : undefined,
    Buffer.from(JSON.stringify(plan.body)),
    true,
  );
  if (r.cancellation.cancelled) {
    r.settleSlot({ kind: 'cancelled' });
    if (!(res instanceof LegOpenError)) res.body.destroy();
    return await cancelled(r);
  }
  if (res instanceof LegOpenError) {
    r.noteCause(res.kind);
    r.settleSlot({ kind: 'open-failed', open: res.kind });
    return await endWith(r, `leg2-failed-to-start:${res.kind}`);
  }
  if (res.status !== 200) {
    // A 4xx is the engine's answer to this request, not a sign of the pool (neutral for the brake).
    r.noteCause(`status-${res.status}`);
    r.settleSlot({ kind: 'status', status: res.status, source: r.source });
    res.body.destroy();
    return await endWith(r, `leg2-status-${res.status}`);
  }
  // Never stitch two models: a continuation from another revision than leg 1's ends the stream explicitly.
  const expected = r.modelRevision;
  const leg2Revision = revisionFromHeaders(res.headers, cfg.modelRevisionHeader);
  if (revisionsDiffer(expected, leg2Revision)) {
    r.noteCause('model-revision-mismatch');
    r.settleSlot({ kind: 'refused-output' });
    res.body.destroy();
    r.log.warn(
      { decision: 'REVISION_MISMATCH', model_revision: expected, leg2_model_revision: leg2Revision },
      'continuation from another model revision: not stitched',
    );
    return await endWith(r, 'model-revision-mismatch');
  }
  const out = await relayLeg2(
    {
      ctx: r.ctx,
      log: r.log,
      delivery: r.delivery,
      tracker: r.tracker,
      recovered: plan.recovered,
      multimodal: r.req.multimodal,
      clientWantsUsage: r.req.payload.stream_options?.include_usage === true,
      accounting: { legs: n + 1, ...counted.accounting },
      isGone: () => r.gone,
      onFirstBytes: () => r.ctx.metrics.observeRecoveryLatency((Date.now() - r.failedAt) / 1000),
      onFirstToken: () => {
        r.settleSlot({ kind: 'first-token' });
        r.trace.legFirstToken();
      },
      expectedRevision: leg2Revision === undefined ? expected : undefined,
      toolCallKey: r.toolCallKey,
      delivered: { reasoning: r.tracker.reasoning, content: r.tracker.content },
      phase: plan.design.phase,
      split: plan.design.shape.split,
    },
    new LegReader(res.body),
  );
  r.trace.legEnded(out.type, out.type === 'failed' ? out.failure : undefined);
  // A leg that answered, but with text we will not append, says nothing about the pool's health.
  const healthy = out.type === 'failed' && ['model-revision-mismatch', 'restarted', 'unexpected-output'].includes(out.failure);
  r.settleSlot(
    out.type !== 'failed' || r.cancellation.cancelled
      ? { kind: 'cancelled' }
      : healthy
        ? { kind: 'refused-output' }
        : { kind: 'failed', failure: out.failure, source: r.source, leg: 'continuation' },
  );
  if (out.type === 'finished') {
    // Leg 2's relay delivered the end; a client that left during that last write stays `gone`.
    r.finish({ kind: 'complete', after: 'continuation' });
    r.ctx.metrics.recovery('continuation', 'succeeded');
    r.logTransition('SUCCEEDED', { leg: n + 1 });
    return false;
  }
  // Cut by the cancellation (the leg was aborted), not failed on its own.
  if (out.type === 'gone' || r.cancellation.cancelled) return await cancelled(r);
  r.ctx.metrics.recovery('continuation', 'failed');
  if (out.type === 'failed') r.noteCause(causeOf(out.failure, out.emptyBody));
  // It answered, then failed as a replica fails (not with text we refused): another leg continues from what the
  // client has now, which includes this leg's text.
  const failure = out.type === 'failed' ? out.failure : 'reset';
  const again = n < cfg.maxContinuations && !healthy && !r.tracker.toolCallsSeen && r.tracker.recoverable;
  if (again && !r.tracker.prefixCapped) {
    r.log.warn({ decision: 'TRIGGERED', failure, leg: n + 1, next_leg: n + 2 }, 'continuation leg failed: continuing again');
    r.noteFailure();
    return true;
  }
  const d = decidePostCommit({
    failure,
    leg: 2,
    toolCallDelivered: false,
    recoverableText: true,
    continuationConfigured: true,
    continuationEnabled: true,
    prefixTooLarge: again && r.tracker.prefixCapped,
  });
  await interruptStream(r, d.action === 'interrupt' ? d.reason : 'leg2-failed');
  return false;
}
