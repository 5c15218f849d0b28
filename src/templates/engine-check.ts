// The engine's own word on leg 2's prompt, asked before leg 2 is sent (vLLM and llama.cpp can be asked; SGLang's
// /tokenize reads text only). The engine wins: where it renders leg 2 otherwise than the uninterrupted prompt
// plus the raw text, the stream ends explicitly.
//   vLLM 0.33.0 /tokenize: a chat body (messages, add_generation_prompt, continue_final_message,
//     chat_template_kwargs, tools) is rendered through the served template and tokenized; a text body
//     (prompt, add_special_tokens) is tokenized as it is (entrypoints/serve/tokenize). Leg 2's chat tokens must
//     equal the tokens of our uninterrupted prompt (as of leg 1) plus the raw text; without our render, the
//     original request's chat tokens followed by the raw text's.
//   llama.cpp /apply-template: the prompt text the chat endpoint renders, leg 2's continuation included
//     (tools/server/server-context.cpp, the same parse as /v1/chat/completions). Leg 2's must be the original's
//     plus the raw text; the first of the candidate shapes that is, is sent.
// Bounded by the caller's signal (TOKENIZE_TIMEOUT_MS, shared with the token counts): no answer in time is
// `unavailable`, never an agreement.
import { request } from 'undici';
import type { JsonObject } from '../openai/chat';
import type { Leg2Message } from './continuation';
import { type PromptDiff, promptDiff } from './prompt-diff';

export type EngineVerdict =
  | { kind: 'agrees'; message: Leg2Message }
  | { kind: 'differs'; detail: 'engine-prompt-differs' | 'engine-disagrees-with-template'; diff?: PromptDiff; tokenAt?: number }
  | { kind: 'unavailable'; detail: string };

export interface EngineCheckInput {
  readonly engine: 'vllm' | 'llamacpp';
  /** The engine's /tokenize (TOKENIZE_URL, else DOWNSTREAM_URL's /tokenize); /apply-template beside it. */
  readonly tokenizeUrl: string;
  readonly original: JsonObject;
  /** The final-message shapes, in order (one unless llama.cpp chooses). */
  readonly candidates: readonly Leg2Message[];
  /** Request fields leg 2 adds (none on these engines today). */
  readonly fields?: Readonly<Record<string, unknown>>;
  readonly raw: string;
  /** Our render of the uninterrupted prompt as of leg 1, where the template was rendered here. */
  readonly prompt1?: string;
  readonly bosToken?: string;
  readonly signal: AbortSignal;
  readonly headers?: Record<string, string>;
}

/** A keep-alive connection the server closed as it was reused: sent once more on a new one (nothing was read). */
const STALE_CONNECTION = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

async function post(url: string, body: object, i: Pick<EngineCheckInput, 'signal' | 'headers'>): Promise<Record<string, unknown>> {
  try {
    return await postOnce(url, body, i);
  } catch (e) {
    if (i.signal.aborted || !STALE_CONNECTION.has(String((e as { code?: unknown }).code))) throw e;
    return await postOnce(url, body, i);
  }
}

