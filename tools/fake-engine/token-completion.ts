// vLLM's /v1/completions with a prompt of token ids, as the fake engine reads it (our reading of vLLM 0.33.0
// entrypoints/openai/completion/protocol.py and serving.py, /work/shared/engine-token-ids.md): the ids are read
// back into the pseudo chat prompt (tokens.ts promptTokens) and the tokens generated after it; the answer for
// that conversation goes on from exactly there, as raw text (no parser on this endpoint), one token a chunk,
// each with its id (`return_token_ids`), the finish on the last token's chunk, then usage and [DONE]. A prompt
// that is not this engine's chat prompt followed by the answer's first tokens is a 400: a gateway that sent the
// wrong ids fails loudly. A family's answer (FakeEngineOptions.familyTokenIds) is its raw tokens, markers
// included (family-speech.ts rawTokens), as its chat stream's ids carried them. x-fake-token-ms paces it as it
// paces the chat endpoint.
//
// Faults (`x-fake-fault`, faults.ts) apply here as on the chat endpoint: server.ts takes this leg's step of the
// script as it does for a chat continuation (a continuation leg, so a single-step script never applies), and an
// index counts what StreamRun counts (stream.ts): token chunks already written by THIS leg, one token a chunk
// here; an index past the end fires after the last token, before the finish (which then comes on a chunk of its
// own). So `crash@30;crash@5` cuts leg 1 after its 30th token and the leg by ids after 5 tokens of its own.
// The kinds that rewrite a chat stream's finish or framing (trickle, flood, bigline, finish-*) are not served
// here: a script that asks for one on this leg gets a 400 instead of a silent pass.
import type { ModelFamily } from '../../src/families/types';
import { answerFor } from './answer';
import type { Exchange } from './exchange';
import { rawTokens } from './family-speech';
import { type Fault, headersExceed } from './faults';
import { parseSize } from './plan';
import { INJECTED_ERROR, MALFORMED_EVENT } from './stream';
import { promptTokens, tokenId, tokenize, tokenOf } from './tokens';

const GENERATION_PROMPT = ['<|im_start|>', 'assistant', '<|im_middle|>'];

/** The conversation a pseudo chat prompt renders (role and text per turn), or null when it is not one. */
function readPrompt(tokens: string[]): { messages: Array<{ role: string; content: string }>; generated: string[] } | null {
  let gp = -1;
  for (let i = tokens.length - 3; i >= 0; i--)
    if (GENERATION_PROMPT.every((t, k) => tokens[i + k] === t)) {
      gp = i;
      break;
    }
  if (gp < 0) return null;
  const messages: Array<{ role: string; content: string }> = [];
  let i = 0;
  while (i < gp) {
    if (tokens[i] !== '<|im_start|>') return null;
    const mid = tokens.indexOf('<|im_middle|>', i);
    const end = tokens.indexOf('<|im_end|>', mid);
    if (mid < 0 || end < 0 || end > gp) return null;
    messages.push({ role: tokens.slice(i + 1, mid).join(''), content: tokens.slice(mid + 1, end).join('') });
    i = end + 1;
  }
  const rendered = promptTokens(messages);
  if (rendered.length !== gp + 3 || rendered.some((t, k) => t !== tokens[k])) return null;
  return { messages, generated: tokens.slice(gp + 3) };
}

/**
 * The raw tokens the model writes for this answer, as the chat stream's ids carry them: the generic family's
 * reasoning then content (no markers), a family's with its markers spelled as its template renders them
 * (family-speech.ts; thinking as the family decides it without kwargs: the leg by ids carries none).
 */
function rawAnswer(family: ModelFamily | undefined, answer: ReturnType<typeof answerFor>): string[] {
  if (!family?.reasoning || family.name === 'generic') return [...answer.reasoningTokens, ...answer.contentTokens];
  const thinking = family.thinking({ chatTemplateKwargs: {}, reasoningEffort: undefined }, 'vllm');
  return rawTokens(family, thinking, answer.reasoningTokens, answer.contentTokens).flatMap((t) => tokenize(t));
}

/** The fault kinds at a token index this endpoint serves (the others: see the header comment). */
const AT_INDEX = new Set(['crash', 'fin', 'eof', 'stall', 'error', 'abort', 'malformed', 'done']);
const UNSERVED = new Set(['trickle', 'flood', 'bigline', 'finish-number', 'finish-object', 'finish-twice']);

export interface TokenCompletionOptions {
  created: number;
  /** The replica's token interval; x-fake-token-ms overrides it, as on the chat endpoint. */
  intervalMs: number;
  name: string;
  /** This leg's step of the `x-fake-fault` script (server.ts takes it, as for a chat continuation). */
  fault?: Fault;
  /** The family the replica speaks (FakeEngineOptions.family): whose raw answer the ids stand for. */
  family?: ModelFamily;
}

