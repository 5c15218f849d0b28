// One continuation leg: a new generation conditioned on the text the client already has (not a migration of the
// failed replica's state), by token ids where leg 1 gave them (token-ids/leg.ts), else by text (template/), in
// steps, each returning a value the next one or the request acts on: planned (counted and checked by
// template/leg2-prepare.ts, then src/recovery/continuation-request.ts), admitted (a re-prefill slot), sent to a
// replica other than the failed one, its head checked (status, model revision), relayed with leg 1's id and
// corrected usage (template/leg2-relay.ts), and judged: complete, another leg from everything delivered so far
// (up to MAX_CONTINUATIONS; default 1, the reference's two legs at most), or the interruption event. The request
// (src/stream/originated-response.ts) runs the legs and applies each result: the slot, the cause, the ending.
import { planCompletionsLeg } from '../completions/plan-leg';
import type { JsonObject } from '../openai/chat';
import { type Leg2Plan, planContinuationRequest, type SkipReason } from '../recovery/continuation-request';
import { causeOf } from '../recovery/give-up-detail';
import { classifyCase } from '../recovery/interrupted-case';
import { revisionFromHeaders, revisionsDiffer } from '../recovery/model-revision';
import { decidePostCommit } from '../recovery/planner';
import type { FailureCause, InterruptReason } from '../recovery/reasons';
import type { SlotEnd } from '../recovery/slot-evidence';
import type { RecoveredTokens } from '../recovery/token-estimate';
import { fromRunningUsage } from '../recovery/usage';
import type { Ending } from '../stream/ending';
import { interruption } from '../stream/give-up';
import type { LegFailure, LegOutcome } from '../stream/legs/leg-loop';
import type { ContinuationPort, CountMethod } from '../stream/request-port';
import { LegOpenError, type LegResponse } from '../upstream/client';
import { LegReader } from '../upstream/leg-reader';
import type { CountedRecoveredTokens } from '../upstream/tokenizer';
import { type Prepared, prepareContinuation } from './template/leg2-prepare';
import { relayLeg2 } from './template/leg2-relay';
import { runTokenIdsLeg } from './token-ids/leg';

/** What one continuation leg came to, for the request to apply. */
export interface LegResult {
  /** Another leg from what the client has now / the request's ending / cancelled (the request ends for it). */
  next: { again: true } | { end: Ending } | { cancelled: true };
  /** What the leg died of (the give-up's `causes`). */
  cause?: FailureCause;
  /** Admitted and sent: what it recovers, how that was counted (request_end), and whether nothing checks it. */
  sent?: { recovered: RecoveredTokens; method: CountMethod; unverified: boolean };
  /** How the leg ended for its re-prefill slot (settled once, by the request). */
  slot?: SlotEnd;
}

type Planned = Extract<Leg2Plan, { kind: 'send' }>;

const CANCELLED: LegResult = { next: { cancelled: true }, slot: { kind: 'cancelled' } };

/**
 * Leg 1 failed after the commit point (logged as TRIGGERED): the interruption event it ends with, or null when
 * continuation legs follow.
 */
export function decideAfterLeg1Failure(r: ContinuationPort, out: LegFailure): Ending | null {
  const t = r.tracker;
  const kase = classifyCase(t.toolCallsSeen, t.reasoning, t.content);
  r.logTransition('TRIGGERED', { failure: out.failure, detail: out.detail, case: kase });
  r.metrics.legFailure(out.failure, 'decode');
  const d = decidePostCommit({
    failure: out.failure,
    leg: 1,
    toolCallDelivered: t.toolCallsSeen,
    recoverableText: t.reasoningChars > 0 || t.contentChars > 0,
    continuationConfigured: r.continuationModel !== undefined,
    continuationEnabled: r.config.continuationEnabled,
    prefixTooLarge: t.prefixCapped,
  });
  if (d.action !== 'interrupt') return notContinuable(r, kase);
  if (d.reason === 'continuation-disabled')
    r.log.info({ decision: 'SKIPPED', reason: d.reason, case: kase }, 'dry run: continuation detected but CONTINUATION_ENABLED=false');
  return interruption(d.reason, out.heldToolCall);
}

