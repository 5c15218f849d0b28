// Exact token counts from the engine (TOKENIZE_URL), used instead of the character estimate for usage and
// for leg 2's budget. Three /tokenize dialects exist and they do not understand each other's bodies:
//
//   vLLM      POST /tokenize {model, prompt, add_special_tokens}              -> {count, tokens, max_model_len}
//             POST /tokenize {model, messages, add_generation_prompt, ...}    -> the same, through the chat template
//   SGLang    POST /tokenize (or /v1/tokenize) {model, prompt, add_special_tokens} -> {tokens, count, max_model_len}
//             (text only: a body with messages and no prompt is refused)
//   llama.cpp POST /tokenize {content, add_special, parse_special}             -> {tokens}
//             (any other body: 200 {"tokens": []}, i.e. "0 tokens": taken as a failure here, never as a count)
//             POST /apply-template {the chat request}                         -> {prompt} (the templated text)
//
// TOKENIZE_DIALECT picks one, or `auto` detects it once per URL (then cached): a text probe that both
// spellings can read tells llama.cpp ({tokens} only) from SGLang/vLLM ({count, ...}); a messages probe
// tells vLLM (counts it) from SGLang (refuses it).
//
// What is counted: the delivered reasoning and content (leg 1's completion tokens), the continuation prefix
// leg 2 is given (markers included), and, where the dialect can, the original request through the chat
// template (the prompt an uninterrupted run reports). Without the latter (SGLang, multimodal requests) the
// prompt is leg 2's prompt_tokens minus the prefix count (src/recovery/usage.ts).
//
// Bounded: everything shares one deadline (TOKENIZE_TIMEOUT_MS); a call that fails or is late makes the
// whole count fall back to the estimate, said in the result (accounting.fallback) and logged by the caller,
// because a recovery must never wait on accounting.

import type { JsonObject } from '../openai/chat';
import type { TokenizeFallback } from '../recovery/reasons';
import {
  type CountedTokens,
  estimateRecoveredTokens,
  hasMultimodalContent,
  type RecoveredTokens,
  type TokenizeDialect,
} from '../recovery/token-estimate';
import { countWithTokenizer, type TextTokenizer } from '../templates/model-tokenizer';
import { type Call, CLIENTS, detectDialect } from './tokenize-dialects';

export const DEFAULT_TOKENIZE_DEADLINE_MS = 200;
export const TOKENIZE_DIALECTS = ['auto', 'sglang', 'vllm', 'llamacpp'] as const;
export type TokenizeDialectSetting = (typeof TOKENIZE_DIALECTS)[number];
export type { TokenizeDialect };

export type CountedRecoveredTokens = CountedTokens;

export interface CountOptions {
  /** TOKENIZE_URL; unset = the estimate. */
  url: string | undefined;
  dialect: TokenizeDialectSetting;
  rates: { cjk: number; other: number };
  /** The raw text leg 2's prompt continues from (src/recovery/continuation-request.ts designLeg2), counted for the prompt subtraction. */
  prefix: string;
  /**
   * The prefix is what the model generated (a known family's raw text, markers included): leg 1's completion is
   * then its count, not the delivered text's, which lacks the markers the parser removed. Unset for `generic`,
   * whose markers are a guess.
   */
  prefixIsGenerated?: boolean;
  /** `detail` for the log only; `code` is what the client's usage.continuation.fallback says. */
  onFallback: (detail: string, code: TokenizeFallback) => void;
  deadlineMs?: number;
  /**
   * Sent with every call. The continuation passes the egress listener's avoid-host header: a TOKENIZE_URL
   * through Envoy's egress then reaches the replicas leg 2 may land on, never the one that just died.
   */
  headers?: Record<string, string>;
  /**
   * The request's cancellation (client gone, shutdown): every call in flight is aborted at once and the
   * estimate returned, without a fallback (nothing failed; the caller ends the request).
   */
  signal?: AbortSignal;
  /** TOKENIZER: counts in process first; /tokenize (url) and the estimate only when it fails. */
  tokenizer?: TextTokenizer;
  /** The engine's prompt for the original request (the served template's rendering), which TOKENIZER counts. */
  promptText?: string;
}

export type { TokenizeFallback };

function fallbackCode(e: unknown, timedOut: boolean): TokenizeFallback {
  if (timedOut) return 'tokenize-timeout';
  const msg = e instanceof Error ? e.message : '';
  if (/ answered \d{3}/.test(msg)) return 'tokenize-error-status';
  if (/neither|counted 0|not JSON|Unexpected token|JSON/.test(msg)) return 'tokenize-bad-answer';
  return 'tokenize-unreachable';
}

export async function countRecoveredTokens(
  payload: JsonObject,
  reasoning: string,
  content: string,
  o: CountOptions,
): Promise<CountedRecoveredTokens> {
  const est = estimateRecoveredTokens(payload, reasoning, content, o.rates);
  let failed: TokenizeFallback | undefined;
  if (o.tokenizer && !o.signal?.aborted) {
    try {
      return await countInProcess(o.tokenizer, payload, reasoning, content, o, est);
    } catch (e) {
      failed = 'tokenizer-failed';
      o.onFallback((e as Error).message, failed);
    }
  }
  if (!o.url || o.signal?.aborted) return estimated(est, failed);
  return countWithEndpoint(o.url, payload, reasoning, content, o, est, failed);
}

