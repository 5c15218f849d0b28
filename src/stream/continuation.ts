// The continuation: ONE leg 2, a new generation conditioned on the text the client already has (not a
// migration of the failed replica's state). Counted (exact via the engine's /tokenize, else estimated), planned
// (src/recovery/continuation-request.ts), admitted (a re-prefill slot), sent to a replica other than the
// failed one, and relayed with leg 1's id and corrected usage; any failure of it ends the stream with the
// interruption event (there is never a third leg).
import { planContinuationRequest } from '../recovery/continuation-request';
import { revisionFromHeaders, revisionsDiffer } from '../recovery/model-revision';
import { decidePostCommit } from '../recovery/planner';
import { familyFor } from '../recovery/prefix-builders';
import { AVOID_HOST_HEADER } from '../request/forward-headers';
import { LegOpenError } from '../upstream/client';
import { LegReader } from '../upstream/leg-reader';
import { countRecoveredTokens } from '../upstream/tokenizer';
import { interruptStream } from './give-up';
import { relayLeg2 } from './leg2-relay';
import type { OriginatedResponse } from './originated-response';

/** `heldToolCall`: an incomplete tool call held back at the failure, dropped if a continuation starts. */
export async function continueFromPrefix(r: OriginatedResponse, heldToolCall: Buffer | undefined): Promise<void> {
  const cfg = r.ctx.config;
  const rates = { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken };
  const onFallback = (why: string) =>
    r.log.warn({ decision: 'TOKENIZE_FALLBACK', reason: why }, 'tokenize failed, using the character estimate');
  // The prefix leg 2 will be given, counted too: leg 2's prompt_tokens minus it is the original prompt.
  const prefix = familyFor(cfg.continuationModel ?? '').build(r.tracker.reasoning, r.tracker.content);
  const counted = await countRecoveredTokens(r.req.payload, r.tracker.reasoning, r.tracker.content, {
    url: cfg.tokenizeUrl,
    dialect: cfg.tokenizeDialect,
    rates,
    prefix,
    onFallback,
    deadlineMs: cfg.tokenizeTimeoutMs,
    // Through Envoy's egress, counted where leg 2 may land: not on the replica that just failed.
    headers: r.lastHost ? { [AVOID_HOST_HEADER]: r.lastHost } : undefined,
  });
  if (r.gone) return;
  r.countMethod = counted.method;
  const plan = planContinuationRequest(r.req.payload, r.tracker, {
    continuationModel: cfg.continuationModel ?? '',
    engine: cfg.engine,
    rates,
    recovered: counted,
  });
  if (plan.kind === 'skip') {
    r.log.info({ decision: 'SKIPPED', reason: plan.reason }, 'no continuation leg');
    return await interruptStream(r, plan.reason, heldToolCall);
  }
  const refused = await r.admit(counted.promptTokens, counted.totalRecovered);
  if (r.gone) return;
  if (refused) return await interruptStream(r, r.shuttingDown ? 'gateway-shutdown' : `recovery-${refused.reason}`, heldToolCall);
  if (heldToolCall)
    r.log.info(
      { decision: 'HELD_TOOL_CALL_DISCARDED', bytes: heldToolCall.length },
      'tool call held at the failure: the continuation starts before it',
    );
  r.recovered = plan.recovered;
  const family = familyFor(cfg.continuationModel ?? '').name;
  r.logTransition('ATTEMPT', {
    leg: 2,
    case: plan.case,
    family,
    recovered_reasoning_tokens: plan.recovered.reasoningTokens,
    recovered_content_tokens: plan.recovered.contentTokens,
    budget_fields: plan.budgetFields,
    budget_remaining: plan.budgetFields.length > 0 ? plan.body[plan.budgetFields[0]] : null,
    accounting: counted.accounting,
  });
  const res = await r.openLeg(
    cfg.continuationUrl,
    r.requestId ? `${r.requestId}-c1` : undefined,
    Buffer.from(JSON.stringify(plan.body)),
    true,
  );
  if (r.gone) return;
  if (res instanceof LegOpenError) {
    r.settleSlot(res.kind === 'aborted' ? 'neutral' : 'failed');
    return await interruptStream(r, r.shuttingDown ? 'gateway-shutdown' : `leg2-failed-to-start:${res.kind}`);
  }
  if (res.status !== 200) {
    r.settleSlot('failed');
    res.body.destroy();
    return await interruptStream(r, `leg2-status-${res.status}`);
  }
  // Never stitch two models: a continuation from another revision than leg 1's ends the stream explicitly.
  const expected = r.modelRevision;
  const leg2Revision = revisionFromHeaders(res.headers, cfg.modelRevisionHeader);
  if (revisionsDiffer(expected, leg2Revision)) {
    r.settleSlot('neutral');
    res.body.destroy();
    r.log.warn(
      { decision: 'REVISION_MISMATCH', model_revision: expected, leg2_model_revision: leg2Revision },
      'continuation from another model revision: not stitched',
    );
    return await interruptStream(r, 'model-revision-mismatch');
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
      accounting: { legs: 2, ...counted.accounting },
      isGone: () => r.gone,
      onFirstBytes: () => r.ctx.metrics.observeRecoveryLatency((Date.now() - r.failedAt) / 1000),
      onFirstToken: () => r.settleSlot('ok'),
      expectedRevision: leg2Revision === undefined ? expected : undefined,
      toolCallKey: r.toolCallKey,
    },
    new LegReader(res.body),
  );
  r.settleSlot(out.type === 'failed' && !r.shuttingDown && out.failure !== 'model-revision-mismatch' ? 'failed' : 'neutral');
  if (out.type === 'gone') return;
  if (out.type === 'finished') {
    r.move('done');
    r.ctx.metrics.recovery('continuation', 'succeeded');
    r.logTransition('SUCCEEDED', { leg: 2 });
    return r.setOutcome('completed-after-continuation');
  }
  r.ctx.metrics.recovery('continuation', 'failed');
  const d = decidePostCommit({
    failure: out.type === 'failed' ? out.failure : 'reset',
    leg: 2,
    toolCallDelivered: false,
    recoverableText: true,
    continuationConfigured: true,
    continuationEnabled: true,
  });
  await interruptStream(r, r.shuttingDown ? 'gateway-shutdown' : d.action === 'interrupt' ? d.reason : 'leg2-failed');
}
