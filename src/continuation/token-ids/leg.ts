// One continuation leg by token ids (src/continuation/continuation.ts runs it first, and the text path,
// src/continuation/template/, when it returns why not): leg 1's ids (the ledger) and its prompt ids (vLLM
// streamed them; llama-server is asked: prompt-ids.ts), the cut's parser state (the phase, the family's closing
// marker), the request (leg2-request.ts), a re-prefill slot, the engine's text-completion endpoint, the relay
// (leg2-relay.ts), and the same judgement as the text path. A leg that cannot go by ids says why (`fallback`),
// and the verified text path follows: never a guess.
import { selectFamily } from '../../families/select';
import type { Phase, ReasoningFormat } from '../../families/types';
import type { JsonObject, ReasoningField } from '../../openai/chat';
import type { InterruptReason } from '../../recovery/reasons';
import type { RecoveredTokens } from '../../recovery/token-estimate';
import { AVOID_HOST_HEADER } from '../../request/forward-headers';
import type { LegOutcome } from '../../stream/legs/leg-loop';
import type { ContinuationPort } from '../../stream/request-port';
import type { LegResponse } from '../../upstream/client';
import { LegReader } from '../../upstream/leg-reader';
import type { LedgerState, Leg1IdLedger } from './leg1-ledger';
import { type IdsLeg2Host, type IdsLeg2Progress, relayIdsLeg2 } from './leg2-relay';
import { planIdsLeg2 } from './leg2-request';
import { fillMarkerHole, markerHoleText } from './marker-hole';
import { llamaPromptIds, llamaTextIds } from './prompt-ids';
import { RawSplitter } from './raw-split';

/** What the text path's hooks give this leg (src/continuation/continuation.ts): send and check the head, then judge. */
export interface LegSteps<Result> {
  /** Sends the leg to CONTINUATION_URL + `path` and checks its head. */
  send(path: string, body: JsonObject): Promise<{ res: LegResponse } | { result: Result }>;
  judge(out: LegOutcome): Result;
  /** The request ends with the interruption event for `reason`. */
  end(reason: InterruptReason): Result;
  readonly cancelled: Result;
}

/** The parser's state at the cut, or why leg 2's raw text could not be split as the engine would. */
export function splitterFor(r: Pick<ContinuationPort, 'tracker' | 'continuationModel' | 'config'>): RawSplitter | { fallback: string } {
  const t = r.tracker;
  const phase: Phase = t.content.length > 0 ? 'content' : 'reasoning';
  if (phase === 'content') return new RawSplitter('content', null);
  const family = selectFamily(r.continuationModel ?? '').family;
  const format: ReasoningFormat | null = family.reasoning;
  if (!format || family.name === 'generic') return { fallback: 'no-reasoning-format' };
  if (format.open.includes('<|channel|>')) return { fallback: 'harmony-not-split' };
  // Both engines' parsers hand out every character after the marker (llama.cpp: `</think>\n\nA` gives content
  // `\n\nA`, seen on the real server: test/real-engine/token-ids.test.ts).
  return new RawSplitter('reasoning', format.close);
}

/** Where the engine is asked (its tokenizer, its template), away from the replica that failed when the router can. */
function engineAsk(r: ContinuationPort) {
  const deadline = AbortSignal.timeout(r.config.tokenizeTimeoutMs);
  return {
    baseUrl: r.config.continuationUrl.replace(/\/+$/, ''),
    headers: r.lastHost ? { [AVOID_HOST_HEADER]: r.lastHost } : undefined,
    signal: AbortSignal.any([deadline, r.cancellation.signal]),
  };
}

async function promptIdsOf(r: ContinuationPort, ledger: Leg1IdLedger, promptIds: readonly number[] | null) {
  if (promptIds) return { ids: promptIds };
  if (ledger.ask.engine !== 'llamacpp') return { failed: 'no-prompt-ids' };
  return llamaPromptIds({ ...engineAsk(r), original: r.req.payload as JsonObject });
}

/**
 * llama-server's stream left out the closing marker's ids (marker-hole.ts): they are the engine's tokenization
 * of the marker's text, taken only when exactly as many as the engine said are missing. The ledger keeps them.
 */
async function fillHole(r: ContinuationPort, ledger: Leg1IdLedger, state: CompleteLedger): Promise<CompleteLedger | { fallback: string }> {
  const hole = state.markerHole;
  if (!hole) return state;
  const close = selectFamily(r.continuationModel ?? '').family;
  if (!close.reasoning || close.name === 'generic') return { fallback: 'marker-hole-no-marker' };
  const text = markerHoleText(hole, r.tracker.reasoning, close.reasoning.close);
  if ('fallback' in text) return text;
  const tokenized = await llamaTextIds(engineAsk(r), text.text);
  if ('failed' in tokenized) return { fallback: `marker-hole-${tokenized.failed}` };
  const filled = fillMarkerHole(state.generatedIds, hole, tokenized.ids);
  if ('fallback' in filled) return filled;
  // The ATTEMPT record that follows says how many (`tokenized_marker_ids`).
  ledger.fillMarkerHole(tokenized.ids);
  const after = ledger.state();
  return after.kind === 'complete' ? after : { fallback: after.reason };
}

