// Wire shapes of the two engines. They differ in small ways a gateway must tolerate: the reasoning field
// name, where reasoning_tokens sit in usage, SGLang's `matched_stop` and `usage: null` on every chunk,
// vLLM's `stop_reason`.

export type Dialect = 'sglang' | 'vllm';

export interface ChunkContext {
  dialect: Dialect;
  id: string;
  created: number;
  model: string;
  /** The weight revision this replica serves, as `system_fingerprint` on every chunk (FakeEngineOptions.revision). */
  revision?: string;
  /** `completions`: `text_completion` chunks (tools/fake-engine/text-completion.ts); default chat. */
  endpoint?: 'chat' | 'completions';
}

/** SGLang reports the id of the stop token it matched (Kimi's <|im_end|>); null when cut by length. */
const SGLANG_STOP_TOKEN_ID = 163586;

export type TokenDelta =
  | { kind: 'reasoning'; text: string }
  | { kind: 'content'; text: string }
  /** A generated token the client sees nothing of (a reasoning marker, whitespace a parser holds back). */
  | { kind: 'silent' }
  /** A token whose text the parser split into both parts (a marker completing inside it). */
  | { kind: 'split'; reasoning: string; content: string }
  | { kind: 'tool-start'; id: string; name: string }
  | { kind: 'tool-args'; text: string };

function envelope(ctx: ChunkContext, choices: unknown[]): Record<string, unknown> {
  const chunk: Record<string, unknown> = {
    id: ctx.id,
    object: 'chat.completion.chunk',
    created: ctx.created,
    model: ctx.model,
    choices,
  };
  if (ctx.revision !== undefined) chunk.system_fingerprint = ctx.revision;
  if (ctx.dialect === 'sglang') chunk.usage = null;
  return chunk;
}

function choice(ctx: ChunkContext, delta: unknown, finish: string | null, extra: Record<string, unknown> = {}) {
  const c: Record<string, unknown> = { index: 0, delta, logprobs: null, finish_reason: finish, ...extra };
  if (ctx.dialect === 'sglang' && !('matched_stop' in c)) c.matched_stop = null;
  return c;
}

export function roleChunk(ctx: ChunkContext) {
  return envelope(ctx, [choice(ctx, { role: 'assistant', content: '' }, null)]);
}

export function tokenChunk(ctx: ChunkContext, d: TokenDelta) {
  let delta: Record<string, unknown>;
  if (d.kind === 'tool-start') {
    delta = { tool_calls: [{ index: 0, id: d.id, type: 'function', function: { name: d.name, arguments: '' } }] };
  } else if (d.kind === 'tool-args') {
    delta = { tool_calls: [{ index: 0, function: { arguments: d.text } }] };
  } else if (d.kind === 'content') {
    delta = { content: d.text };
  } else if (d.kind === 'split') {
    delta = { content: d.content, [ctx.dialect === 'sglang' ? 'reasoning_content' : 'reasoning']: d.reasoning };
  } else if (d.kind === 'silent') {
    throw new Error('a silent token has no chunk');
  } else {
    delta = { content: null, [ctx.dialect === 'sglang' ? 'reasoning_content' : 'reasoning']: d.text };
  }
  if (ctx.dialect === 'sglang') {
    delta = { role: null, content: null, reasoning_content: null, tool_calls: null, ...delta };
  }
  return envelope(ctx, [choice(ctx, delta, null)]);
}

function stopExtra(ctx: ChunkContext, finish: string): Record<string, unknown> {
  return ctx.dialect === 'sglang' ? { matched_stop: finish === 'stop' ? SGLANG_STOP_TOKEN_ID : null } : { stop_reason: null };
}

/**
 * vLLM with return_token_ids: a token its reasoning parser held back (no delta) still gets a chunk, `delta: {}`,
 * to carry its ids (chat_completion/serving.py: "we still need to send a chunk even if delta_message is None").
 */
export function idsOnlyChunk(ctx: ChunkContext, ids: number[]) {
  return envelope(ctx, [{ ...choice(ctx, {}, null), token_ids: ids }]);
}

export function finishChunk(ctx: ChunkContext, finish: string) {
  return envelope(ctx, [choice(ctx, {}, finish, stopExtra(ctx, finish))]);
}

export interface UsageCounts {
  prompt: number;
  completion: number;
  reasoning: number;
}

/**
 * SGLang 0.5.23 (UsageProcessor.calculate_token_usage, usage_processor.py L95-130) puts reasoning_tokens at the top
 * level and, only when there are some, also under completion_tokens_details; vLLM 0.33.0 (chat_completion/serving.py
 * `_make_completion_tokens_details`) only there, whenever a reasoning parser runs. The same shape rides on every
 * chunk with continuous usage stats.
 */
export function usageObject(dialect: Dialect, u: UsageCounts) {
  const base = {
    prompt_tokens: u.prompt,
    total_tokens: u.prompt + u.completion,
    completion_tokens: u.completion,
    prompt_tokens_details: { cached_tokens: 0 },
  };
  return dialect === 'sglang'
    ? { ...base, reasoning_tokens: u.reasoning, completion_tokens_details: u.reasoning ? { reasoning_tokens: u.reasoning } : null }
    : { ...base, completion_tokens_details: { reasoning_tokens: u.reasoning } };
}

export function usageChunk(ctx: ChunkContext, u: UsageCounts) {
  return { ...envelope(ctx, []), usage: usageObject(ctx.dialect, u) };
}

export interface FullAnswer {
  reasoning: string;
  content: string;
  toolCall?: { id: string; name: string; arguments: string };
  finish: string;
  usage: UsageCounts;
}

/** The non-streaming chat.completion. */
export function completionBody(ctx: ChunkContext, a: FullAnswer) {
  const message: Record<string, unknown> = {
    role: 'assistant',
    content: a.toolCall ? null : a.content,
    [ctx.dialect === 'sglang' ? 'reasoning_content' : 'reasoning']: a.reasoning || null,
    tool_calls: a.toolCall
      ? [{ id: a.toolCall.id, index: 0, type: 'function', function: { name: a.toolCall.name, arguments: a.toolCall.arguments } }]
      : ctx.dialect === 'sglang'
        ? null
        : [],
  };
  return {
    id: ctx.id,
    object: 'chat.completion',
    created: ctx.created,
    model: ctx.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: a.finish, ...stopExtra(ctx, a.finish) }],
    usage: usageObject(ctx.dialect, a.usage),
  };
}

export function errorBody(message: string, type: string, code: number) {
  return { error: { message, type, code } };
}
