// The template path over every template of llama.cpp's copy and the checkpoints' own forms
// (test/fidelity/checkpoints.ts): SGLang and vLLM, the engine's reasoning parser and none, the default thinking
// setting and thinking off, every cut (template-case.ts). No cut may drift: exact, or refused before leg 2 is
// sent. And every cell's verdicts are pinned (test/fidelity/template-sweep-expected.json, sweep-expectations.ts
// says how to regenerate it), so a path that refuses more (or fewer) cuts than it did fails too; the published
// R1-distill, QwQ and Thinking-2507 forms must continue exactly in every phase their table entry claims, whatever
// the file says (MUST_CONTINUE). Split in shards so that jest's workers share it
// (test/unit/templates/fidelity-*.test.ts). The vLLM suite runs the vLLM cells again through vLLM's own renderer
// and parsers (test/fidelity/vllm-sweep.ts, test/vllm/template-sweep.test.ts).
import * as fs from 'node:fs';
import { FAMILIES } from '../../src/families/table';
import { templateSha256 } from '../../src/templates/served';
import { CHECKPOINTS } from './checkpoints';
import { type Assets, Harness, provisionAssets } from './harness-client';
import { templateMarkers } from './model-output';
import {
  type CellVerdict,
  cellKey,
  diffCells,
  type Engine,
  type Mode,
  type Parser,
  readExpectations,
  storedTotalsMatch,
  UPDATING,
  updateExpectations,
} from './sweep-expectations';
import { type CaseInput, runTemplateCase } from './template-case';

const MESSAGES = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'What is the answer?' },
];
// Gemma 2 refuses a system role; Mistral's templates put the system prompt into the last user turn.
const NO_SYSTEM = MESSAGES.slice(1);

export const PARSERS: readonly Parser[] = ['engine', 'none'];
export const MODES: ReadonlyArray<readonly [Mode, Record<string, unknown> | undefined]> = [
  ['default', undefined],
  ['thinking-off', { enable_thinking: false }],
];

/**
 * The lower bound the pinned file cannot lower (issue 26): these published forms, with the engine's parser and the
 * default thinking setting, continue exactly at some cut of every phase their family's table entry claims on that
 * engine (the entry is proven against this very text: its sha256 is checked). On SGLang that is the reasoning and
 * the content for all three; on vLLM the R1 distills' reasoning (their template keeps only the text after a final
 * turn's `</think>`), QwQ's both, Thinking-2507's content (its template closes a final turn's think block).
 */
export const MUST_CONTINUE: Record<string, string> = {
  'deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja': 'deepseek-r1-distill', // the distills' published template
  'Qwen/QwQ-32B (published form)': 'qwq',
  'Qwen/Qwen3-235B-A22B-Thinking-2507 (published form)': 'qwen3-thinking-2507',
};

export interface SweepTemplate {
  name: string;
  text: string;
  special: Record<string, string>;
}