type CompleteLedger = Extract<LedgerState, { kind: 'complete' }>;

/** Continuation leg `n` by ids, or why it cannot go by ids (the text path follows). */
export async function runTokenIdsLeg<Result>(
  r: ContinuationPort,
  n: number,
  ledger: Leg1IdLedger,
  steps: LegSteps<Result>,
): Promise<{ result: Result; sent?: RecoveredTokens } | { fallback: string }> {
  const recorded = ledger.state();
  if (recorded.kind === 'gap') return { fallback: recorded.reason };
  const shape = ledger.shape();
  if (!shape) return { fallback: 'no-text-chunk' };
  if (r.tracker.toolCallsSeen) return { fallback: 'tool-call-seen' };
  const splitter = splitterFor(r);
  if ('fallback' in splitter) return splitter;
  const holeIds = recorded.markerHole?.missing ?? 0;
  const state = await fillHole(r, ledger, recorded);
  if (r.cancellation.cancelled) return { result: steps.cancelled };
  if ('fallback' in state) return state;
  const prompt = await promptIdsOf(r, ledger, state.promptIds);
  if (r.cancellation.cancelled) return { result: steps.cancelled };
  if ('failed' in prompt) return { fallback: `prompt-ids-${prompt.failed}` };
  const engine = ledger.ask.engine;
  const delivered = state.generatedIds.length;
  const plan = planIdsLeg2({ engine, original: r.req.payload as JsonObject, promptIds: prompt.ids, generatedIds: state.generatedIds });
  if (plan.kind === 'skip') {
    r.log.info({ decision: 'SKIPPED', reason: plan.reason, continued_by: 'token-ids' }, 'no continuation leg');
    return { result: steps.end(plan.reason) };
  }
  const refused = await r.admit(prompt.ids.length + delivered, delivered);
  if (r.cancellation.cancelled) return { result: steps.cancelled };
  if (refused) return { result: steps.end(`recovery-${refused.reason}`) };
  r.logTransition('ATTEMPT', {
    leg: n + 1,
    continued_by: 'token-ids',
    engine,
    phase: splitter.current,
    prompt_ids: prompt.ids.length,
    delivered_ids: delivered,
    // Of those, the closing marker's that the stream never carried, from the engine's tokenizer (marker-hole.ts).
    ...(holeIds > 0 ? { tokenized_marker_ids: holeIds } : {}),
    budget_remaining: plan.remaining,
  });
  const opened = await steps.send(plan.path, plan.body);
  if ('result' in opened) return opened;
  const { res } = opened;
  const progress: IdsLeg2Progress = { ids: [], complete: true, reasoning: 0 };
  // vLLM reports a reasoning count when a reasoning parser runs, which leg 1's reasoning shows.
  const deliveredReasoning = engine === 'vllm' && r.tracker.reasoningField !== null ? state.reasoningIds : null;
  const host = { engine, shape, splitter, promptTokens: prompt.ids.length, deliveredTokens: delivered, deliveredReasoning, legs: n + 1 };
  const out = await relayIdsLeg2(relayHost(r, host), new LegReader(res.body), progress);
  r.trace.legEnded(out.type, out.type === 'failed' ? out.failure : undefined);
  // Its reasoning ids too: a further leg's usage.reasoning_tokens (and the record) count every leg's.
  ledger.extend(progress.ids, progress.complete, progress.reasoning);
  return { result: steps.judge(out), sent: recoveredOf(prompt.ids.length, state) };
}

/** What the leg recovers, counted from the ids (the request_end record). */
function recoveredOf(promptTokens: number, state: CompleteLedger): RecoveredTokens {
  const total = state.generatedIds.length;
  const reasoning = Math.min(state.reasoningIds, total);
  return {
    promptTokens,
    reasoningTokens: reasoning,
    contentTokens: total - reasoning,
    totalRecovered: total,
    accounting: { method: 'token-ids', dialect: null, prompt: 'token-ids' },
  };
}

const defaultReasoningField = (engine: 'vllm' | 'llamacpp'): ReasoningField => (engine === 'vllm' ? 'reasoning' : 'reasoning_content');

/** The relay's view of the request (leg2-relay.ts). */
function relayHost(
  r: ContinuationPort,
  h: Pick<IdsLeg2Host, 'engine' | 'splitter' | 'promptTokens' | 'deliveredTokens' | 'deliveredReasoning' | 'legs'> & { shape: JsonObject },
): IdsLeg2Host {
  return {
    ...h,
    config: r.config,
    metrics: r.metrics,
    log: r.log,
    shape: { last: h.shape, reasoningField: (r.tracker.reasoningField ?? defaultReasoningField(h.engine)) as ReasoningField },
    clientWantsUsage: r.req.payload.stream_options?.include_usage === true,
    isGone: () => r.isGone(),
    onFirstBytes: () => r.metrics.observeRecoveryLatency((Date.now() - r.failedAt) / 1000),
    onFirstToken: () => r.onFirstToken(),
    deliver: (o) => r.deliver(o),
  };
}
