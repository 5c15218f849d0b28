// What a model writes after its generation prompt, as its chat template shows it: the template's rendering of
// the model's turn after the conversation, cut after the generation prompt and at the end of the content. Where
// the template does not render that turn after the generation prompt, the text is built, and `how` says so:
//   - the prompt opens the reasoning and the template drops a final turn's reasoning (the R1 distills, QwQ):
//     R, the close as the template spells it where a render shows it, else `\n</think>\n\n` (the R1 distills'
//     published answers: `R\n</think>\n\nC`), then C;
//   - the prompt closed the reasoning (thinking off): the template's rendering of a turn without reasoning
//     after it, else C;
//   - a model known to think here, whose template renders its last turn without the reasoning (Kimi-K2-Thinking
//     renders a conversation's last assistant turn as history): the markers around R, then C.
// Pure: the caller renders (the fidelity suite with transformers, the fake engine with our renderer). Shared by
// test/fidelity/model-output.ts and the fake engine's template mode (template-model.ts).

export interface ModelTextInputs {
  /** The uninterrupted prompt. */
  readonly prompt1: string;
  /** The conversation plus an assistant turn with both parts (reasoning_content, reasoning, thinking), no generation prompt. */
  readonly withReasoning: string | undefined;
  /** The conversation plus an assistant turn with the content only. */
  readonly plain: string | undefined;
  readonly reasoning: string;
  readonly content: string;
  readonly markers: readonly [string, string] | undefined;
  /** The caller knows the model thinks here. */
  readonly thinks?: boolean;
}

export type ModelTextHow = 'rendered-turn' | 'prompt-opens' | 'prompt-closed' | 'markers' | 'content-only';

export function modelText(i: ModelTextInputs): { text: string; how: ModelTextHow } {
  const after = (full: string | undefined) => (full?.startsWith(i.prompt1) ? full.slice(i.prompt1.length) : undefined);
  const upToContent = (turn: string | undefined) => {
    const at = turn?.indexOf(i.content) ?? -1;
    return turn !== undefined && at >= 0 ? turn.slice(0, at + i.content.length) : undefined;
  };
  const m = i.markers;
  const tail = i.prompt1.trimEnd();
  const opens = !!m && tail.endsWith(m[0]);
  if (m && tail.endsWith(m[1])) return { text: upToContent(after(i.plain)) ?? i.content, how: 'prompt-closed' };
  const rendered = after(i.withReasoning);
  const shown = upToContent(rendered);
  if (shown !== undefined && (shown.includes(i.reasoning) || (!opens && !(i.thinks && m)))) return { text: shown, how: 'rendered-turn' };
  if (m && opens) return { text: i.reasoning + (spelling(rendered, i, m[1]) ?? `\n${m[1]}\n\n`) + i.content, how: 'prompt-opens' };
  if (m) return { text: m[0] + i.reasoning + m[1] + i.content, how: 'markers' };
  return { text: shown ?? i.content, how: 'content-only' };
}

/** The whitespace around `close` where a render shows the reasoning, then `close`, then the content. */
function spelling(rendered: string | undefined, i: ModelTextInputs, close: string): string | undefined {
  const r = rendered?.indexOf(i.reasoning) ?? -1;
  const c = rendered?.indexOf(i.content) ?? -1;
  if (rendered === undefined || r < 0 || c < 0) return undefined;
  const between = rendered.slice(r + i.reasoning.length, c);
  return between.trim() === close ? between : undefined;
}
