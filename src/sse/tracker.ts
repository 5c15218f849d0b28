// Reads the meaning of each OpenAI chat-completion SSE event and accumulates what a recovery needs: the
// reasoning and content text so far, whether a tool call appeared, the finish_reason, the upstream id.
// It parses only the JSON of data events; the relay still forwards the original bytes.
import type { JsonObject } from '../openai/chat';

import type { SseEvent } from './parser';

export type ReasoningField = 'reasoning_content' | 'reasoning';

export type EventKind =
  | 'chunk' // a chat.completion.chunk (may carry deltas, finish_reason and/or usage)
  | 'done' // data: [DONE]
  | 'error' // data: {"error": ...} in-band error
  | 'malformed' // data that is not JSON (counted and dropped)
  | 'other'; // comment / keep-alive / event without data: forwarded as is

export interface ObservedEvent {
  readonly kind: EventKind;
  /** The event's JSON (an empty object for [DONE], comments and malformed data). */
  readonly json: JsonObject;
  /** Non-empty reasoning/content text or a tool call: something the client "has" once delivered. */
  readonly hasDelta: boolean;
  readonly reasoning: string;
  readonly content: string;
  readonly toolCall: boolean;
  readonly finishReason: string | null;
  readonly usage: boolean;
}

/** One allocation per event, one shape for V8 (the hottest object the relay creates). */
class Observed implements ObservedEvent {
  readonly hasDelta: boolean;
  constructor(
    readonly kind: EventKind,
    readonly json: JsonObject,
    readonly reasoning: string,
    readonly content: string,
    readonly toolCall: boolean,
    readonly finishReason: string | null,
    readonly usage: boolean,
  ) {
    this.hasDelta = reasoning !== '' || content !== '' || toolCall;
  }
}

const NO_JSON: JsonObject = Object.freeze({});
const OTHER: ObservedEvent = Object.freeze(new Observed('other', NO_JSON, '', '', false, null, false));
const DONE: ObservedEvent = Object.freeze(new Observed('done', NO_JSON, '', '', false, null, false));
const MALFORMED: ObservedEvent = Object.freeze(new Observed('malformed', NO_JSON, '', '', false, null, false));

/** The choice with index 0 (an absent index counts as 0). */
function choiceZero(choices: unknown): JsonObject | undefined {
  if (!Array.isArray(choices)) return undefined;
  for (let i = 0; i < choices.length; i++) {
    const c = choices[i];
    if ((c?.index ?? 0) === 0) return c;
  }
  return undefined;
}

export class StreamTracker {
  reasoning = '';
  content = '';
  reasoningField: ReasoningField | null = null;
  toolCallsSeen = false;
  finishReason: string | null = null;
  doneSeen = false;
  id: string | null = null;
  model: string | null = null;
  /** The engine's system_fingerprint, from the first chunk that has one (a model revision source). */
  systemFingerprint: string | null = null;
  malformed = 0;

  /** Classifies an event without changing the accumulated state. Runs once per relayed event. */
  static read(ev: SseEvent): ObservedEvent {
    const data = ev.data;
    if (data === null) return OTHER;
    // JSON.parse tolerates surrounding whitespace; only [DONE] needs the trimmed form.
    if (data.length < 16 && data.trim() === '[DONE]') return DONE;
    let json: JsonObject;
    try {
      json = JSON.parse(data);
    } catch {
      // Whitespace JSON does not allow but String.trim removes (a BOM, NBSP): parse what trim leaves.
      const trimmed = data.trim();
      if (trimmed === '[DONE]') return DONE;
      if (trimmed === data) return MALFORMED;
      try {
        json = JSON.parse(trimmed);
      } catch {
        return MALFORMED;
      }
    }
    if (json === null || typeof json !== 'object') return MALFORMED;
    if (json.error !== undefined && json.choices === undefined) return new Observed('error', json, '', '', false, null, false);
    let reasoning = '';
    let content = '';
    let toolCall = false;
    let finishReason: string | null = null;
    // Only choice index 0 is tracked: requests with n > 1 are out of scope.
    const choice = choiceZero(json.choices);
    if (choice) {
      const d = choice.delta;
      if (d !== null && typeof d === 'object') {
        if (typeof d.reasoning_content === 'string') reasoning = d.reasoning_content;
        else if (typeof d.reasoning === 'string') reasoning = d.reasoning;
        if (typeof d.content === 'string') content = d.content;
        const tc = d.tool_calls;
        if (Array.isArray(tc) && tc.length > 0) toolCall = true;
      }
      if (typeof choice.finish_reason === 'string') finishReason = choice.finish_reason;
    }
    return new Observed('chunk', json, reasoning, content, toolCall, finishReason, json.usage != null && typeof json.usage === 'object');
  }

  /** Folds an observed event into the accumulated state (call only for events the client will get). */
  apply(o: ObservedEvent): void {
    if (o.kind === 'done') this.doneSeen = true;
    else if (o.kind === 'malformed') this.malformed++;
    if (o.kind !== 'chunk') return;
    const j = o.json;
    if (this.id === null && typeof j.id === 'string') this.id = j.id;
    if (this.model === null && typeof j.model === 'string') this.model = j.model;
    if (this.systemFingerprint === null && typeof j.system_fingerprint === 'string' && j.system_fingerprint)
      this.systemFingerprint = j.system_fingerprint;
    if (o.reasoning) {
      this.reasoning += o.reasoning;
      if (this.reasoningField === null) {
        const d = choiceZero(j.choices)?.delta ?? {};
        this.reasoningField = typeof d.reasoning_content === 'string' ? 'reasoning_content' : 'reasoning';
      }
    }
    this.content += o.content;
    if (o.toolCall) this.toolCallsSeen = true;
    if (o.finishReason !== null) this.finishReason = o.finishReason;
  }

  /** A normal end: a finish_reason other than "abort" was seen. */
  get finished(): boolean {
    return this.finishReason !== null && this.finishReason !== 'abort';
  }

  /** Something a continuation could start from (text, and no tool call that leg2 could not continue). */
  get recoverable(): boolean {
    return !this.toolCallsSeen && (this.reasoning !== '' || this.content !== '');
  }
}
