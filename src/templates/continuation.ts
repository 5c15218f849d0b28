// The template path: leg 2 designed from the template the engine serves, and verified against it. The prompt
// leg 2 makes the engine build must be the uninterrupted prompt, rendered as of leg 1 (its clock), followed by
// the raw text the client has; anything else is refused before leg 2 is sent.
//   SGLang: the final message carries the raw text, which SGLang appends after the generation prompt.
//   vLLM: the final message goes through the template (transformers' continue_final_message cut): the first of
//     a few shapes whose rendering is exact is sent; none exact, none is sent.
//   llama.cpp: its own continuation rendering (common/chat) is not restated here; the engine's /apply-template
//     decides between the shapes (src/templates/engine-check.ts).
// Pure: renders only, every instant an input.
import type { Delivered, Engine, Phase } from '../families/types';
import { enginePrompt, notRenderable, type RenderEngine, type SpecialTokens } from './engine-prompt';
import { type PromptDiff, promptDiff } from './prompt-diff';
import { CONTENT_SENTINEL, findMarkers, type Markers, type PromptState, promptState, REASONING_SENTINEL } from './reasoning-markers';
import { type ChatTemplate, TemplateRenderError } from './renderer';

export type Leg2Message = { readonly content: string; readonly reasoning_content?: string };

type Body = Record<string, unknown> & { messages?: unknown };

export interface TemplateInputs {
  readonly engine: Engine;
  /** The template this request renders with (src/templates/served.ts templateForRequest). */
  readonly template: ChatTemplate;
  readonly special: SpecialTokens;
  /** Leg 1's request body, as the client sent it. */
  readonly original: Body;
  readonly delivered: Delivered;
  /** When leg 1 was rendered (the request's arrival): the uninterrupted prompt is rendered as of then. */
  readonly leg1At: Date;
  /** When leg 2 will be rendered. */
  readonly now: Date;
}

export interface TemplateDesign {
  readonly kind: 'design';
  readonly phase: Phase;
  readonly state: PromptState;
  readonly markers: Markers | undefined;
  /** The raw text after the generation prompt that leg 2's prompt continues from. */
  readonly raw: string;
  /** The client's content already carried the markers (no reasoning parser): it is the raw text as it arrived. */
  readonly rawAsArrived: boolean;
  /** The final message to send; for llama.cpp the first of `candidates`. */
  readonly message: Leg2Message;
  /** llama.cpp: the shapes the engine chooses between, in order. */
  readonly candidates: readonly Leg2Message[];
  /** The uninterrupted prompt as of leg 1 (what the engine check compares with). */
  readonly prompt1: string;
  /** render: our rendering of the engine's rule matched exactly; engine: only the engine can say (llama.cpp). */
  readonly verifiedBy: 'render' | 'engine';
}

export interface TemplateRefusal {
  readonly kind: 'refused';
  /** Stable detail for the log and the interruption's reason suffix. */
  readonly detail: string;
  readonly diff?: PromptDiff;
}

const refused = (detail: string, diff?: PromptDiff): TemplateRefusal => ({ kind: 'refused', detail, diff });

/** How this engine renders (llama.cpp templates are rendered like vLLM's for the uninterrupted prompt). */
const renderEngine = (e: Engine): RenderEngine => (e === 'sglang' ? 'sglang' : 'vllm');

interface RawText {
  raw: string;
  phase: Phase;
  asArrived: boolean;
}

/**
 * The delivered parts as the template spells the model's turn: a parser that hands out every character delivers
 * the whitespace the model wrote at the markers with the parts, where the template's spelling puts it. Parts
 * that do not show it (a parser that dropped it, a model that wrote otherwise), or text the
 * model writes before the opening marker (which a parser may hand out on either side), cannot be placed.
 */
function spellingDiffers(d: Delivered, m: Markers, state: PromptState): string | undefined {
  const sp = m.spelling;
  if (!sp || !d.reasoning) return undefined;
  // A part that is still the start of the spelling (a cut inside the whitespace) agrees with it too.
  const agrees = (part: string, spelled: string) => part.startsWith(spelled) || spelled.startsWith(part);
  if (state === 'free') {
    if (sp.lead) return 'text-before-marker';
    if (!agrees(d.reasoning, sp.afterOpen)) return 'whitespace-at-marker';
  }
  if (d.content && (!d.reasoning.endsWith(sp.beforeClose) || !agrees(d.content, sp.afterClose))) return 'whitespace-at-marker';
  return undefined;
}

