// Exact token counts from the engine's /tokenize (TOKENIZE_URL), used instead of the character estimate
// for usage and the leg2 budget. Bounded: a call that fails or takes longer than the deadline falls back
// to the estimate (logged), because a recovery must never wait on accounting.
import { request } from 'undici';
import { estimateRecoveredTokens, type RecoveredTokens } from '../recovery/token-estimate';

export const DEFAULT_TOKENIZE_DEADLINE_MS = 200;

export interface CountedRecoveredTokens extends RecoveredTokens {
  method: 'tokenize' | 'estimate';
}

/** SGLang answers {tokens, count}; vLLM {count, tokens, max_model_len}: `count` or `tokens.length`. */
async function count(url: string, body: object, signal: AbortSignal): Promise<number> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal });
  const json = (await res.body.json()) as { count?: number; tokens?: unknown[] };
  if (res.statusCode !== 200) throw new Error(`tokenize answered ${res.statusCode}`);
  if (typeof json.count === 'number') return json.count;
  if (Array.isArray(json.tokens)) return json.tokens.length;
  throw new Error('tokenize answer has neither count nor tokens');
}

export async function countRecoveredTokens(
  tokenizeUrl: string | undefined,
  payload: any,
  reasoning: string,
  content: string,
  rates: { cjk: number; other: number },
  onFallback: (reason: string) => void,
  deadlineMs = DEFAULT_TOKENIZE_DEADLINE_MS,
): Promise<CountedRecoveredTokens> {
  const estimate = (): CountedRecoveredTokens => ({ ...estimateRecoveredTokens(payload, reasoning, content, rates), method: 'estimate' });
  if (!tokenizeUrl) return estimate();
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), deadlineMs);
  try {
    const model = payload?.model;
    const text = (t: string) => (t ? count(tokenizeUrl, { model, prompt: t, add_special_tokens: false }, ac.signal) : Promise.resolve(0));
    const [promptTokens, reasoningTokens, contentTokens] = await Promise.all([
      count(tokenizeUrl, { model, messages: payload?.messages ?? [] }, ac.signal),
      text(reasoning),
      text(content),
    ]);
    return { promptTokens, reasoningTokens, contentTokens, totalRecovered: reasoningTokens + contentTokens, method: 'tokenize' };
  } catch (e) {
    onFallback(ac.signal.aborted ? `timeout after ${deadlineMs} ms` : (e as Error).message);
    return estimate();
  } finally {
    clearTimeout(timer);
  }
}
