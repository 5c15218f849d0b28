// Qwen checkpoints. Each entry is proven against its checkpoint's own template (test/unit/families/fidelity.test.ts;
// where llama.cpp's copy differs from the published one, the published form: test/fidelity/checkpoints.ts).
import type { ModelFamily } from '../types';
import {
  always,
  CANITOOLCALL,
  enableThinking,
  NOT_VERIFIED_ON_LLAMACPP,
  plainFamily,
  QWEN_SPELLING,
  sglangAppend,
  THINK,
  templateRule,
  trimmed,
  VLLM,
  WHITESPACE,
} from './common';

/** Qwen3 hybrids (the Qwen3-0.6B template): the model writes `<think>\nR\n</think>\n\nC`. */
export const qwen3: ModelFamily = {
  name: 'qwen3',
  // The hybrid checkpoints (Qwen3-0.6B ... Qwen3-235B-A22B and their quantisations), not the 2507 releases.
  match: /^qwen3-\d+(\.\d+)?b(-a\d+b)?(?!.*-(instruct|thinking)-2507)/,
  examples: ['Qwen/Qwen3-32B', 'qwen3-8b', 'Qwen/Qwen3-30B-A3B'],
  template: 'Qwen-Qwen3-0.6B.jinja',
  provenTemplates: ['87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5'],
  proof: 'llama.cpp copy of Qwen3-0.6B (renders as the published Qwen3 template for text contents)',
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

/** Qwen3 Thinking-2507: the generation prompt opens `<think>\n`; the model writes `R\n</think>\n\nC`. */
export const qwen3Thinking2507: ModelFamily = {
  name: 'qwen3-thinking-2507',
  match: /^qwen3-.*-thinking-2507/,
  examples: ['Qwen/Qwen3-235B-A22B-Thinking-2507', 'Qwen/Qwen3-30B-A3B-Thinking-2507'],
  template: 'Qwen-Qwen3-0.6B.jinja',
  provenTemplates: ['988de5f54bddd1c0ddeaa7781860415c8a25800a0ae7008cf5b93fd2148d48a3'],
  proof: 'published form: llama.cpp\u2019s Qwen3-0.6B copy with the 2507 generation prompt (test/fidelity/checkpoints-qwen-deepseek.ts)',
  reasoning: THINK(true, undefined, QWEN_SPELLING),
  thinking: always,
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['content'],
      'content only: the template closes the final turn\u2019s think block',
      [...VLLM, 'vllm 0.33.0 parser/qwen3.py L287 (no whitespace stripped)'],
      // '<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n'), after the prompt's '<think>\n'
      (d) => {
        if (!/^[^\n]([\s\S]*[^\n])?\n$/.test(d.reasoning) || !/^\n\n(?!\n)/.test(d.content)) return WHITESPACE;
        return { content: d.content, reasoning_content: d.reasoning };
      },
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** QwQ-32B (published form): the generation prompt opens `<think>\n`; the final turn renders its content as sent. */
export const qwq: ModelFamily = {
  name: 'qwq',
  // Not QwQ-32B-Preview: its template is Qwen2.5's ChatML, with no `<think>` in the generation prompt.
  match: /^qwq-32b(?!-preview)/,
  examples: ['Qwen/QwQ-32B'],
  template: 'Qwen-QwQ-32B.jinja',
  provenTemplates: ['16488ad69d85833e5f66c50174f39834b688343337e9337f018deaa21b354117'],
  proof: 'published form: llama.cpp\u2019s QwQ copy without its added enable_thinking line, byte-identical to the published text',
  reasoning: THINK(true),
  thinking: always,
  engines: {
    sglang: sglangAppend(THINK(true)),
    vllm: templateRule(
      ['reasoning', 'content'],
      'the final turn renders its content as sent: the prompt\u2019s `<think>\\n` and the raw text',
      [...VLLM, 'vllm 0.33.0 reasoning/deepseek_r1_reasoning_parser.py L44-64'],
      (d) => ({ content: `<think>\n${d.reasoning}${d.content ? `</think>${d.content}` : ''}` }),
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};

/** Qwen3.5 / Qwen3.6 (the Qwen3.5-4B template): the generation prompt opens `<think>\n`. */
export const qwen35: ModelFamily = {
  name: 'qwen3.5',
  match: /^qwen3[.-]?[56](?!\d)/,
  examples: ['Qwen/Qwen3.5-397B-A17B', 'qwen3.6', 'Qwen/Qwen3.6-35B-A3B'],
  template: 'Qwen3.5-4B.jinja',
  provenTemplates: ['a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715'],
  proof: 'llama.cpp copy of Qwen3.5-4B',
  // The same text as Qwen3.5-9B's (one template for the Qwen3.5 checkpoints); Qwen3.6's is not recorded.
  published: {
    file: 'Qwen/Qwen3.5-9B chat_template.jinja',
    revision: 'c202236235762e1c871ad0ccb60c8ee5ba337b9a',
    sha256: 'a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715',
    recordedBy: CANITOOLCALL,
  },
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

/**
 * Qwen3 Instruct-2507: never thinks. Its template is not at hand; on SGLang the continuation does not depend on
 * it (the raw text is appended after the generation prompt, whatever the template), on vLLM it does.
 */
export const qwen3Instruct2507 = plainFamily({
  name: 'qwen3-instruct-2507',
  match: /^qwen3-.*-instruct-2507/,
  examples: ['Qwen/Qwen3-235B-A22B-Instruct-2507', 'Qwen/Qwen3-30B-A3B-Instruct-2507'],
  template: '',
  proof: 'template not at hand: SGLang appends the content whatever the template (serving_chat.py L513-575)',
  provenTemplates: [],
  vllm: 'needs-template',
});

/** Qwen2.5 instruct models: ChatML, no reasoning. */
export const qwen25 = plainFamily({
  name: 'qwen2.5',
  match: /^qwen2\.5-/,
  examples: ['Qwen/Qwen2.5-7B-Instruct', 'Qwen/Qwen2.5-72B-Instruct'],
  template: 'Qwen-Qwen2.5-7B-Instruct.jinja',
  proof: 'llama.cpp copy of Qwen2.5-7B-Instruct',
  provenTemplates: ['cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f'],
  vllm: 'as-sent',
});

/** Qwen3-Coder: no reasoning. */
export const qwen3Coder = plainFamily({
  name: 'qwen3-coder',
  // Not Qwen3-Coder-Next: its published template is another text (canitoolcall 0.1.1 provenance: template_sha256
  // c79a8330… at Qwen/Qwen3-Coder-Next@a7fbcb5c, 5a38bfa0… at Qwen3-Coder-30B-A3B-Instruct@b2cff646).
  match: /^qwen3-?coder(?!-next)/,
  examples: ['Qwen/Qwen3-Coder-480B-A35B-Instruct', 'Qwen/Qwen3-Coder-30B-A3B-Instruct'],
  template: 'Qwen3-Coder.jinja',
  proof: 'llama.cpp copy of Qwen3-Coder',
  provenTemplates: ['d287fb2edf144207f868ae1b282755dc19db2a3f1c5b3a3d57e9e5abffa98392'],
  vllm: 'as-sent',
});
