// The README's family x engine table, written from the family table itself (test/unit/families.test.ts checks
// the README carries exactly this), so the documentation cannot drift from what the gateway does.
import { FAMILIES } from './table';
import { ENGINES, type EngineRule, type ModelFamily } from './types';

const TESTS: Record<string, string> = {
  sglang: 'family-fidelity',
  vllm: 'family-fidelity',
  llamacpp: 'real-engine',
};

function cell(f: ModelFamily, engine: (typeof ENGINES)[number], rule: EngineRule): string {
  if (rule.phases.length === 0) return `no: ${rule.note}`;
  const phases = f.reasoning ? rule.phases.join(' + ') : 'content';
  const when = rule.thinkingOnly === undefined ? '' : rule.thinkingOnly ? ', thinking on' : ', thinking off';
  const extra = rule.note.startsWith('generation prompt + raw') || rule.note.startsWith('structured') ? '' : ` (${rule.note})`;
  return `**${phases}${when}**${extra} [${TESTS[engine]}]`;
}

export function familyTableMarkdown(): string {
  const head = ['| family | `CONTINUATION_MODEL` e.g. | SGLang | vLLM | llama.cpp |', '|---|---|---|---|---|'];
  const rows = FAMILIES.map((f) => `| ${f.name} | \`${f.examples[0]}\` | ${ENGINES.map((e) => cell(f, e, f.engines[e])).join(' | ')} |`);
  return [...head, ...rows].join('\n');
}

if (require.main === module) process.stdout.write(`${familyTableMarkdown()}\n`);