async function postOnce(url: string, body: object, i: Pick<EngineCheckInput, 'signal' | 'headers'>): Promise<Record<string, unknown>> {
  const res = await request(url, {
    method: 'POST',
    headers: { ...i.headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: i.signal,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${new URL(url).pathname} answered ${res.statusCode}`);
  const v: unknown = JSON.parse(text);
  if (!v || typeof v !== 'object') throw new Error(`${new URL(url).pathname} answered no JSON object`);
  return v as Record<string, unknown>;
}

const besideTokenize = (url: string, name: string) => {
  const u = new URL(url);
  u.pathname = u.pathname.replace(/[^/]*$/, name);
  return u.toString();
};

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The template variables vLLM's chat endpoint would pass (reasoning_effort and its enable_thinking), for /tokenize. */
function chatTemplateKwargs(body: JsonObject): Record<string, unknown> {
  const user = isObject(body.chat_template_kwargs) ? body.chat_template_kwargs : {};
  const out: Record<string, unknown> = { ...user };
  if (body.reasoning_effort !== undefined && body.reasoning_effort !== null) {
    out.reasoning_effort = body.reasoning_effort;
    if (!('enable_thinking' in user)) out.enable_thinking = body.reasoning_effort !== 'none';
  }
  return out;
}

function chatBody(body: JsonObject, continuing: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {
    model: body.model,
    messages: body.messages,
    add_generation_prompt: !continuing,
    continue_final_message: continuing,
    add_special_tokens: false,
    chat_template_kwargs: chatTemplateKwargs(body),
  };
  if (body.tools != null) out.tools = body.tools;
  return out;
}

const tokensOf = (a: Record<string, unknown>, what: string): number[] => {
  if (!Array.isArray(a.tokens)) throw new Error(`/tokenize answered no tokens for ${what}`);
  return a.tokens as number[];
};

function firstDifference(a: readonly number[], b: readonly number[]): number | undefined {
  const n = Math.min(a.length, b.length);
  for (let k = 0; k < n; k++) if (a[k] !== b[k]) return k;
  return a.length === b.length ? undefined : n;
}

const withFinal = (original: JsonObject, m: Leg2Message, fields?: Readonly<Record<string, unknown>>): JsonObject => ({
  ...original,
  ...fields,
  messages: [...(original.messages as unknown[]), { role: 'assistant', ...m }],
});

async function checkVllm(i: EngineCheckInput): Promise<EngineVerdict> {
  const message = i.candidates[0];
  const leg2 = withFinal(i.original, message, i.fields);
  const url = i.tokenizeUrl;
  const text = (t: string) => post(url, { model: i.original.model, prompt: t, add_special_tokens: false }, i);
  if (i.prompt1 !== undefined) {
    const [a, c] = await Promise.all([post(url, chatBody(leg2, true), i), text(i.prompt1 + i.raw)]);
    const at = firstDifference(tokensOf(a, 'leg 2'), tokensOf(c, 'the expected prompt'));
    return at === undefined ? { kind: 'agrees', message } : { kind: 'differs', detail: 'engine-prompt-differs', tokenAt: at };
  }
  const [a, b, t] = await Promise.all([post(url, chatBody(leg2, true), i), post(url, chatBody(i.original, false), i), text(i.raw)]);
  const expected = [...tokensOf(b, 'the original request'), ...tokensOf(t, 'the raw text')];
  const at = firstDifference(tokensOf(a, 'leg 2'), expected);
  return at === undefined ? { kind: 'agrees', message } : { kind: 'differs', detail: 'engine-prompt-differs', tokenAt: at };
}

async function checkLlamacpp(i: EngineCheckInput): Promise<EngineVerdict> {
  const url = besideTokenize(i.tokenizeUrl, 'apply-template');
  const promptOf = async (body: object, what: string) => {
    const a = await post(url, body, i);
    if (typeof a.prompt !== 'string') throw new Error(`/apply-template answered no prompt for ${what}`);
    return a.prompt;
  };
  const continuing = (m: Leg2Message) => ({
    ...withFinal(i.original, m, i.fields),
    continue_final_message: true,
    add_generation_prompt: false,
  });
  const [engine1, ...legs] = await Promise.all([
    promptOf(i.original, 'the original request'),
    ...i.candidates.map((m, k) => promptOf(continuing(m), `shape ${k}`)),
  ]);
  if (i.prompt1 !== undefined) {
    // llama-server drops the template's leading BOS text when its vocabulary adds one itself.
    const ours =
      i.bosToken && !engine1.startsWith(i.bosToken) && i.prompt1.startsWith(i.bosToken) ? i.prompt1.slice(i.bosToken.length) : i.prompt1;
    const diff = promptDiff(ours, engine1);
    if (diff) return { kind: 'differs', detail: 'engine-disagrees-with-template', diff };
  }
  // llama-server's reasoning parser hands out the whitespace the generation prompt ends with after an opening
  // marker (`<think>\n`) as the start of the reasoning (test/real-engine/template-continuation.test.ts): the
  // delivered text overlaps the prompt there, once.
  const overlap = /\s+$/.exec(engine1)?.[0] ?? '';
  const expected = [engine1 + i.raw, ...(overlap && i.raw.startsWith(overlap) ? [engine1 + i.raw.slice(overlap.length)] : [])];
  const k = legs.findIndex((p) => expected.includes(p));
  if (k >= 0) return { kind: 'agrees', message: i.candidates[k] };
  return { kind: 'differs', detail: 'engine-prompt-differs', diff: promptDiff(expected[expected.length - 1], legs[0] ?? '') };
}

/** The engine's verdict on leg 2's prompt. Never throws: a failure or a late answer is `unavailable`. */
export async function engineCheck(i: EngineCheckInput): Promise<EngineVerdict> {
  try {
    return await (i.engine === 'vllm' ? checkVllm(i) : checkLlamacpp(i));
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    const detail = i.signal.aborted
      ? 'timeout'
      : /answered \d{3}/.test((e as Error).message)
        ? 'error-status'
        : typeof code === 'string' && /^(E[A-Z]+|UND_ERR)/.test(code)
          ? 'unreachable'
          : 'bad-answer';
    return { kind: 'unavailable', detail };
  }
}
