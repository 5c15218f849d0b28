// Errors with stable codes (undici's style: `code` never changes once published, `name` is the class), and
// the one builder for every error body the gateway itself answers a client with (the interruption event inside
// a stream uses the same builder: src/recovery/interruption.ts). OpenAI's error shape, the request id, and
// whether retrying the same request makes sense.

/**
 * Every code a gateway error carries, one per class (per kind for LegOpenError): published once, never reused.
 * test/unit/error-codes.test.ts holds them unique and every class in src/ to one of them.
 */
export const ERROR_CODES = {
  configInvalid: 'GW_ERR_CONFIG_INVALID',
  illegalTransition: 'GW_ERR_ILLEGAL_TRANSITION',
  legAborted: 'GW_ERR_LEG_ABORTED',
  legOpenConnect: 'GW_ERR_LEG_OPEN_CONNECT',
  legOpenHeadersTimeout: 'GW_ERR_LEG_OPEN_HEADERS_TIMEOUT',
  legOpenAborted: 'GW_ERR_LEG_OPEN_ABORTED',
  legOpenReset: 'GW_ERR_LEG_OPEN_RESET',
  templateSource: 'GW_ERR_TEMPLATE_SOURCE',
  templateRender: 'GW_ERR_TEMPLATE_RENDER',
  chatTemplateConfig: 'GW_ERR_CHAT_TEMPLATE_CONFIG',
  tokenizer: 'GW_ERR_TOKENIZER',
} as const;

export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/** Base of the gateway's own errors: `code` is one of ERROR_CODES, `name` the class name. */
export abstract class GatewayError extends Error {
  abstract readonly code: ErrorCode;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export type ClientErrorCode =
  | 'router_unreachable'
  | 'upstream_timeout'
  | 'upstream_failed'
  | 'recovery_unavailable'
  | 'gateway_shutdown'
  | 'gateway_error'
  | 'upstream_decode_interrupted';

export interface ClientError {
  code: ClientErrorCode;
  message: string;
  requestId: string | undefined;
  retryable: boolean;
  /** The gateway's reason, for logs and dashboards (e.g. attempts-exhausted, recovery-brake-open). */
  reason?: string;
  /** What happened to the request as a whole, in fixed words (src/recovery/give-up-detail.ts): never an exception's text. */
  detail?: string;
  /** Fields of the interruption contract (partial_output, delivered_output_tokens) and the like. */
  extra?: Record<string, unknown>;
}

/** `{"error": {...}}` as an object (for an SSE event) ... */
export function clientErrorPayload(e: ClientError): { error: Record<string, unknown> } {
  return {
    error: {
      code: e.code,
      message: e.message,
      type: 'server_error',
      request_id: e.requestId ?? null,
      ...e.extra,
      retryable: e.retryable,
      ...(e.reason ? { reason: e.reason } : {}),
      ...(e.detail ? { detail: e.detail } : {}),
    },
  };
}

/** ... and as the body of an HTTP answer. */
export function clientErrorBody(e: ClientError): Buffer {
  return Buffer.from(JSON.stringify(clientErrorPayload(e)));
}

/** Response headers of such an answer; `Retry-After` in whole seconds when a retry makes sense. */
export function clientErrorHeaders(retryAfterMs?: number): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json' };
  if (retryAfterMs !== undefined) h['retry-after'] = String(Math.max(1, Math.ceil(retryAfterMs / 1000)));
  return h;
}
