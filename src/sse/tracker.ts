// Reads the meaning of each OpenAI chat-completion SSE event and accumulates what a recovery needs: the
// reasoning and content text so far, whether a tool call appeared, the finish_reason, the upstream id.
// It parses only the JSON of data events; the relay still forwards the original bytes.
//
// Memory per stream is bounded: the kept text (the continuation prefix) stops growing at
// MAX_CONTINUATION_PREFIX_BYTES. Past it the stream can no longer be continued (`prefixCapped`), and only
// counters go on: characters delivered and what the token estimate needs of the text not kept.
import type { JsonObject, ReasoningField } from '../openai/chat';
import { readChoiceZero, toolCallText } from '../openai/chunk';
import { type CharCounts, charCounts, estimateFromCounts } from '../recovery/token-estimate';

import type { SseEvent } from './parser';

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
  /** The field the reasoning came in (null: none), and choice 0's tool calls (null: none). */
  readonly reasoningField: ReasoningField | null;
  readonly toolCalls: readonly unknown[] | null;
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
    readonly reasoningField: ReasoningField | null = null,
    readonly toolCalls: readonly unknown[] | null = null,
  ) {
    this.hasDelta = reasoning !== '' || content !== '' || toolCall;
  }
}

const NO_JSON: JsonObject = Object.freeze({});
const OTHER: ObservedEvent = Object.freeze(new Observed('other', NO_JSON, '', '', false, null, false));
const DONE: ObservedEvent = Object.freeze(new Observed('done', NO_JSON, '', '', false, null, false));
const MALFORMED: ObservedEvent = Object.freeze(new Observed('malformed', NO_JSON, '', '', false, null, false));

/**
 * Text appended in small pieces (one token each), kept flat in slabs: a string grown by `+=` per token is a
 * rope whose every piece costs a node and a string header (about ten times the text itself).
 */
class TextAccumulator {
  private flat = '';
  private readonly pending: string[] = [];
  /** Length (UTF-16 units) of the text, pending pieces included. */
  length = 0;

  add(piece: string): void {
    this.pending.push(piece);
    this.length += piece.length;
    if (this.pending.length >= 64) this.flush();
  }

  get text(): string {
    if (this.pending.length > 0) this.flush();
    return this.flat;
  }

  private flush(): void {
    this.flat += this.pending.join('');
    this.pending.length = 0;
  }
}

/** The cap when a tracker is not given one (MAX_CONTINUATION_PREFIX_BYTES's default). */
export const DEFAULT_MAX_PREFIX_BYTES = 4 * 1024 * 1024;

export class StreamTracker {
  private readonly reasoningText = new TextAccumulator();
  private readonly contentText = new TextAccumulator();
  private readonly toolText = new TextAccumulator();
  /** UTF-8 bytes of the kept text (reasoning, content and tool-call text). */
  prefixBytes = 0;
  /** The delivered text outgrew the cap: what is kept is not the whole of it, no continuation can start from it. */
  prefixCapped = false;
  /** Delivered characters (UTF-16 units), kept or not. */
  reasoningChars = 0;
  contentChars = 0;
  /** What the token estimate needs of the delivered text that was not kept. */
  private readonly uncounted: CharCounts = { cjk: 0, codePoints: 0 };

  constructor(readonly maxPrefixBytes: number = DEFAULT_MAX_PREFIX_BYTES) {}

  /** The delivered reasoning text (up to the cap). */
  get reasoning(): string {
    return this.reasoningText.text;
  }

  /** The delivered content text (up to the cap). */
  get content(): string {
    return this.contentText.text;
  }

  /** The delivered tool calls' names and argument text, concatenated (counted as the prompt counts a tool call). */
  get toolCallText(): string {
    return this.toolText.text;
  }

