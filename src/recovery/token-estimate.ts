// Token counts by character estimation, as the reference gateway's usage.py. This is the fallback: with
// TOKENIZE_URL set the engine's own /tokenize counts (src/upstream/tokenizer.ts), and this estimate is used when
// that call fails or is too slow (the reasons are TokenizeFallback codes, src/recovery/reasons.ts).

import { isObject, type JsonObject } from '../openai/chat';
import type { TokenizeFallback } from './reasons';

// CJK ranges of the reference (_CJK_RE): kana, CJK ext. A, CJK unified, Hangul syllables, CJK compat.
// CJK characters encode far denser in BPE vocabularies, so they are counted with their own rate.
const CJK = /[\u3040-\u30FF\u3400-\u4DBF\u4E00-\u9FFF\uAC00-\uD7A3\uF900-\uFAFF]/gu;

/** What the estimate counts of a text: its CJK code points and all its code points (as Python's len()). */
export interface CharCounts {
  cjk: number;
  codePoints: number;
}

export function charCounts(text: string): CharCounts {
  if (!text) return { cjk: 0, codePoints: 0 };
  const cjk = text.match(CJK)?.length ?? 0;
  let codePoints = 0;
  for (const _ of text) codePoints++;
  return { cjk, codePoints };
}

/** ceil(cjk / cjkRate + other / otherRate) of counted characters (a text's, or a running sum of them). */
export function estimateFromCounts(c: CharCounts, cjkCharsPerToken: number, otherCharsPerToken: number): number {
  return Math.ceil(c.cjk / cjkCharsPerToken + (c.codePoints - c.cjk) / otherCharsPerToken);
}

/** ceil(cjk / cjkRate + other / otherRate); 0 for empty text. Characters are code points, as Python's len(). */
export function estimateTokens(text: string, cjkCharsPerToken: number, otherCharsPerToken: number): number {
  return estimateFromCounts(charCounts(text), cjkCharsPerToken, otherCharsPerToken);
}

// Python's json.dumps(value, ensure_ascii=False) spelling (", " and ": " separators), so the tools schema
// weighs the same number of characters as in the reference.
function pyJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pyJson).join(', ')}]`;
  if (isObject(v))
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: ${pyJson(x)}`)
      .join(', ')}}`;
  return JSON.stringify(v) ?? 'null';
}

// Tool-call arguments are a JSON string in OpenAI's format; anything else is counted as its JSON text
// (the reference would fail the whole continuation on a non-string here).
const asText = (v: unknown): string => (typeof v === 'string' ? v : v == null ? '' : pyJson(v));

/**
 * The text of one message that counts toward the prompt (reference _message_text): string content, the
 * `text` of `type: "text"` parts (image/audio/video parts have no characters to count), and the name and
 * arguments of its tool calls. Role markers and template tokens are ignored, as there.
 */
export function messageText(message: unknown): string {
  if (!isObject(message)) return '';
  const parts: string[] = [];
  const content = message.content;
  if (typeof content === 'string') parts.push(content);
  else if (Array.isArray(content)) {
    for (const part of content) if (isObject(part) && part.type === 'text') parts.push(asText(part.text));
  }
  if (Array.isArray(message.tool_calls)) {
    for (const call of message.tool_calls) {
      const fn = isObject(call) && isObject(call.function) ? call.function : {};
      parts.push(asText(fn.name), asText(fn.arguments));
    }
  }
  return parts.join('');
}

/**
 * All prompt text of a request (reference _prompt_text): every message, plus the tools schema when set; a
 * completions request's prompt string (src/openai/completions.ts) as it is.
 */
export function promptText(payload: JsonObject): string {
  if (typeof payload?.prompt === 'string' && !Array.isArray(payload.messages)) return payload.prompt;
  const messages: unknown[] = Array.isArray(payload?.messages) ? payload.messages : [];
  const texts = messages.map(messageText);
  const tools = payload?.tools;
  // Python truthiness: an empty list or null adds nothing.
  if (tools && !(Array.isArray(tools) && tools.length === 0)) texts.push(pyJson(tools));
  return texts.join('');
}

/**
 * True when a message carries a content part whose type is neither text nor absent (reference
 * _has_multimodal_content). Such prompts cannot be estimated from characters, which switches the usage
 * formula to a subtraction from leg2's real prompt_tokens, and puts vLLM requests out of scope.
 */
export function hasMultimodalContent(payload: JsonObject): boolean {
  const messages: unknown[] = Array.isArray(payload?.messages) ? payload.messages : [];
  return messages.some(
    (m) => isObject(m) && Array.isArray(m.content) && m.content.some((p: unknown) => isObject(p) && p.type != null && p.type !== 'text'),
  );
}

export type TokenizeDialect = 'sglang' | 'vllm' | 'llamacpp';

/**
 * How the numbers were obtained, for usage.continuation and the request_end record.
 *   method  'tokenizer': the model's tokenizer, in process (TOKENIZER); 'tokenize': the engine counted (dialect
 *           says whose /tokenize); 'estimate': characters.
 *   prompt  'template': the engine tokenized the original request through its chat template (vLLM /tokenize
 *           with messages, llama.cpp /apply-template then /tokenize); 'leg2-minus-prefix': leg 2's own
 *           prompt_tokens minus the engine's count of the prefix leg 2 was given (SGLang, whose /tokenize
 *           takes text only, and multimodal requests); 'estimate': the character estimate.
 *   fallback  why not the more exact method configured: TOKENIZER failed, or /tokenize did (absent otherwise).
 */
export interface Accounting {
  /** engine-usage: the running usage the engine streamed with the last delivered chunk (continuous_usage_stats). */
  method: 'tokenizer' | 'tokenize' | 'estimate' | 'engine-usage' | 'token-ids';
  dialect: TokenizeDialect | null;
  prompt: 'template' | 'leg2-minus-prefix' | 'estimate' | 'engine-usage' | 'token-ids';
  fallback?: TokenizeFallback;
}

export interface RecoveredTokens {
  /** The original request's prompt (exact when accounting.prompt is 'template'; else an estimate). */
  promptTokens: number;
  reasoningTokens: number;
  contentTokens: number;
  /** reasoning + content: what leg1 generated and the client already has. */
  totalRecovered: number;
  /**
   * The engine's count of leg 2's continuation prefix (the final assistant message, markers included), when
   * the engine counted it. Leg 2's prompt is the original prompt plus exactly these tokens, so the original
   * prompt is leg 2's prompt_tokens minus this (used when accounting.prompt is 'leg2-minus-prefix', and for
   * multimodal requests, whose images have no characters to estimate).
   */
  prefixTokens?: number;
  accounting?: Accounting;
}

/** A count and how it was made (src/upstream/tokenizer.ts, src/recovery/usage.ts fromRunningUsage). */
export interface CountedTokens extends RecoveredTokens {
  method: Accounting['method'];
  accounting: Accounting;
}

/** Reference estimate_recovered_tokens: the original prompt, and the reasoning/content delivered by leg1. */
export function estimateRecoveredTokens(
  payload: JsonObject,
  reasoning: string,
  content: string,
  rates: { cjk: number; other: number },
): RecoveredTokens {
  const est = (t: string) => estimateTokens(t, rates.cjk, rates.other);
  const reasoningTokens = est(reasoning);
  const contentTokens = est(content);
  return {
    promptTokens: est(promptText(payload)),
    reasoningTokens,
    contentTokens,
    totalRecovered: reasoningTokens + contentTokens,
  };
}
