// Sends the request's legs through Envoy's egress listener, one at a time: leg 1's attempts and the
// continuation legs. An adapter over the upstream client that keeps what the next leg needs from the last one:
// the replica it landed on (a recovery leg asks the egress to avoid it, docs/envoy.md (h)), when leg 1 was
// sent (its engine rendered the uninterrupted prompt then), and the abort that fences the leg in flight.
import type { RequestTrace } from '../../obs/tracing';
import { legRequestHeaders, upstreamHost } from '../../request/forward-headers';
import { LegAbort, LegOpenError, type LegResponse } from '../../upstream/client';
import type { GatewayContext, InScopeRequest, Upstream } from '../context';

export interface LegRequest {
  url: string;
  /** x-request-id of this leg (the client's, with -aN / -cN). */
  requestId: string | undefined;
  body: Buffer;
  /** A continuation leg (else a leg 1 attempt). */
  continuation: boolean;
  /** The leg 1 attempt this leg belongs to (spans). */
  attempt: number;
  /** A continuation asks for leg 1's model revision (under MODEL_REVISION_HEADER). */
  revision?: string;
  /** Another path than the client's (a continuation by token ids: the engine's text-completion endpoint). */
  path?: string;
}

export class LegSender {
  private abort: LegAbort | null = null;
  private sent = 0;
  private host: string | undefined;
  private leg1At: number;

  private readonly upstream: Upstream;
  private readonly revisionHeader: string | undefined;

  constructor(
    ctx: Pick<GatewayContext, 'upstream' | 'config'>,
    /** The client's path and headers (forwarded, minus hop-by-hop and the gateway's own). */
    private readonly client: Pick<InScopeRequest, 'path' | 'clientHeaders' | 'continuationPath'>,
    private readonly trace: RequestTrace,
    /** After it, no leg is sent (an aborted open). */
    private readonly cancellation: { readonly cancelled: boolean },
    started: number,
  ) {
    this.upstream = ctx.upstream;
    this.revisionHeader = ctx.config.modelRevisionHeader;
    this.leg1At = started;
  }

  /** Legs sent so far, leg 1's attempts included. */
  get legs(): number {
    return this.sent;
  }

  /** The replica that served the last leg (from the egress listener's response header). */
  get lastHost(): string | undefined {
    return this.host;
  }

  /** When the latest leg 1 attempt was sent. */
  get leg1SentAt(): number {
    return this.leg1At;
  }

  async open(leg: LegRequest): Promise<LegResponse | LegOpenError> {
    if (this.cancellation.cancelled) return new LegOpenError('aborted');
    this.abort = new LegAbort();
    this.sent++;
    if (!leg.continuation) this.leg1At = Date.now();
    const traceHeaders = this.trace.legStarted({ sent: this.sent, attempt: leg.attempt, continuation: leg.continuation });
    const headers = legRequestHeaders(this.client.clientHeaders, leg.requestId, {
      avoidHost: this.sent > 1 ? this.host : undefined,
      revision: leg.revision && this.revisionHeader ? { header: this.revisionHeader, value: leg.revision } : undefined,
      traceHeaders,
    });
    try {
      // An ids leg names its own endpoint; a Responses continuation goes to the chat path; else the client's.
      const path = leg.path ?? (leg.continuation ? (this.client.continuationPath ?? this.client.path) : this.client.path);
      const res = await this.upstream.open(leg.url + path, headers, leg.body, this.abort);
      this.host = upstreamHost(res.headers) ?? this.host;
      this.trace.legAnswered(res.status, upstreamHost(res.headers));
      return res;
    } catch (e) {
      if (e instanceof LegOpenError) {
        this.trace.legFailedToOpen(e.kind);
        return e;
      }
      throw e;
    }
  }

  /** Fences the leg in flight: its socket is aborted (the replica frees the slot), nothing more of it is read. */
  cancel(): void {
    this.abort?.abort();
  }
}
