// Qwen and DeepSeek checkpoints: their own published chat templates and how they relate to llama.cpp's copies.
// "llama.cpp" below is ggml-org/llama.cpp (history read in its mirror Raudbjorn/ggml-llama.cpp, same commit ids);
// the copy at hand is the one bundled in node-llama-cpp 3.21.1, commit 80fb11ac73e6. "render check": both texts
// rendered with transformers 5.19.0's render_jinja_template over 8 conversations (one user turn, a system prompt,
// history with `</think>`, a final assistant turn with and without reasoning_content, tool calls with and
// without content) x add_generation_prompt true/false x kwargs {} / enable_thinking true / false / thinking true
// = 64 renderings. Method: docs/checkpoint-templates.md.
import { type CheckpointForm, removeOnce, replaceOnce } from './checkpoint-form';

const DEEPSEEK_SPECIAL = { bos_token: '<｜begin▁of▁sentence｜>' };

export const QWEN_DEEPSEEK: readonly CheckpointForm[] = [
  {
    checkpoint: 'Qwen/Qwen3-235B-A22B-Thinking-2507',
    names: ['Qwen/Qwen3-30B-A3B-Thinking-2507'],
    base: 'Qwen-Qwen3-0.6B.jinja',
    identical: false,
    derive: (base) =>
      replaceOnce(
        base,
        "    {{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n",
        "    {{- '<|im_start|>assistant\\n<think>\\n' }}\n",
      ),
    equivalence: 'rendering',
    evidence: [
      'xorbitsai/inference xinference/model/llm/llm_family.json@7ecec16b6338, entry "Qwen3-Thinking" (ids Qwen/Qwen3-235B-A22B-Thinking-2507, Qwen/Qwen3-30B-A3B-Thinking-2507, Qwen/Qwen3-4B-Thinking-2507, one template): generation prompt `{{- \'<|im_start|>assistant\\n<think>\\n\' }}`, no enable_thinking anywhere; a third-party copy, not read from the Hugging Face repository itself',
      'vllm 0.33.0 sdist rust/src/chat/tests/templates/qwen3.jinja: the current Qwen3 template body (`message.content is string`, `message.reasoning_content is string`); the xinference Thinking copy equals it outside the generation prompt, and differs from llama.cpp Qwen-Qwen3-0.6B.jinja (taken 2025-05-26, @e121edc4324a) in those string guards only',
      'render check, derive(base) vs the xinference Thinking copy: 56/64 identical; the 8 that differ are the tool-call turn with `content: null`, where the 0.6B body raises and the 2507 body renders an empty content. Equivalent for string contents only',
      'Qwen docs as quoted in Cerebras/cerebras-cloud-sdk-python#10: "The default chat template automatically includes <think>. Therefore, it is normal for the model\u2019s output to contain only </think>"; vllm-project/vllm#31045: Qwen3-235B-A22B-Thinking-2507-FP8 streams without a `<think>` start tag',
      'SGLang docs advanced_features/separate_reasoning: "Qwen3-Thinking (e.g., Qwen3-235B-A22B-Thinking-2507): Use qwen3 or qwen3-thinking parser, always thinks"; sglang 0.5.23 srt/parser/reasoning_parser.py L2337-2343 forces reasoning for qwen3-thinking',
    ],
    special: {},
    generationPrompt: '`<|im_start|>assistant\\n<think>\\n`, always',
    thinkingSwitch: 'none (always thinks; enable_thinking is not read)',
    modelWrites:
      'only the closing marker: `R\\n</think>\\n\\nC` (the template renders its own turn as `<think>\\n` + R.strip("\\n") + `\\n</think>\\n\\n` + C.lstrip("\\n"))',
    finalTurn:
      'after the last user message: `<|im_start|>assistant\\n<think>\\n` + reasoning.strip("\\n") + `\\n</think>\\n\\n` + content.lstrip("\\n") + `<|im_end|>\\n` (reasoning_content, else split out of content at `</think>`); earlier turns drop the reasoning',
    promptEnds: [
      { kwargs: {}, endsWith: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n' },
      { kwargs: { enable_thinking: false }, endsWith: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n' },
    ],
    parsers: { sglang: 'qwen3-thinking', vllm: 'qwen3' },
  },
  {
    checkpoint: 'Qwen/Qwen3-235B-A22B-Instruct-2507',
    names: ['Qwen/Qwen3-30B-A3B-Instruct-2507'],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      "unslothai/unsloth#3383 quotes Qwen/Qwen3-4B-Instruct-2507\u2019s template: assistant turns render `'<|im_start|>' + message.role + '\\n' + content` with no reasoning handling and no last-query index (the Thinking body has both)",
      'no llama.cpp copy: Qwen-Qwen3-0.6B.jinja renders a final turn with `<think>\\n\\n</think>\\n\\n`, Qwen-Qwen2.5-7B-Instruct.jinja adds a default system prompt, Qwen3-Coder.jinja uses XML tool calls: none is a minimal edit away',
      'xorbitsai/inference llm_family.json@7ecec16b6338 "Qwen3-Instruct" is the Thinking body minus `<think>\\n`, which disagrees with the #3383 quote: not used',
      '235B and 30B are assumed to share the template (the 2507 releases were made together); not byte-compared',
    ],
    special: {},
    generationPrompt: '`<|im_start|>assistant\\n`',
    thinkingSwitch: 'none (never thinks)',
    modelWrites: 'the content only, no markers',
    finalTurn: '`<|im_start|>assistant\\n` + content verbatim (per the #3383 quote), then `<|im_end|>\\n`',
    parsers: {},
  },
  {
    checkpoint: 'Qwen/QwQ-32B',
    names: [],
    base: 'Qwen-QwQ-32B.jinja',
    identical: false,
    derive: (base) => removeOnce(base, "    {%- if not enable_thinking -%}{{- '</think>' -}}{%- endif -%}\n"),
    equivalence: 'bytes',
    evidence: [
      'llama.cpp models/templates/Qwen-QwQ-32B.jinja@f5cd27b71da3 (2025-05-25): the output of scripts/get_chat_template.py Qwen/QwQ-32B (models/templates/README.md); derive(base) is byte-identical to it',
      "llama.cpp @566059a26b0c (#18675, 2026-03-06) added the one line `{%- if not enable_thinking -%}{{- '</think>' -}}{%- endif -%}` after the generation prompt; unchanged since, as at hand",
      'ggml-org/llama.cpp#12275 (2025-03-09): a maintainer shows get_chat_template.py Qwen/QwQ-32B ending `{{- \'<|im_start|>assistant\\n<think>\\n\' }}` ("following the worrying trend initiated by DeepSeek ... to force the model to think"): the same form two months earlier',
      'vllm 0.33.0 docs/features/reasoning_outputs.md L32: QwQ-32B -> deepseek_r1. SGLang\u2019s docs name no parser for QwQ; deepseek-r1 (reasoning_parser.py L367-401) forces reasoning and accepts a missing `<think>`',
    ],
    special: {},
    generationPrompt: '`<|im_start|>assistant\\n<think>\\n`, always',
    thinkingSwitch: 'none (the published template reads no kwarg; llama.cpp\u2019s copy adds enable_thinking, default off: `</think>`)',
    modelWrites:
      'only the closing marker: R + `</think>` + C, in practice `R\\n</think>\\n\\nC` (the template lstrips "\\n" after `</think>` in history; it fixes no whitespace of its own)',
    finalTurn:
      'the last assistant message renders `<|im_start|>assistant\\n` + content verbatim + `<|im_end|>\\n`: no `<think>\\n`, reasoning_content not read; earlier assistant turns keep only the text after `</think>`',
    promptEnds: [
      { kwargs: {}, endsWith: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n' },
      { kwargs: { enable_thinking: false }, endsWith: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n' },
    ],
    parsers: { sglang: 'deepseek-r1', vllm: 'deepseek_r1' },
  },
  {
    checkpoint: 'deepseek-ai/DeepSeek-R1-Distill-Llama-8B',
    names: [
      'deepseek-ai/DeepSeek-R1-Distill-Llama-70B',
      'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B',
      'deepseek-ai/DeepSeek-R1-Distill-Qwen-14B',
      'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B',
      'deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B',
    ],
    base: 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja',
    identical: false,
    equivalence: 'rendering',
    evidence: [
      'llama.cpp models/templates/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja and ...-Qwen-32B.jinja @c7f460ab8820 (2025-02-13): one blob (c2066bd73) for both, get_chat_template.py output on one line, generation prompt `<｜Assistant｜><think>\\n`; @8b576b6c55bc (2025-01-30) it was `<｜Assistant｜>`: DeepSeek added `<think>\\n` in between',
      "llama.cpp @566059a26b0c (#18675) reformatted both onto many lines with trimming tags; Qwen-32B\u2019s copy also got a `message['tool_calls']` test, a moved `<｜tool▁calls▁end｜>` and `{% if not enable_thinking %}</think>` (and `| tojson`, @5e54d51b199a #20424)",
      'render check, at-hand Llama-8B file vs the c7f460ab8 text: 64/64 identical. At-hand Qwen-32B file vs the same text: 30/64 (thinking off unless enable_thinking; tool calls)',
      "thylinao1/bayes-cot-faithfulness docs/ROSTER-TEMPLATES.md@f4f370d40f50: HF DeepSeek-R1-Distill-Llama-8B@6a6f4aa41979 and -70B@b1c0b44b4369 tokenizer_config.json byte-identical (sha256 8ac8c85fb242...), ending `{{'<｜Assistant｜><think>\\n'}}{% endif %}`",
      'xorbitsai/inference llm_family.json@7ecec16b6338 "deepseek-r1-distill-llama" (ids Llama-8B, Llama-70B): byte-identical to the c7f460ab8 text',
      'Qwen-1.5B/7B/14B: assumed to carry the same file as Qwen-32B (DeepSeek changed all distills together); not byte-compared',
      'parsers: vllm 0.33.0 docs/features/reasoning_outputs.md L19 (DeepSeek R1 series -> deepseek_r1); SGLang docs separate_reasoning (DeepSeek-R1 series, "R1, R1-0528, R1-Distill" -> deepseek-r1)',
    ],
    special: DEEPSEEK_SPECIAL,
    generationPrompt: '`<｜Assistant｜><think>\\n`, always (none after a tool result)',
    thinkingSwitch: 'none',
    modelWrites:
      'only the closing marker: R + `</think>` + C, typically `…\\n</think>\\n\\n…` (the template keeps only the text after `</think>`, so it fixes no whitespace)',
    finalTurn:
      '`<｜Assistant｜>` + content.split("</think>")[-1] + `<｜end▁of▁sentence｜>`: reasoning dropped, reasoning_content not read, no `<think>\\n`',
    promptEnds: [
      { kwargs: {}, endsWith: '<BOS><｜User｜>Hi<｜Assistant｜><think>\n' },
      { kwargs: { enable_thinking: false }, endsWith: '<BOS><｜User｜>Hi<｜Assistant｜><think>\n' },
    ],
    parsers: { sglang: 'deepseek-r1', vllm: 'deepseek_r1' },
  },
  {
    checkpoint: 'deepseek-ai/DeepSeek-R1',
    names: [],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      'huggingface/huggingface.js packages/jinja/test/e2e.test.js@c35bd615f (2025-01-30), "deepseek-ai/DeepSeek-R1": the template as then published, which joins several system messages with "\\n\\n" and renders an assistant\u2019s content before its tool calls; generation prompt `<｜Assistant｜>`',
      'xorbitsai/inference llm_family.json@7ecec16b6338, the entry it labels "deepseek-r1-distill-qwen": that same text with `<think>\\n` added to the generation prompt (DeepSeek\u2019s February 2025 change); the latest Hugging Face revision was not read',
      'render check, that text vs the at-hand Llama-8B distill file: identical for every conversation without tool calls (one system message at most), different with tool calls',
    ],
    special: DEEPSEEK_SPECIAL,
    generationPrompt: '`<｜Assistant｜><think>\\n`, always (per the copy above)',
    thinkingSwitch: 'none',
    modelWrites: 'as the distills: R + `</think>` + C',
    finalTurn: 'as the distills: `<｜Assistant｜>` + content after `</think>` + `<｜end▁of▁sentence｜>`',
    parsers: { sglang: 'deepseek-r1', vllm: 'deepseek_r1' },
  },
  {
    checkpoint: 'deepseek-ai/DeepSeek-R1-0528',
    names: [],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      'sglang 0.5.23 srt/parser/reasoning_parser.py L367-381 (DeepSeekR1Detector): "DeepSeek-R1-0528: Generates thinking content with <think> start tag"',
      'xorbitsai/inference llm_family.json@7ecec16b6338 "deepseek-r1-0528": generation prompt `<｜Assistant｜>` with nothing after it; the copy carries xinference\u2019s own tool-prompt text, so it is not the published bytes',
      'the published text itself was not found in any source searched',
    ],
    special: DEEPSEEK_SPECIAL,
    generationPrompt: '`<｜Assistant｜>` (secondary copy); nothing opens the reasoning',
    thinkingSwitch: 'none',
    modelWrites: 'the opening marker too: `<think>` + R + `</think>` + C (exact whitespace not established)',
    finalTurn: 'content after `</think>` (secondary copy); not established from the published text',
    parsers: { sglang: 'deepseek-r1', vllm: 'deepseek_r1' },
  },
  {
    checkpoint: 'deepseek-ai/DeepSeek-R1-0528-Qwen3-8B',
    names: [],
    base: null,
    identical: false,
    equivalence: 'none',
    evidence: [
      "thylinao1/bayes-cot-faithfulness docs/ROSTER-TEMPLATES.md@f4f370d40f50, HF revision 6e8885a6ff5c (tokenizer_config.json sha256 78872f2c1f0a5fb7...): a user turn renders `'<｜User｜>' + content + '<｜Assistant｜>'`; the generation prompt `{% if add_generation_prompt and not ns.is_last_user and not ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}`; assistant content split at `</think>`",
      'xorbitsai/inference llm_family.json@7ecec16b6338 "deepseek-r1-0528-qwen3": the same decisive lines',
    ],
    special: DEEPSEEK_SPECIAL,
    generationPrompt: '`<｜Assistant｜>`, written by the last user turn itself (add_generation_prompt adds nothing after a user turn)',
    thinkingSwitch: 'none',
    modelWrites: 'the opening marker too: `<think>` + R + `</think>` + C',
    finalTurn: 'content.split("</think>")[-1] + `<｜end▁of▁sentence｜>` after the `<｜Assistant｜>` the user turn wrote: reasoning dropped',
    parsers: { sglang: 'deepseek-r1', vllm: 'deepseek_r1' },
  },
];
