// One request/response pair and everything that must stop with it. Timers are owned here so that a
// client abort or engine shutdown cancels them (no writes after close, no timer keeping Node alive), and
// the close is attributed to the client only when neither the engine nor the response itself ended it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export interface SeenRequest {
  replica: string;
  /** The HTTP method, as the engine received it. */
  method: string;
  path: string;
  headers: Record<string, string>;
  body: any;
  continuation: boolean;
  fault?: string;
  startedAt: number;
  closedAt?: number;
  clientAborted: boolean;
  tokensSent: number;
}

export class Exchange {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly drainWaits = new Set<() => void>();
  private selfClosed = false;
  private closedFlag = false;
  private readonly closeListeners: (() => void)[] = [];

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly record: SeenRequest,
  ) {
    res.on('close', () => {
      this.closedFlag = true;
      this.record.closedAt ??= Date.now();
      if (!res.writableEnded && !this.selfClosed) this.record.clientAborted = true;
      this.dispose();
      for (const l of this.closeListeners.splice(0)) l();
    });
  }

  get closed(): boolean {
    return this.closedFlag || this.selfClosed || this.res.destroyed || this.res.writableEnded;
  }

  onClose(listener: () => void): void {
    if (this.closedFlag) listener();
    else this.closeListeners.push(listener);
  }

  later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.closed) fn();
    }, ms);
    this.timers.add(t);
  }

  /** Runs fn once the response's write buffer is below its high-water mark again (at once if it is). */
  whenDrained(fn: () => void): void {
    if (!this.res.writableNeedDrain) return fn();
    const onDrain = () => {
      this.drainWaits.delete(onDrain);
      if (!this.closed) fn();
    };
    this.drainWaits.add(onDrain);
    this.res.once('drain', onDrain);
  }

  write(text: string): void {
    if (!this.closed) this.res.write(text);
  }

  end(text?: string): void {
    if (!this.closed) this.res.end(text);
  }

  sendJson(status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (this.closed || this.res.headersSent) return;
    const text = JSON.stringify(body);
    this.res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    this.res.end(text);
  }

  /** RST (crash) or FIN (fin) on the TCP connection, bypassing HTTP framing. */
  killSocket(how: 'reset' | 'fin' | 'destroy'): void {
    this.selfClosed = true;
    this.dispose();
    const socket = this.res.socket as (Socket & { resetAndDestroy?: () => void }) | null;
    if (!socket) return;
    if (how === 'fin') socket.end();
    else if (how === 'reset' && typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
    else socket.destroy();
  }

  /** Engine shutdown: not the client's doing. */
  shutdown(): void {
    this.selfClosed = true;
    this.dispose();
  }

  dispose(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const d of this.drainWaits) this.res.off('drain', d);
    this.drainWaits.clear();
  }
}
