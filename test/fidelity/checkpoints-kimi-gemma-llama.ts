// Kimi-K2, Gemma 3/4 and Llama 4 checkpoints: their own published chat templates and llama.cpp's copies.
// Conventions as in checkpoints-qwen-deepseek.ts; method: docs/checkpoint-templates.md.
import type { CheckpointForm } from './checkpoint-form';

const KIMI_PLAIN = {
  generationPrompt: '`<|im_assistant|>assistant<|im_middle|>`',
  thinkingSwitch: 'none (never thinks)',
  modelWrites: 'the content only, no markers',
  finalTurn:
    '`<|im_assistant|>assistant<|im_middle|>` + content verbatim + `<|im_end|>`; with no system message a default one is rendered first, and its text depends on the revision (see evidence)',
  // SGLang kimi_k2 / vLLM kimi_k2 are for the K2 thinking models; an instruct model needs no parser.
  parsers: {},
};

export const KIMI_GEMMA_LLAMA: readonly CheckpointForm[] = [
  {
    checkpoint: 'moonshotai/Kimi-K2-Instruct',
    names: [],
    base: 'Kimi-K2-Instruct.jinja',
    identical: false,
    equivalence: 'unverified',
    evidence: [
      'llama.cpp models/templates/Kimi-K2-Instruct.jinja added @1920345c3bce (#16932, 2025-11-19) and edited @636fc17a376d (#17376, "fix template"): tool-call ids are now always generated as `functions.NAME:N` from 0 (the first copy used `tool_call[\'id\']` when defined, counting from 1). Default system prompt "You are Kimi, an AI assistant created by Moonshot AI."',
      'llama.cpp models/templates/moonshotai-Kimi-K2.jinja @4a4f426944e7 (#14654, 2025-07-15, CRLF line ends until @566059a26b0c): the July 2025 form, default system prompt "You are a helpful assistant"',
      'no copy of the published chat_template.jinja was found to compare bytes with. Rendered (transformers 5.19.0), the two llama.cpp copies agree on a conversation without tools except for the default system prompt: its text, and the "\\n" Kimi-K2-Instruct.jinja leaves after its `<|im_end|>` (`{% endif %}` without trimming)',
    ],
    special: {},
    promptEnds: [
      {
        kwargs: {},
        endsWith:
          '<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>\n<|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>',
      },
    ],
    ...KIMI_PLAIN,
  },
  {
    checkpoint: 'moonshotai/Kimi-K2-Instruct-0905',
    names: [],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      'no llama.cpp copy names it and no copy of its chat_template.jinja traceable to the Hugging Face repository was found; its form is assumed to be the Kimi-K2-Instruct one (same chat markers), not established',
    ],
    special: {},
    ...KIMI_PLAIN,
  },
  {
    checkpoint: 'google/gemma-3-27b-it',
    names: ['google/gemma-3-12b-it', 'google/gemma-3-4b-it', 'google/gemma-3-1b-it'],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      'xorbitsai/inference llm_family.json@7ecec16b6338 "gemma-3-it" (ids gemma-3-4b/12b/27b-it) and "gemma-3-1b-it": one template text for both entries; `{{ bos_token }}`, the system prompt folded into the first user turn, roles alternating, model turns `<start_of_turn>model\\n` + content|trim + `<end_of_turn>\\n`, generation prompt `<start_of_turn>model\\n`; a third-party copy',
      'thylinao1/bayes-cot-faithfulness docs/ROSTER-TEMPLATES.md@f4f370d40f50: google/gemma-3-27b-it@005ad3404e59 has no reasoning-related token anywhere',
      'llama.cpp has only google-gemma-2-2b-it.jinja, which raises on a system role: not a minimal edit of Gemma 3\u2019s',
    ],
    special: { bos_token: '<bos>' },
    generationPrompt: '`<start_of_turn>model\\n`',
    thinkingSwitch: 'none (never thinks)',
    modelWrites: 'the content only, no markers',
    finalTurn:
      '`<start_of_turn>model\\n` + content|trim + `<end_of_turn>\\n`: leading and trailing whitespace of the final turn is trimmed',
    parsers: {},
  },
  {
    checkpoint: 'google/gemma-4-31B-it',
    names: [],
    base: 'google-gemma-4-31B-it.jinja',
    identical: false,
    equivalence: 'unverified',
    evidence: [
      'llama.cpp models/templates/google-gemma-4-31B-it.jinja added @b8635075ffe2 (#21418, 2026-04-04, "rename gemma4.jinja to match the others"), updated @3fc65063d9c3 (#21704, "better align to the updated official gemma4 template"); google-gemma-4-31B-it-interleaved.jinja is llama.cpp\u2019s own ("add custom template to support interleaved thinking"), no checkpoint\u2019s',
      'no published copy was compared; other Gemma 4 sizes not compared',
      'parsers: sglang 0.5.23 reasoning_parser.py L1320-1340 (Gemma4Detector: `<|channel>` ... `<channel|>`, self label "thought\\n", explicit enable_thinking); vllm 0.33.0 docs/features/reasoning_outputs.md L20, L39 (gemma4; off by default, enable_thinking or reasoning_effort turns it on)',
    ],
    special: { bos_token: '<bos>' },
    generationPrompt:
      '`<|turn>model\\n`; with thinking on nothing follows (the system turn opens with `<|think|>\\n`), with thinking off an empty `<|channel>thought\\n<channel|>` follows',
    thinkingSwitch: 'enable_thinking (default off)',
    modelWrites: '`<|channel>thought\\n` + R + `<channel|>` + C',
    finalTurn:
      '`<|turn>model\\n` + content with channel blocks stripped and trimmed; reasoning renders only on a turn with tool calls after the last user message',
    promptEnds: [
      { kwargs: {}, endsWith: '<BOS><|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>' },
      { kwargs: { enable_thinking: true }, endsWith: '<BOS><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n' },
    ],
    parsers: { sglang: 'gemma4', vllm: 'gemma4' },
  },
  {
    checkpoint: 'meta-llama/Llama-4-Scout-17B-16E-Instruct',
    names: ['meta-llama/Llama-4-Maverick-17B-128E-Instruct'],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      'transformers 5.19.0 models/llama4/processing_llama4.py L30: the chat template the Llama 4 processor defaults to, the text transformers\u2019 convert_llama4_weights_to_hf.py writes into an instruct checkpoint; generation prompt `<|header_start|>assistant<|header_end|>\\n\\n`, turns end `<|eot|>`; not byte-compared with the Hugging Face repositories',
      'no llama.cpp copy (its Llama files are 3.x, another header syntax)',
      'the template computes date_string (strftime_now) but never renders it',
    ],
    special: { bos_token: '<|begin_of_text|>' },
    generationPrompt: '`<|header_start|>assistant<|header_end|>\\n\\n`',
    thinkingSwitch: 'none (never thinks)',
    modelWrites: 'the content only, no markers',
    finalTurn: '`<|header_start|>assistant<|header_end|>\\n\\n` + content verbatim (a string is not trimmed) + `<|eot|>`',
    parsers: {},
  },
];
