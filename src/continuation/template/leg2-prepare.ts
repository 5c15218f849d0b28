// Before a continuation leg is planned: its design (src/recovery/leg2-design.ts), counted (exact in process with
// TOKENIZER, else via the engine's /tokenize, else estimated) and checked (the date; the engine's own rendering of leg 2, vLLM and
// llama.cpp), the count and the engine's check in parallel under the one TOKENIZE_TIMEOUT_MS deadline.
import type { JsonObject } from '../../openai/chat';
import { withDateRule, withEngineVerdict } from '../../recovery/leg2-checks';
import { type ContinuationTarget, type Designed, designLeg2 } from '../../recovery/leg2-design';
import { AVOID_HOST_HEADER } from '../../request/forward-headers';
import type { ContinuationPort } from '../../stream/request-port';
import { type EngineVerdict, engineCheck } from '../../templates/engine-check';
import { type CountedRecoveredTokens, countRecoveredTokens } from '../../upstream/tokenizer';

export interface Prepared {
  readonly target: ContinuationTarget;
  readonly designed: Designed;
  readonly counted: CountedRecoveredTokens;
  readonly verdict: EngineVerdict | undefined;
}

/** Where the engine can be asked (TOKENIZE_URL, else DOWNSTREAM_URL's /tokenize), when it should be. */
function engineCheckUrl(r: ContinuationPort, designed: Designed): string | undefined {
  const cfg = r.config;
  if (cfg.engine === 'sglang' || 'unsupported' in designed) return undefined;
  // Asked with CHAT_TEMPLATE set (a file, or `auto`: then the engine may be the only renderer); TOKENIZE_URL alone
  // is for counting, and an engine's chat /tokenize may render a template the table was not proven against.
  if (cfg.chatTemplate === undefined) return undefined;
  return cfg.tokenizeUrl ?? `${cfg.downstreamUrl.replace(/\/+$/, '')}/tokenize`;
}

async function askEngine(r: ContinuationPort, designed: Designed, headers: Record<string, string> | undefined) {
  const url = engineCheckUrl(r, designed);
  if (!url || 'unsupported' in designed) return undefined;
  const d = designed.design;
  const deadline = AbortSignal.timeout(r.config.tokenizeTimeoutMs);
  const signal = AbortSignal.any([deadline, r.cancellation.signal]);
  return engineCheck({
    engine: r.config.engine === 'vllm' ? 'vllm' : 'llamacpp',
    tokenizeUrl: url,
    original: r.req.payload as JsonObject,
    candidates: d.candidates ?? [d.shape.message],
    fields: d.shape.fields,
    raw: d.raw,
    prompt1: d.prompt1,
    bosToken: r.chatTemplate?.served()?.special.bos_token,
    signal,
    headers,
  });
}

export async function prepareContinuation(r: ContinuationPort): Promise<Prepared> {
  const cfg = r.config;
  const now = new Date();
  const clock = { leg1At: new Date(r.leg1SentAt), now };
  const target: ContinuationTarget = {
    continuationModel: r.continuationModel ?? '',
    engine: cfg.engine,
    served: r.chatTemplate?.served(),
    clock,
    unverified: cfg.continuationUnverified,
  };
  // The date first: an engine asked now renders both prompts with today's date and could not tell.
  const started = performance.now();
  const designed = withDateRule(designLeg2(r.req.payload, r.tracker, target), clock);
  r.metrics.observeContinuationPrepare(designed.design.source ?? 'generic', (performance.now() - started) / 1000);
  // The raw text leg 2's prompt continues from, counted too: leg 2's prompt_tokens minus it is the original
  // prompt. A cut that cannot be continued has no prefix; planContinuationRequest says why.
  const prefix = 'unsupported' in designed ? '' : designed.design.raw;
  const known = !('unsupported' in designed) && designed.design.source !== 'generic';
  // Through Envoy's egress, counted and checked where leg 2 may land: not on the replica that just failed.
  const headers = r.lastHost ? { [AVOID_HOST_HEADER]: r.lastHost } : undefined;
  const countStarted = performance.now();
  const [counted, verdict] = await Promise.all([
    countRecoveredTokens(r.req.payload, r.tracker.reasoning, r.tracker.content, {
      tokenizer: r.tokenizer,
      // The served template's rendering of the original request, when the design has it: TOKENIZER counts it.
      promptText: 'unsupported' in designed ? undefined : designed.design.prompt1,
      url: cfg.tokenizeUrl,
      dialect: cfg.tokenizeDialect,
      rates: { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken },
      prefix,
      prefixIsGenerated: known,
      onFallback: (detail, code) =>
        r.log.warn({ decision: 'TOKENIZE_FALLBACK', reason: code, detail }, 'counting failed, using the next method'),
      deadlineMs: cfg.tokenizeTimeoutMs,
      headers,
      signal: cfg.tokenizeUrl ? r.cancellation.signal : undefined,
    }).then((c) => {
      r.metrics.observeContinuationCount(c.method, (performance.now() - countStarted) / 1000);
      return c;
    }),
    askEngine(r, designed, headers),
  ]);
  if (verdict?.kind === 'unavailable')
    r.log.warn({ decision: 'ENGINE_CHECK_UNAVAILABLE', detail: verdict.detail }, 'the engine did not answer the continuation check');
  return { target, designed: withEngineVerdict(designed, verdict), counted, verdict };
}
