// The token ids of what leg 1 delivered, read from its chunks as they are relayed, and those chunks without the
// fields the gateway asked for (the client sees its stream as it would without the gateway). Every id counts,
// those of chunks whose text is empty included (vLLM's detokenizer holds back a token that ends mid-character:
// its id comes with an empty delta and its bytes with a later one, vllm/v1/engine/detokenizer.py decode_next),
// so the ids always cover exactly the text the client has: the cut is always between whole tokens. Where the
// engine's own count says an id never came (llama-server sends no chunk for a token ending mid-character or one
// its chat parser held back), the ledger has a gap and a continuation goes by text instead: never a guess.
import { isObject, type JsonObject } from '../../openai/chat';
import type { Leg1IdsAsk } from './leg1-request';

export type LedgerState =
  | {
      kind: 'complete';
      promptIds: readonly number[] | null;
      generatedIds: readonly number[];
      /** Of those, the ids of chunks whose delta was reasoning (an ids-only chunk counts in the phase it came in). */
      reasoningIds: number;
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

/** llama-server: each logprobs entry's `id`, and the engine's count of tokens generated so far. */
function readLlama(chunk: JsonObject): { ids: number[] | null; text: boolean; predicted?: number } {
  const c = choice0(chunk);
  const lp = c && isObject(c.logprobs) && Array.isArray(c.logprobs.content) ? c.logprobs.content : null;
  const ids = lp ? idList(lp.map((e) => (isObject(e) ? e.id : undefined))) : null;
  const t = isObject(chunk.timings) ? chunk.timings.predicted_n : undefined;
  return { ids, text: hasText(c), predicted: Number.isInteger(t) ? (t as number) : undefined };
}

export class Leg1IdLedger {
  private prompt: number[] | null = null;
  private readonly generated: number[] = [];
  private gap: string | null = null;
  private reasoningIds = 0;
  private inReasoning = false;
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

  /** A continuation leg by ids delivered these too: a further leg continues after them (or by text, after a gap). */
  extend(ids: readonly number[], complete: boolean): void {
    for (const id of ids) this.generated.push(id);
    if (!complete) this.gap ??= 'leg2-ids-missing';
  }

  state(): LedgerState {
    if (this.gap) return { kind: 'gap', reason: this.gap };
    return { kind: 'complete', promptIds: this.prompt, generatedIds: this.generated, reasoningIds: this.reasoningIds };
  }

  /** One chunk of leg 1 as the engine sent it (before it is stripped). */
  observe(chunk: JsonObject): void {
    if (this.gap) return;
    const c = choice0(chunk);
    if (hasText(c)) this.lastText = chunk;
    const before = this.generated.length;
    this.observeIds(chunk);
    const d = c && isObject(c.delta) ? c.delta : {};
    const reasoning = ['reasoning_content', 'reasoning'].some((k) => typeof d[k] === 'string' && d[k] !== '');
    const content = typeof d.content === 'string' && d.content !== '';
    if (reasoning || content) this.inReasoning = reasoning && !content;
    if (this.inReasoning) this.reasoningIds += this.generated.length - before;
  }

  private observeIds(chunk: JsonObject): void {
    if (this.ask.engine === 'vllm') return this.observeVllm(chunk);
    const r = readLlama(chunk);
    if (r.ids) for (const id of r.ids) this.generated.push(id);
    else if (r.text) this.gap = 'chunk-without-ids';
    // predicted_n counts this chunk's token too; fewer ids than that: a token went out with no chunk.
    if (!this.gap && r.predicted !== undefined && r.predicted !== this.generated.length) this.gap = 'ids-missing';
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
