// Opens upstream legs with undici. Every leg goes to a configured address (Envoy's egress listener in the
// stack), never to one taken from the request. Timeouts: connect and response-headers are enforced here;
// the body has none on purpose (stall detection belongs to the leg reader, which knows the phase).
import { Agent, errors } from 'undici';
import { GatewayError } from '../errors';
import { LegAbortedError, type LegBody, LegDispatchHandler, type LegHeaders } from './leg-body';

export interface LegResponse {
  status: number;
  headers: LegHeaders;
  body: LegBody;
}

export type LegOpenErrorKind = 'connect' | 'headers-timeout' | 'aborted' | 'reset';

/** Stable-coded error for a leg that produced no response headers: GW_ERR_LEG_CONNECT, ..._HEADERS_TIMEOUT, ... */
export class LegOpenError extends GatewayError {
  readonly code: `GW_ERR_LEG_${string}`;
  constructor(
    readonly kind: LegOpenErrorKind,
    cause?: unknown,
  ) {
    super(`upstream leg failed before response headers: ${kind}`, { cause });
    this.code = `GW_ERR_LEG_${kind.toUpperCase().replace('-', '_')}`;
  }
}

/**
 * Cancels one leg. Not an AbortController on purpose: every request ends by cancelling its last leg, and
 * an AbortController builds a DOMException (with a stack) and an Event each time (measured per stream in
 * docs/performance.md); this is a flag and one callback.
 */
export class LegAbort {
  aborted = false;
  private listener: (() => void) | null = null;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const l = this.listener;
    this.listener = null;
    l?.();
  }

  /** The one thing to do on abort (the leg's own cancellation). */
  onAbort(fn: () => void): void {
    this.listener = fn;
  }
}

export class UpstreamClient {
  private readonly agent: Agent;

  constructor(opts: { connectTimeoutMs: number; headersTimeoutMs: number }) {
    this.agent = new Agent({
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.headersTimeoutMs,
      bodyTimeout: 0,
      keepAliveTimeout: 30_000,
      // Many concurrent streams share the egress listener; undici's default of unlimited connections
      // per origin is what we want here.
    });
  }

  /** Sends one leg; resolves at its response headers. `abort.abort()` ends the leg at any point. */
  open(url: string, headers: Record<string, string>, body: Buffer, abort: LegAbort): Promise<LegResponse> {
    return new Promise((resolve, reject) => {
      const fail = (e: unknown) => reject(new LegOpenError(classifyOpenError(e, abort), e));
      const handler = new LegDispatchHandler(
        abort,
        (status, resHeaders, resBody) => resolve({ status, headers: resHeaders, body: resBody }),
        fail,
      );
      if (abort.aborted) return fail(new LegAbortedError());
      // Before the head the request itself is aborted; after it, the body (the same undici abort).
      abort.onAbort(() => handler.body.destroy());
      const u = new URL(url);
      try {
        this.agent.dispatch({ origin: u.origin, path: u.pathname + u.search, method: 'POST', headers, body }, handler);
      } catch (e) {
        fail(e);
      }
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function classifyOpenError(e: unknown, abort: LegAbort): LegOpenErrorKind {
  if (abort.aborted) return 'aborted';
  if (e instanceof errors.HeadersTimeoutError) return 'headers-timeout';
  if (e instanceof errors.ConnectTimeoutError) return 'connect';
  const code = (e as { code?: string })?.code;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH') return 'connect';
  return 'reset';
}
