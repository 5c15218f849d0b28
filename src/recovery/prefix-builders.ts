// The final assistant message of leg2: the text the client already has, spelled in the control tokens of
// the model family the deployment serves. Ported from the reference gateway's reconstruct.py
// (modelsphere/continuation_gateway): one builder per family, chosen by CONTINUATION_MODEL (the real model
// behind the deployment, never the request's `model` field, which is only a served alias).
//
// Both builders share one rule from the reference: while no content was delivered the crash may have hit
// mid-thought, so the think block is left OPEN and the model decides itself whether to close it. Closing
// it ourselves would cut a reasoning that was not finished, an error we cannot undo; leaving it open when
// it was in fact finished only costs the model one closing tag.

export type CaseKind = 'thinking-partial' | 'content-done' | 'tool-call-seen' | 'no-recoverable-content';

/**
 * Which state the interrupted answer was in. Same order as the reference's classify_case (strongest
 * evidence first): a tool call seen wins even when text was seen too. The reference calls the last case
 * "empty"; we name it after the skip reason it leads to.
 */
export function classifyCase(toolCallsSeen: boolean, reasoning: string, content: string): CaseKind {
  if (toolCallsSeen) return 'tool-call-seen';
  if (content) return 'content-done';
  if (reasoning) return 'thinking-partial';
  return 'no-recoverable-content';
}

export interface PrefixFamily {
  name: string;
  matches(model: string): boolean;
  build(reasoning: string, content: string): string;
}

/**
 * A family entry. `generationPromptOpensThink` carries the DESIGN rule "a model whose generation prompt
 * already opens <think> must not get a second <think>": SGLang appends the final message verbatim after
 * the generation prompt, so for such a template the prefix must start with the reasoning text itself.
 *
 * What the reference does for Qwen3 / GLM: nothing special. Its table has one entry (kimi-k3); every
 * other model, Qwen3.6 and GLM-5.3 included (both listed as verified on SGLang in its README), falls to
 * the <think>...</think> builder, which always writes the opening tag. So both entries here say false,
 * matching it. A family whose template opens <think> in the generation prompt gets its own entry with
 * the flag set, not a change to `generic`.
 */
export interface PrefixFamilyEntry extends PrefixFamily {
  readonly generationPromptOpensThink: boolean;
}

const normalize = (model: string): string => (model ?? '').trim().toLowerCase();

// Kimi-K3's own XTML control tokens (reference: XTML_OPEN / XTML_CLOSE / XTML_SEP).
const OPEN = '<|open|>';
const CLOSE = '<|close|>';
const SEP = '<|sep|>';

const kimiK3: PrefixFamilyEntry = {
  name: 'kimi-k3',
  generationPromptOpensThink: false,
  // Exact name, case-insensitive, as the reference's dict lookup on the lower-cased value: "kimi-k3.1"
  // or "Kimi-K3-Instruct" do NOT match and get the generic format, like there.
  matches: (model) => normalize(model) === 'kimi-k3',
  build(reasoning, content) {
    const think = `${OPEN}think${SEP}${reasoning}`;
    return content ? `${think}${CLOSE}think${SEP}${OPEN}response${SEP}${content}` : think;
  },
};

// The <think>...</think> format, written as a factory so a family whose generation prompt already opens
// the think block can reuse it with the flag set (no `this`: builders may be called detached).
function thinkTagFamily(name: string, generationPromptOpensThink: boolean, matches: (m: string) => boolean): PrefixFamilyEntry {
  const open = generationPromptOpensThink ? '' : '<think>';
  return {
    name,
    generationPromptOpensThink,
    matches,
    build: (reasoning, content) => (content ? `${open}${reasoning}</think>${content}` : `${open}${reasoning}`),
  };
}

// The reference's fallback for every model it has no builder for (Kimi-K2.x, Qwen3, GLM, ...).
const generic = thinkTagFamily('generic', false, () => true);

// Models without a reasoning format (CONTINUATION_MODEL=plain, or a SmolLM2 deployment): the delivered
// content is the prefix, nothing else. Measured with llama-server + SmolLM2-135M at temperature 0
// (docs/real-engine.md): the generic builder's empty "<think></think>" is plain text to such a model and
// changed its continuation at 15 of 18 cut points; the bare content reproduced the greedy answer at 18 of 18.
const plain: PrefixFamilyEntry = {
  name: 'plain',
  generationPromptOpensThink: false,
  matches: (model) => ['plain', 'no-reasoning'].includes(normalize(model)) || normalize(model).startsWith('smollm'),
  // Reasoning is never expected from such a model; if some arrives anyway it is delivered text too.
  build: (reasoning, content) => reasoning + content,
};

/** Searched in order; `generic` is last and matches everything, so familyFor never fails. */
export const PREFIX_FAMILIES: readonly PrefixFamilyEntry[] = Object.freeze([kimiK3, plain, generic]);

export function familyFor(continuationModel: string): PrefixFamilyEntry {
  return PREFIX_FAMILIES.find((f) => f.matches(continuationModel)) ?? generic;
}

/**
 * Reference needs_thinking_disabled: once content has started the thinking phase is over, so leg2 asks
 * the template to keep thinking off; while only reasoning was seen the model must be free to go on
 * thinking. Independent of the family.
 */
export function needsThinkingDisabled(content: string): boolean {
  return content.length > 0;
}
