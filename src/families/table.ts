// The model-family table: for every family, how its model writes an answer and how each engine must be asked
// to continue it so that the engine's prompt is the uninterrupted prompt plus the raw text the model had
// generated. Each cell is proven by test/unit/family-fidelity.test.ts against the family's real chat template
// (llama.cpp's models/templates copy, rendered by transformers' Jinja renderer the way the engine renders it);
// a cell that cannot be rendered exactly is unsupported, and such a stream ends with the interruption event.
// Background, versions and the engines' lines these rules follow: docs/families.md.
import {
  llamacppStructured,
  NOT_VERIFIED_ON_LLAMACPP,
  sglangAppend,
  templateRule,
  trimmed,
  unsupportedRule,
  WHITESPACE,
} from './engine-rules';
import type { Engine, EngineRule, ModelFamily, ReasoningFormat, RenderInputs, ThinkingRule } from './types';

// vLLM 0.33.0 renders the whole conversation with transformers' apply_chat_template and continue_final_message
// (renderers/hf.py L913-920); transformers appends a tag to the final content and cuts the rendering there, or
// before the trailing whitespace the template trimmed (utils/chat_template_utils.py render_jinja_template).
// reasoning_content reaches the template as both reasoning and reasoning_content (chat_completion/protocol.py
// L576-601, renderers/chat_utils/chat_message.py L646-660). Its streaming parser starts in reasoning exactly
// when the prompt ends inside an open reasoning block (parser/abstract_parser.py L857-882).
const VLLM = ['vllm 0.33.0 renderers/hf.py L913-920', 'transformers 5.19 chat_template_utils.render_jinja_template'];

/** What the request's reasoning_effort means for the thinking switch, as each engine translates it. */
function effortSays(i: RenderInputs): boolean | undefined {
  // SGLang: protocol.py L1148-1149 setdefault(thinking/enable_thinking, effort != "none");
  // vLLM: chat_completion/protocol.py L665-666 enable_thinking = effort != "none" unless the client set it.
  return typeof i.reasoningEffort === 'string' ? i.reasoningEffort !== 'none' : undefined;
}

/** Templates that read `enable_thinking` (Qwen3, GLM): on unless it is false. */
const enableThinking: ThinkingRule = (i) => {
  const v = i.chatTemplateKwargs.enable_thinking;
  return v === undefined ? (effortSays(i) ?? true) : v !== false;
};

/** Templates that read `thinking` first, then `enable_thinking` (DeepSeek V3.1 / V3.2, Kimi-K3). */
const thinkingKwarg =
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

const always: ThinkingRule = () => true;
const never: ThinkingRule = () => false;

const THINK = (promptOpens: boolean, lead?: string, spelling?: ReasoningFormat['spelling']): ReasoningFormat => ({
  open: '<think>',
  close: '</think>',
  promptOpens,
  lead,
  spelling,
});
// The spellings below are each template's rendering of the model's own (last) turn.
const QWEN_SPELLING = { afterOpen: '\n', beforeClose: '\n', afterClose: '\n\n' };

