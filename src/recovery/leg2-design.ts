// What leg 2's final message is, where it comes from, and what verified it. Three sources, chosen per deployment
// (chooseSource):
//   - the family table (src/families/table/): a checkpoint whose own template an entry was proven against,
//     named by CONTINUATION_MODEL; verified again on every continuation when the template is at hand;
//   - the template path (src/templates/continuation.ts): CHAT_TEMPLATE's template, rendered here, for any
//     model; every leg 2 verified before it is sent;
//   - the reference gateway's generic `<think>` guess, for a name no entry knows and no template (warned at
//     start; every such leg 2 is labelled unverified). CONTINUATION_UNVERIFIED=refuse ends a stream that has
//     shown reasoning explicitly instead (continuation-unverified): the guess is wrong for any checkpoint whose
//     generation prompt opens the reasoning (DeepSeek-R1's `<think>\n`), and nothing here can tell.
// Pure: the renders are functions of their inputs, the clock included.
import { rawText } from '../families/raw-text';
import { selectFamily } from '../families/select';
import { type Delivered, type Engine, isUnsupported, type Leg2Shape, type ModelFamily, type Phase } from '../families/types';
import { isObject, type JsonObject } from '../openai/chat';
import { designFromTemplate, type Leg2Message, verifyLeg2 } from '../templates/continuation';
import { enginePrompt } from '../templates/engine-prompt';
import type { PromptDiff } from '../templates/prompt-diff';
import { type ServedTemplate, templateForRequest } from '../templates/served';

export interface ContinuationTarget {
  readonly continuationModel: string;
  readonly engine: Engine;
  /** CHAT_TEMPLATE's template, when one is served. */
  readonly served?: ServedTemplate;
  /** When leg 1 was sent and leg 2 will be: a template reading the clock renders leg 1 as of then. */
  readonly clock?: { readonly leg1At: Date; readonly now: Date };
  /** CONTINUATION_UNVERIFIED: the generic guess sent (allow, the default) or refused once reasoning was shown. */
  readonly unverified?: 'allow' | 'refuse';
}

export type DesignSource = 'table' | 'template' | 'generic';

export interface Leg2Design {
  source: DesignSource;
  /** The table family's name, or `template` / `generic`. */
  familyName: string;
  family?: ModelFamily;
  phase: Phase;
  thinking: boolean;
  shape: Leg2Shape;
  /** The raw text the engine's prompt continues from (what a text /tokenize counts as the prefix). */
  raw: string;
  /** The client's content carried the markers as written (no reasoning parser): sent back as it arrived. */
  rawAsArrived: boolean;
  /** What verified leg 2's prompt before it is sent: our render of the served template, only the engine (llama.cpp), or nothing. */
  verifiedBy: 'template' | 'engine' | null;
  /** The uninterrupted prompt as of leg 1, where the template was rendered (the engine check compares with it). */
  prompt1?: string;
  /** llama.cpp on the template path: the final-message shapes the engine chooses between. */
  candidates?: readonly Leg2Message[];
  /** The template reads the clock (a table family's, or the served one): a date change matters. */
  readsClock: boolean;
}

export type Designed =
  | { design: Leg2Design }
  | {
      unsupported: string;
      reason: 'continuation-unsupported' | 'continuation-unverified';
      design: Partial<Leg2Design>;
      diff?: PromptDiff;
    };

/** Which source serves this deployment's continuations (see the header). */
export function chooseSource(target: Pick<ContinuationTarget, 'continuationModel' | 'served'>): {
  source: DesignSource;
  family: ModelFamily;
  verify: boolean;
} {
  const named = selectFamily(target.continuationModel);
  const proven = named.known && named.family.name !== 'generic';
  if (target.served) {
    const sha = target.served.sha256;
    if (proven && sha !== undefined && named.family.provenTemplates.includes(sha))
      return { source: 'table', family: named.family, verify: true };
    return { source: 'template', family: named.family, verify: true };
  }
  return { source: proven ? 'table' : 'generic', family: named.family, verify: false };
}

const withFinal = (original: JsonObject, message: Leg2Message): JsonObject => ({
  ...original,
  messages: [...(Array.isArray(original.messages) ? original.messages : []), { role: 'assistant', ...message }],
});

function fromTemplate(original: JsonObject, d: Delivered, target: ContinuationTarget, served: ServedTemplate): Designed {
  const template = templateForRequest(served, original);
  const partial = { source: 'template' as const, familyName: 'template' };
  if (!template) return { unsupported: 'no-template-for-request', reason: 'continuation-unverified', design: partial };
  const now = target.clock?.now ?? new Date();
  const t = designFromTemplate({
    engine: target.engine,
    template,
    special: served.special,
    original,
    delivered: d,
    leg1At: target.clock?.leg1At ?? now,
    now,
  });
  if (t.kind === 'refused') return { unsupported: t.detail, reason: 'continuation-unverified', design: partial, diff: t.diff };
  return {
    design: {
      ...partial,
      phase: t.phase,
      thinking: t.state !== 'closed',
      shape: { message: t.message, split: 'engine' },
      raw: t.raw,
      rawAsArrived: t.rawAsArrived,
      verifiedBy: t.verifiedBy === 'render' ? 'template' : 'engine',
      prompt1: t.prompt1,
      candidates: t.candidates,
      readsClock: template.readsClock,
    },
  };
}

/**
 * A table family's markers arrived in the content (no reasoning parser, or SGLang's separate_reasoning false):
 * that content is the raw text. A content that is still the start of the opening marker counts too.
 */
