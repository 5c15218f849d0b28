// The token ids of what leg 1 delivered, read from its chunks as they are relayed, and those chunks without the
// fields the gateway asked for (the client sees its stream as it would without the gateway). Every id counts,
// those of chunks whose text is empty included (vLLM's detokenizer holds back a token that ends mid-character:
// its id comes with an empty delta and its bytes with a later one, vllm/v1/engine/detokenizer.py decode_next),
// so the ids always cover exactly the text the client has: the cut is always between whole tokens. Where the
// engine's own count says an id never came (llama-server sends no chunk for a token ending mid-character or one
// its chat parser held back), the ledger has a gap and a continuation goes by text instead: never a guess. The
// one exception is the hole llama-server's reasoning parser leaves where it consumed the closing marker: it is
// recorded with what surrounds it (marker-hole.ts), for the leg to fill from the engine's tokenizer or not at all.
import { isObject, type JsonObject } from '../../openai/chat';
import type { Leg1IdsAsk } from './leg1-request';
import type { MarkerHole } from './marker-hole';

export type LedgerState =
  | {
      kind: 'complete';
      promptIds: readonly number[] | null;
      generatedIds: readonly number[];
      /** Of those, the ids of chunks whose delta was reasoning (an ids-only chunk counts in the phase it came in). */
      reasoningIds: number;
      /** llama-server: the ids its stream did not carry where the reasoning closed (null: none missing). */
      markerHole: MarkerHole | null;
    }
  | { kind: 'gap'; reason: string };

/** Ids in a JSON value: an array of non-negative integers, else null. */
export function idList(v: unknown): number[] | null {
  if (!Array.isArray(v)) return null;
  for (const x of v) if (!Number.isInteger(x) || x < 0) return null;
  return v as number[];
}

const choice0 = (chunk: JsonObject): JsonObject | undefined =>
  Array.isArray(chunk.choices) && isObject(chunk.choices[0]) ? chunk.choices[0] : undefined;

function hasText(c: JsonObject | undefined): boolean {
  const d = c && isObject(c.delta) ? c.delta : undefined;
  if (!d) return false;
  for (const k of ['content', 'reasoning_content', 'reasoning']) if (typeof d[k] === 'string' && d[k] !== '') return true;
  return Array.isArray(d.tool_calls) && d.tool_calls.length > 0;
}

/** vLLM: the prompt's ids on the first chunk, each chunk's own on its choice. */
function readVllm(chunk: JsonObject): { prompt?: number[]; ids: number[] | null; text: boolean } {
  const c = choice0(chunk);
  const prompt = idList(chunk.prompt_token_ids) ?? undefined;
  return { prompt, ids: c ? idList(c.token_ids) : null, text: hasText(c) };
}

/** llama-server: each logprobs entry's `id` and text (`token`), and the engine's count of tokens generated so far. */
function readLlama(chunk: JsonObject): { ids: number[] | null; pieces: string | null; text: boolean; predicted?: number } {
  const c = choice0(chunk);
  const lp = c && isObject(c.logprobs) && Array.isArray(c.logprobs.content) ? c.logprobs.content : null;
  const ids = lp ? idList(lp.map((e) => (isObject(e) ? e.id : undefined))) : null;
  const pieces = lp?.every((e) => isObject(e) && typeof e.token === 'string') ? lp.map((e) => (e as JsonObject).token).join('') : null;
  const t = isObject(chunk.timings) ? chunk.timings.predicted_n : undefined;
  return { ids, pieces, text: hasText(c), predicted: Number.isInteger(t) ? (t as number) : undefined };
}

const deltaOf = (chunk: JsonObject): JsonObject => {
  const c = choice0(chunk);
  return c && isObject(c.delta) ? c.delta : {};
};
const reasoningText = (d: JsonObject): string =>
  (typeof d.reasoning_content === 'string' ? d.reasoning_content : '') + (typeof d.reasoning === 'string' ? d.reasoning : '');

