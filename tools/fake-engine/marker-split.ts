// A reasoning parser that removes only a marker pair and hands out every other character, in the state the
// prompt left it (inside the reasoning when the prompt's last marker opened it): the behaviour SGLang's
// detectors and vLLM's qwen3 / deepseek_r1 parsers share (docs/families.md). Used where an engine's own parser
// is not run: vLLM's, which cannot be imported here (OUR READING of it), and templates no parser is named for.

export interface Split {
  reasoning: string;
  content: string;
}

/** Whether `prompt` leaves the model inside a reasoning block: its last marker is the opening one. */
export function promptOpens(prompt: string, markers: readonly [string, string] | undefined): boolean {
  if (!markers) return false;
  return prompt.lastIndexOf(markers[0]) > prompt.lastIndexOf(markers[1]);
}

/** One delta per token; a marker arriving whole is silent; text is held while it could still begin a marker. */
export function markerSplit(tokens: readonly string[], markers: readonly [string, string] | undefined, startInReasoning: boolean): Split[] {
  if (!markers) return tokens.map((t) => ({ reasoning: '', content: t }));
  const [open, close] = markers;
  let inReasoning = startInReasoning;
  let held = '';
  const out: Split[] = [];
  for (const t of tokens) {
    const d: Split = { reasoning: '', content: '' };
    let text = held + t;
    held = '';
    for (;;) {
      const marker = inReasoning ? close : open;
      const at = text.indexOf(marker);
      if (at < 0) break;
      if (inReasoning) d.reasoning += text.slice(0, at);
      else d.content += text.slice(0, at);
      text = text.slice(at + marker.length);
      inReasoning = !inReasoning;
    }
    const pending = partial(text, inReasoning ? close : open);
    const emit = text.slice(0, text.length - pending);
    held = text.slice(text.length - pending);
    if (inReasoning) d.reasoning += emit;
    else d.content += emit;
    out.push(d);
  }
  if (held) out[out.length - 1][inReasoning ? 'reasoning' : 'content'] += held;
  return out;
}

function partial(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) if (text.endsWith(marker.slice(0, n))) return n;
  return 0;
}
