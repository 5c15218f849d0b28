// Leg 2's hooks on the leg loop: each event is parsed and rewritten (leg 1's id, leg 1's reasoning field
// name, usage counting the recovered text), leg 2's own role chunk is dropped (the client already had one),
// and silence is waited out as the reference gateway does, but never longer than MAX_STALL_SECONDS in total
// (src/continuation/leg2-hooks.ts, as for a leg by ids). Like leg 1's relay it writes nothing: what the client
// gets goes back to the request's deliver().

import type { ResponsesStream } from '../../endpoints/responses/stream';
import type { Delivered, Phase } from '../../families/types';
import { isObject, type JsonObject } from '../../openai/chat';
import { withIdempotentToolCallIds } from '../../openai/tool-call-ids';
import { HarmonySplit } from '../../recovery/harmony-split';
import { DONE_EVENT } from '../../recovery/interruption';
import { isRoleOnlyChunk, rewriteLeg2Chunk } from '../../recovery/leg2-rewrite';
import { revisionFromChunk, revisionsDiffer } from '../../recovery/model-revision';
import { RestartGuard } from '../../recovery/restart-guard';
import type { Accounting, RecoveredTokens } from '../../recovery/token-estimate';
import { type ObservedEvent, StreamTracker } from '../../sse/tracker';
import { type LegFailure, type LegOutcome, type Outgoing, readLeg } from '../../stream/legs/leg-loop';
import type { TrackerView } from '../../stream/request-port';
import type { LegReader } from '../../upstream/leg-reader';
import { Leg2Hooks, type Leg2HooksHost } from '../leg2-hooks';
import { rewriteHarmonyChunk } from './leg2-harmony';

export interface Leg2Host extends Leg2HooksHost {
  /** The request's delivered-text tracker, read-only (leg 1's id and field names; the request appends leg 2's text). */
  readonly tracker: TrackerView;
  readonly recovered: RecoveredTokens;
  readonly multimodal: boolean;
  readonly clientWantsUsage: boolean;
  /** Reported in usage.continuation (an extra field clients may ignore). */
  readonly accounting: { legs: number } & Accounting;
  /** The first generated token (a delta or a finish): the re-prefill is over. */
  onFirstToken(): void;
  /** Leg 1's model revision, checked against leg 2's first system_fingerprint (when no header named leg 2's). */
  readonly expectedRevision: string | undefined;
  /** Derive tool_call ids from this key (src/openai/tool-call-ids.ts). */
  readonly toolCallKey: string | undefined;
  /** What the client had when leg 2 started, and where it was cut. */
  readonly delivered: Delivered;
  readonly phase: Phase;
  /** Who splits leg 2's text: the engine, or the gateway's harmony split (src/families/types.ts Leg2Shape). */
  readonly split: 'engine' | 'harmony';
  /** The endpoint's usage counts reasoning (chat); false for completions, whose usage never has a reasoning count. */
  readonly countsReasoning: boolean;
  /** A Responses stream: the leg's chunks are written as its events (src/endpoints/responses/stream.ts). */
  readonly responses?: Pick<ResponsesStream, 'leg2Chunk' | 'leg2Done'>;
}

/** An item whose bytes are written when it is released: a Responses event is numbered only once it is sent. */
type Deferred = () => Outgoing | LegFailure;

const COUNTS = ['prompt_tokens', 'completion_tokens', 'total_tokens'] as const;

/** `usage` with each count raised to `seen`'s where it was lower. */
function atLeast(usage: JsonObject, seen: JsonObject): JsonObject {
  const out = { ...usage };
  for (const k of COUNTS) if (typeof seen[k] === 'number' && typeof out[k] === 'number' && out[k] < seen[k]) out[k] = seen[k];
  return out;
}

export function relayLeg2(h: Leg2Host, reader: LegReader): Promise<LegOutcome> {
  return readLeg(reader, new Leg2Relay(h));
}

/** Leg 2's LegHooks: its own finish state, its first words held by the restart guard, the usage it corrects. */
class Leg2Relay extends Leg2Hooks<Leg2Host> {
  /** Leg 2's own finish/[DONE] state. */
  private readonly own = new StreamTracker();
  private revisionChecked: boolean;
  private readonly harmony: HarmonySplit | undefined;
  /** The usage the client saw last, current within one read (the request's tracker is updated per read). */
  private lastUsage: JsonObject | null;
  /**
   * Leg 2's first words are held back (bytes and what they add to the tracker) until the guard has seen enough
   * of them to tell a continuation from a restart of the answer.
   */
  private readonly guard: RestartGuard;
  private readonly held: Array<Outgoing | Deferred> = [];

  constructor(h: Leg2Host) {
    super(h);
    this.revisionChecked = h.expectedRevision === undefined;
    this.harmony = h.split === 'harmony' ? new HarmonySplit(h.phase) : undefined;
    this.lastUsage = h.tracker.lastUsage;
    this.guard = new RestartGuard(h.delivered, h.phase);
  }

  finished(): boolean {
    return this.own.finished;
  }

  atFinish(): Outgoing[] | LegFailure {
    return this.guard.finish() === 'restart' ? this.restarted() : this.release([]);
  }

