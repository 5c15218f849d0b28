// What one chat request must produce: the token deltas after the role chunk, the finish reason and the
// prompt size, or the HTTP error a real engine (or a strict test double) would answer. A continuation
// is checked against the deterministic answer so a gateway that builds a wrong prefix fails loudly.
import { randomBytes } from 'node:crypto';
import { selectFamily } from '../../src/families/select';
import type { ModelFamily } from '../../src/families/types';
import { type AnswerSize, answerFor, promptTokenCount, withoutTrailingAssistant } from './answer';
import type { Dialect, TokenDelta } from './dialect';
import { type Delta, rawTokens, sglangSplit, vllmSplit } from './family-speech';
import { parsePrefix } from './prefix-parse';
import { contentText, tokenize } from './tokens';
import { toolCallFor } from './tool-call';

export interface Plan {
  continuation: boolean;
  deltas: TokenDelta[];
  /** usage.reasoning_tokens when the deltas do not show it (raw output: counted as the engine's scheduler would). */
  reasoningTokens?: number;
  finish: 'stop' | 'length' | 'tool_calls';
  promptTokens: number;
  /**
   * A family's answer: the raw token behind each delta (markers included), whose ids vLLM's return_token_ids
   * carries. Set for a first leg without a tool call; unset, a delta's own text is its token.
   */
  raw?: string[];
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

export function parseSize(header: string | undefined): AnswerSize | undefined | 'bad' {
  if (header === undefined) return undefined;
  const m = /^\s*(\d+)\s*,\s*(\d+)\s*$/.exec(header);
  return m ? { reasoning: Number(m[1]), content: Number(m[2]) } : 'bad';
}

function maxTokens(body: any): number | undefined {
  const v = body.max_completion_tokens ?? body.max_tokens;
  return typeof v === 'number' && v >= 0 ? Math.floor(v) : undefined;
}

/** A parser's delta for one raw token, as the fake engine streams it. */
function tokenDelta(d: Delta): TokenDelta {
  if (d.reasoning && d.content) return { kind: 'split', reasoning: d.reasoning, content: d.content };
  if (d.reasoning) return { kind: 'reasoning', text: d.reasoning };
  if (d.content) return { kind: 'content', text: d.content };
  return { kind: 'silent' };
}

/**
 * Where a continuation request resumes the answer: the index of the first raw token still to generate (and the
 * rest of a token the cut fell inside), or null when the request does not continue this answer.
 * SGLang: the final message is the raw text after the generation prompt (serving_chat.py L2229-2235).
 * vLLM: the final message went through the template, which this fake does not run; it finds the point where
 * the parts it was given (reasoning_content or reasoning, content; a content that still carries the opening
 * marker the generation prompt wrote, as for DeepSeek-R1) match what it streamed, whitespace at the ends aside.
 */
function resumeAt(
  family: ModelFamily,
  dialect: Dialect,
  raw: string[],
  split: Delta[],
  last: any,
): { index: number; partial?: string } | null {
  if (dialect === 'sglang') {
    const rest = remainderAfter(raw, contentText(last.content));
    if (rest === null) return null;
    const index = raw.length - rest.length;
    return rest.length > 0 && rest[0] !== raw[index] ? { index: index + 1, partial: rest[0] } : { index };
  }
  let reasoning =
    typeof last.reasoning_content === 'string' ? last.reasoning_content : typeof last.reasoning === 'string' ? last.reasoning : '';
  let content = contentText(last.content);
  const f = family.reasoning;
  const opening = f ? f.open + (f.spelling?.afterOpen ?? '') : '';
  if (!reasoning && f?.promptOpens && opening && content.startsWith(opening)) {
    reasoning = content.slice(opening.length);
    content = '';
  }
  const sofar: Delta[] = [{ reasoning: '', content: '' }];
  for (const d of split)
    sofar.push({ reasoning: sofar[sofar.length - 1].reasoning + d.reasoning, content: sofar[sofar.length - 1].content + d.content });
  const exact = sofar.findIndex((s) => s.reasoning === reasoning && s.content === content);
  if (exact >= 0) return { index: exact };
  // A template that trimmed the parts: the latest point they match, whitespace at the ends aside.
  for (let k = sofar.length - 1; k >= 0; k--) {
    const s = sofar[k];
    if (s.reasoning.trimEnd() === reasoning.trimEnd() && s.content.trim() === content.trim() && (content !== '' || s.content === ''))
      return { index: k };
  }
  return null;
}

/**
 * `x-fake-on-mismatch: restart`: a continuation that does not continue this answer is answered from its first
 * token, as a real model given a prompt it does not read as "go on" tends to start over (what the gateway's
 * restart guard exists for); otherwise it is a 400.
 */
export function planRequest(body: any, headers: Record<string, string>, dialect: Dialect, familyName: string): PlanResult {
  const planned = planOne(body, headers, dialect, familyName);
  if (planned.ok || planned.message !== MISMATCH_MESSAGE || headers['x-fake-on-mismatch'] !== 'restart') return planned;
  const { continue_final_message: _c, ...fresh } = body;
  return planOne({ ...fresh, messages: withoutTrailingAssistant(body.messages) }, headers, dialect, familyName);
}

function planOne(body: any, headers: Record<string, string>, dialect: Dialect, familyName: string): PlanResult {
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
  const family = selectFamily(familyName).family;
  if (family.name !== 'generic') return planFamilyAnswer(body, dialect, family, answer, continuation);
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
    const parsed = parsePrefix('generic', prefix);
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

/**
 * A family's answer (tools/fake-engine/family-speech.ts): its raw tokens, markers included and counted, split by
 * the dialect's reasoning parser; a continuation resumes where the request says the answer was cut.
 */
function planFamilyAnswer(
  body: any,
  dialect: Dialect,
  family: ModelFamily,
  answer: ReturnType<typeof answerFor>,
  continuation: boolean,
): PlanResult {
  const messages: any[] = body.messages;
  const kwargs = body.chat_template_kwargs && typeof body.chat_template_kwargs === 'object' ? body.chat_template_kwargs : {};
  const thinking = family.thinking({ chatTemplateKwargs: kwargs, reasoningEffort: body.reasoning_effort }, dialect);
  const tool = chosenTool(body);
  const toolCall = tool ? toolCallFor(messages, tool) : undefined;
  const raw = rawTokens(family, thinking, answer.reasoningTokens, toolCall ? [] : answer.contentTokens).flatMap((t) => tokenize(t));
  const split = dialect === 'sglang' ? sglangSplit(family, raw, thinking) : vllmSplit(family, raw, thinking);
  let deltas = split.map(tokenDelta);
  let promptTokens = promptTokenCount(messages);
  // The tokens generated inside the reasoning, whatever the client saw of them (SGLang counts them in its
  // scheduler, separate_reasoning or not: serving_chat.py L2504).
  let reasoningTokens = split.filter((d) => d.thinking).length;
  if (continuation) {
    const last = messages[messages.length - 1];
    if (last?.role !== 'assistant') return bad('fake-engine: continue_final_message needs a final assistant message');
    const at = resumeAt(family, dialect, raw, split, last);
    if (at === null) return bad(MISMATCH_MESSAGE);
    // separate_reasoning false (SGLang, gpt-oss leg 2): the raw text, markers and all, as content.
    const rawOut = dialect === 'sglang' && body.separate_reasoning === false;
    const rest = rawOut ? raw.slice(at.index).map((text): TokenDelta => ({ kind: 'content', text })) : deltas.slice(at.index);
    if (at.partial !== undefined)
      rest.unshift(rawOut ? { kind: 'content', text: at.partial } : tokenDelta(sglangSplit(family, [at.partial], false)[0]));
    reasoningTokens = split.slice(at.index).filter((d) => d.thinking).length;
    deltas = rest;
    promptTokens = promptTokenCount(withoutTrailingAssistant(messages)) + tokenize(contentText(last.content)).length;
  }
  if (toolCall) {
    deltas.push({ kind: 'tool-start', id: `${toolCall.id}_${randomBytes(3).toString('hex')}`, name: toolCall.name });
    for (const text of toolCall.argumentChunks) deltas.push({ kind: 'tool-args', text });
  }
  // One delta per raw token (splitTokens), so the raw tokens line up with the deltas of a first leg.
  const rawOf = (n: number) => (continuation || toolCall ? {} : { raw: raw.slice(0, n) });
  const max = maxTokens(body);
  if (max !== undefined && deltas.length > max) {
    return {
      ok: true,
      plan: { continuation, deltas: deltas.slice(0, max), finish: 'length', promptTokens, reasoningTokens, ...rawOf(max) },
    };
  }
  return {
    ok: true,
    plan: { continuation, deltas, finish: toolCall ? 'tool_calls' : 'stop', promptTokens, reasoningTokens, ...rawOf(deltas.length) },
  };
}

/**
 * The usage's reasoning_tokens: every token before the first content one, the reasoning markers included (they
 * are generated tokens of the reasoning), as an engine counting the thinking segment would.
 */
export function reasoningTokenCount(deltas: readonly TokenDelta[]): number {
  const firstOther = deltas.findIndex((d) => d.kind !== 'reasoning' && d.kind !== 'silent');
  return firstOther < 0 ? deltas.length : firstOther;
}