  reasoningField: ReasoningField | null = null;
  toolCallsSeen = false;
  finishReason: string | null = null;
  doneSeen = false;
  id: string | null = null;
  /** Leg 1's `created` (every chunk the client sees carries it, leg 2's rewritten). */
  created: number | null = null;
  model: string | null = null;
  /** The engine's system_fingerprint, from the first chunk that has one (a model revision source). */
  systemFingerprint: string | null = null;
  malformed = 0;
  /** The last usage the stream carried (vLLM's continuous_usage_stats puts one on every chunk) ... */
  lastUsage: JsonObject | null = null;
  /** ... and whether it came with the last delivered text (then it counts everything the client has). */
  usageCurrent = false;

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
    // Only choice index 0 is tracked: requests with n > 1 are out of scope.
    const c = readChoiceZero(json);
    const usage = json.usage != null && typeof json.usage === 'object';
    return new Observed('chunk', json, c.reasoning, c.content, c.toolCalls !== null, c.finishReason, usage, c.reasoningField, c.toolCalls);
  }

  /** Folds an observed event into the accumulated state (call only for events the client will get). */
  apply(o: ObservedEvent): void {
    if (o.kind === 'done') this.doneSeen = true;
    else if (o.kind === 'malformed') this.malformed++;
    if (o.kind !== 'chunk') return;
    const j = o.json;
    if (this.id === null && typeof j.id === 'string') this.id = j.id;
    if (this.created === null && typeof j.created === 'number') this.created = j.created;
    if (this.model === null && typeof j.model === 'string') this.model = j.model;
    if (this.systemFingerprint === null && typeof j.system_fingerprint === 'string' && j.system_fingerprint)
      this.systemFingerprint = j.system_fingerprint;
    if (o.reasoning && this.reasoningField === null) this.reasoningField = o.reasoningField;
    this.reasoningChars += o.reasoning.length;
    this.contentChars += o.content.length;
    const toolText = o.toolCalls ? toolCallText(o.toolCalls) : '';
    if (o.toolCall) this.toolCallsSeen = true;
    if (o.hasDelta) this.keep(o.reasoning, o.content, toolText);
    if (o.finishReason !== null) this.finishReason = o.finishReason;
    if (o.usage) this.lastUsage = j.usage as JsonObject;
    if (o.usage) this.usageCurrent = true;
    else if (o.hasDelta) this.usageCurrent = false;
  }

  /** Keeps one event's text, or past the cap only counts it (an event's text is kept whole or not at all). */
  private keep(reasoning: string, content: string, toolText: string): void {
    if (!this.prefixCapped) {
      const bytes = Buffer.byteLength(reasoning) + Buffer.byteLength(content) + Buffer.byteLength(toolText);
      if (this.prefixBytes + bytes <= this.maxPrefixBytes) {
        this.prefixBytes += bytes;
        if (reasoning) this.reasoningText.add(reasoning);
        if (content) this.contentText.add(content);
        if (toolText) this.toolText.add(toolText);
        return;
      }
      this.prefixCapped = true;
    }
    for (const t of [reasoning, content, toolText]) {
      if (!t) continue;
      const c = charCounts(t);
      this.uncounted.cjk += c.cjk;
      this.uncounted.codePoints += c.codePoints;
    }
  }

  /** The token estimate of everything delivered (reasoning, content, tool calls), the text past the cap included. */
  deliveredTokenEstimate(cjkCharsPerToken: number, otherCharsPerToken: number): number {
    const kept = charCounts(this.reasoning + this.content + this.toolCallText);
    const all = { cjk: kept.cjk + this.uncounted.cjk, codePoints: kept.codePoints + this.uncounted.codePoints };
    return estimateFromCounts(all, cjkCharsPerToken, otherCharsPerToken);
  }

  /** A normal end: a finish_reason other than "abort" was seen. */
  get finished(): boolean {
    return this.finishReason !== null && this.finishReason !== 'abort';
  }

  /** Text delivered and no tool call that leg2 could not continue (past the cap too: see prefixCapped). */
  get recoverable(): boolean {
    return !this.toolCallsSeen && (this.reasoningChars > 0 || this.contentChars > 0);
  }
}
