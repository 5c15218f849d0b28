// GLM, Kimi and MiniMax checkpoints (test/unit/families/fidelity.test.ts proves each against its template).
import type { EngineRule, ModelFamily } from '../types';
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
  thinkingKwarg,
  trimmed,
  unsupportedRule,
  VLLM,
  WHITESPACE,
} from './common';

/** GLM-4.5 / 4.6: the model writes `\n<think>R</think>\nC` after `<|assistant|>`. */
export const glm46: ModelFamily = {
  name: 'glm-4.6',
  // Not GLM-4.5V / GLM-4.6V: the vision checkpoints publish their own templates.
  match: /^glm-?4\.[56](?![\dv])/,
  examples: ['zai-org/GLM-4.6', 'glm-4.5-air'],
  template: 'GLM-4.6.jinja',
  provenTemplates: ['8804f445c761b9f259e3c1126a579d481a22ca09b2a3d32bcc4eb91bc36e0301'],
  proof: 'llama.cpp copy of GLM-4.6',
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
export const glm47: ModelFamily = {
  name: 'glm-4.7',
  match: /^glm-?(4\.7|5)/,
  examples: ['zai-org/GLM-4.7', 'GLM-4.7-Flash'],
  template: 'GLM-4.7-Flash.jinja',
  provenTemplates: ['d63ad536c3c81880043e22ec7fd08db42b4d8fb7c89c7138bc562bfa25281375'],
  proof: 'llama.cpp copy of GLM-4.7-Flash',
  published: {
    file: 'zai-org/GLM-4.7 chat_template.jinja',
    revision: '602d01efcdd332c5238ca4bcede555defbe83eb7',
    sha256: 'd63ad536c3c81880043e22ec7fd08db42b4d8fb7c89c7138bc562bfa25281375',
    recordedBy: CANITOOLCALL,
  },
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

/** Kimi-K2-Thinking: the model writes `<think>R</think>C`. */
export const kimiK2Thinking: ModelFamily = {
  name: 'kimi-k2-thinking',
  match: /^kimi-?k2-thinking/,
  examples: ['moonshotai/Kimi-K2-Thinking'],
  template: 'Kimi-K2-Thinking.jinja',
  provenTemplates: ['2f6c593d50682612ccc3229f043ecd1bdeb5a32fdfe86ca2158203a61d885817'],
  proof: 'llama.cpp copy of Kimi-K2-Thinking',
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

/** Kimi-K2-Instruct: no reasoning. */
export const kimiK2Instruct = plainFamily({
  name: 'kimi-k2-instruct',
  match: /^kimi-?k2-instruct(?!-0905)/,
  examples: ['moonshotai/Kimi-K2-Instruct'],
  template: 'Kimi-K2-Instruct.jinja',
  proof: 'llama.cpp copy of Kimi-K2-Instruct (not compared with a published copy; llama.cpp edited its tool-call ids)',
  provenTemplates: ['1d396d5b128cdb9b2a4ef73434fa08d31c75604a11daa77bcb4b622d32dddd41'],
  vllm: 'as-sent',
});

const K3_OPEN = '<|open|>think<|sep|>';
const K3_CLOSE = '<|close|>think<|sep|><|open|>response<|sep|>';

/** Kimi-K3: XTML channels; the generation prompt opens the think (or, thinking off, the response) channel. */
export const kimiK3: ModelFamily = {
  name: 'kimi-k3',
  match: /^kimi-?k3/,
  examples: ['moonshotai/Kimi-K3', 'kimi-k3'],
  template: 'Kimi-K3.jinja',
  provenTemplates: ['4578103bf225f58d5b7ceb613ccc2ac8fe82b6707b7289211b3d4825e87806b3'],
  proof: 'llama.cpp copy of Kimi-K3',
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
export const minimaxM2: ModelFamily = {
  name: 'minimax-m2',
  match: /^minimax-?m2/,
  examples: ['MiniMaxAI/MiniMax-M2', 'minimax-m2.5'],
  template: 'MiniMax-M2.jinja',
  provenTemplates: ['967ff7e387676f4b4340585da0585416532f1e6c5ee3f1ede64b2c21ef7ea001'],
  proof: 'llama.cpp copy of MiniMax-M2',
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