  onEvent(event: ObservedEvent, raw: Buffer): readonly Outgoing[] | LegFailure {
    this.own.apply(event);
    if (event.kind === 'done') {
      const responses = this.h.responses;
      return this.emit(responses ? () => ({ bytes: responses.leg2Done(), events: [event] }) : { bytes: DONE_EVENT, events: [event] });
    }
    if (event.kind !== 'chunk') return this.emit({ bytes: raw, events: [] });
    const o = this.harmony ? this.splitHarmony(event, this.harmony) : event;
    if (o === null || 'type' in o) return o ?? [];
    const refused = this.checkRevision(o);
    if (refused) return refused;
    if (isRoleOnlyChunk(o.json)) return [];
    if (o.hasDelta || o.finishReason !== null) this.h.onFirstToken();
    const g = this.guard;
    if (g.observe(o.reasoning, o.content) === 'restart' || (o.finishReason !== null && g.finish() === 'restart')) return this.restarted();
    // Leg 2 always asks for usage (to correct it); the client only gets it if it asked.
    const usageOnly = o.usage && Array.isArray(o.json.choices) && o.json.choices.length === 0;
    if (usageOnly && !this.h.clientWantsUsage) return [];
    const { bytes, usage } = rewriteForClient(this.h, o, this.lastUsage);
    if (usage) this.lastUsage = usage;
    // The tracker keeps the corrected usage: a further continuation leg counts from it.
    const tracked: ObservedEvent = { ...o, json: { ...o.json, id: undefined, created: undefined, usage: usage ?? o.json.usage } };
    const responses = this.h.responses;
    if (!responses) return this.emit({ bytes, events: [tracked] });
    return this.emit(() => {
      const written = responses.leg2Chunk(o, usage);
      return Buffer.isBuffer(written) ? { bytes: written, events: [tracked] } : this.unwritable(written);
    });
  }

  /** What the client gets now: nothing while the guard is undecided, then everything it held, in order. */
  private emit(item: Outgoing | Deferred): readonly Outgoing[] | LegFailure {
    if (this.guard.state === 'pending') {
      this.held.push(item);
      return [];
    }
    return this.release([item]);
  }

  /** The held items and `more`, written in order; a Responses chunk that cannot be written fails the leg. */
  private release(more: Array<Outgoing | Deferred>): Outgoing[] | LegFailure {
    const out: Outgoing[] = [];
    for (const item of [...this.held.splice(0), ...more]) {
      const written = typeof item === 'function' ? item() : item;
      if ('type' in written) return written;
      out.push(written);
    }
    return out;
  }

  /** A continuation chunk the Responses stream cannot carry (a tool call, reasoning after the answer's text). */
  private unwritable(why: string): LegFailure {
    this.log.warn({ decision: 'LEG2_UNEXPECTED_OUTPUT', detail: why }, 'the continuation wrote what the Responses stream cannot carry');
    return { type: 'failed', failure: 'unexpected-output' };
  }

  /** The gateway's harmony split (src/families/types.ts Leg2Shape): the chunk as the client gets it, null to drop. */
  private splitHarmony(o: ObservedEvent, harmony: HarmonySplit): ObservedEvent | LegFailure | null {
    const r = rewriteHarmonyChunk(o, harmony);
    if ('drop' in r) return null;
    if ('event' in r) return r.event;
    this.log.warn({ decision: 'LEG2_UNEXPECTED_OUTPUT', detail: r.error }, 'the continuation left the channels the gateway splits');
    return { type: 'failed', failure: 'unexpected-output' };
  }

  /** Leg 1's model revision against leg 2's first system_fingerprint, once (when no header named leg 2's). */
  private checkRevision(o: ObservedEvent): LegFailure | null {
    if (this.revisionChecked) return null;
    this.revisionChecked = true;
    const got = revisionFromChunk(o.json);
    if (!revisionsDiffer(this.h.expectedRevision, got)) return null;
    const record = { decision: 'REVISION_MISMATCH', model_revision: this.h.expectedRevision, leg2_model_revision: got };
    this.log.warn(record, 'continuation from another model revision: not stitched');
    return { type: 'failed', failure: 'model-revision-mismatch' };
  }

  private restarted(): LegFailure {
    this.log.warn({ decision: 'LEG2_RESTARTED', phase: this.h.phase }, 'the continuation began the answer again: not appended');
    return { type: 'failed', failure: 'restarted' };
  }
}

/** Leg 2's chunk as the client gets it, and the (corrected) usage it carries. */
function rewriteForClient(h: Leg2Host, o: ObservedEvent, lastUsage: JsonObject | null): { bytes: Buffer; usage?: JsonObject } {
  let rewritten = rewriteLeg2Chunk(o.json, {
    responseId: h.tracker.id,
    created: h.tracker.created,
    reasoningField: h.tracker.reasoningField,
    countsReasoning: h.countsReasoning,
    recovered: h.recovered,
    multimodal: h.multimodal,
  });
  // Running usage (continuous_usage_stats) never goes below what the client already saw.
  const corrected = isObject(rewritten.usage) ? rewritten.usage : undefined;
  const usage = corrected && lastUsage ? atLeast(corrected, lastUsage) : corrected;
  if (h.toolCallKey && o.toolCall) rewritten = withIdempotentToolCallIds(rewritten, h.toolCallKey) ?? rewritten;
  // A client that did not ask gets no usage leg 2 was asked for; SGLang's `usage: null` on every chunk stays, as in an
  // uninterrupted stream.
  if (!h.clientWantsUsage && rewritten.usage !== null) delete rewritten.usage;
  else if (usage) {
    const a = h.accounting;
    const continuation = {
      legs: a.legs,
      recovered_tokens: h.recovered.totalRecovered,
      method: a.method,
      dialect: a.dialect,
      prompt: a.prompt,
      // How leg 2 was asked: by text through the template (src/continuation/token-ids/usage.ts says `token-ids`).
      path: 'template',
      ...(a.fallback ? { fallback: a.fallback } : {}),
    };
    rewritten.usage = { ...usage, continuation };
  }
  return { bytes: Buffer.from(`data: ${JSON.stringify(rewritten)}\n\n`), usage };
}
