// The fake engine serving a real chat template (FakeEngineOptions.chatTemplate): OUR READING of an engine, for
// end-to-end tests of the template path. It renders each request by the engine's rule with the sidecar's own
// renderer (src/templates/engine-prompt.ts, which test/unit/templates/engine-prompt.test.ts holds equal to the
// engines' code), writes the answer the template shows the model writing (model-text.ts), and splits it as a
// reasoning parser that removes only the markers would (marker-split.ts), or not at all (`parser: 'none'`). A
// continuation is answered only when its prompt is exactly the uninterrupted prompt plus a prefix of that
// answer; anything else is the mismatch a model would drift on (a 400 here, so a test cannot miss it).
import { enginePrompt, type SpecialTokens } from '../../src/templates/engine-prompt';
import { PARSER_MARKERS } from '../../src/templates/reasoning-markers';
import { ChatTemplate } from '../../src/templates/renderer';
import { type Answer, withoutTrailingAssistant } from './answer';
import type { Dialect, TokenDelta } from './dialect';
import { markerSplit, promptOpens } from './marker-split';
import { modelText } from './model-text';
import { MISMATCH_MESSAGE, type PlanResult, remainderAfter, VLLM_GENERATION_PROMPT_MESSAGE } from './plan';
import { tokenize } from './tokens';

export interface TemplateModelOptions {
  /** The template's text. */
  readonly text: string;
  readonly special?: SpecialTokens;
  /** `markers`: a reasoning parser for the template's marker pair; `none`: no parser, the raw text as content. */
  readonly parser: 'markers' | 'none';
}

export interface TemplateModel {
  readonly template: ChatTemplate;
  readonly special: SpecialTokens;
  readonly parser: 'markers' | 'none';
  readonly markers: readonly [string, string] | undefined;
}

export function templateModel(o: TemplateModelOptions): TemplateModel {
  const markers = PARSER_MARKERS.find(([open, close]) => o.text.includes(open) && o.text.includes(close));
  return { template: new ChatTemplate(o.text), special: o.special ?? {}, parser: o.parser, markers };
}

function deltaOf(d: { reasoning: string; content: string }): TokenDelta {
  if (d.reasoning && d.content) return { kind: 'split', reasoning: d.reasoning, content: d.content };
  if (d.reasoning) return { kind: 'reasoning', text: d.reasoning };
  if (d.content) return { kind: 'content', text: d.content };
  return { kind: 'silent' };
}

const bad = (message: string): PlanResult => ({ ok: false, status: 400, message });

/** The answer to `body` (a request, or a leg 2 continuing its final message), as this template's model writes it. */
export function planTemplateAnswer(body: any, dialect: Dialect, tm: TemplateModel, answer: Answer, now: Date): PlanResult {
  const continuation = body.continue_final_message === true;
  if (continuation && dialect === 'vllm' && body.add_generation_prompt !== false) return bad(VLLM_GENERATION_PROMPT_MESSAGE);
  const at = { template: tm.template, special: tm.special, now };
  const base = {
    ...body,
    messages: continuation ? withoutTrailingAssistant(body.messages) : body.messages,
    continue_final_message: false,
    add_generation_prompt: true,
  };
  let prompt1: string;
  let prompt: string;
  try {
    prompt1 = enginePrompt(dialect, base, at);
    prompt = continuation ? enginePrompt(dialect, body, at) : prompt1;
  } catch (e) {
    return bad(`fake-engine: the template refuses this request: ${(e as Error).message}`);
  }
  const reasoning = answer.reasoningTokens.join('');
  const content = answer.contentTokens.join('');
  const render = (final: Record<string, unknown>) => {
    try {
      return enginePrompt(
        'vllm',
        { ...base, messages: [...base.messages, { role: 'assistant', ...final }], add_generation_prompt: false },
        at,
      );
    } catch {
      return undefined;
    }
  };
  const text = modelText({
    prompt1,
    withReasoning: render({ content, reasoning_content: reasoning, thinking: reasoning }),
    plain: render({ content }),
    reasoning,
    content,
    markers: tm.markers,
  }).text;
  const tokens = tokenize(text);
  let rest = tokens;
  if (continuation) {
    const continued = prompt.startsWith(prompt1) ? prompt.slice(prompt1.length) : undefined;
    const after = continued === undefined ? null : remainderAfter(tokens, continued);
    if (after === null) return bad(MISMATCH_MESSAGE);
    rest = after;
  }
  const raw = tm.parser === 'none' || (dialect === 'sglang' && body.separate_reasoning === false);
  const split = raw ? rest.map((t) => ({ reasoning: '', content: t })) : markerSplit(rest, tm.markers, promptOpens(prompt, tm.markers));
  let deltas = split.map(deltaOf);
  const firstContent = deltas.findIndex((d) => d.kind === 'content' || d.kind === 'split');
  const reasoningTokens = firstContent < 0 ? deltas.length : firstContent;
  const max =
    typeof (body.max_completion_tokens ?? body.max_tokens) === 'number' ? (body.max_completion_tokens ?? body.max_tokens) : undefined;
  const promptTokens = tokenize(prompt).length;
  if (max !== undefined && deltas.length > max) {
    deltas = deltas.slice(0, max);
    return { ok: true, plan: { continuation, deltas, finish: 'length', promptTokens, reasoningTokens: Math.min(reasoningTokens, max) } };
  }
  return { ok: true, plan: { continuation, deltas, finish: 'stop', promptTokens, reasoningTokens } };
}

/** vLLM's chat /tokenize through the template: the prompt text's fake tokens (leg 2 continued, or a generation prompt). */
export function templatePromptText(body: any, tm: TemplateModel, now: Date): string {
  const continuing = body.continue_final_message === true;
  return enginePrompt(
    'vllm',
    { ...body, add_generation_prompt: continuing ? false : (body.add_generation_prompt ?? true) },
    { template: tm.template, special: tm.special, now },
  );
}