/** A Responses request whose continuation cannot be built (src/endpoints/responses/to-chat.ts): its interruption. */
function notContinuable(r: ContinuationPort, kase: string): Ending | null {
  const why = r.req.responses?.notContinuable;
  if (why === undefined) return null;
  r.log.info({ decision: 'SKIPPED', reason: 'responses-input-unsupported', case: kase, detail: why }, 'no continuation leg');
  return interruption('responses-input-unsupported');
}

/** Continuation leg `n` (leg n + 1 of the request). `heldToolCall`: a tool call held at leg 1's failure. */
export async function runContinuationLeg(r: ContinuationPort, n: number, heldToolCall: Buffer | undefined): Promise<LegResult> {
  // By token ids where leg 1 gave them (src/continuation/token-ids/), else by text, saying why.
  let idsFallback = r.tokenIds ? undefined : r.tokenIdsOff;
  if (r.tokenIds) {
    const steps = {
      send: async (path: string, body: JsonObject) => {
        const opened = await sendLeg(r, n, body, path);
        return 'res' in opened ? opened : { result: opened };
      },
      judge: (out: LegOutcome) => judge(r, n, out),
      end: (reason: InterruptReason): LegResult => ({ next: { end: interruption(reason, heldToolCall) } }),
      cancelled: CANCELLED,
    };
    const byIds = await runTokenIdsLeg(r, n, r.tokenIds, steps);
    if ('result' in byIds)
      return byIds.sent ? { ...byIds.result, sent: { recovered: byIds.sent, method: 'token-ids', unverified: false } } : byIds.result;
    idsFallback = byIds.fallback;
    r.log.info({ decision: 'TOKEN_IDS_FALLBACK', reason: idsFallback, leg: n + 1 }, 'continuation by text: no token ids for this cut');
  }
  const planned = await planLeg(r);
  if (r.cancellation.cancelled) return CANCELLED;
  if ('end' in planned) return { next: { end: interruption(planned.end, heldToolCall) } };
  const { plan, counted, verdict } = planned;
  const refused = await r.admit(counted.promptTokens, counted.totalRecovered);
  if (r.cancellation.cancelled) return CANCELLED;
  if (refused) return { next: { end: interruption(`recovery-${refused.reason}`, heldToolCall) } };
  if (heldToolCall)
    r.log.info(
      { decision: 'HELD_TOOL_CALL_DISCARDED', bytes: heldToolCall.length },
      'tool call held at the failure: the continuation starts before it',
    );
  const sent = { recovered: plan.recovered, method: counted.method, unverified: plan.design.source === 'generic' };
  r.logTransition('ATTEMPT', {
    ...attemptRecord(n, plan, counted, verdict),
    continued_by: r.req.endpoint === 'completions' ? 'text' : 'template',
    ids_fallback: idsFallback ?? null,
  });
  if (plan.design.source === 'generic') r.metrics.unverifiedContinuation('sent');
  // What a text leg delivers comes without ids: a further leg cannot go by ids.
  r.tokenIds?.textLegSent();
  const opened = await sendLeg(r, n, plan.body);
  if (!('res' in opened)) return { ...opened, sent };
  const out = await relay(r, n, plan, counted, opened);
  r.trace.legEnded(out.type, out.type === 'failed' ? out.failure : undefined);
  return { ...judge(r, n, out), sent };
}

