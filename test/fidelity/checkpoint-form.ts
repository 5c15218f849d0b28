// The shape of one checkpoint's chat-template record (test/fidelity/checkpoints.ts) and the two edits a `derive`
// may make. Plain data and pure functions: no I/O. Method and sources: docs/checkpoint-templates.md.

/** How close the form (`base`, or `derive(base)`) is to the checkpoint's own published template. */
export type Equivalence =
  // byte for byte the published text (as far as the cited evidence goes)
  | 'bytes'
  // the published text differs only in formatting or in paths our conversations do not take: every rendering
  // compared (transformers' render_jinja_template, the conversations named in the evidence) is identical
  | 'rendering'
  // a file at hand that llama.cpp took from the checkpoint, with no published copy found to compare it with
  | 'unverified'
  // not at hand: base is null
  | 'none';

export interface CheckpointForm {
  /** Hugging Face id. */
  checkpoint: string;
  /** Other ids sharing exactly this template (the evidence says how that was established). */
  names: readonly string[];
  /** llama.cpp models/templates file name the form comes from; null = not at hand. */
  base: string | null;
  /** base is byte-identical to the published template (as far as the evidence goes). */
  identical: boolean;
  /** The published form from base, by a minimal edit that throws if the expected fragment is not found. */
  derive?: (base: string) => string;
  /** What the form shares with the published text (see Equivalence). */
  equivalence: Equivalence;
  /** Where each fact was read: repo path@commit or URL, and what it shows. */
  evidence: readonly string[];
  /** The special tokens the template reads (bos_token / eos_token), with the checkpoint's values. */
  special: { bos_token?: string; eos_token?: string };
  /** What the generation prompt ends with, thinking on (prose). */
  generationPrompt: string;
  /** Which kwarg switches thinking, or 'none'. */
  thinkingSwitch: string;
  /** What the model writes after the generation prompt: markers and their whitespace (prose). */
  modelWrites: string;
  /** How the template renders a final assistant turn, and whether its reasoning is rendered (prose). */
  finalTurn: string;
  /**
   * For a form at hand: the conversation `[{role: 'user', content: 'Hi'}]` rendered with add_generation_prompt and
   * these kwargs (bos_token '<BOS>', eos_token '<EOS>') ends with `endsWith` (test/unit/families/checkpoint-renders.test.ts).
   */
  promptEnds?: readonly { kwargs: Record<string, unknown>; endsWith: string }[];
  /** SGLang 0.5.23 and vLLM 0.33.0 --reasoning-parser names; absent = none fits or none is documented. */
  parsers: { sglang?: string; vllm?: string };
}

function occurrences(text: string, fragment: string): number {
  let count = 0;
  for (let at = text.indexOf(fragment); at !== -1; at = text.indexOf(fragment, at + fragment.length)) count++;
  return count;
}

/** Replaces the one occurrence of `fragment`; throws when it is missing or not unique (the base file changed). */
export function replaceOnce(base: string, fragment: string, replacement: string): string {
  const count = occurrences(base, fragment);
  if (count !== 1) {
    throw new Error(`expected exactly one ${JSON.stringify(fragment)} in the base template, found ${count}`);
  }
  return base.replace(fragment, () => replacement);
}

/** Removes the one occurrence of `fragment`; throws when it is missing or not unique. */
export function removeOnce(base: string, fragment: string): string {
  return replaceOnce(base, fragment, '');
}
