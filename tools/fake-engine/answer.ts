// The deterministic answer: a pure function of the conversation (minus a trailing assistant message,
// which is a continuation prefix), so every replica produces the same bytes and a stitched answer can be
// compared byte for byte with an uninterrupted one.
import { fnv1a, promptTokens, registerVocabulary, tokenize } from './tokens';

export interface Answer {
  reasoningTokens: string[];
  contentTokens: string[];
}

export interface AnswerSize {
  reasoning: number;
  content: number;
}

// Word tokens carry their leading space, so concatenations re-tokenize to the same tokens; only the first
// token of a part may be a bare word (nothing precedes it that it could merge with).
const OPENERS = ['Okay', 'Sure', 'First', 'Let', 'Well', 'Right'];
const WORDS = [
  ' the',
  ' user',
  ' asks',
  ' about',
  ' a',
  ' stream',
  ' of',
  ' tokens',
  ' so',
  ' I',
  ' should',
  ' check',
  ' each',
  ' step',
  ' alpha',
  ' beta',
  ' gamma',
  ' delta',
  ' engine',
  ' answer',
  ' and',
  ' then',
  ' it',
  ' continues',
  ' from',
  ' prefix',
  ' replica',
  ' is',
  ' fine',
  ' with',
  ' bytes',
  ' order',
  ' 42',
  ' 7',
];
const PUNCT = [',', '.', ':', '!', '\n'];
const CJK = ['你好', '世界', '模型', '续写', '流式'];
const EMOJI = ['🙂', '🚀', '✨'];
// Structured output (response_format json_*): the content is one JSON document, cut into these tokens.
const JSON_TOKENS = ['{"', 'summary', '":', ' "', '",', ' "', 'count', '":', ' ', '}'];
registerVocabulary([...OPENERS, ...WORDS, ...PUNCT, ...CJK, ...EMOJI, ...JSON_TOKENS, '"', '"count', ',']);

/** mulberry32: tiny seeded PRNG, good enough to make answers look varied (tests reuse it). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(rnd: () => number, list: readonly T[]): T {
  return list[Math.floor(rnd() * list.length)];
}

/** One part (reasoning or content) of n tokens, always with a CJK and an emoji token when n >= 4. */
function part(rnd: () => number, n: number): string[] {
  const out: string[] = [];
  const cjkAt = Math.floor(n / 3);
  const emojiAt = Math.floor((2 * n) / 3);
  for (let i = 0; i < n; i++) {
    if (i === 0) out.push(pick(rnd, OPENERS));
    else if (i === n - 1) out.push('.');
    else if (n >= 4 && i === cjkAt) out.push(pick(rnd, CJK));
    else if (n >= 4 && i === emojiAt) out.push(pick(rnd, EMOJI));
    else {
      const r = rnd();
      const afterPunct = PUNCT.includes(out[i - 1]);
      out.push(r < 0.12 && !afterPunct ? pick(rnd, PUNCT) : r < 0.17 ? pick(rnd, CJK) : pick(rnd, WORDS));
    }
  }
  return out;
}

export function withoutTrailingAssistant(messages: any[]): any[] {
  const list = Array.isArray(messages) ? messages : [];
  const last = list[list.length - 1];
  return last && last.role === 'assistant' ? list.slice(0, -1) : list;
}

/** Seed of the conversation; also used for tool-call ids and arguments. */
export function conversationSeed(messages: any[]): number {
  return fnv1a(JSON.stringify(withoutTrailingAssistant(messages)));
}

/** A JSON document of about n tokens: {"summary": "<words>", "count": <n>} (valid only when complete). */
function jsonPart(rnd: () => number, n: number): string[] {
  const words: string[] = [];
  for (let i = 0; i < Math.max(1, n - 10); i++) words.push(pick(rnd, WORDS));
  return ['{"', 'summary', '":', ' "', ...words, '",', ' "', 'count', '":', ' ', String(words.length), '}'];
}

export function answerFor(messages: any[], size?: AnswerSize, json = false): Answer {
  const rnd = prng(conversationSeed(messages));
  // Draw the natural sizes even when forced, so the rest of the random sequence does not depend on it.
  const naturalR = 20 + Math.floor(rnd() * 21);
  const naturalC = 20 + Math.floor(rnd() * 41);
  const r = size ? size.reasoning : naturalR;
  const c = size ? size.content : naturalC;
  const reasoningTokens = part(rnd, r);
  return { reasoningTokens, contentTokens: json ? jsonPart(rnd, c) : part(rnd, c) };
}

export function promptTokenCount(messages: any[]): number {
  return promptTokens(messages).length;
}

export { tokenize };
