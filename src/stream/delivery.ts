// The client side of an originated response. Before the commit point (the first delta) everything is held
// back, headers included: a failed attempt can then be dropped and re-run without the client seeing a byte
// of it. After the commit point bytes go straight out, with gRPC backpressure respected. The request's state
// machine (originated-response.ts) decides when to commit; `committed` is read-only for everyone else.
import type { ProcessorStream } from '../extproc/processor-stream';

export class Delivery {
  private isCommitted = false;
  private ended = false;
  private held: Buffer[] = [];
  /** Bytes held back before the commit point (bounded by the caller: MAX_HELD_BYTES). */
  heldBytes = 0;
  private headers: { status: number; headers: Record<string, string> } | null = null;

  constructor(private readonly stream: ProcessorStream) {}

  get committed(): boolean {
    return this.isCommitted;
  }

  /** Response headers of the current attempt; sent at commit. A retried attempt replaces them. */
  setHeaders(status: number, headers: Record<string, string>): void {
    if (!this.isCommitted) this.headers = { status, headers };
  }

  hold(buf: Buffer): void {
    this.held.push(buf);
    this.heldBytes += buf.length;
  }

  /** Drop held body bytes but keep the attempt's headers. */
  discardHeldBody(): void {
    this.held = [];
    this.heldBytes = 0;
  }

  /** Forget what a failed attempt produced (nothing of it reached the client). */
  discardAttempt(): void {
    this.discardHeldBody();
    this.headers = null;
  }

  /** Sends the held headers and events. Called by the state machine at the commit point (and by end()). */
  async commit(): Promise<void> {
    if (this.isCommitted) return;
    this.isCommitted = true;
    const h = this.headers ?? { status: 200, headers: { 'content-type': 'text/event-stream' } };
    this.stream.sendResponseHeaders(h.status, h.headers);
    const held = this.held;
    this.discardHeldBody();
    if (held.length) await this.write(Buffer.concat(held));
  }

  /** Delivers (or, before the commit point, holds) bytes; a promise is returned only under backpressure. */
  write(buf: Buffer): Promise<void> | undefined {
    if (!this.isCommitted) {
      this.hold(buf);
      return undefined;
    }
    if (this.ended || buf.length === 0) return undefined;
    return this.stream.sendResponseBody(buf, false);
  }

  /** Ends the response (sending the headers first if needed). The last message carries bytes when it can. */
  async end(tail?: Buffer): Promise<void> {
    if (this.ended) return;
    if (!this.isCommitted) await this.commit();
    this.ended = true;
    await this.stream.sendResponseBody(tail ?? Buffer.alloc(0), true);
  }

  /** A complete non-streamed answer (error statuses, passthrough of a non-200), before anything was sent. */
  async respond(status: number, headers: Record<string, string>, body: Buffer): Promise<void> {
    this.headers = { status, headers };
    this.held = [];
    await this.end(body);
  }

  /** Cut the client's response like a dead upstream would. */
  reset(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    // Nothing more may be sent either way; before the commit point Envoy answers with its own error.
    this.isCommitted = true;
    this.stream.reset(reason);
  }
}
