// A Responses request as the chat request a continuation leg starts from. The messages are the ones vLLM
// 0.33.0 renders for it (entrypoints/openai/responses/utils.py construct_input_messages: `instructions` as a
// system message, a string input as one user message, input messages as they are, with their text), the
// function tools in chat form (convert_tool_responses_to_completions_format: every key but `type` under
// `function`). Anything else in the input (function calls and their outputs, reasoning items, images, a
// previous_response_id whose history only the engine holds) makes the request not continuable: the gateway
// would have to guess at a prompt it cannot see.
import { type ChatMessage, type ChatRequest, isObject, type JsonObject } from '../../openai/chat';
import { InputMessage, inputMessageText, type ResponsesRequest } from '../../openai/responses';

/** Sampling fields that mean the same on both paths (vLLM accepts them on each). */
const SAME_FIELDS = [
  'model',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'repetition_penalty',
  'seed',
  'parallel_tool_calls',
  'chat_template_kwargs',
];

/** The chat request continuation legs start from, or why none can be built (a code, never the input's text). */
export type ChatForm = { chat: ChatRequest; notContinuable?: undefined } | { notContinuable: string };

export function toChatRequest(req: ResponsesRequest): ChatForm {
  if (req.previous_response_id != null) return { notContinuable: 'previous-response-id' };
  const messages = inputMessages(req);
  if (!Array.isArray(messages)) return messages;
  const chat: ChatRequest = { messages, stream: true, stream_options: { include_usage: true } };
  for (const f of SAME_FIELDS) if (req[f] !== undefined) chat[f] = req[f];
  if (typeof req.max_output_tokens === 'number') chat.max_tokens = req.max_output_tokens;
  const effort = isObject(req.reasoning) ? req.reasoning.effort : undefined;
  if (typeof effort === 'string') chat.reasoning_effort = effort;
  if (Array.isArray(req.tools) && req.tools.length > 0) chat.tools = req.tools.map(chatTool);
  const choice = chatToolChoice(req.tool_choice);
  if (choice === null) return { notContinuable: 'tool-choice' };
  if (choice !== undefined) chat.tool_choice = choice;
  return { chat };
}

function inputMessages(req: ResponsesRequest): ChatMessage[] | { notContinuable: string } {
  const messages: ChatMessage[] = [];
  if (typeof req.instructions === 'string' && req.instructions !== '') messages.push({ role: 'system', content: req.instructions });
  if (typeof req.input === 'string') return [...messages, { role: 'user', content: req.input }];
  for (const item of req.input) {
    const m = InputMessage.safeParse(item);
    if (!m.success) return { notContinuable: `input-item:${itemType(item)}` };
    messages.push({ role: m.data.role, content: inputMessageText(m.data) });
  }
  return messages;
}

function itemType(item: unknown): string {
  const t = isObject(item) ? (item.type ?? 'message') : 'not-an-object';
  return typeof t === 'string' && /^[a-z_]{1,40}$/.test(t) ? t : '<other>';
}

function chatTool(tool: unknown): JsonObject {
  if (!isObject(tool)) return {};
  const { type: _type, ...fn } = tool;
  return { type: 'function', function: fn };
}

/** undefined: none given; null: a form the chat path has no equivalent for. */
function chatToolChoice(c: unknown): unknown {
  if (c === undefined || c === null) return undefined;
  if (c === 'auto' || c === 'none' || c === 'required') return c;
  if (isObject(c) && c.type === 'function' && typeof c.name === 'string') return { type: 'function', function: { name: c.name } };
  return null;
}
