// DeepSeek checkpoints (test/unit/families/fidelity.test.ts proves each against its template).
import type { ModelFamily } from '../types';
import {
  always,
  llamacppStructured,
  NOT_VERIFIED_ON_LLAMACPP,
  QWEN_SPELLING,
  sglangAppend,
  THINK,
  templateRule,
  thinkingKwarg,
  unsupportedRule,
  VLLM,
} from './common';

/** DeepSeek-V3.1: `<think>` (thinking) or `<think></think>` (chat) closes the generation prompt. */
export const deepseekV31: ModelFamily = {
  name: 'deepseek-v3.1',
  match: /^deepseek-?v3\.1/,
  examples: ['deepseek-ai/DeepSeek-V3.1', 'DeepSeek-V3.1-Terminus'],
  template: 'deepseek-ai-DeepSeek-V3.1.jinja',
  provenTemplates: ['d9f5f351b276cf9e81d009db08830db7d38e94927aecd09a7beb43e2aafee94e'],
  proof: 'llama.cpp copy of DeepSeek-V3.1',
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
export const deepseekV32: ModelFamily = {
  name: 'deepseek-v3.2',
  match: /^deepseek-?v3\.2/,
  examples: ['deepseek-ai/DeepSeek-V3.2', 'DeepSeek-V3.2-Exp'],
  template: 'deepseek-ai-DeepSeek-V3.2.jinja',
  // Proven against SGLang's encoder, not a template: a served template takes the template path.
  provenTemplates: [],
  proof: 'SGLang\u2019s DeepSeek-V3.2 encoder (the checkpoint has no chat template)',
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
export const deepseekV4: ModelFamily = {
  name: 'deepseek-v4',
  match: /^deepseek-?v4/,
  examples: ['deepseek-ai/DeepSeek-V4', 'DeepSeek-V4-Flash'],
  template: 'deepseek-ai-DeepSeek-V4.jinja',
  provenTemplates: [],
  proof: 'no continuation: both engines render it with DeepSeek\u2019s own encoder',
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

/**
 * The DeepSeek-R1 distills (Qwen and Llama bases), with their published template (llama.cpp's
 * deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja; its Qwen-32B copy adds an enable_thinking switch the checkpoints
 * do not have): the generation prompt always opens `<think>\n`, the model writes `R\n</think>\n\nC`.
 */
export const deepseekR1Distill: ModelFamily = {
  name: 'deepseek-r1-distill',
  match: /^deepseek-?r1-distill-(qwen|llama)-/,
  examples: ['deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', 'deepseek-ai/DeepSeek-R1-Distill-Llama-8B'],
  template: 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja',
  provenTemplates: ['dd2675619a64a449cdcdd2b93e605a0a50764cee41e344f244752bc93643936c'],
  proof: 'llama.cpp copy of R1-Distill-Llama-8B: renders as the published distill template (test/fidelity/checkpoints-qwen-deepseek.ts)',
  reasoning: THINK(true, undefined, QWEN_SPELLING),
  thinking: always,
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['reasoning'],
      'reasoning only: the template keeps only the text after `</think>` of the final turn',
      [...VLLM, 'vllm 0.33.0 reasoning/deepseek_r1_reasoning_parser.py L44-64'],
      // The final turn renders as '<｜Assistant｜>' + content, so the content carries the prompt's '<think>\n'.
      (d) => ({ content: `<think>\n${d.reasoning}` }),
    ),
    // llama.cpp's parser hands out the generation prompt's '\n' after <think> as reasoning, and its continuation
    // writes the reasoning start marker plus that reasoning back: exact (test/real-engine/template-continuation).
    llamacpp: llamacppStructured('test/real-engine/template-continuation.test.ts (the published R1 template, real llama-server)'),
  },
};