export class Leg1IdLedger {
  private prompt: number[] | null = null;
  private readonly generated: number[] = [];
  private gap: string | null = null;
  private reasoningIds = 0;
  private inReasoning = false;
  /** llama-server, until the first content: the text of every token received (to place a marker hole; null: a
   * token came without its text). */
  private pieces: string | null = '';
  private sawContent = false;
  private markerHole: MarkerHole | null = null;
  /** The last chunk that carried text, as the engine sent it: the shape leg 2's chunks take (client-chunks.ts). */
  private lastText: JsonObject | null = null;

  constructor(readonly ask: Leg1IdsAsk) {}

  /** A new leg 1 attempt: what an earlier one delivered was never the client's (before the commit point). */
  reset(): void {
    this.prompt = null;
    this.generated.length = 0;
    this.gap = null;
    this.lastText = null;
    this.reasoningIds = 0;
    this.inReasoning = false;
    this.pieces = '';
    this.sawContent = false;
    this.markerHole = null;
  }

  /** Leg 1's last text chunk as the client got it (null: none yet). */
  shape(): JsonObject | null {
    const last = this.lastText;
    const stripped = last ? this.strip(last) : null;
    return stripped === null || stripped === 'drop' ? last : stripped;
  }

  /** A continuation leg by text was sent: what it delivers has no ids here, a further leg goes by text too. */
  textLegSent(): void {
    this.gap ??= 'after-text-leg';
  }

  /** The marker hole's ids, as the leg found them (marker-hole.ts): they take their place for any further leg. */
  fillMarkerHole(ids: readonly number[]): void {
    const hole = this.markerHole;
    if (!hole || ids.length !== hole.missing) return;
    this.generated.splice(hole.at, 0, ...ids);
    this.reasoningIds += ids.length;
    this.markerHole = null;
  }

  /**
   * A continuation leg by ids delivered these too, `reasoning` of them in the reasoning: a further leg continues
   * after them (or by text, after a gap), and its reasoning count includes them.
   */
  extend(ids: readonly number[], complete: boolean, reasoning = 0): void {
    for (const id of ids) this.generated.push(id);
    this.reasoningIds += reasoning;
    if (!complete) this.gap ??= 'leg2-ids-missing';
  }

  state(): LedgerState {
    if (this.gap) return { kind: 'gap', reason: this.gap };
    return {
      kind: 'complete',
      promptIds: this.prompt,
      generatedIds: this.generated,
      reasoningIds: this.reasoningIds,
      markerHole: this.markerHole,
    };
  }

  /** One chunk of leg 1 as the engine sent it (before it is stripped). */
  observe(chunk: JsonObject): void {
    if (this.gap) return;
    const c = choice0(chunk);
    if (hasText(c)) this.lastText = chunk;
    const before = this.generated.length;
    this.observeIds(chunk);
    const d = deltaOf(chunk);
    const reasoning = reasoningText(d) !== '';
    const content = typeof d.content === 'string' && d.content !== '';
    if (reasoning || content) this.inReasoning = reasoning && !content;
    if (this.inReasoning) this.reasoningIds += this.generated.length - before;
  }

