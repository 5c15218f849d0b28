// What of an SGLang 0.5.23 Responses request the gateway cannot continue as SGLang would have gone on
// (srt/entrypoints/openai/serving_responses.py): the request stays in scope (a failure before the first delta is
// re-run whole), but a failure after it ends with response.failed rather than a stream SGLang would not send.
import { isObject } from '../../openai/chat';
import type { ResponsesRequest } from '../../openai/responses';
import type { ChatForm } from './to-chat';

/** Why this SGLang request's stream cannot be continued, or undefined. */
export function sglangNotContinuable(req: ResponsesRequest): string | undefined {
  // responses_stream_generator_non_harmony: with tools callable, a message item is held back (not streamed) until
  // a tool call or the end, and its `phase` is only known then; the continuation could not write it as SGLang does.
  const tools = Array.isArray(req.tools) ? req.tools : [];
  if (tools.length > 0 && req.tool_choice !== 'none') return 'sglang-tools';
  // reasoning.summary: the reasoning is streamed as reasoning_summary_* events (_wants_reasoning_summary).
  if (isObject(req.reasoning) && req.reasoning.summary != null) return 'reasoning-summary';
  // include reasoning.encrypted_content: the reasoning item carries SGLang's own encoding of its state.
  if (Array.isArray(req.include) && req.include.includes('reasoning.encrypted_content')) return 'encrypted-reasoning';
  return undefined;
}

/**
 * The chat form of the request where SGLang renders the same messages: _construct_input_messages coalesces every
 * system message (instructions and system input items) into one leading one and merges consecutive assistant
 * messages, which the chat path would not do; such an input is not continued.
 */
export function sglangChatForm(req: ResponsesRequest, form: ChatForm): ChatForm {
  const why = sglangNotContinuable(req);
  if (why !== undefined) return { notContinuable: why };
  if (form.notContinuable !== undefined) return form;
  const roles = form.chat.messages.map((m) => m.role);
  const systems = roles.filter((r) => r === 'system' || r === 'developer').length;
  if (systems > 1 || (systems === 1 && roles[0] !== 'system')) return { notContinuable: 'sglang-system-messages' };
  if (roles.some((r, i) => r === 'assistant' && roles[i + 1] === 'assistant')) return { notContinuable: 'sglang-assistant-turns' };
  return form;
}
