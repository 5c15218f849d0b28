// The three /tokenize dialects (SGLang, vLLM, llama.cpp: the header of src/upstream/tokenizer.ts shows their
// bodies), a client for each, and the detection of which one answers at a URL (TOKENIZE_DIALECT=auto).
import { request } from 'undici';
import type { JsonObject } from '../openai/chat';
import type { TokenizeDialect } from '../recovery/token-estimate';

interface Answer {
  status: number;
  json: JsonObject;
}

/** A call's context: the shared deadline, and headers for the egress listener (the replica to avoid). */
export interface Call {
  signal: AbortSignal;
  headers?: Record<string, string>;
}

async function post(url: string, body: object, call: Call): Promise<Answer> {
  const res = await request(url, {
    method: 'POST',
    headers: { ...call.headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: call.signal,
  });
  const text = await res.body.text();
  let json: JsonObject = {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed !== null && typeof parsed === 'object') json = parsed as JsonObject;
  } catch {
    // not JSON: an empty object, which no dialect accepts as an answer
  }
  return { status: res.statusCode, json };
}

const path = (url: string) => new URL(url).pathname;

/** `count` (SGLang, vLLM) or the length of `tokens` (all three); a non-empty text never has 0 tokens. */
function countOf(a: Answer, url: string, text: string | null): number {
  if (a.status !== 200) throw new Error(`${path(url)} answered ${a.status}`);
  const n = typeof a.json?.count === 'number' ? a.json.count : Array.isArray(a.json?.tokens) ? a.json.tokens.length : undefined;
  if (n === undefined) throw new Error(`${path(url)} answer has neither count nor tokens`);
  // llama.cpp answers {"tokens": []} to a body it cannot read: counting that as 0 would bill nothing.
  if (n === 0 && text !== '') throw new Error(`${path(url)} counted 0 tokens for a non-empty text (wrong TOKENIZE_DIALECT?)`);
  return n;
}

/** llama.cpp's /apply-template beside its /tokenize: the last path segment of TOKENIZE_URL replaced. */
export function applyTemplateUrl(tokenizeUrl: string): string {
  const u = new URL(tokenizeUrl);
  u.pathname = u.pathname.replace(/[^/]*$/, 'apply-template');
  return u.toString();
}

// The request fields that change what the chat template renders (vLLM's TokenizeChatRequest takes them).
const TEMPLATE_FIELDS = ['tools', 'chat_template', 'chat_template_kwargs', 'documents', 'mm_processor_kwargs'] as const;

export interface DialectClient {
  /** Tokens of generated text: no BOS/EOS added, special-token text read as the engine reads its prompt. */
  text(url: string, model: unknown, text: string, call: Call): Promise<number>;
  /** The original request's prompt through the engine's chat template, as its chat endpoint counts it. */
  prompt?(url: string, payload: JsonObject, call: Call): Promise<number>;
}

const openAiText: DialectClient['text'] = async (url, model, text, call) =>
  countOf(await post(url, { model, prompt: text, add_special_tokens: false }, call), url, text);

export const CLIENTS: Record<TokenizeDialect, DialectClient> = {
  sglang: { text: openAiText },
  vllm: {
    text: openAiText,
    async prompt(url, payload, call) {
      const body: Record<string, unknown> = {
        model: payload?.model,
        messages: payload?.messages ?? [],
        // A chat request's defaults (vLLM): generation prompt on, no special tokens added by the tokenizer.
        add_generation_prompt: payload?.add_generation_prompt ?? true,
        continue_final_message: payload?.continue_final_message ?? false,
        add_special_tokens: payload?.add_special_tokens ?? false,
      };
      for (const f of TEMPLATE_FIELDS) if (payload?.[f] != null) body[f] = payload[f];
      return countOf(await post(url, body, call), url, null);
    },
  },
  llamacpp: {
    async text(url, _model, text, call) {
      return countOf(await post(url, { content: text, add_special: false, parse_special: true }, call), url, text);
    },
    async prompt(url, payload, call) {
      // /apply-template parses the body as the chat endpoint does (tools, chat_template_kwargs, an
      // assistant prefill, ...), and strips a leading BOS when the vocabulary adds one; the chat endpoint
      // then tokenizes with add_special and parse_special on, as here.
      const tplUrl = applyTemplateUrl(url);
      const t = await post(tplUrl, payload, call);
      if (t.status !== 200 || typeof t.json?.prompt !== 'string') throw new Error(`${path(tplUrl)} answered ${t.status} without a prompt`);
      return countOf(await post(url, { content: t.json.prompt, add_special: true, parse_special: true }, call), url, t.json.prompt);
    },
  },
};

const PROBE = 'Hello';
const detected = new Map<string, Promise<TokenizeDialect>>();

/** Forgets every detected dialect (tests; a process talks to one engine kind per URL). */
export function forgetDetectedDialects(): void {
  detected.clear();
}

async function probeDialect(url: string, model: unknown, call: Call): Promise<TokenizeDialect> {
  // Both spellings in one body: SGLang/vLLM read `prompt`, llama.cpp reads `content`; each ignores the other.
  const text = await post(url, { model, prompt: PROBE, content: PROBE, add_special_tokens: false, add_special: false }, call);
  if (text.status !== 200) throw new Error(`dialect detection: ${path(url)} answered ${text.status}`);
  if (typeof text.json?.count === 'number') {
    const chat = await post(url, { model, messages: [{ role: 'user', content: PROBE }], add_generation_prompt: true }, call);
    return chat.status === 200 && typeof chat.json?.count === 'number' && chat.json.count > 0 ? 'vllm' : 'sglang';
  }
  if (Array.isArray(text.json?.tokens) && text.json.tokens.length > 0) return 'llamacpp';
  throw new Error(`dialect detection: ${path(url)} answer is neither SGLang/vLLM ({count, tokens}) nor llama.cpp ({tokens})`);
}

/** The dialect at `url`, detected once and cached; a failed detection is not cached (tried again next time). */
export function detectDialect(url: string, model: unknown, call: Call): Promise<TokenizeDialect> {
  let p = detected.get(url);
  if (!p) {
    p = probeDialect(url, model, call);
    detected.set(url, p);
    p.catch(() => detected.delete(url));
  }
  return p;
}