/** Counted, checked and planned; or the reason no continuation leg can be sent (logged as SKIPPED). */
async function planLeg(
  r: ContinuationPort,
): Promise<{ plan: Planned; counted: CountedRecoveredTokens; verdict: Prepared['verdict'] } | { end: SkipReason }> {
  // A completion continues its prompt as plain text: no chat design (src/completions/).
  if (r.req.endpoint === 'completions') return planCompletionsLeg(r, r.req.payload);
  const cfg = r.config;
  const prepared = await prepareContinuation(r);
  // The engine's own running count where it streamed one (continuous usage stats): exact, and what the client
  // last saw, so the corrected usage never goes below it.
  const counted = fromRunningUsage(r.tracker.lastUsage, r.tracker.usageCurrent, prepared.counted);
  const plan = planContinuationRequest(r.req.payload, r.tracker, {
    ...prepared.target,
    rates: { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken },
    recovered: counted,
    designed: prepared.designed,
  });
  if (plan.kind === 'send') return { plan, counted, verdict: prepared.verdict };
  if (plan.design?.source === 'generic' && plan.reason === 'continuation-unverified') r.metrics.unverifiedContinuation('refused');
  r.log.info({ decision: 'SKIPPED', reason: plan.reason, ...skipRecord(r, plan, prepared) }, 'no continuation leg');
  return { end: plan.reason };
}

/** Why the leg was not sent, for the SKIPPED record: offsets and lengths where the prompts parted, never text. */
function skipRecord(r: ContinuationPort, plan: Extract<Leg2Plan, { kind: 'skip' }>, prepared: Prepared): Record<string, unknown> {
  if (!plan.design) return {};
  const v = prepared.verdict;
  return {
    family: plan.design.familyName,
    source: plan.design.source,
    engine: r.config.engine,
    phase: plan.design.phase,
    thinking: plan.design.thinking,
    detail: plan.detail,
    ...(plan.diff ? { differs_at: plan.diff.at, expected_length: plan.diff.expectedLength, actual_length: plan.diff.actualLength } : {}),
    ...(v?.kind === 'differs' && v.tokenAt !== undefined ? { differs_at_token: v.tokenAt } : {}),
  };
}

/**
 * The ATTEMPT record of continuation leg `n`. `engine_check`: the engine's verdict on leg 2's prompt (vLLM's
 * /tokenize, llama.cpp's /apply-template; `agrees`, or `unavailable` where our render verified it), null when the
 * engine was not asked. `unverified`: nothing checks this leg 2 (the generic guess, CONTINUATION_UNVERIFIED=allow).
 */
function attemptRecord(n: number, plan: Planned, counted: CountedRecoveredTokens, verdict: Prepared['verdict']): Record<string, unknown> {
  return {
    leg: n + 1,
    case: plan.case,
    family: plan.design.familyName,
    source: plan.design.source,
    verified_by: plan.design.verifiedBy,
    unverified: plan.design.source === 'generic',
    engine_check: verdict?.kind ?? null,
    raw_as_arrived: plan.design.rawAsArrived,
    phase: plan.design.phase,
    leg2_split: plan.design.shape.split,
    recovered_reasoning_tokens: plan.recovered.reasoningTokens,
    recovered_content_tokens: plan.recovered.contentTokens,
    budget_fields: plan.budgetFields,
    budget_remaining: plan.budgetFields.length > 0 ? plan.body[plan.budgetFields[0]] : null,
    accounting: counted.accounting,
  };
}

/** Sends the leg and checks its head: an event stream from leg 1's model revision, else why not. */
async function sendLeg(r: ContinuationPort, n: number, body: JsonObject, path?: string): Promise<{ res: LegResponse } | LegResult> {
  const cfg = r.config;
  const res = await r.openLeg(
    cfg.continuationUrl,
    r.requestId ? `${r.requestId}-c${n}` : undefined,
    Buffer.from(JSON.stringify(body)),
    true,
    path,
  );
  if (r.cancellation.cancelled) {
    if (!(res instanceof LegOpenError)) res.body.destroy();
    return CANCELLED;
  }
  if (res instanceof LegOpenError)
    return {
      next: { end: interruption(`leg2-failed-to-start:${res.kind}`) },
      cause: res.kind,
      slot: { kind: 'open-failed', open: res.kind },
    };
  if (res.status !== 200) {
    // A 4xx is the engine's answer to this request, not a sign of the pool (neutral for the brake).
    res.body.destroy();
    const slot: SlotEnd = { kind: 'status', status: res.status, source: r.source };
    return { next: { end: interruption(`leg2-status-${res.status}`) }, cause: `status-${res.status}`, slot };
  }
  // Never stitch two models: a continuation from another revision than leg 1's ends the stream explicitly.
  const leg2Revision = revisionFromHeaders(res.headers, cfg.modelRevisionHeader);
  if (revisionsDiffer(r.modelRevision, leg2Revision)) {
    res.body.destroy();
    r.log.warn(
      { decision: 'REVISION_MISMATCH', model_revision: r.modelRevision, leg2_model_revision: leg2Revision },
      'continuation from another model revision: not stitched',
    );
    return { next: { end: interruption('model-revision-mismatch') }, cause: 'model-revision-mismatch', slot: { kind: 'refused-output' } };
  }
  return { res };
}

