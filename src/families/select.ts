// Which family CONTINUATION_MODEL names. Users write model names as their registry spells them
// (`Qwen/Qwen3-32B`, `deepseek-ai/DeepSeek-V3.2`, `qwen3.6`): the organisation is dropped, case ignored, and
// the rest matched against each family's pattern in table order. A pattern names the checkpoints whose template
// its entry was proven against, and accepts what a quantised copy appends to their names (`-AWQ`, `-FP8`, `-GGUF`,
// `-Q4_K_M.gguf`: the same template); a sibling with a template of its own (DeepSeek-R1 and R1-0528 next to the
// R1 distills, QwQ-32B-Preview, GLM-4.5V, Qwen3-Coder-Next) is not matched. An Ollama tag (`deepseek-r1:8b`, a
// distill under R1's name) is matched by nothing. A name no family knows gets the reference gateway's
// `<think>…</think>` format, `generic`, which no template test backs: the sidecar warns at start, each such leg 2
// is labelled unverified, and CONTINUATION_UNVERIFIED=refuse ends its reasoning streams explicitly instead.
import { sglangAppend } from './engine-rules';
import { FAMILIES } from './table';
import type { ModelFamily, ReasoningFormat } from './types';

const GENERIC_FORMAT: ReasoningFormat = { open: '<think>', close: '</think>', promptOpens: false };

/** The reference gateway's fallback (reconstruct.py): `<think>R</think>C` on every engine, verified on none. */
export const GENERIC: ModelFamily = {
  name: 'generic',
  match: /^generic$/,
  examples: ['generic'],
  template: '',
  provenTemplates: [],
  proof: 'none: the reference gateway\u2019s guess, warned at start',
  reasoning: GENERIC_FORMAT,
  thinking: () => true,
  engines: {
    sglang: { ...sglangAppend(GENERIC_FORMAT), note: 'the reference gateway\u2019s <think> format, not verified against any template' },
    vllm: { ...sglangAppend(GENERIC_FORMAT), note: 'the reference gateway\u2019s <think> format, not verified against any template' },
    llamacpp: { ...sglangAppend(GENERIC_FORMAT), note: 'the reference gateway\u2019s <think> format, not verified against any template' },
  },
};

export function normalizeModelName(model: string): string {
  const lower = (model ?? '').trim().toLowerCase();
  return lower.slice(lower.lastIndexOf('/') + 1);
}

export interface FamilyChoice {
  family: ModelFamily;
  /** false: no family knows the name, `generic` is a guess (warned at start). */
  known: boolean;
}

export function selectFamily(continuationModel: string | undefined): FamilyChoice {
  const name = normalizeModelName(continuationModel ?? '');
  if (GENERIC.match.test(name)) return { family: GENERIC, known: true };
  // A family's own name selects it too (`deepseek-r1-distill`, `qwen3-thinking-2507`): the README table's column.
  const family = FAMILIES.find((f) => f.name === name) ?? FAMILIES.find((f) => f.match.test(name));
  return family ? { family, known: true } : { family: GENERIC, known: false };
}

/** For the startup warning: every family with an example of the names it accepts. */
export function knownFamilies(): string {
  return [...FAMILIES.map((f) => `${f.name} (${f.examples[0]})`), 'generic'].join(', ');
}
