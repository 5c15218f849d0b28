// The fake engine speaking a model family: the raw tokens such a model writes after its generation prompt
// (its markers spelled as its template renders them, src/families/table/), and how each engine's reasoning
// parser splits them into the reasoning and content deltas a client receives. The SGLang and vLLM splits here
// are OUR reading of their parsers (docs/families.md names the files): the fidelity suite checks the SGLang one
// against SGLang's own parser code, the vLLM one only stands for vLLM, which cannot run here.
import type { ModelFamily } from '../../src/families/types';

/** Special markers are single tokens (`<|channel|>`, `<think>`); text between them is split as the caller did. */
const MARKER = /(<\|[a-z_]+\|>|<\/?think>)/;

function markerTokens(s: string): string[] {
  return s.split(MARKER).filter((t) => t !== '');
}

/** The raw tokens of an answer made of these reasoning and content tokens. */
export function rawTokens(family: ModelFamily, thinking: boolean, reasoning: readonly string[], content: readonly string[]): string[] {
  const f = family.reasoning;
  if (!f) return [...content];
  const sp = f.spelling ?? {};
  if (!thinking) return sp.offLead ? [sp.offLead, ...content] : [...content];
  const out: string[] = [];
  if (!f.promptOpens) {
    if (f.lead) out.push(f.lead);
    out.push(...markerTokens(f.open));
    if (sp.afterOpen) out.push(sp.afterOpen);
  }
  out.push(...reasoning);
  if (sp.beforeClose) out.push(sp.beforeClose);
  out.push(...markerTokens(f.close));
  if (sp.afterClose) out.push(sp.afterClose);
  out.push(...content);
  return out;
}

export interface Delta {
  reasoning: string;
  content: string;
  /** The token was generated inside the reasoning (its markers included): what usage.reasoning_tokens counts. */
  thinking?: boolean;
}

type VllmParser = 'engine' | 'engine-strip' | 'r1' | 'none';

/** vLLM 0.33.0's parser kind per family (vllm/reasoning/__init__.py registry; docs/families.md). */
const VLLM_PARSER: Record<string, VllmParser> = {
  qwen3: 'engine', // parser/qwen3.py: strip_trailing_reasoning_whitespace=False (L287)
  'qwen3-thinking-2507': 'engine',
  'qwen3.5': 'engine',
  qwq: 'r1', // docs/features/reasoning_outputs.md L32: QwQ-32B -> deepseek_r1
  'nemotron-3-nano': 'r1',
  'glm-4.6': 'engine-strip', // parser/glm47_moe.py: the engine default strips (parser_engine_config.py L118)
  'glm-4.7': 'engine-strip',
  'kimi-k2-thinking': 'engine-strip', // parser/kimi_k2.py L144
  'minimax-m2': 'engine-strip', // parser/minimax_m2.py
  'deepseek-v4': 'engine-strip',
  'deepseek-r1-distill': 'r1', // reasoning/deepseek_r1_reasoning_parser.py
  'deepseek-v3.1': 'r1', // deepseek_v3: the R1 parser when thinking (deepseek_v3_reasoning_parser.py L25-37)
  'deepseek-v3.2': 'r1',
  'gemma-4': 'engine-strip', // parser/gemma4.py: strips `thought\n`; the engine default strips trailing reasoning whitespace
  generic: 'r1',
};

export interface SplitOptions {
  startInReasoning: boolean;
  /** vLLM's engine parsers (strip_trailing_reasoning_whitespace): the reasoning's trailing whitespace is dropped. */
  stripTrailingReasoning?: boolean;
  /** vLLM's engine parsers: whitespace-only content waits for the next non-space (parser_engine.py L898-909). */
  holdWhitespaceContent?: boolean;
}