/** Every llama.cpp template and every checkpoint form derived from one (sorted by name). */
export function sweepTemplates(assets: Assets): SweepTemplate[] {
  const special = { bos_token: '<s>', eos_token: '</s>' };
  const out: SweepTemplate[] = fs
    .readdirSync(assets.templates)
    .filter((f) => f.endsWith('.jinja'))
    .map((f) => ({ name: f, text: fs.readFileSync(`${assets.templates}/${f}`, 'utf8'), special }));
  for (const c of CHECKPOINTS) {
    if (!c.base || !c.derive) continue;
    const base = fs.readFileSync(`${assets.templates}/${c.base}`, 'utf8');
    out.push({ name: `${c.checkpoint} (published form)`, text: c.derive(base), special: { ...special, ...c.special } });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** How a cell's vLLM side runs: harness.py's restatement and our marker split, or vLLM's own code. */
export type VllmOwn = CaseInput['vllmOwn'];

/** One cell: both conversations tried (the system prompt first), every cut's verdict, and the drifts. */
export async function runCell(
  harness: Harness,
  t: SweepTemplate,
  engine: Engine,
  parser: Parser,
  kwargs: Record<string, unknown> | undefined,
  vllmOwn?: VllmOwn,
): Promise<{ verdict: CellVerdict; drift: string[]; parserName?: string }> {
  const c: CaseInput = {
    name: t.name,
    template: t.text,
    special: t.special,
    engine,
    messages: MESSAGES,
    kwargs,
    parser,
    nowMs: Date.now(),
    vllmOwn,
  };
  let r = await runTemplateCase(harness, c);
  let conversation: CellVerdict['conversation'];
  if (r.skipped) {
    r = await runTemplateCase(harness, { ...c, messages: NO_SYSTEM });
    conversation = 'no system prompt';
  }
  if (r.skipped) return { verdict: { skipped: true, reasoning: '', content: '' }, drift: [] };
  const letter = { exact: 'E', refused: 'R', drift: 'D' } as const;
  const phase = (p: string) =>
    r.cuts
      .filter((cut) => cut.phase === p)
      .map((cut) => letter[cut.kind])
      .join('');
  const drift = r.cuts.flatMap((cut) =>
    cut.kind === 'drift' ? [`${parser} ${JSON.stringify(kwargs ?? {})} ${cut.phase}: ${cut.why}`] : [],
  );
  return { verdict: { conversation, reasoning: phase('reasoning'), content: phase('content') }, drift, parserName: r.parserName };
}

/** The MUST_CONTINUE floor for one template's cells: what is missing (empty: met). */
export function floorMisses(t: SweepTemplate, cells: Record<string, CellVerdict>, engines: readonly Engine[]): string[] {
  const familyName = MUST_CONTINUE[t.name];
  if (!familyName) return [];
  const family = FAMILIES.find((f) => f.name === familyName);
  if (!family?.provenTemplates.includes(templateSha256(t.text))) return [`${t.name}: the ${familyName} entry is not proven against it`];
  return engines.flatMap((engine) => {
    const claimed = family.engines[engine].phases;
    const v = cells[cellKey(engine, 'engine', 'default')];
    const missing = claimed.length === 0 ? ['any phase (the entry claims none)'] : claimed.filter((p) => !v?.[p].includes('E'));
    return missing.map(
      (p) => `${t.name} on ${engine} (its parser, default thinking): no exact cut in the ${p}, which ${familyName} claims`,
    );
  });
}

export function sweepShard(index: number, of: number): void {
  jest.setTimeout(15 * 60 * 1000);
  let harness: Harness;
  const all = sweepTemplates(provisionAssets());
  const templates = all.filter((_, i) => i % of === index);
  const pinned = readExpectations();
  const summary: string[] = [];
  const got: Record<string, Record<string, CellVerdict>> = {};
  beforeAll(() => {
    harness = Harness.start();
  });
  afterAll(async () => {
    await harness?.stop();
    if (UPDATING) updateExpectations(got, index === 0 ? all.map((t) => t.name) : undefined);
    console.log(`template path, exact / refused cuts (shard ${index + 1} of ${of}):\n${summary.join('\n')}`);
  });
  if (index === 0 && !UPDATING)
    it('the pinned file names every template of the sweep, and its totals are its cells', () => {
      expect(Object.keys(pinned.templates).sort()).toEqual(all.map((t) => t.name).sort());
      const { stored, computed } = storedTotalsMatch();
      expect(stored).toEqual(computed);
    });
  describe.each(templates.map((t) => [t.name, t] as const))('%s', (_name, t) => {
    it.each(['sglang', 'vllm'] as const)('on %s: every cut exact or refused before leg 2, as pinned', async (engine) => {
      const drift: string[] = [];
      const cells: Record<string, CellVerdict> = {};
      for (const parser of PARSERS)
        for (const [mode, kwargs] of MODES) {
          const r = await runCell(harness, t, engine, parser, kwargs);
          drift.push(...r.drift);
          cells[cellKey(engine, parser, mode)] = r.verdict;
        }
      got[t.name] = { ...got[t.name], ...cells };
      const cuts = Object.values(cells).map((v) => v.reasoning + v.content);
      const n = (l: string) => cuts.join('').split(l).length - 1;
      summary.push(`  ${t.name} ${engine}: ${n('E')} exact, ${n('R')} refused`);
      expect(drift).toEqual([]);
      expect(floorMisses(t, cells, [engine])).toEqual([]);
      if (!UPDATING) expect(diffCells(t.name, cells, pinned)).toEqual([]);
    });
  });
}

/** vLLM 0.33.0's --reasoning-parser for a template's marker pair, where it runs here (VLLM_NOT_RUN: where not). */
export const VLLM_PARSER_FOR: Record<string, string> = {
  '<think>': 'qwen3',
  '<seed:think>': 'seed_oss',
  '<mm:think>': 'minimax_m3',
  '[THINK]': 'mistral',
};

/** The marker pairs whose vLLM parser is not run here, and why: their cells use our marker split on vLLM's prompts. */
export const VLLM_NOT_RUN: Record<string, string> = {
  '<|START_THINKING|>':
    'cohere_command4 imports cohere_melody (vllm/parser/cohere_command.py L17-28), which vllm 0.33.0 does not require and the venv does not have',
  '<thinking>': 'no vLLM 0.33.0 reasoning parser splits at <thinking>',
};

/**
 * The tokens vLLM's parsers look for by id, for one stand-in tokenizer shared by every template (Qwen3's: one
 * model directory, instead of one per template at 15-20 s each): the markers the parsers above split on, the
 * role tokens the templates write (turn boundaries), and Mistral's bracket tokens (its parser needs
 * `[TOOL_CALLS]` as one token). Qwen3's vocabulary has `<think>` and its own role tokens.
 */
export function sweepAddedTokens(templates: readonly SweepTemplate[]): string[] {
  const markers = Object.keys(VLLM_PARSER_FOR).flatMap((open) => {
    const pair = templates.map((t) => templateMarkers(t.text)).find((m) => m?.[0] === open);
    return pair ? [...pair] : [];
  });
  const roles = templates.flatMap(
    (t) => t.text.match(/<\|[^|<>\s]{1,40}\|>|\[gMASK\]|<sop>|\]~[a-z]\]|\[e~\[|\[\/?[A-Z][A-Z_]{2,20}\]/g) ?? [],
  );
  return [...new Set([...markers, ...roles])].filter((m) => m !== '<think>' && m !== '</think>').sort();
}
