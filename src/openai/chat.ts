// The OpenAI chat-completions shapes the gateway reads, with their guards. Only what the gateway relies on
// is typed; everything else travels as it came (unknown fields are kept, never dropped).

// biome-ignore lint/suspicious/noExplicitAny: the one loose type: JSON from clients and engines, read through the guards below
export type JsonObject = Record<string, any>;

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

/** Token usage as engines report it (vLLM and SGLang add fields; they are kept). */
export interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  [field: string]: unknown;
}

export interface ChatChunkChoice {
  index?: number;
  delta?: {
    role?: string;
    content?: string | null;
    reasoning_content?: string | null;
    reasoning?: string | null;
    tool_calls?: unknown[];
  } & JsonObject;
  finish_reason?: string | null;
  [field: string]: unknown;
}

/** One `chat.completion.chunk` of a stream. */
export interface ChatChunk {
  id?: string;
  model?: string;
  choices?: ChatChunkChoice[];
  usage?: Usage | null;
  [field: string]: unknown;
}
