// What a model writes after its generation prompt, from its chat template (tools/fake-engine/model-text.ts says
// how), rendered here by transformers (test/fidelity/harness.py). The assistant turn carries the reasoning as
// reasoning_content, reasoning and thinking (gpt-oss's template renders the analysis channel from `thinking` for
// a final turn, as in training).

import { PARSER_MARKERS } from '../../src/templates/reasoning-markers';
import { type ModelTextHow, modelText } from '../../tools/fake-engine/model-text';
import type { Harness } from './harness-client';

/** Word tokens with their leading space, a CJK and an emoji token (cuts right after a multi-byte character). */
export const REASONING_TOKENS = ['Let', ' me', ' think', ':', ' 你好', ' 🙂', ' step', ' two', '.'];
export const CONTENT_TOKENS = ['The', ' answer', ' is', ' 42', ' —', ' 世界', ' ✨', ' done', '.'];
export const REASONING = REASONING_TOKENS.join('');
export const CONTENT = CONTENT_TOKENS.join('');

export interface ModelOutput {
  /** The raw text after the generation prompt, up to the end of the content. */
  readonly text: string;
  readonly how: ModelTextHow;
  /** The marker pair the text uses, if any. */
  readonly markers?: readonly [string, string];
}

export function templateMarkers(template: string): readonly [string, string] | undefined {
  return PARSER_MARKERS.find(([o, c]) => template.includes(o) && template.includes(c));
}

export async function modelOutput(
  h: Harness,
  job: { template: string; messages: object[]; kwargs: Record<string, unknown>; special: Record<string, string>; nowMs?: number },
  prompt1: string,
  o: { markers?: readonly [string, string]; thinks?: boolean } = {},
): Promise<ModelOutput> {
  const markers = o.markers ?? templateMarkers(job.template);
  const render = async (final: Record<string, unknown>) => {
    const r = await h.call({
      op: 'render',
      template: job.template,
      messages: [...job.messages, { role: 'assistant', ...final }],
      kwargs: job.kwargs,
      special: job.special,
      nowMs: job.nowMs,
    });
    return r.ok ? (r.text as string) : undefined;
  };
  const withReasoning = await render({ content: CONTENT, reasoning_content: REASONING, reasoning: REASONING, thinking: REASONING });
  const out = modelText({
    prompt1: await renderedPrompt(h, job, prompt1, withReasoning),
    withReasoning,
    plain: await render({ content: CONTENT }),
    reasoning: REASONING,
    content: CONTENT,
    markers,
    thinks: o.thinks,
  });
  return { ...out, markers };
}

/**
 * The prompt the turn renders after: the engine's, or, where the engine's renders the conversation otherwise than
 * this harness does (vLLM hands a template that iterates content parts the messages as parts: Gemma 4's renders a
 * system part as `text | trim + ' '`, a string as `content | trim`), this harness's own rendering of it, so that the
 * model's turn is cut at the generation prompt either way.
 */
async function renderedPrompt(
  h: Harness,
  job: { template: string; messages: object[]; kwargs: Record<string, unknown>; special: Record<string, string>; nowMs?: number },
  prompt1: string,
  withReasoning: string | undefined,
): Promise<string> {
  if (withReasoning === undefined || withReasoning.startsWith(prompt1)) return prompt1;
  const r = await h.call({ op: 'render', ...job, add_generation_prompt: true });
  return r.ok && withReasoning.startsWith(r.text as string) ? (r.text as string) : prompt1;
}

/** The raw text as a model's tokens: markers and special tokens whole, the rest as the word tokens above. */
export function rawTokens(text: string, markers: readonly string[]): string[] {
  const specials = [...markers, ...PARSER_MARKERS.flat()].filter((m, i, a) => m && a.indexOf(m) === i);
  specials.sort((a, b) => b.length - a.length);
  const words = [...REASONING_TOKENS, ...CONTENT_TOKENS].sort((a, b) => b.length - a.length);
  const out: string[] = [];
  let i = 0;
  let plain = '';
  const flush = () => {
    if (plain) out.push(plain);
    plain = '';
  };
  while (i < text.length) {
    const special = specials.find((m) => text.startsWith(m, i)) ?? /^<\|[^|<>]{1,40}\|>/.exec(text.slice(i))?.[0];
    const word = special ? undefined : words.find((w) => text.startsWith(w, i));
    const ws = special || word ? undefined : /^\s+/.exec(text.slice(i))?.[0];
    const tok = special ?? word ?? ws;
    if (tok) {
      flush();
      out.push(tok);
      i += tok.length;
    } else {
      plain += text[i];
      i += 1;
    }
  }
  flush();
  return out;
}
