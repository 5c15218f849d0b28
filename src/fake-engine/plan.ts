// What one chat request must produce: the token deltas after the role chunk, the finish reason and the
// prompt size, or the HTTP error a real engine (or a strict test double) would answer. A continuation
// is checked against the deterministic answer so a gateway that builds a wrong prefix fails loudly.
import { randomBytes } from 'node:crypto';
import { type AnswerSize, answerFor, promptTokenCount, withoutTrailingAssistant } from './answer';
import type { Dialect, TokenDelta } from './dialect';
import { type PrefixFamily, parsePrefix } from './prefix-parse';
import { contentText, tokenize } from './tokens';
import { toolCallFor } from './tool-call';

export interface Plan {
  continuation: boolean;
  deltas: TokenDelta[];
  finish: 'stop' | 'length' | 'tool_calls';
  promptTokens: number;
}

export type PlanResult = { ok: true; plan: Plan } | { ok: false; status: number; message: string };

export const MISMATCH_MESSAGE = "fake-engine: continuation prefix does not match this engine's answer";
export const VLLM_GENERATION_PROMPT_MESSAGE = 'continue_final_message and add_generation_prompt cannot both be true.';

const bad = (message: string): PlanResult => ({ ok: false, status: 400, message });

/**
 * Tokens still to emit after `text`, or null if `text` is not a prefix of the tokens' concatenation.
 * A cut inside a token emits the rest of that token first (tests cut on boundaries, demos may not).
 */
export function remainderAfter(tokens: string[], text: string): string[] | null {
  let at = 0;
  for (let i = 0; i < tokens.length; i++) {
    if (at === text.length) return tokens.slice(i);
    const t = tokens[i];
    if (text.startsWith(t, at)) {
      at += t.length;
      continue;
    }
    const tail = text.slice(at);
    return t.startsWith(tail) ? [t.slice(tail.length), ...tokens.slice(i + 1)] : null;
  }
  return at === text.length ? [] : null;
}

function thinkingDisabled(body: any): boolean {
  const k = body.chat_template_kwargs;
  return !!k && typeof k === 'object' && (k.thinking === false || k.enable_thinking === false);
}

/** `tools` offered and not refused; a named tool_choice picks that tool. */
function chosenTool(body: any): any | undefined {
  if (!Array.isArray(body.tools) || body.tools.length === 0 || body.tool_choice === 'none') return undefined;
  const wanted = body.tool_choice?.function?.name;
  return body.tools.find((t: any) => wanted && t?.function?.name === wanted) ?? body.tools[0];
}

function parseSize(header: string | undefined): AnswerSize | undefined | 'bad' {
  if (header === undefined) return undefined;
  const m = /^\s*(\d+)\s*,\s*(\d+)\s*$/.exec(header);
  return m ? { reasoning: Number(m[1]), content: Number(m[2]) } : 'bad';
}

function maxTokens(body: any): number | undefined {
  const v = body.max_completion_tokens ?? body.max_tokens;
  return typeof v === 'number' && v >= 0 ? Math.floor(v) : undefined;
}

export function planRequest(body: any, headers: Record<string, string>, dialect: Dialect, family: PrefixFamily): PlanResult {
  if (!body || typeof body !== 'object' || !Array.isArray(body.messages) || body.messages.length === 0) {
    return bad('fake-engine: body must be JSON with a non-empty messages array');
  }
  const messages: any[] = body.messages;
  const continuation = body.continue_final_message === true;
  if (continuation && dialect === 'vllm' && body.add_generation_prompt !== false) {
    return bad(VLLM_GENERATION_PROMPT_MESSAGE);
  }
  const size = parseSize(headers['x-fake-answer-tokens']);
  if (size === 'bad') return bad('fake-engine: x-fake-answer-tokens must be "R,C"');

  const rf = body.response_format?.type;
  const answer = answerFor(messages, size, rf === 'json_object' || rf === 'json_schema');
  const noThinking = thinkingDisabled(body);
  const tool = chosenTool(body);
  const toolCall = tool ? toolCallFor(messages, tool) : undefined;
  // With a tool call the answer has no content: any content prefix is then a mismatch.
  const fullContent = toolCall ? [] : answer.contentTokens;

  let reasoning = noThinking && !continuation ? [] : answer.reasoningTokens;
  let content = fullContent;
  let promptTokens = promptTokenCount(messages);

  if (continuation) {
    const last = messages[messages.length - 1];
    if (last?.role !== 'assistant') return bad('fake-engine: continue_final_message needs a final assistant message');
    const prefix = contentText(last.content);
    const parsed = parsePrefix(family, prefix);
    const split =
      parsed.kind === 'split' ? parsed : noThinking ? { reasoning: '', content: parsed.text } : { reasoning: parsed.text, content: '' };
    // An empty reasoning with thinking off is an original request that never thought.
    const expected = noThinking && split.reasoning === '' ? [] : answer.reasoningTokens;
    const restReasoning = remainderAfter(expected, split.reasoning);
    if (restReasoning === null) return bad(MISMATCH_MESSAGE);
    if (noThinking && restReasoning.length > 0) {
      return bad('fake-engine: thinking disabled while the reasoning is incomplete (gateway bug)');
    }
    let restContent: string[] | null = fullContent;
    if (split.content !== '') {
      restContent = restReasoning.length === 0 ? remainderAfter(fullContent, split.content) : null;
      if (restContent === null) return bad(MISMATCH_MESSAGE);
    }
    reasoning = restReasoning;
    content = restContent;
    promptTokens = promptTokenCount(withoutTrailingAssistant(messages)) + tokenize(prefix).length;
  }

  const deltas: TokenDelta[] = reasoning.map((text) => ({ kind: 'reasoning' as const, text }));
  if (toolCall) {
    // Like a real engine, every generation names its tool call anew (the call itself is deterministic).
    deltas.push({ kind: 'tool-start', id: `${toolCall.id}_${randomBytes(3).toString('hex')}`, name: toolCall.name });
    for (const text of toolCall.argumentChunks) deltas.push({ kind: 'tool-args', text });
  } else {
    for (const text of content) deltas.push({ kind: 'content', text });
  }
  const max = maxTokens(body);
  if (max !== undefined && deltas.length > max) {
    return { ok: true, plan: { continuation, deltas: deltas.slice(0, max), finish: 'length', promptTokens } };
  }
  return { ok: true, plan: { continuation, deltas, finish: toolCall ? 'tool_calls' : 'stop', promptTokens } };
}
