// vLLM's /v1/completions with a prompt of token ids, as the fake engine reads it (our reading of vLLM 0.33.0
// entrypoints/openai/completion/protocol.py and serving.py, /work/shared/engine-token-ids.md): the ids are read
// back into the pseudo chat prompt (tokens.ts promptTokens) and the tokens generated after it; the answer for
// that conversation goes on from exactly there, as raw text (no parser on this endpoint), one token a chunk,
// each with its id (`return_token_ids`), the finish on the last token's chunk, then usage and [DONE]. A prompt
// that is not this engine's chat prompt followed by the answer's first tokens is a 400: a gateway that sent the
// wrong ids fails loudly.
import { answerFor } from './answer';
import type { Exchange } from './exchange';
import { parseSize } from './plan';
import { promptTokens, tokenId, tokenOf } from './tokens';

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

export function tokenCompletion(ex: Exchange, opts: { created: number; intervalMs: number; name: string }): void {
  const body = ex.record.body;
  const bad = (message: string) => ex.sendJson(400, { error: { message, type: 'BadRequestError', code: 400 } });
  const ids: unknown = body?.prompt;
  if (!Array.isArray(ids) || !ids.every((x) => Number.isInteger(x)))
    return bad('fake-engine: /v1/completions here takes a prompt of token ids');
  const tokens = ids.map((id) => tokenOf(id as number));
  if (tokens.some((t) => t === undefined)) return bad('fake-engine: a token id this engine never handed out');
  const read = readPrompt(tokens as string[]);
  if (!read) return bad("fake-engine: the prompt ids are not this engine's chat prompt");
  const size = parseSize(ex.record.headers['x-fake-answer-tokens']);
  const answer = answerFor(read.messages, size === 'bad' ? undefined : size);
  const all = [...answer.reasoningTokens, ...answer.contentTokens];
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
  ex.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let i = 0;
  const step = () => {
    if (ex.closed) return;
    if (i < rest.length) {
      const last = i === rest.length - 1;
      ex.write(`data: ${JSON.stringify({ ...base, choices: [choice(rest[i], rest[i], last ? finish : null)] })}\n\n`);
      i++;
      ex.record.tokensSent = i;
      if (!last) return void ex.later(opts.intervalMs, step);
    } else ex.write(`data: ${JSON.stringify({ ...base, choices: [choice('', null, finish)] })}\n\n`);
    if (body.stream_options?.include_usage === true) {
      const usage = { prompt_tokens: ids.length, total_tokens: ids.length + rest.length, completion_tokens: rest.length };
      ex.write(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`);
    }
    ex.end('data: [DONE]\n\n');
  };
  ex.later(opts.intervalMs, step);
}
