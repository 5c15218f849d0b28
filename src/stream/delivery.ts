// The client side of an originated response. Before the commit point (the first delta) everything is held
// back, headers included: a failed attempt can then be dropped and re-run without the client seeing a
// byte of it. After the commit point bytes go straight out, with gRPC backpressure respected.
import type { ClientStream } from '../extproc/client-stream';

export class Delivery {
  committed = false;
  ended = false;
  /** Bytes handed to Envoy for the client. */
  bytesDelivered = 0;
  private held: Buffer[] = [];
  /** Bytes held back before the commit point (bounded by the caller: MAX_HELD_BYTES). */
  heldBytes = 0;
  private headers: { status: number; headers: Record<string, string> } | null = null;

  constructor(private readonly client: ClientStream) {}

  get clientGone(): boolean {
    return this.client.isClosed && !this.ended;
  }

  /** Response headers of the current attempt; sent at commit. A retried attempt replaces them. */
  setHeaders(status: number, headers: Record<string, string>): void {
    if (!this.committed) this.headers = { status, headers };
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
    this.held = [];
    this.heldBytes = 0;
    this.headers = null;
  }

  async commit(): Promise<void> {
    if (this.committed) return;
    this.committed = true;
    const h = this.headers ?? { status: 200, headers: { 'content-type': 'text/event-stream' } };
    this.client.sendResponseHeaders(h.status, h.headers);
    const held = this.held;
    this.held = [];
    this.heldBytes = 0;
    if (held.length) await this.write(Buffer.concat(held));
  }

  /** Delivers (or, before the commit point, holds) bytes; a promise is returned only under backpressure. */
  write(buf: Buffer): Promise<void> | undefined {
    if (!this.committed) {
      this.hold(buf);
      return undefined;
    }
    if (this.ended || buf.length === 0) return undefined;
    this.bytesDelivered += buf.length;
    return this.client.sendResponseBody(buf, false);
  }

  /** Ends the response (commits first if needed). The last message carries bytes when it can. */
  async end(tail?: Buffer): Promise<void> {
    if (this.ended) return;
    if (!this.committed) await this.commit();
    this.ended = true;
    const last = tail ?? Buffer.alloc(0);
    this.bytesDelivered += last.length;
    await this.client.sendResponseBody(last, true);
  }

  /** A complete non-streamed answer (error statuses, passthrough of a non-200). */
  async respond(status: number, headers: Record<string, string>, body: Buffer): Promise<void> {
    this.headers = { status, headers };
    this.held = [];
    await this.end(body);
  }

  /** Cut the client's response like a dead upstream would. */
  reset(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    if (!this.committed) {
      // Nothing was sent: Envoy answers the client with its own error for a failed processor stream.
      this.committed = true;
    }
    this.client.reset(reason);
  }
}
