// One in-scope Responses stream, as the request's steps see it: leg 1's events read into the tracked state,
// a continuation leg's chat chunks written as the same stream, and the two ways the gateway ends it itself:
// response.completed after a continuation, or response.failed (the Responses API's own failure event, with the
// interruption registry's error) where the stream cannot be continued. Leg 1 goes to the engine's
// /v1/responses; continuation legs to its chat path (/v1/chat/completions), from the request as chat messages.
import type { JsonObject } from '../../openai/chat';
import { type InterruptionInfo, interruptionPayload } from '../../recovery/interruption';
import type { SseEvent } from '../../sse/parser';
import type { ObservedEvent } from '../../sse/tracker';
import type { ResponsesDialect } from './dialect';
import { readLeg1Event } from './leg1-read';
import { type WriteRefusal, writeCompletion, writeLeg2Chunk } from './leg2-write';
import { ResponsesState } from './state';

/** The chat path a continuation leg of a Responses stream is sent to. */
export const CONTINUATION_CHAT_PATH = '/v1/chat/completions';

export class ResponsesStream {
  private readonly state: ResponsesState;

  constructor(
    maxTextBytes: number,
    /** Why no continuation can be built from this request (previous_response_id, an item kind): undefined when one can. */
    readonly notContinuable: string | undefined,
    dialect: ResponsesDialect,
  ) {
    this.state = new ResponsesState(maxTextBytes, dialect);
  }

  /** Leg 1's reader (bound: the leg loop calls it per event). */
  readonly read = (ev: SseEvent): ObservedEvent => readLeg1Event(this.state, ev);

  /** A continuation chunk (its usage corrected) as the client's events, or why it cannot be written. */
  leg2Chunk(o: ObservedEvent, usage: JsonObject | undefined): Buffer | WriteRefusal {
    const out = writeLeg2Chunk(this.state, o, usage);
    return out === 'tool-call' || out === 'reasoning-after-text' || out === 'text-too-large' ? out : Buffer.from(out);
  }

  /** The continuation's end: the open item's .done events and response.completed. */
  leg2Done(): Buffer {
    return Buffer.from(writeCompletion(this.state));
  }

  /**
   * The stream ends without its answer: response.failed, whose response carries the interruption registry's
   * error (code upstream_decode_interrupted, a stable `reason`) and the items delivered so far, the cut one as
   * `incomplete`. No [DONE]: a Responses stream has none.
   */
  failed(info: InterruptionInfo): Buffer {
    const s = this.state;
    const output = [...s.doneItems];
    if (s.open) output.push({ ...s.dialect.doneItem(s.open, s.open.text), status: 'incomplete' });
    const { error } = interruptionPayload(info) as { error: JsonObject };
    const response = { ...(s.base ?? {}), status: 'failed', error, output, usage: null };
    return Buffer.from(s.numbered([{ type: 'response.failed', response }]));
  }
}
