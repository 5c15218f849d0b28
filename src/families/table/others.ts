// gpt-oss, Llama, Mistral, Gemma, Granite, Nemotron and the explicit `plain` format
// (test/unit/families/fidelity.test.ts proves each against its template).
import type { ModelFamily, ReasoningFormat } from '../types';
import {
  always,
  CANITOOLCALL,
  enableThinking,
  llamacppStructured,
  NOT_VERIFIED_ON_LLAMACPP,
  plainFamily,
  sglangAppend,
  THINK,
  unsupportedRule,
  VLLM_UNVERIFIED_TEMPLATE,
} from './common';

const HARMONY: ReasoningFormat = {
  open: '<|channel|>analysis<|message|>',
  close: '<|end|><|start|>assistant<|channel|>final<|message|>',
  promptOpens: false,
};

/** gpt-oss: harmony channels (analysis, then final) after `<|start|>assistant`. Its template renders the date. */
export const gptOss: ModelFamily = {
  name: 'gpt-oss',
  match: /^gpt-?oss/,
  examples: ['openai/gpt-oss-120b', 'gpt-oss-20b'],
  template: 'openai-gpt-oss-120b.jinja',
  provenTemplates: ['a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146'],
  proof: 'llama.cpp copy of gpt-oss-120b',
  published: {
    file: 'openai/gpt-oss-20b chat_template.jinja',
    revision: '6cee5e81ee83917806bbde320786a8fb61efebee',
    sha256: 'a4c9919cbbd4acdd51ccffe22da049264b1b73e59055fa58811a99efbd7c8146',
    recordedBy: CANITOOLCALL,
  },
  readsClock: true,
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

/** Llama 3.1 and 3.3: one template (llama.cpp's two copies are byte-identical). */
export const llama3 = plainFamily({
  name: 'llama-3',
  match: /^(meta-)?llama-?3\.[13]-/,
  examples: ['meta-llama/Llama-3.3-70B-Instruct', 'meta-llama/Llama-3.1-8B-Instruct'],
  template: 'meta-llama-Llama-3.3-70B-Instruct.jinja',
  proof: 'llama.cpp copy of Llama-3.3-70B-Instruct (byte-identical to its Llama-3.1-8B-Instruct copy)',
  // Recorded from unsloth's mirror of meta-llama/Llama-3.3-70B-Instruct (the gated original).
  published: {
    file: 'unsloth/Llama-3.3-70B-Instruct chat_template.jinja',
    revision: '99cd0d2c829e92a67c844f9144c2509632e5c87f',
    sha256: 'e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65',
    recordedBy: CANITOOLCALL,
  },
  provenTemplates: ['e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65'],
  vllm: 'trims',
});

/** Llama 3.2: its template renders today's date (strftime_now) into the system header. */
export const llama32 = {
  ...plainFamily({
    name: 'llama-3.2',
    match: /^(meta-)?llama-?3\.2-/,
    examples: ['meta-llama/Llama-3.2-3B-Instruct', 'meta-llama/Llama-3.2-1B-Instruct'],
    template: 'meta-llama-Llama-3.2-3B-Instruct.jinja',
    proof: 'llama.cpp copy of Llama-3.2-3B-Instruct',
    provenTemplates: ['5816fce10444e03c2e9ee1ef8a4a1ea61ae7e69e438613f3b17b69d0426223a4'],
    vllm: 'trims',
  }),
  readsClock: true,
};

export const mistral = plainFamily({
  name: 'mistral',
  match: /^mistral-nemo/,
  examples: ['mistralai/Mistral-Nemo-Instruct-2407'],
  template: 'mistralai-Mistral-Nemo-Instruct-2407.jinja',
  proof: 'llama.cpp copy of Mistral-Nemo-Instruct-2407',
  provenTemplates: ['e4676cb56dffea7782fd3e2b577cfaf1e123537e6ef49b3ec7caa6c095c62272'],
  vllm: 'as-sent',
  vllmNote: {
    // The template puts the system prompt into the LAST user turn (`loop.last`): with a final assistant turn
    // after it, the system prompt is no longer rendered.
    refuse: (messages) => (messages[0] as { role?: string } | undefined)?.role === 'system',
    note: 'without a system prompt only: the template renders it into the last user turn, which leg 2 no longer ends with',
  },
});

export const gemma2 = plainFamily({
  name: 'gemma-2',
  match: /^gemma-?2-/,
  examples: ['google/gemma-2-2b-it', 'gemma-2-9b-it'],
  template: 'google-gemma-2-2b-it.jinja',
  proof: 'llama.cpp copy of gemma-2-2b-it',
  provenTemplates: ['ecd6ae513fe103f0eb62e8ab5bfa8d0fe45c1074fa398b089c93a7e70c15cfd6'],
  vllm: 'trims',
});

export const granite40 = plainFamily({
  name: 'granite-4.0',
  match: /^granite-4\.0-/,
  examples: ['ibm-granite/granite-4.0-h-small'],
  template: 'ibm-granite-granite-4.0.jinja',
  proof: 'llama.cpp copy of granite-4.0 (not compared with a published copy)',
  provenTemplates: ['9524df67b77a7b25a2dfee898f75b316a157eb9d855b51e32aeac79d7c8a83ce'],
  vllm: 'unverified-template',
});

export const granite41 = plainFamily({
  name: 'granite-4.1',
  match: /^granite-4\.1-/,
  examples: ['ibm-granite/granite-4.1-8b'],
  template: 'ibm-granite-granite-4.1.jinja',
  proof: 'llama.cpp copy of granite-4.1 (not compared with a published copy)',
  provenTemplates: ['fed2756d2d24e127b951dcf139d0b03ab7db8ef23a456128ebc9c2db4901d476'],
  vllm: 'unverified-template',
});

/** Nemotron 3 Nano: the generation prompt opens `<think>\n` (enable_thinking, on by default). */
export const nemotron3Nano: ModelFamily = {
  name: 'nemotron-3-nano',
  match: /^nvidia-nemotron-3-nano/,
  examples: ['nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16'],
  template: 'NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja',
  provenTemplates: ['ab7813c3abdd9cb655905a410728b26c7884eca45ddfab8d9f931553485a7862'],
  proof: 'llama.cpp copy of NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 (not compared with a published copy)',
  reasoning: THINK(true),
  thinking: enableThinking,
  engines: { sglang: sglangAppend(THINK(true)), vllm: VLLM_UNVERIFIED_TEMPLATE, llamacpp: NOT_VERIFIED_ON_LLAMACPP },
};

/**
 * Any model without reasoning, named so (`plain`, `no-reasoning`) or SmolLM2 (its template travels in its GGUF):
 * SGLang appends the content whatever the template; llama-server was measured with SmolLM2's.
 */
export const plain = plainFamily({
  name: 'plain',
  match: /^(plain|no-reasoning|smollm2)/,
  examples: ['plain', 'HuggingFaceTB/SmolLM2-135M-Instruct'],
  template: '',
  proof: 'no template: SGLang appends the content whatever the template; llama-server with SmolLM2\u2019s own (real engine)',
  provenTemplates: [],
  vllm: 'needs-template',
  llamacpp: llamacppStructured('test/real-engine/continuation.test.ts (SmolLM2-135M)'),
});
