// Opens upstream legs with undici. Every leg goes to a configured address (Envoy's egress listener in the
// stack), never to one taken from the request. Timeouts: connect and response-headers are enforced here;
// the body has none on purpose (stall detection belongs to the leg reader, which knows the phase).
import { Agent, errors } from 'undici';
import { LegAbortedError, LegDispatchHandler, type LegBody, type LegHeaders } from './leg-body';

export interface LegResponse {
  status: number;
  headers: LegHeaders;
  body: LegBody;
}

export type LegOpenErrorKind = 'connect' | 'headers-timeout' | 'aborted' | 'reset';

/** Stable-coded error for a leg that produced no response headers. */
export class LegOpenError extends Error {
  readonly code: string;
  constructor(readonly kind: LegOpenErrorKind, cause?: unknown) {
    super(`upstream leg failed before response headers: ${kind}`, { cause });
    this.code = `LEG_${kind.toUpperCase().replace('-', '_')}`;
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

  /** Sends one leg; resolves at its response headers. Aborting `signal` aborts the leg at any point. */
  open(url: string, headers: Record<string, string>, body: Buffer, signal: AbortSignal): Promise<LegResponse> {
    return new Promise((resolve, reject) => {
      const fail = (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(new LegOpenError(classifyOpenError(e, signal), e));
      };
      const handler = new LegDispatchHandler(
        signal,
        (status, resHeaders, resBody) => resolve({ status, headers: resHeaders, body: resBody }),
        fail,
      );
      // Before the head the request itself is aborted; after it, the body (the same undici abort).
      const onAbort = () => handler.body.destroy();
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) return fail(new LegAbortedError());
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

function classifyOpenError(e: unknown, signal: AbortSignal): LegOpenErrorKind {
  if (signal.aborted) return 'aborted';
  if (e instanceof errors.HeadersTimeoutError) return 'headers-timeout';
  if (e instanceof errors.ConnectTimeoutError) return 'connect';
  const code = (e as { code?: string })?.code;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH') return 'connect';
  return 'reset';
}