/**
 * The raw text behind what the parser delivered, for where the prompt left the model. `emptyBlock`: the
 * template writes markers for a turn without reasoning (Kimi-K2-Thinking's `<think></think>`), so content
 * without reasoning may or may not follow such a block.
 */
export function rebuildRaw(d: Delivered, markers: Markers | undefined, state: PromptState, emptyBlock = false): RawText | TemplateRefusal {
  const phase: Phase = d.content ? 'content' : 'reasoning';
  if (!markers) return d.reasoning ? refused('reasoning-without-template-markers') : { raw: d.content, phase, asArrived: false };
  // No reasoning parser (or SGLang's separate_reasoning false): the markers arrived in the content, as written.
  if (!d.reasoning && (d.content.includes(markers.open) || d.content.includes(markers.close)))
    return { raw: d.content, phase: 'content', asArrived: true };
  if (state === 'closed') return { raw: d.reasoning + d.content, phase, asArrived: false };
  const misspelled = spellingDiffers(d, markers, state);
  if (misspelled) return refused(misspelled);
  if (state === 'opens') {
    // Content without reasoning after a prompt that opened the block: a parser that saw the model close it at
    // once, or no parser at all (the reasoning itself, delivered as content). Which one cannot be told.
    if (!d.reasoning && d.content) return refused('raw-text-ambiguous');
    return { raw: phase === 'content' ? d.reasoning + markers.close + d.content : d.reasoning, phase, asArrived: false };
  }
  if (!d.reasoning) return emptyBlock ? refused('raw-text-ambiguous') : { raw: d.content, phase, asArrived: false };
  // The template never shows the model's reasoning after this prompt (it drops a final turn's): where its
  // markers go and whether the model writes the opening one is a guess.
  if (markers.from === 'template-text') return refused('reasoning-format-not-rendered');
  const head = markers.open + d.reasoning;
  return { raw: phase === 'content' ? head + markers.close + d.content : head, phase, asArrived: false };
}

interface Renders {
  prompt1: string;
  markers: Markers | undefined;
  state: PromptState;
  /** A turn without reasoning renders markers (an empty block) after the generation prompt. */
  emptyBlock: boolean;
  /** vLLM: the generation prompt's tail the final turn's header does not render (R1: `<think>\n`). */
  tail: string | undefined;
}

function withFinal(body: Body, message: Record<string, unknown>): Body {
  return { ...body, messages: [...(body.messages as unknown[]), { role: 'assistant', ...message }] };
}

/** A render that may refuse (a template raising for an assistant turn it does not expect): undefined then. */
function attempt(render: () => string): string | undefined {
  try {
    return render();
  } catch {
    return undefined;
  }
}

function renders(i: TemplateInputs): Renders {
  const at = { template: i.template, special: i.special, now: i.leg1At };
  const original: Body = { ...i.original, continue_final_message: false, add_generation_prompt: true };
  const prompt1 = enginePrompt(renderEngine(i.engine), original, at);
  // The markers and the generation prompt are read off plain renders (the vLLM rule: the template as such).
  const withPrompt = enginePrompt('vllm', original, at);
  const without = attempt(() => enginePrompt('vllm', { ...original, add_generation_prompt: false }, at));
  const gp = without !== undefined && withPrompt.startsWith(without) ? withPrompt.slice(without.length) : withPrompt;
  const sentinels = { content: CONTENT_SENTINEL, reasoning_content: REASONING_SENTINEL };
  const full = attempt(() => enginePrompt('vllm', withFinal({ ...original, add_generation_prompt: false }, sentinels), at));
  const turn = full?.startsWith(withPrompt) ? full.slice(withPrompt.length) : undefined;
  const markers = findMarkers(i.template.text, gp, turn);
  const plain = attempt(() =>
    enginePrompt(
      'vllm',
      withFinal({ ...original, add_generation_prompt: false }, { content: CONTENT_SENTINEL, reasoning_content: '' }),
      at,
    ),
  );
  const beforeContent = plain?.startsWith(withPrompt) ? plain.slice(withPrompt.length, plain.indexOf(CONTENT_SENTINEL)) : '';
  const emptyBlock = !!markers && (beforeContent.includes(markers.open) || beforeContent.includes(markers.close));
  let tail: string | undefined;
  if (i.engine === 'vllm') {
    const probeBody = withFinal({ ...original, add_generation_prompt: false, continue_final_message: true }, { content: CONTENT_SENTINEL });
    const probe = attempt(() => enginePrompt('vllm', probeBody, at));
    const head = probe?.endsWith(CONTENT_SENTINEL) ? probe.slice(0, -CONTENT_SENTINEL.length) : undefined;
    tail = head !== undefined && prompt1.startsWith(head) ? prompt1.slice(head.length) : undefined;
  }
  return { prompt1, markers, state: markers ? promptState(prompt1, markers) : 'free', emptyBlock, tail };
}

