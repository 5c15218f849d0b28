// The README's family x engine table, written from the family table itself (test/unit/families/table.test.ts checks
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

/** How a family's continuations are verified: its proof, the served template, the engine. */
function verifiedHow(f: ModelFamily): string {
  const how = ['table'];
  if (f.provenTemplates.length > 0) how.push('template');
  if (ENGINES.some((e) => e !== 'sglang' && f.engines[e].phases.length > 0)) how.push('engine');
  return how.join(', ');
}

export function familyTableMarkdown(): string {
  const head = [
    '| family | `CONTINUATION_MODEL` e.g. | proven against | SGLang | vLLM | llama.cpp | verified how |',
    '|---|---|---|---|---|---|---|',
  ];
  const rows = FAMILIES.map(
    (f) =>
      `| ${f.name} | \`${f.examples[0]}\` | ${f.proof} | ${ENGINES.map((e) => cell(f, e, f.engines[e])).join(' | ')} | ${verifiedHow(f)} |`,
  );
  const any = [
    '| any other model, `CHAT_TEMPLATE` set | any name | the served template, rendered here | **reasoning + content** where the template path is exact [template-fidelity] | **where a final-message shape renders exactly** [template-fidelity] | **reasoning + content** (the shape llama-server\u2019s /apply-template renders exactly, checked per continuation) [real-engine] | template, engine |',
    '| any other model, no template | any name | nothing: the reference\u2019s `<think>` guess, warned at start | the guess | the guess | the guess | none |',
  ];
  return [...head, ...rows, ...any].join('\n');
}

if (require.main === module) process.stdout.write(`${familyTableMarkdown()}\n`);
