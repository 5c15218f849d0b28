// What of a request's decision records becomes span attributes: an allow-list of counts, kinds and names
// (src/stream/request-record.ts logs the same values), so that no free text (a failure's detail, an exception
// message) reaches a trace. Attribute names follow the OpenTelemetry GenAI conventions where one exists
// (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/), else `gateway.*`.

export type AttributeValue = string | number | boolean;

/** Decision fields copied onto a span event, as `gateway.<field>`. */
const DECISION_FIELDS = [
  'leg',
  'failure',
  'case',
  'family',
  'phase',
  'leg2_split',
  'backoff_ms',
  'retry_after_ms',
  'ttfd_ms',
  'recovered_reasoning_tokens',
  'recovered_content_tokens',
  'budget_remaining',
  'dry_run',
  'reason',
] as const;

/** The allow-listed fields of a decision record with a string, number or boolean value. */
export function decisionAttributes(extra: Record<string, unknown>): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const k of DECISION_FIELDS) {
    const v = extra[k];
    if (typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v))) out[`gateway.${k}`] = v;
  }
  return out;
}

/** Outcomes that are no error of the request (src/obs/metric-labels.ts REQUEST_OUTCOMES). */
const OK_OUTCOMES = new Set([
  'completed',
  'completed-after-retry',
  'completed-after-continuation',
  'passed-through-status',
  'client-disconnected',
]);

export function outcomeIsError(outcome: string): boolean {
  return !OK_OUTCOMES.has(outcome);
}

/** A span name after the GenAI convention `{gen_ai.operation.name} {gen_ai.request.model}`. */
export function chatSpanName(model: string | undefined): string {
  return model ? `chat ${model}` : 'chat';
}
