// The token boundary (issue 17 item 2): where a family's vocabulary is available, the leg 2 prompt's TOKENS must
// start with the uninterrupted prompt's tokens, not only its text. llama.cpp's `llama-tokenize` (built with
// llama-server) tokenizes with the vocabulary-only GGUFs of llama.cpp's models/ (scripts/llama-cpp-assets.sh).
//
// Only Llama 3 is checked: its ggml-vocab-llama-bpe.gguf carries the special tokens its template writes. The
// Qwen vocabularies there (qwen2, qwen35) lack `<think>` as one token (it tokenizes as `<th` `ink` `>`), so they
// would test another tokenizer than the families'; the others have no vocabulary there.
//   vLLM renders leg 2's text and tokenizes it whole: tokens(leg 2 prompt) must begin with tokens(prompt).
//   SGLang encodes the generation prompt and the prefix separately and joins the ids (serving_chat.py L551-575):
//   its prompt begins with the uninterrupted ids by construction; whether the prefix's ids equal what a whole
//   tokenization would give is printed.
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { FAMILIES } from '../../src/families/table';
import { planContinuationRequest } from '../../src/recovery/continuation-request';
import { Harness, provisionAssets } from '../fidelity/harness-client';
import { locateAssets } from './support';

const underOwnConfig = (globalThis as any).__REAL_ENGINE_SUITE__ === true;
const located = underOwnConfig ? locateAssets() : { skip: 'runs only under test/real-engine/jest.config.js (npm run test:real-engine)' };
const describeReal = 'skip' in located ? describe.skip : describe;

const CONTENT = ['The', ' answer', ' is', ' 42', ',', ' 你好', ' 🙂', '\n\n', 'Done', '.'];
const SPECIAL = { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' };

describeReal('token boundary of leg 2 prompts (Llama 3 vocabulary, llama-tokenize)', () => {
  let harness: Harness;
  let templates: string;
  let vocab: string;
  let tokenizeBin: string;
  beforeAll(() => {
    if ('skip' in located) return;
    const a = provisionAssets();
    templates = a.templates;
    vocab = path.join(a.vocab, 'ggml-vocab-llama-bpe.gguf');
    tokenizeBin = path.join(path.dirname(located.assets.bin), 'llama-tokenize');
    harness = Harness.start();
  });
  afterAll(async () => {
    await harness?.stop();
  });

  const ids = (text: string): number[] =>
    JSON.parse(
      execFileSync(tokenizeBin, ['-m', vocab, '--stdin', '--ids', '--log-disable', '--no-bos'], { input: text, encoding: 'utf8' })
        .trim()
        .split('\n')
        .pop() as string,
    );

  test.each(['vllm', 'sglang'] as const)(
    '%s: at every cut the leg 2 prompt begins with the uninterrupted prompt, in tokens',
    async (engine) => {
      const family = FAMILIES.find((f) => f.name === 'llama-3');
      if (!family) throw new Error('no llama-3 family');
      const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'What is the answer?' }] };
      const job = (b: unknown) => ({
        op: engine === 'vllm' ? 'vllm_prompt' : 'sglang_prompt',
        templatePath: path.join(templates, family.template),
        special: SPECIAL,
        body: b,
      });
      const p1 = await harness.text(job(body));
      const t1 = ids(p1);
      const bad: string[] = [];
      let checked = 0;
      let wholeDiffers = 0;
      for (let k = 1; k < CONTENT.length; k++) {
        const delivered = { reasoning: '', content: CONTENT.slice(0, k).join('') };
        const plan = planContinuationRequest(
          body,
          { ...delivered, toolCallsSeen: false },
          {
            continuationModel: family.examples[0],
            engine,
            rates: { cjk: 1.6, other: 4 },
          },
        );
        if (plan.kind === 'skip') continue; // a cut the table refuses (trailing whitespace the template trims)
        const p2 = await harness.text(job(plan.body));
        const t2 = engine === 'vllm' ? ids(p2) : [...t1, ...ids(p2.slice(p1.length))];
        checked++;
        if (JSON.stringify(t2.slice(0, t1.length)) !== JSON.stringify(t1))
          bad.push(`cut ${k}: leg 2's tokens do not begin with the prompt's`);
        if (engine === 'sglang' && JSON.stringify(ids(p2)) !== JSON.stringify(t2)) wholeDiffers++;
      }
      console.log(
        `${engine}: ${checked} cuts checked in tokens` +
          (engine === 'sglang' ? `; the separately encoded prefix differed from a whole tokenization at ${wholeDiffers}` : ''),
      );
      expect(checked).toBeGreaterThan(5);
      expect(bad).toEqual([]);
    },
  );
});