/** Qwen3 (hybrid; the Qwen3-0.6B template): the model writes `<think>\nR\n</think>\n\nC`. */
const qwen3: ModelFamily = {
  name: 'qwen3',
  match: /^qwen3(?![.-]?([56](?!\d)|coder))|^qwq/,
  examples: ['Qwen/Qwen3-32B', 'qwen3-8b', 'Qwen/QwQ-32B'],
  template: 'Qwen-Qwen3-0.6B.jinja',
  provenTemplates: [],
  reasoning: THINK(false, undefined, QWEN_SPELLING),
  thinking: enableThinking,
  engines: {
    sglang: sglangAppend(THINK(false)),
    vllm: templateRule(
      ['content'],
      'content only: the template closes the final turn\u2019s think block, so a cut inside the reasoning cannot be continued',
      [...VLLM, 'vllm 0.33.0 tests/parser/test_parse.py L465-466', 'vllm 0.33.0 parser/qwen3.py L287 (no whitespace stripped)'],
      // '<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n')
      (d, thinking) => {
        if (!thinking) return /^\n/.test(d.content) ? WHITESPACE : { content: d.content };
        if (!/^\n[^\n]([\s\S]*[^\n])?\n$/.test(d.reasoning) || !/^\n\n(?!\n)/.test(d.content)) return WHITESPACE;
        return { content: d.content, reasoning_content: d.reasoning };
      },
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** Qwen3.5 / Qwen3.6 (the Qwen3.5-4B template): the generation prompt opens `<think>\n`. */
const qwen35: ModelFamily = {
  name: 'qwen3.5',
  match: /^qwen3[.-]?[56](?!\d)/,
  examples: ['Qwen/Qwen3.5-397B-A17B', 'qwen3.6', 'Qwen/Qwen3.6-35B-A3B'],
  template: 'Qwen3.5-4B.jinja',
  provenTemplates: [],
  reasoning: THINK(true, undefined, QWEN_SPELLING),
  thinking: enableThinking,
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['content'],
      'content only, and not after trailing whitespace: the template trims the final turn',
      [...VLLM, 'vllm 0.33.0 rust/src/chat/tests/templates/qwen35.jinja L82, L99-101'],
      // '<think>\n' + reasoning|trim + '\n</think>\n\n' + content|trim
      (d, thinking) => {
        if (!thinking) return trimmed(d.content) ? { content: d.content } : WHITESPACE;
        const r = d.reasoning.slice(0, -1);
        if (
          !d.reasoning.endsWith('\n') ||
          !trimmed(r) ||
          !d.content.startsWith('\n\n') ||
          !trimmed(d.content.slice(2)) ||
          !d.content.slice(2)
        )
          return WHITESPACE;
        return { content: d.content, reasoning_content: d.reasoning };
      },
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** GLM-4.5 / 4.6: the model writes `\n<think>R</think>\nC` after `<|assistant|>`. */
const glm46: ModelFamily = {
  name: 'glm-4.6',
  match: /^glm-?4\.[56](?!\d)/,
  examples: ['zai-org/GLM-4.6', 'glm-4.5-air'],
  template: 'GLM-4.6.jinja',
  provenTemplates: [],
  reasoning: THINK(false, '\n', { afterClose: '\n', offLead: '\n' }),
  thinking: enableThinking,
  engines: {
    sglang: sglangAppend(THINK(false, '\n')),
    vllm: templateRule(
      ['content'],
      'content only, and not after trailing whitespace: the template strips the final turn',
      [...VLLM, 'vllm 0.33.0 parser/glm47_moe.py (trailing reasoning whitespace dropped)'],
      // '\n<think>' + reasoning.strip() + '</think>' + '\n' + content.strip()
      (d, thinking) => {
        if (!thinking)
          return d.content.startsWith('\n') && trimmed(d.content.slice(1)) && d.content.length > 1 ? { content: d.content } : WHITESPACE;
        if (!d.reasoning.startsWith('\n') || !trimmed(d.reasoning.slice(1))) return WHITESPACE;
        if (!d.content.startsWith('\n') || !trimmed(d.content.slice(1)) || d.content.length < 2) return WHITESPACE;
        return { content: d.content, reasoning_content: d.reasoning };
      },
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** GLM-4.7 (and the GLM-5.x users who run its format): the generation prompt opens `<think>`. */
const glm47: ModelFamily = {
  name: 'glm-4.7',
  match: /^glm-?(4\.7|5)/,
  examples: ['zai-org/GLM-4.7', 'GLM-4.7-Flash'],
  template: 'GLM-4.7-Flash.jinja',
  provenTemplates: [],
  reasoning: THINK(true),
  thinking: enableThinking,
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['content'],
      'content only, and not after trailing whitespace: the template strips the final turn',
      [...VLLM, 'vllm 0.33.0 parser/glm47_moe.py (trailing reasoning whitespace dropped)'],
      // '<think>' + reasoning.strip() + '</think>' + content.strip()
      (d, thinking) => {
        if (!thinking) return trimmed(d.content) ? { content: d.content } : WHITESPACE;
        if (!trimmed(d.reasoning) || !d.reasoning || !trimmed(d.content)) return WHITESPACE;
        return { content: d.content, reasoning_content: d.reasoning };
      },
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** DeepSeek-V3.1: `<think>` (thinking) or `<think></think>` (chat) closes the generation prompt. */
const deepseekV31: ModelFamily = {
  name: 'deepseek-v3.1',
  match: /^deepseek-?v3\.1/,
  examples: ['deepseek-ai/DeepSeek-V3.1', 'DeepSeek-V3.1-Terminus'],
  template: 'deepseek-ai-DeepSeek-V3.1.jinja',
  provenTemplates: [],
  reasoning: THINK(true),
  thinking: thinkingKwarg(false),
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['content'],
      'thinking off only: the template renders the final turn after `<think></think>` (no prefix flag from vLLM)',
      [...VLLM, 'vllm 0.33.0 examples/tool_chat_template_deepseekv31.jinja L57-75'],
      (d) => ({ content: d.content }),
      false,
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** DeepSeek-V3.2: SGLang's own text encoder (no chat template in the checkpoint). */
const deepseekV32: ModelFamily = {
  name: 'deepseek-v3.2',
  match: /^deepseek-?v3\.2/,
  examples: ['deepseek-ai/DeepSeek-V3.2', 'DeepSeek-V3.2-Exp'],
  template: 'deepseek-ai-DeepSeek-V3.2.jinja',
  provenTemplates: [],
  reasoning: THINK(true),
  thinking: thinkingKwarg(false, true),
  engines: {
    sglang: sglangAppend(THINK(true), { cites: ['sglang 0.5.23 serving_chat.py L2075-2124 (dsv32 encoder)'] }),
    vllm: unsupportedRule('vLLM\u2019s deepseek_v32 renderer ignores continue_final_message and closes the final turn', [
      'vllm 0.33.0 renderers/deepseek_v32.py L20-87, deepseek_v32_encoding.py L243-259',
    ]),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** DeepSeek-V4: both engines render it with DeepSeek's own encoder. */
const deepseekV4: ModelFamily = {
  name: 'deepseek-v4',
  match: /^deepseek-?v4/,
  examples: ['deepseek-ai/DeepSeek-V4', 'DeepSeek-V4-Flash'],
  template: 'deepseek-ai-DeepSeek-V4.jinja',
  provenTemplates: [],
  reasoning: THINK(true),
  thinking: thinkingKwarg(true),
  engines: {
    sglang: unsupportedRule('deepseek-recipe renders content as answer text and its parser drops newlines at the markers: not exact', [
      'sglang 0.5.23 srt/entrypoints/openai/serving_deepseek_recipe.py L100-153',
    ]),
    vllm: unsupportedRule('vLLM\u2019s deepseek_v4 renderer ignores continue_final_message', [
      'vllm 0.33.0 renderers/deepseek_v4.py L24-98',
    ]),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** The DeepSeek-R1 distills (Qwen and Llama bases): the generation prompt opens `<think>\n`. */
const deepseekR1: ModelFamily = {
  name: 'deepseek-r1',
  match: /^deepseek-?r1/,
  examples: ['deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', 'DeepSeek-R1-Distill-Llama-8B'],
  template: 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja',
  provenTemplates: [],
  reasoning: THINK(true, undefined, QWEN_SPELLING),
  // This template closes the think block unless enable_thinking is set (`{% if not enable_thinking %}</think>`).
  thinking: (i) => Boolean(i.chatTemplateKwargs.enable_thinking ?? effortSays(i) ?? false),
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['reasoning'],
      'reasoning only: the template keeps only the text after `</think>` of the final turn',
      [...VLLM, 'vllm 0.33.0 reasoning/deepseek_r1_reasoning_parser.py L44-64'],
      // The final turn renders as '<｜Assistant｜>' + content, so the content carries the prompt's '<think>\n'.
      (d) => ({ content: `<think>\n${d.reasoning}` }),
      true,
    ),
    // llama.cpp's parser hands out the generation prompt's '\n' after <think> as reasoning, and its continuation
    // writes the reasoning start marker plus that reasoning back: exact. With thinking off it writes
    // `<think></think>` where the generation prompt had `<think>\n</think>`: refused. Both measured on a real
    // llama-server (test/real-engine/template-continuation.test.ts).
    llamacpp: llamacppStructured(
      'test/real-engine/template-continuation.test.ts (R1 template, real llama-server)',
      true,
      'thinking on only (structured continue_final_message): with thinking off llama.cpp renders `<think></think>` for the prompt\u2019s `<think>\\n</think>`',
    ),
  },
};

/** Kimi-K2 thinking: the model writes `<think>R</think>C`. */
const kimiK2: ModelFamily = {
  name: 'kimi-k2',
  match: /^kimi-?k2/,
  examples: ['moonshotai/Kimi-K2-Thinking', 'kimi-k2.6'],
  template: 'Kimi-K2-Thinking.jinja',
  provenTemplates: [],
  reasoning: THINK(false),
  thinking: always,
  engines: {
    sglang: sglangAppend(THINK(false)),
    vllm: unsupportedRule('the template renders the final assistant turn as history, with an empty think block', [
      ...VLLM,
      'llama.cpp models/templates/Kimi-K2-Thinking.jinja (hist_msgs)',
    ]),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

const K3_OPEN = '<|open|>think<|sep|>';
const K3_CLOSE = '<|close|>think<|sep|><|open|>response<|sep|>';

/** Kimi-K3: XTML channels; the generation prompt opens the think (or, thinking off, the response) channel. */
const kimiK3: ModelFamily = {
  name: 'kimi-k3',
  match: /^kimi-?k3/,
  examples: ['moonshotai/Kimi-K3', 'kimi-k3'],
  template: 'Kimi-K3.jinja',
  provenTemplates: [],
  reasoning: { open: K3_OPEN, close: K3_CLOSE, promptOpens: true },
  thinking: thinkingKwarg(true),
  engines: {
    sglang: sglangAppend(
      { open: K3_OPEN, close: K3_CLOSE, promptOpens: true },
      { cites: ['sglang 0.5.23 serving_chat.py L726-812 (kimi_k3)'] },
    ),
    vllm: unsupportedRule('vLLM hands continue_final_message to the checkpoint\u2019s own encoder, which is not available here', [
      'vllm 0.33.0 renderers/kimi_k3.py L143-220',
    ]),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

const HARMONY: ReasoningFormat = {
  open: '<|channel|>analysis<|message|>',
  close: '<|end|><|start|>assistant<|channel|>final<|message|>',
  promptOpens: false,
};

/** gpt-oss: harmony channels (analysis, then final) after `<|start|>assistant`. */
const gptOss: ModelFamily = {
  name: 'gpt-oss',
  match: /^gpt-?oss/,
  examples: ['openai/gpt-oss-120b', 'gpt-oss-20b'],
  template: 'openai-gpt-oss-120b.jinja',
  provenTemplates: [],
  reasoning: HARMONY,
  thinking: always,
  engines: {
    sglang: sglangAppend(HARMONY, { harmony: true }),
    vllm: unsupportedRule('vLLM renders gpt-oss with openai_harmony and opens a new assistant turn: no continuation', [
      'vllm 0.33.0 entrypoints/openai/parser/harmony_utils.py L412-458',
    ]),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/**
 * The `minimax-append-think` parsers (SGLang's MiniMaxAppendThinkDetector, vLLM's minimax_m2_append_think) do
 * not split: they stream everything as content with `<think>` prepended, and prepend it again to leg 2
 * (sglang reasoning_parser.py L1069-1101; vllm minimax_m2_reasoning_parser.py L45-56). Seen as delivered content
 * opening with `<think>` and no reasoning: not continued.
 */
function refuseAppendThink(rule: EngineRule): EngineRule {
  return {
    ...rule,
    plan: (c) =>
      !c.delivered.reasoning && c.delivered.content.startsWith('<think>') ? { unsupported: 'append-think-parser' } : rule.plan(c),
  };
}

/** MiniMax-M2: the generation prompt opens `<think>\n`; the model writes `R\n</think>\n\nC`. */
const minimaxM2: ModelFamily = {
  name: 'minimax-m2',
  match: /^minimax-?m2/,
  examples: ['MiniMaxAI/MiniMax-M2', 'minimax-m2.5'],
  template: 'MiniMax-M2.jinja',
  provenTemplates: [],
  reasoning: THINK(true, undefined, QWEN_SPELLING),
  thinking: always,
  engines: {
    sglang: refuseAppendThink(
      sglangAppend(THINK(true), { cites: ['sglang 0.5.23 reasoning_parser.py L2293, L2337-2343 (minimax: forced reasoning)'] }),
    ),
    vllm: refuseAppendThink(
      templateRule(
        ['content'],
        'content only: the template closes the final turn\u2019s think block',
        [...VLLM, 'vllm 0.33.0 parser/minimax_m2.py L143-147 (trailing reasoning whitespace dropped)'],
        // '<think>\n' + reasoning + '\n</think>\n\n' + content (the parser dropped the reasoning's '\n')
        (d) => {
          if (d.reasoning !== d.reasoning.trimEnd() || d.reasoning.startsWith('\n') || !/^\n\n(?!\n)/.test(d.content)) return WHITESPACE;
          return { content: d.content.slice(2), reasoning_content: d.reasoning };
        },
      ),
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** A model without a reasoning format: its answer is the content, continued as it is. */
function plainFamily(
  name: string,
  match: RegExp,
  examples: string[],
  template: string,
  vllmTrims: boolean,
  vllmNote?: { refuse: (messages: readonly unknown[]) => boolean; note: string },
): ModelFamily {
  return {
    name,
    match,
    examples,
    template,
    provenTemplates: [],
    reasoning: null,
    thinking: never,
    engines: {
      sglang: sglangAppend(null),
      vllm: templateRule(
        ['content'],
        vllmNote?.note ??
          (vllmTrims ? 'not after leading or trailing whitespace: the template trims the final turn' : 'the final turn rendered as sent'),
        VLLM,
        (d, _thinking, c) => {
          if (d.reasoning) return { unsupported: 'reasoning-from-plain-model' };
          if (vllmNote?.refuse(c.messages)) return { unsupported: 'conversation-rendered-differently' };
          return vllmTrims && !trimmed(d.content) ? WHITESPACE : { content: d.content };
        },
      ),
      llamacpp: name === 'plain' ? llamacppStructured('test/real-engine/continuation.test.ts (SmolLM2-135M)') : NOT_VERIFIED_ON_LLAMACPP,
    },
  };
}

const llama3 = plainFamily(
  'llama-3',
  /^(meta-)?llama-?3/,
  ['meta-llama/Llama-3.3-70B-Instruct', 'llama-3.1-8b'],
  'meta-llama-Llama-3.3-70B-Instruct.jinja',
  true,
);
const mistral = plainFamily(
  'mistral',
  /^(mistral|ministral)(?!.*reasoning)/,
  ['mistralai/Mistral-Nemo-Instruct-2407'],
  'mistralai-Mistral-Nemo-Instruct-2407.jinja',
  false,
  {
    // The template puts the system prompt into the LAST user turn (`loop.last`): with a final assistant turn
    // after it, the system prompt is no longer rendered.
    refuse: (messages) => (messages[0] as { role?: string } | undefined)?.role === 'system',
    note: 'without a system prompt only: the template renders it into the last user turn, which leg 2 no longer ends with',
  },
);
const gemma = plainFamily('gemma', /^gemma-?2/, ['google/gemma-2-2b-it', 'gemma-2-9b'], 'google-gemma-2-2b-it.jinja', true);
/** ChatML models without reasoning (SmolLM2, Qwen2.5): `plain` is also the explicit name of that format. */
const plain = plainFamily(
  'plain',
  /^(plain|no-reasoning|smollm|qwen2\.5|qwen3-?coder)/,
  ['plain', 'HuggingFaceTB/SmolLM2-135M-Instruct', 'Qwen/Qwen3-Coder-480B-A35B-Instruct'],
  'Qwen-Qwen2.5-7B-Instruct.jinja',
  false,
);

/** Searched in order; the first match wins (select.ts). */
export const FAMILIES: readonly ModelFamily[] = Object.freeze([
  qwen35,
  qwen3,
  glm46,
  glm47,
  deepseekV31,
  deepseekV32,
  deepseekV4,
  deepseekR1,
  kimiK2,
  kimiK3,
  gptOss,
  minimaxM2,
  llama3,
  mistral,
  gemma,
  plain,
]);
