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
  'source',
  'unverified',
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
  'continued_by',
  'ids_fallback',
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

/** A count an engine reported: a finite integer, not negative (else left out, as src/recovery/usage.ts does). */
function count(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

/**
 * What the request span says of the answer the client got: gen_ai.usage.* from the last usage the stream
 * carried (the corrected one after a continuation: what an uninterrupted run reports; absent when the stream
 * carried none) and gen_ai.response.finish_reasons from its finish_reason (one choice: n > 1 is out of scope).
 */
export function responseAttributes(
  finishReason: string | null,
  usage: Readonly<Record<string, unknown>> | null,
): Record<string, AttributeValue | string[]> {
  const out: Record<string, AttributeValue | string[]> = {};
  const input = count(usage?.prompt_tokens);
  const output = count(usage?.completion_tokens);
  if (input !== undefined) out['gen_ai.usage.input_tokens'] = input;
  if (output !== undefined) out['gen_ai.usage.output_tokens'] = output;
  // An engine's string, but a short word in every engine the gateway speaks to; a long one is not trusted.
  if (finishReason && finishReason.length <= 64) out['gen_ai.response.finish_reasons'] = [finishReason];
  return out;
}

/** The attributes every span carries: the provider and, when configured, the server (src/config/otel-env.ts). */
export function commonAttributes(
  providerName: string,
  server: { readonly address: string; readonly port?: number } | undefined,
): Record<string, AttributeValue> {
  return {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': providerName,
    ...(server ? { 'server.address': server.address } : {}),
    ...(server?.port !== undefined ? { 'server.port': server.port } : {}),
  };
}