  private observeIds(chunk: JsonObject): void {
    if (this.ask.engine === 'vllm') return this.observeVllm(chunk);
    const r = readLlama(chunk);
    const before = this.generated.length;
    if (r.ids) for (const id of r.ids) this.generated.push(id);
    else if (r.text) this.gap = 'chunk-without-ids';
    const d = deltaOf(chunk);
    const content = typeof d.content === 'string' ? d.content : '';
    const firstContent = !this.sawContent && content !== '';
    if (content !== '') this.sawContent = true;
    if (this.gap || r.predicted === undefined) return;
    // predicted_n counts this chunk's token too; fewer ids than that: a token went out with no chunk.
    const missing = r.predicted - this.generated.length - (this.markerHole?.missing ?? 0);
    if (missing === 0) {
      if (!this.sawContent && this.pieces !== null) this.pieces = r.pieces === null ? null : this.pieces + r.pieces;
      return;
    }
    // The reasoning parser's hole: ids missing just before the first content, after reasoning, with nothing else
    // in this chunk (the chunk that releases held text mid-reasoning, or a mid-character token, is a gap).
    const closesReasoning = firstContent && this.reasoningIds > 0 && missing > 0 && reasoningText(d) === '' && r.ids?.length === 1;
    if (!closesReasoning || r.pieces === null || this.pieces === null) {
      this.gap = 'ids-missing';
      return;
    }
    this.markerHole = { at: before, missing, piecesBefore: this.pieces, pieceAfter: r.pieces, contentAfter: content };
    this.pieces = '';
  }

  private observeVllm(chunk: JsonObject): void {
    const r = readVllm(chunk);
    if (r.prompt) this.prompt = r.prompt;
    if (r.ids) for (const id of r.ids) this.generated.push(id);
    else if (r.text) this.gap = 'chunk-without-ids';
  }

  /**
   * The chunk as the client gets it: the fields the client did not ask for removed (null: unchanged; `drop`: a
   * chunk that exists only because ids were asked for: vLLM sends a token its parser held back, `delta: {}`, only
   * to carry its ids: chat_completion/serving.py, "we still need to send a chunk even if delta_message is None").
   */
  strip(chunk: JsonObject): JsonObject | null | 'drop' {
    const asked = this.ask.clientAsked;
    if (this.ask.engine === 'vllm') {
      if (asked.tokenIds) return null;
      if (onlyCarriesIds(chunk)) return 'drop';
      return stripVllm(chunk);
    }
    return stripLlama(chunk, asked.logprobs, asked.timings);
  }
}

function onlyCarriesIds(chunk: JsonObject): boolean {
  const c = choice0(chunk);
  if (!c || chunk.usage != null || 'prompt_token_ids' in chunk || !Array.isArray(c.token_ids)) return false;
  const emptyDelta = isObject(c.delta) && Object.keys(c.delta).length === 0;
  return emptyDelta && (c.finish_reason === null || c.finish_reason === undefined) && (c.logprobs === null || c.logprobs === undefined);
}

/**
 * vLLM 0.33.0 sets `prompt_token_ids` and `token_ids` on every stream chunk whether asked or not and dumps with
 * exclude_unset (chat_completion/serving.py): a stream not asked for ids carries them as null, in place.
 */
function stripVllm(chunk: JsonObject): JsonObject | null {
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  const carries = (c: unknown) => isObject(c) && c.token_ids != null;
  if (chunk.prompt_token_ids == null && !choices.some(carries)) return null;
  const out: JsonObject = { ...chunk };
  if ('prompt_token_ids' in out) out.prompt_token_ids = null;
  if (Array.isArray(chunk.choices)) out.choices = chunk.choices.map((c) => (carries(c) ? { ...(c as JsonObject), token_ids: null } : c));
  return out;
}

function stripLlama(chunk: JsonObject, logprobs: boolean, timings: boolean): JsonObject | null {
  const c = choice0(chunk);
  const dropLogprobs = !logprobs && c !== undefined && 'logprobs' in c;
  // The chunk with the finish carries timings whatever was asked (server-context.cpp: stats set at the stop).
  const dropTimings = !timings && 'timings' in chunk && c !== undefined && (c.finish_reason === null || c.finish_reason === undefined);
  if (!dropLogprobs && !dropTimings) return null;
  const out: JsonObject = { ...chunk };
  if (dropTimings) delete out.timings;
  if (dropLogprobs && Array.isArray(chunk.choices)) {
    const { logprobs: _l, ...kept } = c as JsonObject;
    out.choices = [kept, ...chunk.choices.slice(1)];
  }
  return out;
}