export function tokenCompletion(ex: Exchange, opts: TokenCompletionOptions): void {
  const body = ex.record.body;
  const h = ex.record.headers;
  const bad = (message: string) => ex.sendJson(400, { error: { message, type: 'BadRequestError', code: 400 } });
  let fault = opts.fault;
  // The faults before any response byte, as the chat endpoint applies them (server.ts chat()).
  if (fault && UNSERVED.has(fault.kind)) return bad(`fake-engine: fault '${fault.spec}' is not served on /v1/completions by ids`);
  if (fault?.kind === 'crash-before-headers') return ex.killSocket('reset');
  if (fault?.kind === 'reject-headers') {
    if (headersExceed(h, fault.at)) return ex.killSocket('reset');
    fault = undefined;
  }
  if (fault?.kind === 'hang') return; // the socket stays open until the client or close() ends it
  if (fault?.kind === 'plain') {
    ex.res.writeHead(200, { 'content-type': 'text/plain' });
    return ex.end('fake-engine: an answer that is no event stream\n');
  }
  if (fault?.kind === 'empty') {
    ex.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    return ex.end();
  }
  if (fault?.kind === 'status') {
    const code = fault.status ?? 500;
    const retryAfter: Record<string, string> = fault.retryAfter === undefined ? {} : { 'retry-after': String(fault.retryAfter) };
    return ex.sendJson(code, { error: { message: `fake-engine injected status ${code}`, type: 'InjectedError', code } }, retryAfter);
  }
  const prompt: unknown = body?.prompt;
  if (!Array.isArray(prompt) || !prompt.every((x) => Number.isInteger(x)))
    return bad('fake-engine: /v1/completions here takes a prompt of token ids');
  const ids = prompt as number[];
  const tokens = ids.map((id) => tokenOf(id));
  if (tokens.some((t) => t === undefined)) return bad('fake-engine: a token id this engine never handed out');
  const read = readPrompt(tokens as string[]);
  if (!read) return bad("fake-engine: the prompt ids are not this engine's chat prompt");
  const size = parseSize(h['x-fake-answer-tokens']);
  const all = rawAnswer(opts.family, answerFor(read.messages, size === 'bad' ? undefined : size));
  if (read.generated.some((t, k) => all[k] !== t)) return bad("fake-engine: continuation prefix does not match this engine's answer");
  let rest = all.slice(read.generated.length);
  const max = typeof body.max_tokens === 'number' ? body.max_tokens : Number.POSITIVE_INFINITY;
  const finish = rest.length > max ? 'length' : 'stop';
  rest = rest.slice(0, Math.min(rest.length, max));
  const base = {
    id: `cmpl-${opts.name}-${ids.length}`,
    object: 'text_completion',
    created: opts.created,
    model: body.model ?? 'fake-model',
  };
  const wantIds = body.return_token_ids === true;
  const choice = (text: string, t: string | null, finishReason: string | null) => ({
    index: 0,
    text,
    logprobs: null,
    finish_reason: finishReason,
    stop_reason: null,
    ...(wantIds ? { token_ids: t === null ? [] : [tokenId(t)] } : {}),
  });
  const event = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    ex.write(`data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`);
  const ms = Number(h['x-fake-token-ms']);
  const intervalMs = h['x-fake-token-ms'] !== undefined && Number.isFinite(ms) && ms >= 0 ? ms : opts.intervalMs;
  // As StreamRun: the fault fires when `at` tokens of this leg are written, or after the last one when past the end.
  const faultAt = fault && AT_INDEX.has(fault.kind) ? Math.min(fault.at, rest.length) : -1;
  let faultDone = false;
  /** Returns true when the leg goes on writing in this same step (stream.ts applyFault). */
  const applyFault = (f: Fault): boolean => {
    switch (f.kind) {
      case 'crash':
        ex.killSocket('reset');
        return false;
      case 'fin':
        ex.killSocket('fin');
        return false;
      case 'eof':
        ex.end();
        return false;
      case 'stall':
        if (f.ms !== undefined) ex.later(f.ms, step);
        return false;
      case 'error':
        ex.write(`data: ${INJECTED_ERROR}\n\n`);
        ex.end('data: [DONE]\n\n');
        return false;
      case 'abort':
        event([choice('', null, 'abort')]);
        ex.end('data: [DONE]\n\n');
        return false;
      case 'malformed':
        ex.write(MALFORMED_EVENT);
        return true;
      case 'done':
        ex.end('data: [DONE]\n\n');
        return false;
      default:
        return true;
    }
  };
  let i = 0;
  function step(): void {
    if (ex.closed) return;
    if (fault && !faultDone && i === faultAt) {
      faultDone = true;
      if (!applyFault(fault)) return;
    }
    if (i < rest.length) {
      // The finish rides on the last token's chunk, unless a fault is still due after it (then on a chunk of its own).
      const last = i === rest.length - 1 && !(fault && !faultDone && faultAt === rest.length);
      event([choice(rest[i], rest[i], last ? finish : null)]);
      i++;
      ex.record.tokensSent = i;
      if (!last) return void ex.later(intervalMs, step);
    } else event([choice('', null, finish)]);
    if (body.stream_options?.include_usage === true) {
      const sign = fault?.kind === 'negative-usage' ? -1 : 1;
      const usage = {
        prompt_tokens: sign * ids.length,
        total_tokens: sign * (ids.length + rest.length),
        completion_tokens: sign * rest.length,
      };
      event([], { usage });
    }
    ex.end(fault?.kind === 'nodone' ? undefined : 'data: [DONE]\n\n');
  }
  const begin = () => {
    ex.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    ex.later(intervalMs, step);
  };
  if (fault?.kind === 'slow') ex.later(fault.ms ?? 0, begin);
  else begin();
}
