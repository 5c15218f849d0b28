// The ways an engine can be asked to continue a family's answer, as EngineRule factories. Which family uses
// which is the table's business (table.ts); the facts behind each are cited where it is used.
import { rawText } from './raw-text';
import type { Delivered, EngineContext, EngineRule, Leg2Shape, Phase, ReasoningFormat, Unsupported } from './types';

const BOTH: readonly Phase[] = ['reasoning', 'content'];

/**
 * SGLang's chat endpoint with continue_final_message: it drops the final assistant message, renders the rest
 * with add_generation_prompt=True and the request's chat_template_kwargs, and appends the message's content
 * verbatim (serving_chat.py `_handle_last_assistant_message` L513-549, `_append_assistant_prefix_to_prompt_ids`
 * L551-575, `_apply_jinja_template` L2153-2235; the request's add_generation_prompt is not a field there and is
 * dropped). So the prompt is the uninterrupted one plus exactly the raw text, for every phase. Its reasoning
 * parser starts in the state the prefix leaves it in (reasoning_parser.py L104-116, L2355-2362).
 */
export function sglangAppend(format: ReasoningFormat | null, extra: { cites?: string[]; harmony?: boolean } = {}): EngineRule {
  return {
    phases: BOTH,
    note: extra.harmony
      ? 'generation prompt + raw harmony text; leg 2 streamed raw (separate_reasoning false) and split by the gateway'
      : 'generation prompt + raw text (continue_final_message)',
    cites: [
      'sglang 0.5.23 srt/entrypoints/openai/serving_chat.py L513-575, L2153-2235',
      'sglang 0.5.23 srt/parser/reasoning_parser.py L104-116, L2355-2362',
      ...(extra.cites ?? []),
    ],
    plan: (c) => {
      const raw = rawText(format, c.delivered, c.phase, c.thinking);
      if (typeof raw !== 'string') return raw;
      if (!extra.harmony) return { message: { content: raw }, split: 'engine' };
      // SGLang's harmony parser ignores the prefix (reasoning_parser.py GptOssDetector L999-1066): leg 2 would
      // come back mis-split. Raw text instead, special tokens kept (serving_chat.py L1821-1823), split here.
      return { message: { content: raw }, fields: { separate_reasoning: false }, split: 'harmony' };
    },
  };
}

/**
 * llama-server's structured continuation: the final assistant message's reasoning_content and content;
 * llama.cpp renders the generation prompt up to the template's reasoning start, the reasoning, and (content
 * set) its reasoning end and the content (common/chat-auto-parser-generator.cpp L54-70, tools/server
 * server-common.cpp L1275-1288). The delivered parts go as they came.
 */
export function llamacppStructured(verifiedBy: string, thinkingOnly?: boolean, note?: string): EngineRule {
  return {
    phases: BOTH,
    thinkingOnly,
    note: note ?? 'structured continue_final_message (reasoning_content + content)',
    cites: ['llama.cpp (node-llama-cpp 3.21.1, 80fb11a) common/chat-auto-parser-generator.cpp L54-70', verifiedBy],
    plan: (c) => {
      if (thinkingOnly !== undefined && c.thinking !== thinkingOnly)
        return { unsupported: `thinking-${c.thinking ? 'on' : 'off'}-unsupported` };
      const { reasoning, content } = c.delivered;
      return { message: reasoning ? { content, reasoning_content: reasoning } : { content }, split: 'engine' };
    },
  };
}

export function unsupportedRule(note: string, cites: string[]): EngineRule {
  return { phases: [], note, cites, plan: () => ({ unsupported: 'family-engine-unsupported' }) };
}

/** Not checked against that engine here: no claim is made, the stream ends explicitly. */
export const NOT_VERIFIED_ON_LLAMACPP = unsupportedRule('not verified against llama-server', []);

/** A vLLM-style rule: the final message goes through the template; `build` returns it when the cut renders exactly. */
export function templateRule(
  phases: readonly Phase[],
  note: string,
  cites: string[],
  build: (d: Delivered, thinking: boolean, c: EngineContext) => Leg2Shape['message'] | Unsupported,
  thinkingOnly?: boolean,
): EngineRule {
  return {
    phases,
    thinkingOnly,
    // The notes of the rules whose template trims say so ("not after ... whitespace").
    whitespaceCutsRefused: /whitespace/.test(note),
    note,
    cites,
    plan: (c) => {
      if (thinkingOnly !== undefined && c.thinking !== thinkingOnly)
        return { unsupported: `thinking-${c.thinking ? 'on' : 'off'}-unsupported` };
      if (!phases.includes(c.phase)) return { unsupported: `phase-${c.phase}-unsupported` };
      const m = build(c.delivered, c.thinking, c);
      return 'unsupported' in m ? (m as Unsupported) : { message: m, split: 'engine' };
    },
  };
}

/** A delivered part whose whitespace the template would change: this cut cannot be rendered exactly. */
export const WHITESPACE: Unsupported = { unsupported: 'whitespace-not-rendered-exactly' };

export const trimmed = (s: string): boolean => s === s.trim();
