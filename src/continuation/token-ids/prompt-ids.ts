// llama-server's chat stream does not carry the prompt's ids: the engine is asked for them the way it made
// them for leg 1, its template applied to the same request (`/apply-template`, the same oaicompat parsing as
// the chat endpoint) and the result tokenized as a chat prompt is (`/tokenize` with add_special and
// parse_special: server-context.cpp tokenizes a chat task with both true, L2239; /tokenize defaults
// add_special to false, L5073-5077). The engine's own answer, never our tokenizer's.
import { request } from 'undici';
import { isObject, type JsonObject } from '../../openai/chat';
import { idList } from './leg1-ledger';

export interface PromptIdsAsk {
  readonly baseUrl: string;
  readonly original: JsonObject;
  readonly headers?: Record<string, string>;
  readonly signal: AbortSignal;
}

async function postJson(url: string, body: unknown, ask: Omit<PromptIdsAsk, 'original'>): Promise<JsonObject | null> {
  const res = await request(url, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', ...ask.headers },
    signal: ask.signal,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) return null;
  const json = JSON.parse(text);
  return isObject(json) ? json : null;
}

/** The prompt ids leg 1 was given, or why they could not be had (a short code, never the engine's text). */
export async function llamaPromptIds(ask: PromptIdsAsk): Promise<{ ids: number[] } | { failed: string }> {
  try {
    const applied = await postJson(`${ask.baseUrl}/apply-template`, ask.original, ask);
    if (!applied || typeof applied.prompt !== 'string') return { failed: 'apply-template' };
    const tokenized = await postJson(`${ask.baseUrl}/tokenize`, { content: applied.prompt, add_special: true, parse_special: true }, ask);
    const ids = tokenized ? idList(tokenized.tokens) : null;
    return ids && ids.length > 0 ? { ids } : { failed: 'tokenize' };
  } catch {
    return { failed: ask.signal.aborted ? 'timeout' : 'unreachable' };
  }
}

/**
 * The engine's ids for a piece of generated text (the marker hole's: marker-hole.ts): `/tokenize` with no BOS
 * added and special tokens parsed, as the model's own output of a special token (a real R1's `</think>`) is one id.
 */
export async function llamaTextIds(ask: Omit<PromptIdsAsk, 'original'>, text: string): Promise<{ ids: number[] } | { failed: string }> {
  try {
    const tokenized = await postJson(`${ask.baseUrl}/tokenize`, { content: text, add_special: false, parse_special: true }, ask);
    const ids = tokenized ? idList(tokenized.tokens) : null;
    return ids && ids.length > 0 ? { ids } : { failed: 'tokenize' };
  } catch {
    return { failed: ask.signal.aborted ? 'timeout' : 'unreachable' };
  }
}
