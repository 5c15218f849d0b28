// What the family table's entries share: the thinking rules of the templates, the `<think>` format, the vLLM
// citations, and the entry of a model without reasoning.
import {
  llamacppStructured,
  NOT_VERIFIED_ON_LLAMACPP,
  sglangAppend,
  templateRule,
  trimmed,
  unsupportedRule,
  WHITESPACE,
} from '../engine-rules';
import type { Engine, EngineRule, ModelFamily, ReasoningFormat, RenderInputs, ThinkingRule } from '../types';

// vLLM 0.33.0 renders the whole conversation with transformers' apply_chat_template and continue_final_message
// (renderers/hf.py L913-920); transformers appends a tag to the final content and cuts the rendering there, or
// before the trailing whitespace the template trimmed (utils/chat_template_utils.py render_jinja_template).
// reasoning_content reaches the template as both reasoning and reasoning_content (chat_completion/protocol.py
// L576-601, renderers/chat_utils/chat_message.py L646-660). Its streaming parser starts in reasoning exactly
// when the prompt ends inside an open reasoning block (parser/abstract_parser.py L857-882).
/**
 * The record of published template hashes: PyPI canitoolcall 0.1.1's fixtures name, per checkpoint, the revision
 * of the template file they were rendered through and its template_sha256 (fixtures/<family>/*.jsonl, provenance).
 */
export const CANITOOLCALL = 'canitoolcall 0.1.1 fixture provenance (PyPI)';

export const VLLM = ['vllm 0.33.0 renderers/hf.py L913-920', 'transformers 5.19 chat_template_utils.render_jinja_template'];

/** What the request's reasoning_effort means for the thinking switch, as each engine translates it. */
export function effortSays(i: RenderInputs): boolean | undefined {
  // SGLang: protocol.py L1148-1149 setdefault(thinking/enable_thinking, effort != "none");
  // vLLM: chat_completion/protocol.py L665-666 enable_thinking = effort != "none" unless the client set it.
  return typeof i.reasoningEffort === 'string' ? i.reasoningEffort !== 'none' : undefined;
}

/** Templates that read `enable_thinking` (Qwen3, GLM): on unless it is false. */
export const enableThinking: ThinkingRule = (i) => {
  const v = i.chatTemplateKwargs.enable_thinking;
  return v === undefined ? (effortSays(i) ?? true) : v !== false;
};

/** Templates that read `enable_thinking`, off unless set (Gemma 4). */
export const enableThinkingDefaultOff: ThinkingRule = (i) => {
  const v = i.chatTemplateKwargs.enable_thinking;
  return v === undefined ? (effortSays(i) ?? false) : v === true;
};

/** Templates that read `thinking` first, then `enable_thinking` (DeepSeek V3.1 / V3.2, Kimi-K3). */
export const thinkingKwarg =
  (fallback: boolean, sglangReadsOnlyThinking = false): ThinkingRule =>
  (i, engine: Engine) => {
    const t = i.chatTemplateKwargs.thinking;
    if (t !== undefined) return Boolean(t);
    const effort = effortSays(i);
    // SGLang's DeepSeek-V3.2 encoder reads chat_template_kwargs.thinking only (serving_chat.py L3513-3516).
    if (engine === 'sglang' && sglangReadsOnlyThinking) return effort ?? fallback;
    const e = i.chatTemplateKwargs.enable_thinking;
    if (e !== undefined) return Boolean(e);
    return effort ?? fallback;
  };

export const always: ThinkingRule = () => true;
export const never: ThinkingRule = () => false;

export const THINK = (promptOpens: boolean, lead?: string, spelling?: ReasoningFormat['spelling']): ReasoningFormat => ({
  open: '<think>',
  close: '</think>',
  promptOpens,
  lead,
  spelling,
});
// The spellings are each template's rendering of the model's own (last) turn.
export const QWEN_SPELLING = { afterOpen: '\n', beforeClose: '\n', afterClose: '\n\n' };

/** A checkpoint whose template is not at hand: vLLM renders the final turn through it, which is not proven here. */
export const VLLM_NEEDS_TEMPLATE: EngineRule = unsupportedRule(
  'the final turn goes through a template not at hand here: set CHAT_TEMPLATE, and leg 2 is rendered and verified',
  [],
);

/**
 * A checkpoint of which only llama.cpp's copy of the template is at hand, not compared with the published one
 * (docs/checkpoint-templates.md: `unverified`): vLLM renders the final turn through the checkpoint's own.
 */
export const VLLM_UNVERIFIED_TEMPLATE: EngineRule = unsupportedRule(
  'the final turn goes through the checkpoint\u2019s own template, of which only llama.cpp\u2019s copy is at hand, unverified: set CHAT_TEMPLATE, and leg 2 is rendered and verified',
  [],
);

const NO_VLLM_RULE = { 'needs-template': VLLM_NEEDS_TEMPLATE, 'unverified-template': VLLM_UNVERIFIED_TEMPLATE } as const;

/** A model without a reasoning format: its answer is the content, continued as it is. */
export function plainFamily(o: {
  name: string;
  match: RegExp;
  examples: string[];
  template: string;
  proof: string;
  provenTemplates: readonly string[];
  published?: ModelFamily['published'];
  /** needs-template: the template is not at hand; unverified-template: only llama.cpp's copy, not compared. */
  vllm: 'trims' | 'as-sent' | 'needs-template' | 'unverified-template';
  vllmNote?: { refuse: (messages: readonly unknown[]) => boolean; note: string };
  llamacpp?: EngineRule;
}): ModelFamily {
  const trims = o.vllm === 'trims';
  return {
    name: o.name,
    match: o.match,
    examples: o.examples,
    template: o.template,
    provenTemplates: o.provenTemplates,
    proof: o.proof,
    ...(o.published ? { published: o.published } : {}),
    reasoning: null,
    thinking: never,
    engines: {
      sglang: sglangAppend(null),
      vllm:
        o.vllm === 'needs-template' || o.vllm === 'unverified-template'
          ? NO_VLLM_RULE[o.vllm]
          : templateRule(
              ['content'],
              o.vllmNote?.note ??
                (trims ? 'not after leading or trailing whitespace: the template trims the final turn' : 'the final turn rendered as sent'),
              VLLM,
              (d, _thinking, c) => {
                if (d.reasoning) return { unsupported: 'reasoning-from-plain-model' };
                if (o.vllmNote?.refuse(c.messages)) return { unsupported: 'conversation-rendered-differently' };
                return trims && !trimmed(d.content) ? WHITESPACE : { content: d.content };
              },
            ),
      llamacpp: o.llamacpp ?? NOT_VERIFIED_ON_LLAMACPP,
    },
  };
}

export { llamacppStructured, NOT_VERIFIED_ON_LLAMACPP, sglangAppend, templateRule, trimmed, unsupportedRule, WHITESPACE };