/** The estimate as the answer, with the fallback code that led to it (none when nothing failed). */
function estimated(est: RecoveredTokens, fallback?: TokenizeFallback): CountedRecoveredTokens {
  return {
    ...est,
    method: 'estimate',
    accounting: { method: 'estimate', dialect: null, prompt: 'estimate', ...(fallback ? { fallback } : {}) },
  };
}

/** TOKENIZER: the counts in process; throws when the tokenizer does. */
async function countInProcess(
  tokenizer: TextTokenizer,
  payload: JsonObject,
  reasoning: string,
  content: string,
  o: CountOptions,
  est: RecoveredTokens,
): Promise<CountedRecoveredTokens> {
  // A multimodal prompt has no text to count: leg 2's prompt minus the prefix, as with /tokenize.
  const promptText = hasMultimodalContent(payload) ? undefined : o.promptText;
  const c = await countWithTokenizer(tokenizer, {
    reasoning,
    content,
    prefix: o.prefix,
    prefixIsGenerated: !!o.prefixIsGenerated,
    promptText,
  });
  return {
    ...c,
    promptTokens: c.promptTokens ?? est.promptTokens,
    method: 'tokenizer',
    accounting: { method: 'tokenizer', dialect: null, prompt: c.promptTokens !== undefined ? 'template' : 'leg2-minus-prefix' },
  };
}

/**
 * TOKENIZE_URL: the engine's /tokenize within the deadline, aborted with the request; the estimate when it
 * fails. `failed`: the in-process tokenizer's failure, if any, carried into the accounting.
 */
async function countWithEndpoint(
  url: string,
  payload: JsonObject,
  reasoning: string,
  content: string,
  o: CountOptions,
  est: RecoveredTokens,
  failed: TokenizeFallback | undefined,
): Promise<CountedRecoveredTokens> {
  const deadlineMs = o.deadlineMs ?? DEFAULT_TOKENIZE_DEADLINE_MS;
  const ac = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, deadlineMs);
  const cancel = () => ac.abort();
  o.signal?.addEventListener('abort', cancel, { once: true });
  try {
    const call: Call = { signal: ac.signal, headers: o.headers };
    const dialect = o.dialect === 'auto' ? await detectDialect(url, payload?.model, call) : o.dialect;
    const counts = await endpointCounts(CLIENTS[dialect], url, payload, { reasoning, content, prefix: o.prefix }, call);
    return fromEndpointCounts(counts, !!o.prefixIsGenerated && !!o.prefix, est, dialect, failed);
  } catch (e) {
    if (o.signal?.aborted) return estimated(est);
    // The log gets the detail; the client (usage.continuation.fallback) only a stable code, never an exception's
    // text (it may name an internal address: `connect ECONNREFUSED 10.0.0.7:8000`).
    const code = fallbackCode(e, timedOut);
    o.onFallback(timedOut ? `timeout after ${deadlineMs} ms` : (e as Error).message, code);
    return estimated(est, code);
  } finally {
    clearTimeout(timer);
    o.signal?.removeEventListener('abort', cancel);
    ac.abort(); // calls still in flight after another failed
  }
}

interface EndpointCounts {
  reasoningTokens: number;
  contentTokens: number;
  prefixTokens: number;
  /** The template's count of the original prompt; undefined when the dialect has none or the call failed. */
  promptTokens: number | undefined;
}

/** The four counts, asked at once. */
async function endpointCounts(
  client: (typeof CLIENTS)[TokenizeDialect],
  url: string,
  payload: JsonObject,
  texts: { reasoning: string; content: string; prefix: string },
  call: Call,
): Promise<EndpointCounts> {
  const model = payload?.model;
  const text = (t: string) => (t ? client.text(url, model, t, call) : Promise.resolve(0));
  // Images have no template text to count: a multimodal prompt is always leg 2's minus the prefix. A
  // template call that fails while the text calls answer still leaves that exact subtraction.
  // Only a chat request has a templated prompt (a completion's prompt is leg 2's minus the prefix).
  const chat = Array.isArray(payload?.messages);
  const templated =
    client.prompt && chat && !hasMultimodalContent(payload) ? client.prompt(url, payload, call).catch(() => undefined) : undefined;
  const [reasoningTokens, contentTokens, prefixTokens, promptTokens] = await Promise.all([
    text(texts.reasoning),
    text(texts.content),
    text(texts.prefix),
    templated,
  ]);
  return { reasoningTokens, contentTokens, prefixTokens, promptTokens };
}

/** The endpoint's counts as the answer. A generated prefix (markers included) is leg 1's completion count. */
function fromEndpointCounts(
  c: EndpointCounts,
  prefixIsGenerated: boolean,
  est: RecoveredTokens,
  dialect: TokenizeDialect,
  failed: TokenizeFallback | undefined,
): CountedRecoveredTokens {
  const generated = prefixIsGenerated ? c.prefixTokens : c.reasoningTokens + c.contentTokens;
  return {
    promptTokens: c.promptTokens ?? est.promptTokens,
    // The markers count with the reasoning they delimit.
    reasoningTokens: prefixIsGenerated ? Math.max(0, generated - c.contentTokens) : c.reasoningTokens,
    contentTokens: c.contentTokens,
    totalRecovered: generated,
    prefixTokens: c.prefixTokens,
    method: 'tokenize',
    accounting: {
      method: 'tokenize',
      dialect,
      prompt: c.promptTokens !== undefined ? 'template' : 'leg2-minus-prefix',
      ...(failed ? { fallback: failed } : {}),
    },
  };
}
