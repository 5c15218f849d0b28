// The label values every labelled series starts with, at zero, so that a dashboard or an alert sees
// `continuation_gateway_request_outcomes_total{outcome="interrupted"} 0` from the first scrape instead of an absent series
// (rate() over an absent series is "no data", not 0; https://prometheus.io/docs/practices/instrumentation/#avoid-missing-metrics).
// Values that only exist at run time (leg2-status-503, a detail after a colon) still appear when first used.
import type { FailureKind, InterruptReason } from '../recovery/reasons';
import type { ScopeSkipReason } from '../request/scope';

/** request_end's `outcome`, one to one (src/stream/originated-response.ts setOutcome). */
export const REQUEST_OUTCOMES = [
  'completed',
  'completed-after-retry',
  'completed-after-continuation',
  'interrupted',
  'failed-before-first-delta',
  'passed-through-status',
  'client-disconnected',
  'error',
] as const;

/**
 * request_outcomes_total's `continuation`: whether the request sent a continuation leg and whether anything checked
 * it: `none` (no leg 2 sent), `verified` (every leg 2 from a proven table entry or the served template),
 * `unverified` (a leg 2 was the generic guess: no entry for the name, no CHAT_TEMPLATE).
 */
export const CONTINUATION_VERIFICATION = ['none', 'verified', 'unverified'] as const;
export type ContinuationVerification = (typeof CONTINUATION_VERIFICATION)[number];

const FAILURE_KINDS: Record<FailureKind, true> = {
  reset: true,
  eof: true,
  'error-event': true,
  'abort-finish': true,
  'malformed-finish': true,
  stall: true,
  'stall-limit': true,
  'first-delta-timeout': true,
  'first-delta-deadline': true,
  'headers-timeout': true,
  overloaded: true,
  'server-error': true,
  'model-revision-mismatch': true,
  restarted: true,
  'unexpected-output': true,
  connect: true,
};
/** Leg 1 failure kinds (src/recovery/planner.ts FailureKind; the Record makes a new kind a compile error here). */
export const LEG_FAILURE_REASONS = Object.keys(FAILURE_KINDS) as FailureKind[];

const SCOPE_SKIPS: Record<ScopeSkipReason, true> = {
  'not-json': true,
  'not-chat-request': true,
  'not-streaming': true,
  'client-continue-final-message': true,
  'structured-output': true,
  'body-too-large': true,
  'vllm-multimodal': true,
  'continuation-model-unset': true,
  'multiple-choices': true,
  'json-too-deep': true,
  'method-not-post': true,
  'endpoint-not-covered': true,
  'not-completions-request': true,
  'completions-prompt-not-text': true,
  'completions-echo': true,
  'completions-logprobs': true,
  'completions-suffix': true,
};
/** Passthrough reasons: the scope decision's, and those of src/stream/request-exchange.ts. */
export const PASSTHROUGH_REASONS = [
  ...(Object.keys(SCOPE_SKIPS) as ScopeSkipReason[]),
  'no-body',
  'body-too-large-to-buffer',
  'request-trailers',
  'draining',
  'continuation-model-undetected',
  'envoy-too-old',
  'envoy-version-unknown',
  // POST /v1/responses (src/endpoints/responses/scope.ts), beside the reasons it shares with chat.
  'not-responses-request',
  'responses-background',
  'responses-server-tools',
  'responses-engine-unsupported',
];

/** Interruption event reasons that carry no run-time part (src/recovery/reasons.ts InterruptReason). */
export const INTERRUPTION_REASONS = [
  'tool-call-delivered',
  'nothing-recoverable',
  'continuation-disabled',
  'continuation-unsupported',
  'responses-input-unsupported',
  'continuation-unverified',
  'continuation-prefix-too-large',
  'budget-exhausted',
  'tool-call-seen',
  'no-recoverable-content',
  'recovery-queue-timeout',
  'recovery-brake-open',
  'recovery-too-costly',
  'recovery-deadline',
  'model-revision-mismatch',
  'leg2-reset',
  'leg2-eof',
  'leg2-error-event',
  'leg2-abort-finish',
  'leg2-malformed-finish',
  'leg2-stall',
  'leg2-stall-limit',
  'leg2-restarted',
  'leg2-unexpected-output',
  'leg2-failed',
  'gateway-shutdown',
  'gateway-internal-error',
] as const satisfies readonly InterruptReason[];

export const REFUSAL_REASONS = ['brake-open', 'queue-timeout', 'cancelled', 'too-costly'];
export const PHASES = ['prefill', 'decode'] as const;
