// Opens upstream legs with undici. Every leg goes to a configured address (Envoy's egress listener in the
// stack), never to one taken from the request. Timeouts: connect and response-headers are enforced here;
// the body has none on purpose (stall detection belongs to the leg reader, which knows the phase).
//
// One re-run, here and nowhere else: a leg whose pooled connection to the engine was closed under it (Envoy's
// own 503 with flag UC, `upstream_reset_before_response_started{connection_termination}`) is sent once more
// at once. No byte of an answer exists yet, so nothing reached the client; see UpstreamClient.open.
import { Agent, buildConnector, errors, Pool } from 'undici';
import { ERROR_CODES, GatewayError } from '../errors';
import type { LegOpenFailure } from '../recovery/reasons';
import { UPSTREAM_FLAGS_HEADER } from '../request/forward-headers';
import { LegAbortedError, type LegBody, LegDispatchHandler, type LegHeaders } from './leg-body';

export interface LegResponse {
  status: number;
  headers: LegHeaders;
  body: LegBody;
}

/** Defined with the client-visible codes it appears in (leg2-failed-to-start:<kind>). */
export type LegOpenErrorKind = LegOpenFailure;

/** One code per kind, written out (a computed one collided with LegAbortedError's GW_ERR_LEG_ABORTED). */
const LEG_OPEN_CODES = {
  connect: ERROR_CODES.legOpenConnect,
  'headers-timeout': ERROR_CODES.legOpenHeadersTimeout,
  aborted: ERROR_CODES.legOpenAborted,
  reset: ERROR_CODES.legOpenReset,
} as const satisfies Record<LegOpenErrorKind, string>;

/** Stable-coded error for a leg that produced no response headers: GW_ERR_LEG_OPEN_CONNECT, ..._HEADERS_TIMEOUT, ... */
export class LegOpenError extends GatewayError {
  readonly code: (typeof LEG_OPEN_CODES)[LegOpenErrorKind];
  constructor(
    readonly kind: LegOpenErrorKind,
    cause?: unknown,
  ) {
    super(`upstream leg failed before response headers: ${kind}`, { cause });
    this.code = LEG_OPEN_CODES[kind];
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

/**
 * Default legs per HTTP/2 connection (UPSTREAM_HTTP2_STREAMS_PER_CONNECTION). With all legs on one connection,
 * one Envoy worker thread served every leg (the 1,000-stream first deltas of docs/performance.md) and a lost
 * connection ended every leg at once; a cap spreads them over connections, which the kernel spreads over
 * Envoy's workers, and bounds what one lost connection takes.
 */
export const HTTP2_STREAMS_PER_CONNECTION = 100;

export class UpstreamClient {
  private readonly agent: Agent;
  private readonly http2: boolean;

  constructor(opts: { connectTimeoutMs: number; headersTimeoutMs: number; http2?: boolean; http2StreamsPerConnection?: number }) {
    this.http2 = opts.http2 === true;
    const base = {
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.headersTimeoutMs,
      bodyTimeout: 0,
      keepAliveTimeout: 30_000,
    };
    this.agent = new Agent(
      this.http2
        ? {
            ...base,
            // HTTP/2 without TLS (prior knowledge) to an http: URL, at most `pipelining` legs per connection: the
            // Pool hands a leg to the first connection with room and opens another when none has. The connector
            // is built here because the Pool would build its own without `useH2c` (undici 7.30,
            // lib/dispatcher/pool.js), and its legs would go out as HTTP/1.1.
            factory: (origin: string | URL, o: object) =>
              new Pool(origin, {
                ...o,
                connect: buildConnector({ allowH2: true, useH2c: true, timeout: opts.connectTimeoutMs } as buildConnector.BuildOptions),
                allowH2: true,
                pipelining: opts.http2StreamsPerConnection ?? HTTP2_STREAMS_PER_CONNECTION,
              } as Pool.Options),
          }
        : // Many concurrent streams share the egress listener; undici's default of unlimited connections
          // per origin is what we want here.
          base,
    );
  }

  /**
   * Legs re-sent because their connection to the engine was terminated before any response byte (see open()).
   * Read by tests and the bench; each re-run is also an Envoy access-log line with flags=UC.
   */
  connectionTerminationReruns = 0;

  /**
   * Sends one leg; resolves at its response headers. `abort.abort()` ends the leg at any point.
   *
   * A response that is Envoy's own 503 with flag UC (the engine closed the connection before it sent a byte of
   * response: typically a keep-alive connection it timed out just as Envoy reused it, RFC 9112 section 9.3.1)
   * is re-sent once, immediately; the second answer, whatever it is, is the leg's. Safe: nothing of the answer
   * exists, so nothing reached the client. Envoy's egress does not retry it itself (its retry_on covers only
   * what no engine can have seen; a retry there would also apply to every other reset before headers, with
   * num_retries 2). At most one extra engine request per leg, counted in the README's bound.
   */
  async open(url: string, headers: Record<string, string>, body: Buffer, abort: LegAbort): Promise<LegResponse> {
    const first = await this.openOnce(url, headers, body, abort);
    if (!isConnectionTermination(first) || abort.aborted) return first;
    await first.body.readAll(4096); // Envoy's short local reply: read it so the connection to Envoy stays reusable
    if (abort.aborted) throw new LegOpenError('aborted', new LegAbortedError());
    this.connectionTerminationReruns++;
    return this.openOnce(url, headers, body, abort);
  }

  private openOnce(url: string, headers: Record<string, string>, body: Buffer, abort: LegAbort): Promise<LegResponse> {
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
        // HTTP/2: undici starts a request it takes for non-idempotent (every POST) only when nothing else runs on
        // the connection (client-h2.js, busy()), so legs would run one after another: the late first deltas of
        // the first try (docs/performance.md). undici 7.30 reads the flag for that scheduling only
        // (lib/dispatcher/client-h1.js, client-h2.js) and never re-sends a request itself; a leg's one re-run is open()'s.
        this.agent.dispatch(
          { origin: u.origin, path: u.pathname + u.search, method: 'POST', headers, body, ...(this.http2 ? { idempotent: true } : {}) },
          handler,
        );
      } catch (e) {
        fail(e);
      }
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** Envoy's local 503 for an upstream connection terminated before the response started (%RESPONSE_FLAGS% UC). */
export function isConnectionTermination(res: { status: number; headers: LegHeaders }): boolean {
  if (res.status !== 503) return false;
  const raw = res.headers[UPSTREAM_FLAGS_HEADER];
  return (Array.isArray(raw) ? raw.join(',') : String(raw ?? '')).split(/[,\s]+/).includes('UC');
}

function classifyOpenError(e: unknown, abort: LegAbort): LegOpenErrorKind {
  if (abort.aborted) return 'aborted';
  if (e instanceof errors.HeadersTimeoutError) return 'headers-timeout';
  if (e instanceof errors.ConnectTimeoutError) return 'connect';
  const code = (e as { code?: string })?.code;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EHOSTUNREACH') return 'connect';
  return 'reset';
}
