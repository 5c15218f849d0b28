// The one builder for every error body the gateway itself answers a client with (the interruption event
// inside a stream is src/recovery/interruption.ts). Stable codes, OpenAI's error shape, the request id, and
// whether retrying the same request makes sense.

export type ClientErrorCode = 'router_unreachable' | 'upstream_timeout' | 'upstream_failed' | 'recovery_unavailable' | 'gateway_shutdown';

export interface ClientError {
  code: ClientErrorCode;
  message: string;
  requestId: string | undefined;
  retryable: boolean;
  /** The gateway's reason, for logs and dashboards (e.g. attempts-exhausted, recovery-brake-open). */
  reason?: string;
}

export function clientErrorBody(e: ClientError): Buffer {
  return Buffer.from(
    JSON.stringify({
      error: { message: e.message, type: 'server_error', code: e.code, request_id: e.requestId ?? null, retryable: e.retryable, ...(e.reason ? { reason: e.reason } : {}) },
    }),
  );
}

/** Response headers of such an answer; `Retry-After` in whole seconds when a retry makes sense. */
export function clientErrorHeaders(retryAfterMs?: number): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json' };
  if (retryAfterMs !== undefined) h['retry-after'] = String(Math.max(1, Math.ceil(retryAfterMs / 1000)));
  return h;
}
