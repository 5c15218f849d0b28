// POST /v1/completions: a prompt string continued as plain text, streamed as `text_completion` chunks, in the
// two engines' shapes (our reading of their code, which this fake only confirms):
//   vLLM   vllm/entrypoints/openai/completion/serving.py completion_stream_generator (read at commit 030ea52 of
//          vllm-project/vllm, not yet checked against the 0.33.0 sdist the rest of the fake reads): no role chunk;
//          each chunk `model_dump_json(exclude_unset=True)`: {id, object: "text_completion", created, model,
//          choices: [{index, text, logprobs, finish_reason, stop_reason}]} (usage only with continuous usage stats:
//          prompt, total, completion); the finish_reason rides on the last generated token's chunk: an
//          end-of-sequence token adds no text, so "" with "stop" (a `length` cut carries it on its last text chunk;
//          this fake sends it on a chunk of its own); the usage chunk `exclude_none=True`: choices [] and
//          {prompt_tokens, total_tokens, completion_tokens}.
//   SGLang python/sglang/srt/entrypoints/openai/serving_completions.py _generate_completion_stream (0.5.x; read at
//          commit 004c82e of sgl-project/sglang):
//          `model_dump_json()` of every field: choices [{index, text, logprobs, finish_reason, matched_stop}] and
//          `usage: null`; the usage chunk `exclude_none=True` with UsageProcessor's layout (as chat's).
// Optional extension fields (token_ids, prompt_token_ids, hidden states) are left out: off unless asked for.
//
// The answer is a pure function of the ORIGINAL prompt (the same words as chat answers, its first word with a
// leading space, so that prompt + any delivered tokens tokenize to exactly the prompt's tokens then those): a
// continuation (the original prompt + a prefix of the answer) is recognised by finding where its prompt splits
// into a prompt and the start of that prompt's own answer, and resumes there.
import type { AnswerSize } from './answer';
import { answerFor } from './answer';
import type { ChunkContext, UsageCounts } from './dialect';
import { usageObject } from './dialect';
import type { PlanResult } from './plan';
import { tokenize } from './tokens';

/** The answer's tokens for an original prompt (x-fake-answer-tokens' second number sets its length). */
export function completionAnswer(prompt: string, size?: AnswerSize): string[] {
  const tokens = answerFor([{ role: 'user', content: prompt }], size).contentTokens;
  return tokens.map((t, i) => (i === 0 && /^[A-Za-z]/.test(t) ? ` ${t}` : t));
}

/**
 * Where `prompt` splits into an original prompt and a delivered prefix of its answer: the shortest original
 * (the longest delivered text) at a token boundary, or none (a fresh prompt, nothing delivered).
 */
export function splitContinuation(prompt: string, size?: AnswerSize): { original: string; delivered: string[] } {
  const tokens = tokenize(prompt);
  let at = 0;
  for (let i = 0; i < tokens.length; i++) {
    const original = prompt.slice(0, at);
    const rest = tokens.slice(i);
    const answer = completionAnswer(original, size);
    if (original !== '' && rest.length <= answer.length && rest.every((t, k) => t === answer[k])) return { original, delivered: rest };
    at += tokens[i].length;
  }
  return { original: prompt, delivered: [] };
}

export function planTextCompletion(body: any, size?: AnswerSize): PlanResult {
  if (!body || typeof body !== 'object' || typeof body.prompt !== 'string')
    return { ok: false, status: 400, message: 'fake-engine: /v1/completions needs a prompt string' };
  const { original, delivered } = splitContinuation(body.prompt, size);
  const rest = completionAnswer(original, size).slice(delivered.length);
  const max = typeof body.max_tokens === 'number' ? body.max_tokens : 16; // the engines' default (see the gateway's)
  const deltas = rest.slice(0, Math.max(0, max)).map((text) => ({ kind: 'content' as const, text }));
  return {
    ok: true,
    plan: {
      continuation: delivered.length > 0,
      deltas,
      finish: rest.length > max ? 'length' : 'stop',
      promptTokens: tokenize(body.prompt).length,
      reasoningTokens: 0,
    },
  };
}

function envelope(ctx: ChunkContext, choices: unknown[]): Record<string, unknown> {
  const chunk: Record<string, unknown> = { id: ctx.id, object: 'text_completion', created: ctx.created, model: ctx.model, choices };
  if (ctx.dialect === 'sglang') chunk.usage = null;
  return chunk;
}

function choice(ctx: ChunkContext, text: string, finish: string | null): Record<string, unknown> {
  const c: Record<string, unknown> = { index: 0, text, logprobs: null, finish_reason: finish };
  if (ctx.dialect === 'sglang') c.matched_stop = finish === 'stop' ? 151643 : null;
  else c.stop_reason = null;
  return c;
}

export function completionTokenChunk(ctx: ChunkContext, text: string): Record<string, unknown> {
  return envelope(ctx, [choice(ctx, text, null)]);
}

/** The finish: the end-of-sequence token's chunk ("" with "stop"), or a length cut's. */
export function completionFinishChunk(ctx: ChunkContext, finish: string): Record<string, unknown> {
  return envelope(ctx, [choice(ctx, '', finish)]);
}

/** Usage in the engine's completions layout: vLLM's three counts; SGLang's UsageProcessor layout (as its chat's). */
export function completionUsageObject(ctx: ChunkContext, u: UsageCounts): Record<string, unknown> {
  if (ctx.dialect === 'sglang') return usageObject('sglang', u);
  return { prompt_tokens: u.prompt, total_tokens: u.prompt + u.completion, completion_tokens: u.completion };
}

export function completionUsageChunk(ctx: ChunkContext, u: UsageCounts): Record<string, unknown> {
  const chunk = envelope(ctx, []);
  delete chunk.usage;
  return { ...chunk, usage: completionUsageObject(ctx, u) };
}
