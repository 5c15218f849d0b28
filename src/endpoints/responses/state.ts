// What one Responses stream has told its client so far, kept so that the gateway can go on writing the same
// stream after leg 1 died: the response object of response.created (the base of response.completed), the
// last sequence_number, the item the text goes into (its id, output_index, content_index and text so far),
// and the items already finished. Leg 1's reader fills it (leg1-read.ts); the writer of a continuation leg's
// events reads and extends it (leg2-write.ts).
import type { JsonObject } from '../../openai/chat';
import type { ResponsesDialect } from './dialect';
import type { ItemPlace, Unnumbered } from './events';

export interface OpenItem extends ItemPlace {
  /** The item's text so far (up to the byte cap): its .done events carry all of it. */
  text: string;
  textBytes: number;
}

export class ResponsesState {
  /** response.created's `response`: id, created_at, model and the request's echoed settings. */
  base: JsonObject | null = null;
  /** The last sequence_number the client got (-1: none). */
  lastSeq = -1;
  open: OpenItem | null = null;
  /** The output_index the next item gets. */
  nextOutputIndex = 0;
  /** The items finished so far (output_item.done's `item`), in order: response.completed's output. */
  readonly doneItems: JsonObject[] = [];
  /** The open item's text outgrew the cap: its .done events could not be written whole. */
  textCapped = false;
  /** A continuation leg's finish_reason and its corrected usage (chat form), for response.completed. */
  finishReason: string | null = null;
  usage: JsonObject | null = null;

  constructor(
    /** MAX_CONTINUATION_PREFIX_BYTES: past it the stream cannot be continued anyway (the tracker's cap). */
    readonly maxTextBytes: number,
    /** The engine's variant of the events, which the gateway's own events follow. */
    readonly dialect: ResponsesDialect,
  ) {}

  /** A new leg 1 attempt's response.created: nothing of an earlier attempt reached the client. */
  reset(base: JsonObject): void {
    this.base = base;
    this.lastSeq = -1;
    this.open = null;
    this.nextOutputIndex = 0;
    this.doneItems.length = 0;
    this.textCapped = false;
  }

  /** Text for the open item (kept for its .done events, up to the cap). */
  addText(text: string): void {
    const open = this.open;
    if (!open || text === '' || this.textCapped) return;
    const bytes = Buffer.byteLength(text);
    if (open.textBytes + bytes > this.maxTextBytes) {
      this.textCapped = true;
      return;
    }
    open.text += text;
    open.textBytes += bytes;
  }

  openItem(place: ItemPlace): void {
    this.open = { ...place, text: '', textBytes: 0 };
    this.nextOutputIndex = Math.max(this.nextOutputIndex, place.outputIndex + 1);
  }

  /**
   * The next events as the client gets them: numbered on from the last sequence_number (an event that has the
   * field already, as SGLang's do, keeps its place in the JSON; otherwise it comes last, as vLLM's).
   */
  numbered(events: readonly Unnumbered[]): string {
    let out = '';
    for (const e of events) {
      this.lastSeq++;
      const ev = { ...e, sequence_number: this.lastSeq };
      out += `event: ${e.type}\ndata: ${JSON.stringify(ev)}\n\n`;
    }
    return out;
  }
}