/** The final-message shapes to try, in order. */
function candidates(engine: Engine, raw: RawText, d: Delivered, tail: string | undefined): Leg2Message[] {
  if (engine === 'sglang') return [{ content: raw.raw }];
  if (engine === 'llamacpp')
    return raw.asArrived || !d.reasoning
      ? [{ content: raw.raw }]
      : [{ content: d.content, reasoning_content: d.reasoning }, { content: raw.raw }];
  const out: Leg2Message[] = [];
  if (tail) out.push({ content: tail + raw.raw });
  if (!raw.asArrived && d.reasoning && d.content) out.push({ content: d.content, reasoning_content: d.reasoning });
  out.push({ content: raw.raw });
  return out;
}

/**
 * llama.cpp's parser reads the generation prompt followed by the model's text (tools/server/README.md
 * `generation_prompt`: "Prepended to model output before parsing"), so after a prompt that opens the reasoning the
 * delivered reasoning starts with what the prompt wrote after the opening marker (R1's `<think>\n`: the `\n`).
 * That text is the prompt's, not generated: the raw text leg 2's prompt continues from (what is counted as what
 * leg 1 generated, and what the engine check expects after the uninterrupted prompt) starts after it. Measured
 * against a real llama-server: test/real-engine/template-path.test.ts (counted with it, every cut was one token
 * over the engine's count of the generated text).
 */
function llamacppGenerated(raw: RawText, r: Renders): string {
  if (r.state !== 'opens' || !r.markers || raw.asArrived) return raw.raw;
  const at = r.prompt1.lastIndexOf(r.markers.open);
  const tail = at < 0 ? '' : r.prompt1.slice(at + r.markers.open.length);
  return tail && raw.raw.startsWith(tail) ? raw.raw.slice(tail.length) : raw.raw;
}

/** Leg 2's final message from the served template, verified; or why there is none. */
export function designFromTemplate(i: TemplateInputs): TemplateDesign | TemplateRefusal {
  const unrenderable = notRenderable(i.original);
  if (unrenderable) return refused(unrenderable);
  let r: Renders;
  try {
    r = renders(i);
  } catch (e) {
    return refused(e instanceof TemplateRenderError ? 'template-raised' : 'template-not-rendered');
  }
  const raw = rebuildRaw(i.delivered, r.markers, r.state, r.emptyBlock);
  if ('kind' in raw) return raw;
  const expected = r.prompt1 + raw.raw;
  const shapes = candidates(i.engine, raw, i.delivered, r.tail);
  const base = { kind: 'design', phase: raw.phase, state: r.state, markers: r.markers, raw: raw.raw, rawAsArrived: raw.asArrived } as const;
  if (i.engine === 'llamacpp')
    return { ...base, raw: llamacppGenerated(raw, r), message: shapes[0], candidates: shapes, prompt1: r.prompt1, verifiedBy: 'engine' };
  let first: TemplateRefusal | undefined;
  for (const message of shapes) {
    const v = verifyLeg2(i, withFinal(i.original, message), expected);
    if (v === undefined) return { ...base, message, candidates: [message], prompt1: r.prompt1, verifiedBy: 'render' };
    if (v.detail !== 'prompt-differs') return v;
    first ??= v;
  }
  return first ?? refused('prompt-differs');
}

/**
 * The prompt the engine builds for leg 2's `body` now, against `expected` (the uninterrupted prompt as of leg 1
 * plus the raw text): undefined when exact, else why not (`date-changed` when the template read the clock and
 * leg 2 rendered as of leg 1 would have been exact).
 */
export function verifyLeg2(
  i: Pick<TemplateInputs, 'engine' | 'template' | 'special' | 'leg1At' | 'now'>,
  body: Body,
  expected: string,
): TemplateRefusal | undefined {
  const leg2: Body = { ...body, continue_final_message: true, add_generation_prompt: false };
  const render = (now: Date) => enginePrompt(renderEngine(i.engine), leg2, { template: i.template, special: i.special, now });
  const actual = attempt(() => render(i.now));
  if (actual === undefined) return refused('leg2-not-rendered');
  const diff = promptDiff(expected, actual);
  if (!diff) return undefined;
  if (i.template.readsClock && attempt(() => render(i.leg1At)) === expected) return refused('date-changed', diff);
  return refused('prompt-differs', diff);
}
