// One Envoy ext_proc gRPC stream = one client request. This adapter turns the ProcessingRequest messages into
// calls on a handler and offers the few answers the gateway gives: CONTINUE with the echoed body (native
// proxying), or a locally originated response (StreamedImmediateResponse: headers, then body chunks).
// Writes after the stream is gone are dropped, never thrown: the client may vanish at any moment.
import * as grpc from '@grpc/grpc-js';
import { encodeSirBody, encodeSirHeaders } from './encode-body';
import { headerMapToRecord, type ProcessingRequest, type ProcessingResponse } from './proto';

export interface ProcessorStreamHandler {
  onRequestHeaders(headers: Record<string, string>, endOfStream: boolean): void;
  onRequestBody(chunk: Buffer, endOfStream: boolean): void;
  onRequestTrailers(): void;
  /** The client (or Envoy) went away: cancel everything for this request. */
  onGone(reason: string): void;
}

type Call = grpc.ServerDuplexStream<ProcessingRequest, ProcessingResponse>;

export class ProcessorStream {
  private closed = false;
  private drainWaiters: Array<() => void> = [];

  constructor(
    private readonly call: Call,
    handler: ProcessorStreamHandler,
  ) {
    call.on('data', (m: ProcessingRequest) => {
      if (this.closed) return;
      switch (m.request) {
        case 'request_headers':
          handler.onRequestHeaders(headerMapToRecord(m.request_headers?.headers), !!m.request_headers?.end_of_stream);
          break;
        case 'request_body':
          handler.onRequestBody(m.request_body?.body ?? Buffer.alloc(0), !!m.request_body?.end_of_stream);
          break;
        case 'request_trailers':
          handler.onRequestTrailers();
          break;
        default:
          // Response-path messages are not configured (response processing is off); ignore defensively.
          break;
      }
    });
    const gone = (reason: string) => {
      if (this.closed) return;
      this.closed = true;
      this.releaseDrainWaiters();
      handler.onGone(reason);
    };
    // Envoy half-closes the stream when the downstream request is torn down (seen in the spike: `end` then
    // `cancelled` within milliseconds of the client disconnecting); it never half-closes while a response
    // we originate is still open.
    call.on('end', () => gone('client-half-close'));
    call.on('cancelled', () => gone('client-cancelled'));
    call.on('error', (e: Error) => gone(`grpc-error: ${e.message}`));
    call.on('drain', () => this.releaseDrainWaiters());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Out of scope: let Envoy's router proxy the request natively. */
  continueRequest(): void {
    this.write({ request_headers: { response: { status: 'CONTINUE' } } });
  }

  /** In FULL_DUPLEX_STREAMED mode the body must be handed back, chunk by chunk, or the upstream gets none. */
  echoBody(chunk: Buffer, endOfStream: boolean): boolean {
    return this.write({
      request_body: { response: { body_mutation: { streamed_response: { body: chunk, end_of_stream: endOfStream } } } },
    });
  }

  continueTrailers(): void {
    this.write({ request_trailers: {} });
  }

  /** Starts the locally originated response (only valid as the answer to request_headers). */
  sendResponseHeaders(status: number, headers: Record<string, string>, endOfStream = false): void {
    const list: Array<[string, Buffer]> = [[':status', Buffer.from(String(status))]];
    for (const [key, value] of Object.entries(headers)) list.push([key, Buffer.from(value, 'latin1')]);
    this.write(encodeSirHeaders(list, endOfStream) as unknown as ProcessingResponse);
  }

  /**
   * Sends response body bytes. Returns a promise only when gRPC's buffer is full (backpressure): the
   * caller awaits it before sending more; the usual case costs no promise at all.
   */
  sendResponseBody(body: Buffer, endOfStream: boolean): Promise<void> | undefined {
    const ok = this.write(encodeSirBody(body, endOfStream) as unknown as ProcessingResponse);
    if (endOfStream) this.finish();
    else if (!ok && !this.closed) return new Promise<void>((r) => this.drainWaiters.push(r));
    return undefined;
  }

  /** Aborts the client's response: Envoy resets the downstream stream (what a dead upstream looks like). */
  reset(details: string): void {
    if (this.closed) return;
    this.closed = true;
    this.releaseDrainWaiters();
    this.call.emit('error', { code: grpc.status.UNAVAILABLE, details });
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.releaseDrainWaiters();
    this.call.end();
  }

  private write(msg: ProcessingResponse): boolean {
    if (this.closed) return true;
    return this.call.write(msg);
  }

  private releaseDrainWaiters(): void {
    const w = this.drainWaiters;
    this.drainWaiters = [];
    for (const r of w) r();
  }
}
