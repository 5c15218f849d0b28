// The client's end of an originated response, driven by the request (originated-response.ts, the only module
// that builds one: test/unit/stream/client-reach.test.ts checks it). It holds what the current attempt
// produced before the commit point (held-output.ts) and sends a head, body bytes, the end or a reset to the
// ext_proc stream, in that order and never after the end. No decision lives here, no commit flag: when to
// release what is held and how the response ends is the request's.
import type { FinalResponse } from './ending';
import { HeldOutput, type ResponseHead } from './held-output';
import { verbatimBody, verbatimHead } from './verbatim';

/** What the client side needs of the ext_proc stream (src/extproc/processor-stream.ts implements it). */
export interface ClientWire {
  sendResponseHeaders(status: number, headers: Record<string, string>): void;
  /** A promise only under backpressure. */
  sendResponseBody(body: Buffer, endOfStream: boolean): Promise<void> | undefined;
  reset(details: string): void;
}

export class ClientSide {
  private held = new HeldOutput();
  /** Ended or reset: nothing more may be sent. */
  private closed = false;

  constructor(private readonly wire: ClientWire) {}

  /** A new leg 1 attempt: its 200 event-stream head (null: none read yet); an earlier attempt's output is forgotten. */
  newAttempt(head: ResponseHead | null): void {
    this.held = new HeldOutput(head);
  }

  /** The current attempt's event-stream head is held (sent at the commit point). */
  get attemptHadHeaders(): boolean {
    return this.held.head !== null;
  }

  /** Before the commit point: kept back. */
  hold(bytes: Buffer): void {
    this.held.add(bytes);
  }

  /** After the commit point: sent; a promise only under backpressure. */
  send(bytes: Buffer): Promise<void> | undefined {
    if (this.closed || bytes.length === 0) return undefined;
    return this.wire.sendResponseBody(bytes, false);
  }

  /** Sends what is held (the head, then the events), once: at the commit point, or with the ending. */
  async release(): Promise<void> {
    const out = this.held.release();
    if (out === null || this.closed) return;
    this.wire.sendResponseHeaders(out.head.status, out.head.headers);
    await this.send(out.body);
  }

  /** The last of the response (ending.ts finalResponse), after what is held unless it replaces it. */
  async end(f: Exclude<FinalResponse, null>, gone: () => boolean): Promise<void> {
    if ('verbatim' in f) return await this.relayVerbatim(f.verbatim, gone);
    if (f.head) this.held = new HeldOutput(f.head);
    else if (f.dropHeldBody) this.held.dropBody();
    await this.release();
    await this.close(f.tail);
  }

  /** Cut the response like a dead upstream would (before any head: Envoy answers with its own error). */
  reset(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.wire.reset(reason);
  }

  private async close(tail: Buffer): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.wire.sendResponseBody(tail, true);
  }

  /** The engine's non-streaming answer, unchanged, as it arrives. */
  private async relayVerbatim(answer: Parameters<typeof verbatimHead>[0], gone: () => boolean): Promise<void> {
    this.held = new HeldOutput(verbatimHead(answer));
    await this.release();
    for await (const piece of verbatimBody(answer)) {
      if (gone()) return;
      if (piece === 'end') return await this.close(Buffer.alloc(0));
      // The upstream died in the middle of its answer: reproduce that for the client.
      if (piece === 'reset') return this.reset('upstream reset during a passed-through response');
      await this.send(piece);
    }
  }
}