function relay(
  r: ContinuationPort,
  n: number,
  plan: Planned,
  counted: CountedRecoveredTokens,
  { res }: { res: LegResponse },
): Promise<LegOutcome> {
  const leg2Revision = revisionFromHeaders(res.headers, r.config.modelRevisionHeader);
  return relayLeg2(
    {
      config: r.config,
      metrics: r.metrics,
      log: r.log,
      tracker: r.tracker,
      recovered: plan.recovered,
      multimodal: r.req.multimodal,
      clientWantsUsage: r.req.payload.stream_options?.include_usage === true,
      accounting: { legs: n + 1, ...counted.accounting },
      isGone: () => r.isGone(),
      onFirstBytes: () => r.metrics.observeRecoveryLatency((Date.now() - r.failedAt) / 1000),
      onFirstToken: () => r.onFirstToken(),
      expectedRevision: leg2Revision === undefined ? r.modelRevision : undefined,
      toolCallKey: r.toolCallKey,
      delivered: { reasoning: r.tracker.reasoning, content: r.tracker.content },
      phase: plan.design.phase,
      split: plan.design.shape.split,
      // A completion's usage has no reasoning count to correct (src/recovery/usage.ts).
      countsReasoning: r.req.endpoint !== 'completions',
      deliver: (out) => r.deliver(out),
      responses: r.req.responses,
    },
    new LegReader(res.body),
  );
}

/** What the relayed leg came to: complete, another leg, or the interruption event. */
function judge(r: ContinuationPort, n: number, out: LegOutcome): LegResult {
  if (out.type === 'finished') {
    r.metrics.recovery('continuation', 'succeeded');
    r.logTransition('SUCCEEDED', { leg: n + 1 });
    return { next: { end: { kind: 'complete', after: 'continuation' } }, slot: { kind: 'cancelled' } };
  }
  // Cut by the cancellation (the leg was aborted), not failed on its own.
  if (out.type === 'gone' || r.cancellation.cancelled) return CANCELLED;
  r.metrics.recovery('continuation', 'failed');
  // A leg that answered, but with text we will not append, says nothing about the pool's health.
  const refusedOutput = ['model-revision-mismatch', 'restarted', 'unexpected-output'].includes(out.failure);
  const slot: SlotEnd = refusedOutput
    ? { kind: 'refused-output' }
    : { kind: 'failed', failure: out.failure, source: r.source, leg: 'continuation' };
  const cause = causeOf(out.failure, out.emptyBody);
  // It answered, then failed as a replica fails (not with text we refused): another leg continues from what the
  // client has now, which includes this leg's text.
  const t = r.tracker;
  const again = n < r.config.maxContinuations && !refusedOutput && !t.toolCallsSeen && t.recoverable;
  if (again && !t.prefixCapped) {
    r.log.warn({ decision: 'TRIGGERED', failure: out.failure, leg: n + 1, next_leg: n + 2 }, 'continuation leg failed: continuing again');
    return { next: { again: true }, cause, slot };
  }
  const d = decidePostCommit({
    failure: out.failure,
    leg: 2,
    toolCallDelivered: false,
    recoverableText: true,
    continuationConfigured: true,
    continuationEnabled: true,
    prefixTooLarge: again && t.prefixCapped,
  });
  return { next: { end: interruption(d.action === 'interrupt' ? d.reason : 'leg2-failed') }, cause, slot };
}
