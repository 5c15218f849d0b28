// The generation prompts the checkpoint records claim (test/fidelity/checkpoints.ts `promptEnds`), rendered
// through each form at hand (the base file, or its derived form) with transformers 5.19.0's real Jinja renderer
// (test/fidelity/harness.py, the renderer SGLang and vLLM call): QwQ, Qwen3 Thinking-2507 and the R1 distills
// open `<think>\n` whatever enable_thinking says; Nemotron 3 and Gemma 4 switch on their kwarg.
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { CHECKPOINTS } from '../../fidelity/checkpoints';
import { Harness, provisionAssets } from '../../fidelity/harness-client';

jest.setTimeout(15 * 60 * 1000);

const SPECIAL = { bos_token: '<BOS>', eos_token: '<EOS>' };

let harness: Harness;
let templates: string;
beforeAll(() => {
  templates = provisionAssets().templates;
  harness = Harness.start();
});
afterAll(async () => {
  await harness?.stop();
});

describe('checkpoint forms at hand render the generation prompt the records claim', () => {
  it('every form at hand names its prompt ending, no form not at hand does', () => {
    for (const c of CHECKPOINTS) {
      const named = (c.promptEnds?.length ?? 0) > 0;
      expect([c.checkpoint, named]).toEqual([c.checkpoint, c.base !== null]);
    }
  });

  for (const c of CHECKPOINTS.filter((x) => x.base !== null)) {
    it(`${c.checkpoint} (${c.derive ? 'derived from ' : ''}${c.base})`, async () => {
      const base = readFileSync(path.join(templates, c.base as string), 'utf8');
      const template = c.derive ? c.derive(base) : base;
      for (const { kwargs, endsWith } of c.promptEnds ?? []) {
        const text = await harness.text({
          op: 'render',
          template,
          messages: [{ role: 'user', content: 'Hi' }],
          kwargs,
          special: SPECIAL,
          add_generation_prompt: true,
        });
        expect({ kwargs, tail: text.slice(-endsWith.length) }).toEqual({ kwargs, tail: endsWith });
      }
    });
  }
});
