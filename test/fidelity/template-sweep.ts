// The template path over every template of llama.cpp's copy and the checkpoints' own forms
// (test/fidelity/checkpoints.ts): SGLang and vLLM, the engine's reasoning parser and none, the default thinking
// setting and thinking off, every cut (template-case.ts). No cut may drift: exact, or refused before leg 2 is
// sent. Split in shards so that jest's workers share it (test/unit/templates/fidelity-*.test.ts).
import * as fs from 'node:fs';
import { CHECKPOINTS } from './checkpoints';
import { type Assets, Harness, provisionAssets } from './harness-client';
import { type CaseInput, runTemplateCase } from './template-case';

const MESSAGES = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello! How can I help?' },
  { role: 'user', content: 'What is the answer?' },
];
// Gemma 2 refuses a system role; Mistral's templates put the system prompt into the last user turn.
const NO_SYSTEM = MESSAGES.slice(1);

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

export function sweepShard(index: number, of: number): void {
  jest.setTimeout(15 * 60 * 1000);
  let harness: Harness;
  const templates = sweepTemplates(provisionAssets()).filter((_, i) => i % of === index);
  const summary: string[] = [];
  beforeAll(() => {
    harness = Harness.start();
  });
  afterAll(async () => {
    await harness?.stop();
    console.log(`template path, exact / refused cuts (shard ${index + 1} of ${of}):\n${summary.join('\n')}`);
  });
  describe.each(templates.map((t) => [t.name, t] as const))('%s', (_name, t) => {
    it.each(['sglang', 'vllm'] as const)('on %s: every cut exact or refused before leg 2', async (engine) => {
      const drift: string[] = [];
      let exact = 0;
      let refused = 0;
      for (const parser of ['engine', 'none'] as const)
        for (const kwargs of [undefined, { enable_thinking: false }]) {
          const c: CaseInput = {
            name: t.name,
            template: t.text,
            special: t.special,
            engine,
            messages: MESSAGES,
            kwargs,
            parser,
            nowMs: Date.now(),
          };
          let r = await runTemplateCase(harness, c);
          if (r.skipped) r = await runTemplateCase(harness, { ...c, messages: NO_SYSTEM });
          for (const cut of r.cuts) {
            if (cut.kind === 'drift') drift.push(`${parser} ${JSON.stringify(kwargs ?? {})} ${cut.phase}: ${cut.why}`);
            else if (cut.kind === 'exact') exact++;
            else refused++;
          }
        }
      summary.push(`  ${t.name} ${engine}: ${exact} exact, ${refused} refused`);
      expect(drift).toEqual([]);
    });
  });
}
