// The template sweep's pinned verdicts (test/fidelity/template-sweep-expected.json): for every template, engine,
// reasoning parser (the engine's, or none) and thinking setting, the verdict of every cut, so that a template
// path that starts refusing cuts (or stops) fails the sweep instead of passing as "no drift". The npm sweep
// (test/unit/templates/fidelity-*.test.ts) compares its cells with it exactly; the vLLM suite's own-code sweep
// (test/vllm/template-sweep.test.ts) compares its vLLM cells with the same entries.
//
// A deliberate change: rerun the shards with UPDATE_SWEEP_EXPECTATIONS=1 (the file is rewritten, only the cells
// that ran; the totals recomputed) and review the file's diff:
//   npx tsc -p tsconfig.json && UPDATE_SWEEP_EXPECTATIONS=1 npx jest dist/test/unit/templates/fidelity-
import * as fs from 'node:fs';
import * as path from 'node:path';

export const EXPECTATIONS_FILE = path.resolve(__dirname, '..', '..', '..', 'test', 'fidelity', 'template-sweep-expected.json');
export const UPDATING = process.env.UPDATE_SWEEP_EXPECTATIONS === '1';
const HOW_TO_UPDATE =
  'if the change is deliberate: UPDATE_SWEEP_EXPECTATIONS=1 npx jest dist/test/unit/templates/fidelity- (after tsc), then review the diff of test/fidelity/template-sweep-expected.json';

/** One cell's cuts in order, a letter each: E exact, R refused before leg 2, D drift (never pinned: it fails). */
export interface CellVerdict {
  /** The template refuses the system prompt: the conversation without it (template-sweep.ts NO_SYSTEM). */
  readonly conversation?: 'no system prompt';
  /** The template refuses both conversations: no cut. */
  readonly skipped?: true;
  readonly reasoning: string;
  readonly content: string;
}

export type Engine = 'sglang' | 'vllm';
export type Parser = 'engine' | 'none';
export type Mode = 'default' | 'thinking-off';

export function cellKey(engine: Engine, parser: Parser, mode: Mode): string {
  return `${engine} ${parser === 'engine' ? 'parser' : 'no-parser'} ${mode}`;
}

export interface Expectations {
  readonly templates: Record<string, Record<string, CellVerdict>>;
}

export function readExpectations(): Expectations {
  if (!fs.existsSync(EXPECTATIONS_FILE)) return { templates: {} };
  const j = JSON.parse(fs.readFileSync(EXPECTATIONS_FILE, 'utf8'));
  return { templates: j.templates ?? {} };
}

const count = (s: string, letter: string) => [...s].filter((ch) => ch === letter).length;

function describePhase(name: string, s: string): string {
  if (!s) return `${name} none`;
  const d = count(s, 'D');
  return `${name} ${count(s, 'E')} exact / ${count(s, 'R')} refused${d ? ` / ${d} DRIFT` : ''} (${s})`;
}

export function describeCell(v: CellVerdict | undefined): string {
  if (!v) return 'not pinned';
  if (v.skipped) return 'skipped (the template refuses both conversations)';
  const conv = v.conversation ? `${v.conversation}: ` : '';
  return `${conv}${describePhase('reasoning', v.reasoning)}, ${describePhase('content', v.content)}`;
}

export const sameCell = (a: CellVerdict | undefined, b: CellVerdict | undefined): boolean =>
  JSON.stringify(normalize(a)) === JSON.stringify(normalize(b));

function normalize(v: CellVerdict | undefined): CellVerdict | undefined {
  if (!v) return undefined;
  return { conversation: v.conversation, skipped: v.skipped, reasoning: v.reasoning, content: v.content };
}

/** The cells that differ from the pinned ones, as lines a reviewer can read (empty: all match). */
export function diffCells(template: string, got: Record<string, CellVerdict>, pinned = readExpectations()): string[] {
  const want = pinned.templates[template] ?? {};
  const keys = [...new Set([...Object.keys(want), ...Object.keys(got)])];
  return keys
    .filter((k) => k in got && !sameCell(want[k], got[k]))
    .map((k) => `${template} | ${k}: pinned ${describeCell(want[k])}; now ${describeCell(got[k])}. ${HOW_TO_UPDATE}`);
}

export interface Totals {
  exact: number;
  refused: number;
  skippedCells: number;
}

/** Exact and refused cuts per engine, and per engine and parser, over every pinned cell. */
export function totals(e: Expectations): Record<string, Totals> {
  const out: Record<string, Totals> = {};
  const add = (key: string, v: CellVerdict) => {
    const t = (out[key] ??= { exact: 0, refused: 0, skippedCells: 0 });
    const cuts = v.reasoning + v.content;
    t.exact += count(cuts, 'E');
    t.refused += count(cuts, 'R');
    if (v.skipped) t.skippedCells++;
  };
  for (const cells of Object.values(e.templates))
    for (const [k, v] of Object.entries(cells)) {
      const [engine, parser] = k.split(' ');
      add('all', v);
      add(engine, v);
      add(`${engine} ${parser}`, v);
    }
  return out;
}

function serialize(e: Expectations): string {
  const names = Object.keys(e.templates).sort((a, b) => a.localeCompare(b));
  const t = totals(e);
  const lines = [
    '{',
    `  "about": ${JSON.stringify(
      'Pinned verdicts of the template sweep (test/fidelity/template-sweep.ts): per template and cell (engine, parser or no-parser, thinking setting), one letter per cut, E exact, R refused before leg 2. Written by UPDATE_SWEEP_EXPECTATIONS=1 (test/fidelity/sweep-expectations.ts); review its diff.',
    )},`,
    `  "totals": {${Object.keys(t)
      .sort()
      .map((k) => `\n    ${JSON.stringify(k)}: ${JSON.stringify(t[k])}`)
      .join(',')}\n  },`,
    '  "templates": {',
    names
      .map((n) => {
        const cells = e.templates[n];
        const body = Object.keys(cells)
          .sort()
          .map((k) => `      ${JSON.stringify(k)}: ${JSON.stringify(normalize(cells[k]))}`)
          .join(',\n');
        return `    ${JSON.stringify(n)}: {\n${body}\n    }`;
      })
      .join(',\n'),
    '  }',
    '}',
  ];
  return `${lines.join('\n')}\n`;
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Merges these templates' cells into the file (the shards run in parallel jest workers: one writer at a time,
 * by an mkdir lock). `keep`: the sweep's template names, when known; templates not among them are dropped.
 */
export function updateExpectations(got: Record<string, Record<string, CellVerdict>>, keep?: readonly string[]): void {
  const lock = `${EXPECTATIONS_FILE}.lock`;
  for (let waited = 0; ; waited += 100) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      if (waited > 60_000) fs.rmSync(lock, { recursive: true, force: true });
      sleep(100);
    }
  }
  try {
    const e = readExpectations();
    const templates = { ...e.templates };
    for (const [name, cells] of Object.entries(got)) templates[name] = { ...templates[name], ...cells };
    if (keep) for (const name of Object.keys(templates)) if (!keep.includes(name)) delete templates[name];
    const tmp = `${EXPECTATIONS_FILE}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, serialize({ templates }));
    fs.renameSync(tmp, EXPECTATIONS_FILE);
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

/** The file's totals equal its cells' (a hand edit of one without the other is caught). */
export function storedTotalsMatch(): { stored: unknown; computed: unknown } {
  const j = JSON.parse(fs.readFileSync(EXPECTATIONS_FILE, 'utf8'));
  return { stored: j.totals, computed: totals({ templates: j.templates ?? {} }) };
}