/** The longest end of `text` that begins one of `markers` (a marker arriving over several tokens). */
function partialMarker(text: string, markers: readonly string[]): number {
  let best = 0;
  for (const m of markers) {
    for (let n = Math.min(m.length - 1, text.length); n > best; n--) {
      if (text.endsWith(m.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

/**
 * A reasoning parser over raw tokens: in reasoning, the opening marker is absorbed and the closing one ends the
 * reasoning; markers are nobody's text and a marker split over tokens is held until it completes (SGLang's
 * detectors: reasoning_parser.py L104-200; vLLM's engine parsers absorb (REASONING, THINK_START) likewise).
 * One delta per token, empty where the token gave the client nothing.
 */
export function splitTokens(family: ModelFamily, tokens: readonly string[], o: SplitOptions): Delta[] {
  const f = family.reasoning;
  if (!f) return tokens.map((t) => ({ reasoning: '', content: t }));
  const out: Delta[] = [];
  let inReasoning = o.startInReasoning;
  let pending = '';
  let deferred = '';
  let heldContent = '';
  for (const t of tokens) {
    const d: Delta = { reasoning: '', content: '', thinking: inReasoning };
    pending += t;
    while (pending) {
      if (!inReasoning) {
        d.content += pending;
        pending = '';
        break;
      }
      const open = pending.indexOf(f.open);
      const close = pending.indexOf(f.close);
      if (open >= 0 && (close < 0 || open < close)) {
        d.reasoning += pending.slice(0, open);
        pending = pending.slice(open + f.open.length);
      } else if (close >= 0) {
        d.reasoning += pending.slice(0, close);
        pending = pending.slice(close + f.close.length);
        inReasoning = false;
      } else {
        const hold = partialMarker(pending, [f.open, f.close]);
        d.reasoning += pending.slice(0, pending.length - hold);
        pending = pending.slice(pending.length - hold);
        break;
      }
    }
    if (o.stripTrailingReasoning) {
      if (d.reasoning) {
        const combined = deferred + d.reasoning;
        d.reasoning = combined.trimEnd();
        deferred = combined.slice(d.reasoning.length);
      }
      if (!inReasoning) deferred = '';
    }
    if (o.holdWhitespaceContent && d.content) {
      heldContent += d.content;
      d.content = heldContent.trim() === '' ? '' : heldContent;
      if (d.content) heldContent = '';
    }
    out.push(d);
  }
  return out;
}

/**
 * vLLM's streaming split of these tokens. `startInReasoning`: the prompt ended inside an open reasoning block
 * (abstract_parser.py L857-882: is_reasoning_end(prompt_token_ids) false); by default, thinking on.
 */
export function vllmSplit(family: ModelFamily, tokens: readonly string[], thinking: boolean, startInReasoning = thinking): Delta[] {
  const kind = family.reasoning ? (VLLM_PARSER[family.name] ?? 'none') : 'none';
  if (kind === 'none') return tokens.map((t) => ({ reasoning: '', content: t }));
  return splitTokens(family, tokens, {
    startInReasoning,
    stripTrailingReasoning: kind === 'engine-strip',
    holdWhitespaceContent: kind === 'engine' || kind === 'engine-strip',
  });
}

/** SGLang's split (its detectors strip nothing; DeepSeek-R1's is forced into reasoning: reasoning_parser.py L400). */
export function sglangSplit(family: ModelFamily, tokens: readonly string[], thinking: boolean): Delta[] {
  return splitTokens(family, tokens, { startInReasoning: thinking || family.name === 'deepseek-r1-distill' });
}
/**
 * Whether a vLLM prompt ends inside an open reasoning block, judged on the current turn only (what follows the
 * generation prompt: the continued text), as the parsers with turn boundaries do (parser_engine.py L712-734).
 */
export function vllmPromptOpensReasoning(family: ModelFamily, currentTurn: string, thinking: boolean): boolean {
  const f = family.reasoning;
  if (!f || !thinking) return false;
  const lastOpen = currentTurn.lastIndexOf(f.open);
  const lastClose = currentTurn.lastIndexOf(f.close);
  // Neither marker: the state the generation prompt left, reasoning (wait_for_reasoning).
  return lastOpen === lastClose ? true : lastOpen > lastClose;
}
