// Which finish_reason values an engine may send, and what the gateway makes of one it reads. Pure, one call per
// chunk that has a finish_reason field; a chunk shape other than chat's (completions, responses) reads its own
// field and asks the same question.
//
// The gateway does not know which engine is behind the router, so a value is well formed when it is one of
// the strings any of the engines it fronts sends (the union below). Anything else (a number, an object such as
// SGLang's internal {"type":"stop"}, an empty or unknown string) is a malformed finish: the leg that sent it
// failed (src/stream/legs/leg-loop.ts), and the value never reaches the client.

/**
 * The strings each dialect's chat stream sends:
 * - vLLM: FINISH_REASON_STRINGS in vllm/v1/engine/__init__.py ("stop", "length", "abort", "error",
 *   "repetition"; vLLM 0.11+), and "tool_calls", which the chat serving layer puts in place of "stop" when
 *   the answer was a tool call (vllm/entrypoints/openai/serving_chat.py).
 * - SGLang: the chat serving layer reads finish_reason["type"] ("stop", "length", "abort") and sends
 *   "tool_calls" for a tool call (python/sglang/srt/entrypoints/openai/serving_chat.py, v0.5).
 * - llama.cpp: "stop", "length", "tool_calls" (tools/server/server-task.cpp / server.cpp, b6000+).
 * - OpenAI's API itself: "stop", "length", "tool_calls", "content_filter", "function_call".
 */
export const DIALECT_FINISH_REASONS = {
  vllm: ['stop', 'length', 'abort', 'error', 'repetition', 'tool_calls'],
  sglang: ['stop', 'length', 'abort', 'tool_calls'],
  llamacpp: ['stop', 'length', 'tool_calls'],
  openai: ['stop', 'length', 'tool_calls', 'content_filter', 'function_call'],
} as const satisfies Record<string, readonly string[]>;

export type FinishDialect = keyof typeof DIALECT_FINISH_REASONS;

/** Every dialect's strings: what the gateway accepts from an engine it cannot name. */
export const KNOWN_FINISH_REASONS: ReadonlySet<string> = new Set(Object.values(DIALECT_FINISH_REASONS).flat());

/**
 * What a chunk's finish_reason field says: none (absent or null), a finish, or a malformed one. `malformed`
 * says what kind of value it was (never the value: it may be anything an engine wrote).
 */
export type FinishCheck =
  | { readonly kind: 'none' }
  | { readonly kind: 'finish'; readonly reason: string }
  | { readonly kind: 'malformed'; readonly what: MalformedFinish };

export type MalformedFinish = 'number' | 'boolean' | 'object' | 'array' | 'empty-string' | 'unknown-string';

const NONE: FinishCheck = Object.freeze({ kind: 'none' });

export function checkFinishReason(value: unknown, known: ReadonlySet<string> = KNOWN_FINISH_REASONS): FinishCheck {
  if (value === undefined || value === null) return NONE;
  if (typeof value === 'string') {
    if (known.has(value)) return { kind: 'finish', reason: value };
    return { kind: 'malformed', what: value === '' ? 'empty-string' : 'unknown-string' };
  }
  if (Array.isArray(value)) return { kind: 'malformed', what: 'array' };
  if (typeof value === 'number' || typeof value === 'bigint') return { kind: 'malformed', what: 'number' };
  if (typeof value === 'boolean') return { kind: 'malformed', what: 'boolean' };
  return { kind: 'malformed', what: 'object' };
}
