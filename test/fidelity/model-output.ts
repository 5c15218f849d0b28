// What a model writes after its generation prompt, taken from its chat template rather than from our own
// constants: the template's rendering of an assistant turn (reasoning and content) after the conversation,
// cut after the generation prompt and at the end of the content. Where the template does not render that turn
// after the generation prompt, the text is built and the test says how:
//   - the prompt opens the reasoning and the template drops a final turn's reasoning (the DeepSeek-R1 distills,
//     QwQ): R, the template's own spelling of the close where another render shows it, else `\n</think>\n\n`
//     (the R1 distills' published answers: `R\n</think>\n\nC`), then C;
//   - the prompt closed the reasoning (thinking off): the template's rendering of a turn without reasoning
//     after it, else C;
//   - a model the caller knows thinks here, whose template renders its last turn without the reasoning
//     (Kimi-K2-Thinking renders a conversation's last assistant turn as history): the markers around R, then C;
//   - otherwise the template's markers around R, then C.
// The assistant turn carries the reasoning as reasoning_content, reasoning and thinking (gpt-oss's template
// renders the analysis channel from `thinking` for a final turn, as in training).
import { PARSER_MARKERS } from '../../src/templates/reasoning-markers';
import type { Harness } from './harness-client';

/** Word tokens with their leading space, a CJK and an emoji token (cuts right after a multi-byte character). */
export const REASONING_TOKENS = ['Let', ' me', ' think', ':', ' 你好', ' 🙂', ' step', ' two', '.'];
export const CONTENT_TOKENS = ['The', ' answer', ' is', ' 42', ' —', ' 世界', ' ✨', ' done', '.'];
export const REASONING = REASONING_TOKENS.join('');
export const CONTENT = CONTENT_TOKENS.join('');

export interface ModelOutput {
  /** The raw text after the generation prompt, up to the end of the content. */
  readonly text: string;
  /** How it was obtained (for the test's summary). */
  readonly how: 'rendered-turn' | 'prompt-opens' | 'prompt-closed' | 'markers' | 'content-only';
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
  const after = async (final: Record<string, unknown>) => {
    const turn = await h.call({
      op: 'render',
      template: job.template,
      messages: [...job.messages, { role: 'assistant', ...final }],
      kwargs: job.kwargs,
      special: job.special,
      nowMs: job.nowMs,
    });
    return turn.ok && turn.text.startsWith(prompt1) ? (turn.text.slice(prompt1.length) as string) : undefined;
  };
  const rendered = await after({ content: CONTENT, reasoning_content: REASONING, reasoning: REASONING, thinking: REASONING });
  const end = rendered?.indexOf(CONTENT) ?? -1;
  const tail = prompt1.trimEnd();
  const opens = markers && tail.endsWith(markers[0]);
  const closed = markers && tail.endsWith(markers[1]);
  if (closed) {
    const plain = await after({ content: CONTENT });
    const at = plain?.indexOf(CONTENT) ?? -1;
    return { text: plain !== undefined && at >= 0 ? plain.slice(0, at + CONTENT.length) : CONTENT, how: 'prompt-closed', markers };
  }
  const withReasoning = rendered?.includes(REASONING) === true;
  if (rendered !== undefined && end >= 0 && (withReasoning || (!opens && !(o.thinks && markers))))
    return { text: rendered.slice(0, end + CONTENT.length), how: 'rendered-turn', markers };
  if (markers && opens) {
    // The close as the template spells it after a reasoning it renders (a history turn), else R1's.
    const spelled = rendered !== undefined ? spelling(rendered, markers[1]) : undefined;
    return { text: REASONING + (spelled ?? `\n${markers[1]}\n\n`) + CONTENT, how: 'prompt-opens', markers };
  }
  if (markers) return { text: markers[0] + REASONING + markers[1] + CONTENT, how: 'markers', markers };
  return { text: rendered !== undefined && end >= 0 ? rendered.slice(0, end + CONTENT.length) : CONTENT, how: 'content-only' };
}

/** The whitespace around `close` where a render shows `REASONING` then `close` then `CONTENT`. */
function spelling(rendered: string, close: string): string | undefined {
  const r = rendered.indexOf(REASONING);
  const c = rendered.indexOf(CONTENT);
  if (r < 0 || c < 0) return undefined;
  const between = rendered.slice(r + REASONING.length, c);
  return between.trim() === close ? between : undefined;
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
