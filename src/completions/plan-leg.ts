// Planning a completions stream's continuation leg (the step src/continuation/continuation.ts takes for this
// endpoint instead of a chat design): count what the client has, then the request (continuation-request.ts).
// Counted as chat's text is:
// the model's tokenizer in process (TOKENIZER), else the engine's /tokenize (TOKENIZE_URL), else the estimate; the
// original prompt as an uninterrupted run reports it is leg 2's prompt_tokens minus the count of the appended
// text (its prompt is exactly the original plus that text), or the engine's running count (continuous usage).
import type { CompletionRequest } from '../openai/completions';
import type { Leg2Plan, SkipReason } from '../recovery/continuation-request';
import { fromRunningUsage } from '../recovery/usage';
import { AVOID_HOST_HEADER } from '../request/forward-headers';
import type { ContinuationPort } from '../stream/request-port';
import { type CountedRecoveredTokens, countRecoveredTokens } from '../upstream/tokenizer';
import { planCompletionsContinuation } from './continuation-request';

type Planned = Extract<Leg2Plan, { kind: 'send' }>;

export async function planCompletionsLeg(
  r: ContinuationPort,
  original: CompletionRequest,
): Promise<{ plan: Planned; counted: CountedRecoveredTokens; verdict: undefined } | { end: SkipReason }> {
  const cfg = r.config;
  const content = r.tracker.content;
  const started = performance.now();
  const counted = await countRecoveredTokens(original, '', content, {
    tokenizer: r.tokenizer,
    url: cfg.tokenizeUrl,
    dialect: cfg.tokenizeDialect,
    rates: { cjk: cfg.cjkCharsPerToken, other: cfg.otherCharsPerToken },
    // The text leg 2's prompt gains: its count is what leg 2's prompt_tokens has more than the original's.
    prefix: content,
    onFallback: (detail, code) =>
      r.log.warn({ decision: 'TOKENIZE_FALLBACK', reason: code, detail }, 'counting failed, using the next method'),
    deadlineMs: cfg.tokenizeTimeoutMs,
    // Through Envoy's egress, counted where leg 2 may land: not on the replica that just failed.
    headers: r.lastHost ? { [AVOID_HOST_HEADER]: r.lastHost } : undefined,
    signal: cfg.tokenizeUrl ? r.cancellation.signal : undefined,
  });
  r.metrics.observeContinuationCount(counted.method, (performance.now() - started) / 1000);
  const exact = fromRunningUsage(r.tracker.lastUsage, r.tracker.usageCurrent, counted);
  const plan = planCompletionsContinuation(original, content, exact);
  if (plan.kind === 'send') return { plan, counted: exact, verdict: undefined };
  r.log.info({ decision: 'SKIPPED', reason: plan.reason, endpoint: 'completions' }, 'no continuation leg');
  return { end: plan.reason };
}
