// Idempotent tool-call ids (docs/background.md, rule 5: a side effect is keyed by the logical action, not by
// the GPU attempt). An engine gives every generation new tool_call ids, so a client
// retry, or an invisible retry inside the gateway, would present the same logical call under a new id. When
// the client names its request (Idempotency-Key, or failing that its own X-Request-Id), the ids it receives
// are derived from that name and the call's index instead: the same on every attempt and every client retry
// with the same key. A tool executor deduplicates on them. Without either header ids pass unchanged.
import { createHash } from 'node:crypto';
import { isObject, type JsonObject } from './chat';

/** The header the front listener sets to the client's own x-request-id (tools/stack/envoy-config.ts). */
export const CLIENT_REQUEST_ID_HEADER = 'x-gateway-client-request-id';

/** The client's name for its logical request, if it gave one. */
export function idempotencyKeyOf(headers: Record<string, string>): string | undefined {
  const key = headers['idempotency-key']?.trim() || headers[CLIENT_REQUEST_ID_HEADER]?.trim();
  return key || undefined;
}

/** `call_` + 22 url-safe characters of sha256(key ":" index): stable, short, and the key is not echoed. */
export function toolCallId(key: string, index: number): string {
  return `call_${createHash('sha256').update(`${key}:${index}`).digest('base64url').slice(0, 22)}`;
}

/** The chunk with its tool_call ids replaced, or null when it carries none (then it is relayed as it came). */
export function withIdempotentToolCallIds(chunk: JsonObject, key: string): JsonObject | null {
  if (!Array.isArray(chunk.choices)) return null;
  let changed = false;
  const choices = chunk.choices.map((c: unknown) => {
    if (!isObject(c) || !isObject(c.delta) || !Array.isArray(c.delta.tool_calls)) return c;
    const calls = c.delta.tool_calls.map((t: unknown, i: number) => {
      if (!isObject(t) || typeof t.id !== 'string') return t;
      changed = true;
      return { ...t, id: toolCallId(key, typeof t.index === 'number' ? t.index : i) };
    });
    return { ...c, delta: { ...c.delta, tool_calls: calls } };
  });
  return changed ? { ...chunk, choices } : null;
}
