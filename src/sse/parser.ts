// Incremental Server-Sent Events parser working on bytes.
//
// Why bytes and whole events: the relay forwards an upstream event only once it is complete, as the exact
// bytes the engine wrote. A leg that dies in the middle of an event therefore never delivers half an event
// (the client's SSE parser would otherwise glue it to the next leg's first line), and UTF-8 sequences split
// across TCP chunks are decoded only when their line is complete.
//
// Follows the WHATWG event-stream rules that matter here: lines end with CRLF, LF or CR; an empty line ends
// an event; lines starting with ':' are comments; `data:` lines are joined with '\n'; one leading space after
// the colon is dropped.
//
// `boundedNonEvents` (the leg reader's setting, issue 39): what carries no event costs no memory per byte. An
// engine may write keep-alive comments or blank lines as fast as it can: of the comment-only events one push
// completes, only the first is returned (the others are skipped and counted), and blank lines before an event's
// first field are dropped, not kept to ride along with it; of the empty `data:` events one push completes, only
// the first is returned (the others, malformed all the same, are skipped and counted: a flood of them built an
// array of millions of events a second and raised the sidecar's RSS by 145-213 MB in 10 s). Without it every
// byte is returned (the raw of the events reproduces the input).

export interface SseEvent {
  /** The exact bytes of the event, blank line included. Concatenating every raw reproduces the input. */
  readonly raw: Buffer;
  /** Joined data lines, or null when the event had no data line (comment-only keep-alives, say). */
  readonly data: string | null;
  readonly event?: string;
}

const LF = 0x0a;
const CR = 0x0d;

export class SseParser {
  private dataLines: string[] = [];
  private eventName: string | undefined;
  private sawField = false;
  /** Offset in buf where the current (incomplete) event starts, and where scanning resumes. */
  private eventStart = 0;
  private scanFrom = 0;
  private buf: Buffer = Buffer.alloc(0);
  /** The current event has a line that is not a comment. */
  private sawNonComment = false;
  /** Comment-only events skipped, and stray blank-line bytes dropped (boundedNonEvents). */
  commentsSkipped = 0;
  strayBytesDropped = 0;
  /** Empty `data:` events skipped beyond the first of a push (boundedNonEvents): each is malformed, and counted. */
  emptyDataSkipped = 0;

  constructor(private readonly boundedNonEvents = false) {}

  /** Bytes received but not yet part of a complete event. */
  get bufferedBytes(): number {
    return this.buf.length - this.eventStart;
  }

  /** Feeds a chunk; returns the events it completed, in order. */
  push(chunk: Buffer): SseEvent[] {
    this.buf = this.buf.length === this.eventStart ? chunk : Buffer.concat([this.buf.subarray(this.eventStart), chunk]);
    this.scanFrom -= this.eventStart;
    this.eventStart = 0;
    const events: SseEvent[] = [];
    const buf = this.buf;
    let commentReturned = false;
    let emptyReturned = false;
    let lineStart = this.scanFrom;
    let i = this.scanFrom;
    // Engines end lines with LF: then the next line break is found natively (memchr), not byte by byte.
    const lfOnly = buf.indexOf(CR, i) === -1;
    while (i < buf.length) {
      let b: number;
      if (lfOnly) {
        const lf = buf.indexOf(LF, i);
        if (lf === -1) break;
        i = lf;
        b = LF;
      } else {
        b = buf[i];
        if (b !== LF && b !== CR) {
          i++;
          continue;
        }
      }
      let next = i + 1;
      if (b === CR) {
        // A CR at the very end may be the first half of a CRLF: wait for the next byte to decide.
        if (next === buf.length) break;
        if (buf[next] === LF) next++;
      }
      const ended = this.onLine(buf, lineStart, i);
      if (ended) {
        const empty = this.isEmptyData();
        if (this.boundedNonEvents && !this.sawNonComment && commentReturned) {
          this.commentsSkipped++;
          this.finishEvent(undefined);
        } else if (this.boundedNonEvents && empty && emptyReturned) {
          this.emptyDataSkipped++;
          this.finishEvent(undefined);
        } else {
          commentReturned ||= !this.sawNonComment;
          emptyReturned ||= empty;
          events.push(this.finishEvent(buf.subarray(this.eventStart, next)) as SseEvent);
        }
        this.eventStart = next;
      } else if (this.boundedNonEvents && !this.sawField) {
        // A blank line before any field: nothing to keep.
        this.strayBytesDropped += next - this.eventStart;
        this.eventStart = next;
      }
      lineStart = next;
      i = next;
    }
    this.scanFrom = lineStart;
    return events;
  }

  /** Returns whatever incomplete event bytes are buffered (for diagnostics) and resets the parser. */
  reset(): Buffer {
    const rest = this.buf.subarray(this.eventStart);
    this.buf = Buffer.alloc(0);
    this.eventStart = 0;
    this.scanFrom = 0;
    this.dataLines = [];
    this.eventName = undefined;
    this.sawField = false;
    this.sawNonComment = false;
    return rest;
  }

  /** Handles one line [start, end); returns true when it is the blank line that ends an event. */
  private onLine(buf: Buffer, start: number, end: number): boolean {
    // Stray blank lines before any field dispatch nothing; their bytes ride along with the next event.
    if (start === end) return this.sawField;
    this.sawField = true;
    if (buf[start] === 0x3a /* ':' */) return false;
    this.sawNonComment = true;
    // Fast path for the line every chunk has: decode only the value of `data:` / `data: `.
    if (
      end - start > 4 &&
      buf[start] === 0x64 &&
      buf[start + 1] === 0x61 &&
      buf[start + 2] === 0x74 &&
      buf[start + 3] === 0x61 &&
      buf[start + 4] === 0x3a
    ) {
      let v = start + 5;
      if (v < end && buf[v] === 0x20) v++;
      this.dataLines.push(buf.toString('utf8', v, end));
      return false;
    }
    const line = buf.toString('utf8', start, end);
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.dataLines.push(value);
    else if (field === 'event') this.eventName = value;
    return false;
  }

  /** The event that just ended is one empty `data:` line and nothing else (no JSON: malformed, never relayed). */
  private isEmptyData(): boolean {
    return this.dataLines.length === 1 && this.dataLines[0] === '' && this.eventName === undefined;
  }

  /** The event that ended (undefined raw: skipped, only the state is reset). */
  private finishEvent(raw: Buffer | undefined): SseEvent | undefined {
    const lines = this.dataLines;
    let ev: SseEvent | undefined;
    if (raw !== undefined) {
      const data = lines.length === 0 ? null : lines.length === 1 ? lines[0] : lines.join('\n');
      ev = this.eventName === undefined ? { raw, data } : { raw, data, event: this.eventName };
    }
    if (lines.length > 0) this.dataLines = [];
    this.eventName = undefined;
    this.sawField = false;
    this.sawNonComment = false;
    return ev;
  }
}
