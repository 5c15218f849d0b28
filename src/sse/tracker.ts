// Reads the meaning of each OpenAI chat-completion SSE event and accumulates what a recovery needs: the
// reasoning and content text so far, whether a tool call appeared, the finish_reason, the upstream id.
// It parses only the JSON of data events; the relay still forwards the original bytes.

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
  readonly json?: any;
  /** Non-empty reasoning/content text or a tool call: something the client "has" once delivered. */
  readonly hasDelta: boolean;
  readonly reasoning: string;
  readonly content: string;
  readonly toolCall: boolean;
  readonly finishReason: string | null;
  readonly usage: boolean;
}

export class StreamTracker {
  reasoning = '';
  content = '';
  reasoningField: ReasoningField | null = null;
  toolCallsSeen = false;
  finishReason: string | null = null;
  doneSeen = false;
  error: unknown = null;
  id: string | null = null;
  model: string | null = null;
  malformed = 0;

  /** Classifies an event without changing the accumulated state. */
  static read(ev: SseEvent): ObservedEvent {
    const empty = { hasDelta: false, reasoning: '', content: '', toolCall: false, finishReason: null, usage: false };
    if (ev.data === null) return { kind: 'other', ...empty };
    const data = ev.data.trim();
    if (data === '[DONE]') return { kind: 'done', ...empty };
    let json: any;
    try {
      json = JSON.parse(data);
    } catch {
      return { kind: 'malformed', ...empty };
    }
    if (json === null || typeof json !== 'object') return { kind: 'malformed', ...empty };
    if (json.error !== undefined && json.choices === undefined) return { kind: 'error', json, ...empty };
    let reasoning = '';
    let content = '';
    let toolCall = false;
    let finishReason: string | null = null;
    // Only choice index 0 is tracked: requests with n > 1 are out of scope.
    const choice = Array.isArray(json.choices) ? json.choices.find((c: any) => (c?.index ?? 0) === 0) : undefined;
    if (choice) {
      const d = choice.delta ?? {};
      if (typeof d.reasoning_content === 'string') reasoning = d.reasoning_content;
      else if (typeof d.reasoning === 'string') reasoning = d.reasoning;
      if (typeof d.content === 'string') content = d.content;
      if (Array.isArray(d.tool_calls) && d.tool_calls.length > 0) toolCall = true;
      if (typeof choice.finish_reason === 'string') finishReason = choice.finish_reason;
    }
    return {
      kind: 'chunk',
      json,
      hasDelta: reasoning !== '' || content !== '' || toolCall,
      reasoning,
      content,
      toolCall,
      finishReason,
      usage: json.usage != null && typeof json.usage === 'object',
    };
  }

  /** Folds an observed event into the accumulated state (call only for events the client will get). */
  apply(o: ObservedEvent): void {
    if (o.kind === 'done') this.doneSeen = true;
    else if (o.kind === 'malformed') this.malformed++;
    else if (o.kind === 'error') this.error = o.json.error;
    if (o.kind !== 'chunk') return;
    const j = o.json;
    if (this.id === null && typeof j.id === 'string') this.id = j.id;
    if (this.model === null && typeof j.model === 'string') this.model = j.model;
    if (o.reasoning) {
      this.reasoning += o.reasoning;
      if (this.reasoningField === null) {
        const d = j.choices?.find((c: any) => (c?.index ?? 0) === 0)?.delta ?? {};
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
