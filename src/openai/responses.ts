// The OpenAI Responses API shapes the gateway reads and writes (POST /v1/responses with stream: true): the
// request fields that decide scope and the continuation, and every stream event the gateway reads of leg 1 or
// writes itself. Shapes as vLLM 0.33.0 streams them (entrypoints/openai/responses/simple_streaming_events.py,
// serving.py responses_stream_generator, api_router.py `event: <type>\ndata: <json>`), which are the openai
// package's types (openai.types.responses). Unknown fields are kept: what is not read travels as it came.
import { z } from 'zod';
import { isObject, type JsonObject } from './chat';

/** The Responses path (the query string is not part of it). */
export const RESPONSES_PATH = '/v1/responses';

/** A content part of an input message: `input_text` (user, system, developer) or `output_text` (assistant). */
const TextPart = z.looseObject({ type: z.enum(['input_text', 'output_text', 'text']), text: z.string() });

/** An input item the continuation can rebuild as a chat message: a plain message with text content. */
export const InputMessage = z.looseObject({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'system', 'developer', 'assistant']),
  content: z.union([z.string(), z.array(TextPart).length(1)]),
});
export type InputMessage = z.infer<typeof InputMessage>;

/** A function tool in the Responses' flat form ({type, name, description, parameters}). */
export const FunctionTool = z.looseObject({ type: z.literal('function'), name: z.string().min(1) });

/** The request, as far as scope reads it (validation only: the parsed body is what is kept and re-sent). */
export const ResponsesRequestShape = z.looseObject({
  input: z.union([z.string(), z.array(z.unknown()).min(1)]),
  stream: z.unknown().optional(),
});

export interface ResponsesRequest {
  model?: string;
  input: string | unknown[];
  instructions?: string | null;
  stream?: boolean;
  max_output_tokens?: number | null;
  previous_response_id?: string | null;
  background?: boolean | null;
  tools?: unknown[];
  text?: { format?: { type?: string } } & JsonObject;
  [field: string]: unknown;
}

/** The event types the gateway reads or writes (openai.types.responses.Response*Event `type`). */
export type ResponsesEventType =
  | 'response.created'
  | 'response.in_progress'
  | 'response.output_item.added'
  | 'response.content_part.added'
  | 'response.output_text.delta'
  | 'response.reasoning_text.delta'
  | 'response.reasoning_summary_text.delta'
  | 'response.function_call_arguments.delta'
  | 'response.output_text.done'
  | 'response.reasoning_text.done'
  | 'response.content_part.done'
  | 'response.output_item.done'
  | 'response.completed'
  | 'response.incomplete'
  | 'response.failed'
  | 'error';

/** The output item kinds the gateway continues: text in a message, or reasoning text. */
export type TextItemKind = 'message' | 'reasoning';

/** Every stream event: its type and its place in the stream. */
export interface ResponsesEvent {
  type: ResponsesEventType | string;
  sequence_number: number;
  [field: string]: unknown;
}

/** Usage as a Responses stream reports it in response.completed. */
export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** The event's JSON when it is a Responses event (an object with a string `type`), else null. */
export function asResponsesEvent(json: unknown): ResponsesEvent | null {
  return isObject(json) && typeof json.type === 'string' ? (json as ResponsesEvent) : null;
}

/** One SSE event as vLLM writes it (api_router.py _convert_stream_to_sse_events). */
export function sseOf(event: ResponsesEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** The text of an input message's content (a string, or its one text part). */
export function inputMessageText(m: InputMessage): string {
  return typeof m.content === 'string' ? m.content : m.content[0].text;
}
