// What a request holds back before its commit point: the current attempt's response head and events. Before
// the first delta nothing reaches the client, headers included, so a failed attempt is dropped whole and re-run
// without the client seeing a byte of it. Plain data owned by the request (originated-response.ts), which
// releases it once, at the commit point or with its ending; nothing here sends.

export interface ResponseHead {
  status: number;
  headers: Record<string, string>;
}

/** The head of an event stream when the attempt's own was never read (an ending before any response). */
export const EVENT_STREAM_HEAD: ResponseHead = Object.freeze({ status: 200, headers: { 'content-type': 'text/event-stream' } });

export class HeldOutput {
  private body: Buffer[] = [];
  /** Bytes held (bounded by the relays: MAX_HELD_BYTES). */
  bytes = 0;
  private released = false;

  /** `head`: the attempt's 200 event-stream headers, sent at the commit point; null until read. */
  constructor(readonly head: ResponseHead | null = null) {}

  add(buf: Buffer): void {
    if (buf.length === 0) return;
    this.body.push(buf);
    this.bytes += buf.length;
  }

  /** The events held are not to be sent (the head stays). */
  dropBody(): void {
    this.body = [];
    this.bytes = 0;
  }

  /** The head and events to send, once (null: already released: the request is past its commit point). */
  release(): { head: ResponseHead; body: Buffer } | null {
    if (this.released) return null;
    this.released = true;
    const body = this.body.length === 1 ? this.body[0] : Buffer.concat(this.body);
    this.dropBody();
    return { head: this.head ?? EVENT_STREAM_HEAD, body };
  }
}
