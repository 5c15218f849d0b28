// The raw text a model generated after its generation prompt, rebuilt from what the engine's reasoning parser
// delivered. Exact where the parser removed only the markers (SGLang's detectors and vLLM's qwen3 / deepseek_r1
// parsers hand out every other character; docs/families.md), which is the case every rule using this assumes.
import type { Delivered, Phase, ReasoningFormat, Unsupported } from './types';

export function phaseOf(d: Delivered): Phase {
  return d.content.length > 0 ? 'content' : 'reasoning';
}

/**
 * `thinking` off: the generation prompt already closed (or never opened) the reasoning, so the model's text is
 * the delivered text itself (a parser that forces reasoning, like DeepSeek-R1's, hands it out as reasoning).
 */
export function rawText(format: ReasoningFormat | null, d: Delivered, phase: Phase, thinking: boolean): string | Unsupported {
  if (!format || !thinking) return d.reasoning + d.content;
  let head = '';
  let reasoning = d.reasoning;
  if (!format.promptOpens) {
    const lead = format.lead ?? '';
    if (lead) {
      // The model writes `lead` before the opening marker and the parser, already in reasoning, hands it out.
      if (!reasoning.startsWith(lead)) return { unsupported: 'reasoning-not-in-family-format' };
      reasoning = reasoning.slice(lead.length);
    }
    head = lead + format.open;
  }
  return phase === 'content' ? head + reasoning + format.close + d.content : head + reasoning;
}
