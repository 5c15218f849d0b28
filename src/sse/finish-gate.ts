// One finish per leg, and nothing of substance after it (issue 39). Pure: given what a leg has relayed so far
// (a finish, a [DONE]) and its next event, says whether the client gets that event.
//
// After a leg's finish_reason only what completes the stream may follow: the usage chunk (choices [] and usage:
// vLLM and SGLang send it after the finish when include_usage is set), comments, and [DONE]. More content, a
// second finish, an error or an abort after the finish are dropped (counted, logged): an engine that sends them
// is broken, and the client already has its answer. After [DONE] nothing at all follows. A finish_reason that
// is none of the engines' strings (src/sse/finish-reason.ts) is a failed leg, unless it comes after a finish
// (then it is just more after the finish).
import type { ObservedEvent } from './tracker';

export interface LegFinishState {
  /** The leg relayed a finish_reason. */
  readonly finished: boolean;
  /** The leg relayed [DONE]. */
  readonly done: boolean;
}

export type FinishGateVerdict =
  | 'relay' // the leg's ordinary handling goes on
  | 'malformed-finish' // the leg failed: its finish_reason is none of the engines' strings
  | 'after-finish' // dropped: content, a second finish, an error or an abort after the leg's finish
  | 'after-done'; // dropped: anything after the leg's [DONE]

export function gateEvent(o: ObservedEvent, leg: LegFinishState): FinishGateVerdict {
  if (leg.done) return 'after-done';
  if (!leg.finished) return o.kind === 'chunk' && o.malformedFinish ? 'malformed-finish' : 'relay';
  if (o.kind === 'done' || o.kind === 'other') return 'relay';
  // A usage chunk carries no delta and no finish of its own.
  if (o.kind === 'chunk' && o.usage && !o.hasDelta && o.finishReason === null && !o.malformedFinish) return 'relay';
  return 'after-finish';
}
