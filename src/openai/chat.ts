// The OpenAI chat-completions shapes the gateway reads, with their guards. Only what the gateway relies on
// is typed; everything else travels as it came (unknown fields are kept, never dropped). A streamed chunk's
// fields are read through the guards of chunk.ts.

/** JSON from clients and engines: every field is `unknown` until a guard has looked at it. */
export type JsonObject = Record<string, unknown>;

/** A plain JSON object (not an array, not null). */
export function isObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export interface ChatMessage {
  role: string;
  content?: string | Array<{ type?: string; text?: unknown } & JsonObject> | null;
  tool_calls?: Array<{ id?: string; type?: string; function?: { name?: unknown; arguments?: unknown } } & JsonObject>;
  [field: string]: unknown;
}

/** A chat-completions request body, as the scope decision accepted it (an object with a messages array). */
export interface ChatRequest {
  model?: string;
  stream?: boolean;
  messages: ChatMessage[];
  stream_options?: { include_usage?: boolean } & JsonObject;
  max_tokens?: number | string | null;
  max_completion_tokens?: number | string | null;
  response_format?: { type?: string } & JsonObject;
  tools?: unknown;
  [field: string]: unknown;
}

export function isChatRequest(v: unknown): v is ChatRequest {
  return isObject(v) && Array.isArray(v.messages);
}

/** The delta field an engine streams reasoning in: SGLang and older vLLM `reasoning_content`, vLLM >= 0.10 `reasoning`. */
export type ReasoningField = 'reasoning_content' | 'reasoning';

/** Token usage as engines report it (vLLM and SGLang add fields; they are kept). */
export interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  [field: string]: unknown;
}