function markersInContent(family: ModelFamily, d: Delivered): boolean {
  const f = family.reasoning;
  if (!f || d.reasoning || !d.content) return false;
  return d.content.includes(f.open) || d.content.includes(f.close) || f.open.startsWith(d.content);
}

/**
 * Content without reasoning, and no marker in it, while thinking is on: a parser that saw the model write an
 * empty block (or close the one the prompt opened) at once, or no parser at all (then, after a prompt that opens
 * the block, that content is the reasoning itself). The raw text cannot be told.
 */
function rawTextAmbiguous(family: ModelFamily, d: Delivered, thinking: boolean): boolean {
  return !!family.reasoning && thinking && !d.reasoning && d.content.length > 0;
}

function fromTable(original: JsonObject, d: Delivered, target: ContinuationTarget, family: ModelFamily, source: DesignSource): Designed {
  const phase: Phase = d.content ? 'content' : 'reasoning';
  const thinking = family.thinking(
    {
      chatTemplateKwargs: isObject(original.chat_template_kwargs) ? original.chat_template_kwargs : {},
      reasoningEffort: original.reasoning_effort,
    },
    target.engine,
  );
  const partial = { source, familyName: family.name, family, phase, thinking, readsClock: family.readsClock === true };
  if (markersInContent(family, d)) {
    // Sent back as it arrived; only SGLang appends it verbatim whatever the template, the others need the
    // served template to show their rendering of it is exact.
    if (target.engine !== 'sglang' && !target.served)
      return { unsupported: 'raw-text-needs-template', reason: 'continuation-unsupported', design: partial };
    const design: Leg2Design = {
      ...partial,
      shape: { message: { content: d.content }, split: 'engine' },
      raw: d.content,
      rawAsArrived: true,
      verifiedBy: null,
    };
    return verifyTable(original, design, target);
  }
  // The generic guess keeps the reference's reading (an empty block); a table family's raw text is known or refused.
  if (source === 'table' && rawTextAmbiguous(family, d, thinking))
    return { unsupported: 'raw-text-ambiguous', reason: 'continuation-unsupported', design: partial };
  const messages = Array.isArray(original.messages) ? original.messages : [];
  const shape = family.engines[target.engine].plan({ delivered: d, phase, thinking, messages });
  if (isUnsupported(shape)) return { unsupported: shape.unsupported, reason: 'continuation-unsupported', design: partial };
  const rebuilt = rawText(family.reasoning, d, phase, thinking);
  if (typeof rebuilt !== 'string') return { unsupported: rebuilt.unsupported, reason: 'continuation-unsupported', design: partial };
  const raw = target.engine === 'llamacpp' ? llamacppGenerated(family.reasoning, rebuilt, thinking, d) : rebuilt;
  return verifyTable(original, { ...partial, shape, raw, rawAsArrived: false, verifiedBy: null }, target);
}

/**
 * llama.cpp's parser reads the generation prompt before the model's text, so after a prompt that opens the
 * reasoning the delivered reasoning starts with what the prompt wrote after the marker (R1's `<think>\n`: the
 * `\n`, the format's afterOpen). That is the prompt's, not generated: not counted as leg 1's, not expected after
 * the uninterrupted prompt (src/templates/continuation.ts llamacppGenerated, the same rule on the template path).
 */
function llamacppGenerated(format: ModelFamily['reasoning'], raw: string, thinking: boolean, d: Delivered): string {
  const tail = format?.promptOpens && thinking && d.reasoning ? (format.spelling?.afterOpen ?? '') : '';
  return tail && raw.startsWith(tail) ? raw.slice(tail.length) : raw;
}

/** The table's leg 2 checked against the served template (SGLang, vLLM), when there is one. */
function verifyTable(original: JsonObject, design: Leg2Design, target: ContinuationTarget): Designed {
  const served = target.served;
  const template = served ? templateForRequest(served, original) : undefined;
  if (!served || !template || target.engine === 'llamacpp') return { design };
  const now = target.clock?.now ?? new Date();
  const leg1At = target.clock?.leg1At ?? now;
  const special = served.special;
  let prompt1: string;
  try {
    prompt1 = enginePrompt(target.engine, { ...original, continue_final_message: false }, { template, special, now: leg1At });
  } catch {
    return { unsupported: 'template-raised', reason: 'continuation-unverified', design };
  }
  const body = { ...withFinal(original, design.shape.message), ...design.shape.fields };
  const refusal = verifyLeg2({ engine: target.engine, template, special, leg1At, now }, body, prompt1 + design.raw);
  if (refusal) return { unsupported: refusal.detail, reason: 'continuation-unverified', design, diff: refusal.diff };
  return { design: { ...design, verifiedBy: 'template', prompt1, readsClock: template.readsClock } };
}

/** The leg 2 for this cut, or why there is none. Pure; also used to count the prefix before planning. */
export function designLeg2(
  original: JsonObject,
  state: { readonly reasoning: string; readonly content: string; readonly toolCallsSeen?: boolean },
  target: ContinuationTarget,
): Designed {
  const d: Delivered = { reasoning: state.reasoning, content: state.content };
  const choice = chooseSource(target);
  if (choice.source === 'template' && target.served) return fromTemplate(original, d, target, target.served);
  if (choice.source === 'generic' && target.unverified === 'refuse' && d.reasoning !== '')
    return {
      unsupported: 'unverified-guess-refused',
      reason: 'continuation-unverified',
      design: { source: 'generic', familyName: 'generic' },
    };
  return fromTable(original, d, target, choice.family, choice.source);
}
