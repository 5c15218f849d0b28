// The template path's pure decisions with real templates (llama.cpp's copies) and a fixed clock: which source
// serves a deployment, the raw text as it arrived, the date, the engine's verdict. The sweep over every template
// and cut is test/unit/templates/fidelity-*.test.ts.
import * as fs from 'node:fs';
import { withDateRule, withEngineVerdict } from '../../../src/recovery/leg2-checks';
import { chooseSource, type Designed, designLeg2 } from '../../../src/recovery/leg2-design';
import { serveTemplates } from '../../../src/templates/served';
import { provisionAssets } from '../../fidelity/harness-client';

const templates = provisionAssets().templates;
const served = (file: string, special: Record<string, string> = {}) =>
  serveTemplates({ default: fs.readFileSync(`${templates}/${file}`, 'utf8') }, special, file);
const body = (extra: Record<string, unknown> = {}) => ({
  model: 'm',
  stream: true,
  messages: [{ role: 'user', content: 'What is the answer?' }],
  ...extra,
});
// Two instants a few seconds apart, on either side of local midnight.
const beforeMidnight = new Date(2026, 11, 3, 23, 59, 55);
const afterMidnight = new Date(2026, 11, 4, 0, 0, 5);
const sameDay = { leg1At: beforeMidnight, now: beforeMidnight };
const nextDay = { leg1At: beforeMidnight, now: afterMidnight };
const design = (d: Designed) => {
  if ('unsupported' in d) throw new Error(`refused: ${d.reason}:${d.unsupported}`);
  return d.design;
};

describe('which source serves the deployment', () => {
  it('a name whose entry was proven against the served template keeps the entry, verified; any other model takes the template path', () => {
    const qwen3 = served('Qwen-Qwen3-0.6B.jinja');
    expect(chooseSource({ continuationModel: 'Qwen/Qwen3-32B', served: qwen3 })).toMatchObject({ source: 'table', verify: true });
    // The llama.cpp copy of the R1 distill Qwen-32B is not the checkpoint's published form: template path.
    const r1Copy = served('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja');
    expect(chooseSource({ continuationModel: 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', served: r1Copy }).source).toBe('template');
    expect(chooseSource({ continuationModel: 'my-finetune', served: qwen3 }).source).toBe('template');
    expect(chooseSource({ continuationModel: 'my-finetune' }).source).toBe('generic');
    expect(chooseSource({ continuationModel: 'Qwen/Qwen3-32B' })).toMatchObject({ source: 'table', verify: false });
  });

  it('the table entry on the template it was proven against: verified by rendering it', () => {
    const d = design(
      designLeg2(
        body(),
        { reasoning: '\nLet me think', content: '' },
        { continuationModel: 'Qwen/Qwen3-32B', engine: 'sglang', served: served('Qwen-Qwen3-0.6B.jinja'), clock: sameDay },
      ),
    );
    expect(d).toMatchObject({ source: 'table', verifiedBy: 'template', raw: '<think>\nLet me think' });
  });
});

describe('the template path', () => {
  const target = (engine: 'sglang' | 'vllm', file = 'Qwen-Qwen3-0.6B.jinja') => ({
    continuationModel: 'my-finetune',
    engine,
    served: served(file),
    clock: sameDay,
  });

  it('SGLang: the raw text after the generation prompt, markers from the template', () => {
    const d = design(designLeg2(body(), { reasoning: '\nLet me think\n', content: '\n\nThe ans' }, target('sglang')));
    expect(d).toMatchObject({ source: 'template', verifiedBy: 'template', rawAsArrived: false, phase: 'content' });
    expect(d.shape.message).toEqual({ content: '<think>\nLet me think\n</think>\n\nThe ans' });
  });

  it('vLLM: the first final-message shape whose rendering is exact (the parts, for Qwen3)', () => {
    const d = design(designLeg2(body(), { reasoning: '\nLet me think\n', content: '\n\nThe ans' }, target('vllm')));
    expect(d.shape.message).toEqual({ content: '\n\nThe ans', reasoning_content: '\nLet me think\n' });
  });

  it('vLLM: a cut inside the reasoning that no shape renders exactly is refused, with where the prompts part', () => {
    const d = designLeg2(body(), { reasoning: '\nLet me', content: '' }, target('vllm'));
    expect(d).toMatchObject({ reason: 'continuation-unverified', unsupported: 'prompt-differs' });
    expect('diff' in d && d.diff?.at).toBeGreaterThan(0);
  });

  it('no reasoning parser: content carrying the markers is sent back as it arrived, on both engines', () => {
    for (const engine of ['sglang', 'vllm'] as const) {
      const d = design(designLeg2(body(), { reasoning: '', content: '<think>\nLet me think\n</think>\n\nThe' }, target(engine)));
      expect(d).toMatchObject({ rawAsArrived: true, raw: '<think>\nLet me think\n</think>\n\nThe' });
    }
  });

  it("llama.cpp: the raw text starts after the generation prompt's `\\n` its parser hands out as reasoning (what is counted)", () => {
    // R1's prompt ends `<think>\n`; llama-server's parser reads it before the model's text, so a model that wrote
    // "\nA: 10" is delivered "\n\nA: 10" (test/real-engine/template-path.test.ts).
    const r1 = { continuationModel: 'my-org/private-reasoner', engine: 'llamacpp' as const, clock: sameDay };
    const tpl = served('deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja');
    const reasoning = design(designLeg2(body(), { reasoning: '\n\nA: 10', content: '' }, { ...r1, served: tpl }));
    expect(reasoning).toMatchObject({ source: 'template', verifiedBy: 'engine', raw: '\nA: 10' });
    expect(reasoning.prompt1?.endsWith('<think>\n')).toBe(true);
    // The shapes still carry the parts as delivered: llama.cpp writes `<think>` + reasoning_content back.
    expect(reasoning.candidates?.[0]).toEqual({ content: '', reasoning_content: '\n\nA: 10' });
    const content = design(designLeg2(body(), { reasoning: '\n\nA: 10\n', content: '\n\nA: 6' }, { ...r1, served: tpl }));
    expect(content.raw).toBe('\nA: 10\n</think>\n\nA: 6');
    // The table entry for the checkpoint's own name, with the template or without: the same raw text.
    for (const withTemplate of [tpl, undefined]) {
      const table = { ...r1, continuationModel: 'deepseek-ai/DeepSeek-R1-Distill-Llama-8B', served: withTemplate };
      const t = design(designLeg2(body(), { reasoning: '\n\nA: 10\n', content: '\n\nA: 6' }, table));
      expect(t).toMatchObject({ source: 'table', raw: '\nA: 10\n</think>\n\nA: 6' });
      expect(t.shape.message).toEqual({ content: '\n\nA: 6', reasoning_content: '\n\nA: 10\n' });
    }
    // A prompt that does not open the block has no such text: the delivered content is the raw text.
    const plain = design(
      designLeg2(body(), { reasoning: '', content: '\nThe' }, { ...r1, served: served('Qwen-Qwen2.5-7B-Instruct.jinja') }),
    );
    expect(plain.raw).toBe('\nThe');
  });

  it('after a prompt that opens the block, content without reasoning or markers is refused (parser or none?)', () => {
    const d = designLeg2(body(), { reasoning: '', content: 'Let me' }, target('sglang', 'Qwen3.5-4B.jinja'));
    expect(d).toMatchObject({ reason: 'continuation-unverified', unsupported: 'raw-text-ambiguous' });
  });
});

describe('the clock', () => {
  const gptOss = served('openai-gpt-oss-120b.jinja');
  const delivered = { reasoning: '', content: '<|channel|>analysis<|message|>Let me' };

  it('rendered here: leg 2 rendered on the next day is refused as date-changed; on the same day it is exact', () => {
    const t = { continuationModel: 'my-finetune', engine: 'sglang' as const, served: gptOss };
    expect(designLeg2(body(), delivered, { ...t, clock: nextDay })).toMatchObject({ unsupported: 'date-changed' });
    expect(design(designLeg2(body(), delivered, { ...t, clock: sameDay })).verifiedBy).toBe('template');
  });

  it('only the engine renders it (no template here): a table family that reads the date, or the guess, ends on a date change', () => {
    const gpt = designLeg2(body(), { reasoning: 'Let me', content: '' }, { continuationModel: 'openai/gpt-oss-120b', engine: 'sglang' });
    expect(withDateRule(gpt, nextDay)).toMatchObject({ reason: 'continuation-unverified', unsupported: 'date-changed' });
    expect(withDateRule(gpt, sameDay)).toBe(gpt);
    const generic = designLeg2(body(), { reasoning: 'r', content: '' }, { continuationModel: 'my-finetune', engine: 'sglang' });
    expect(withDateRule(generic, nextDay)).toMatchObject({ unsupported: 'date-changed' });
    const qwen3 = designLeg2(body(), { reasoning: '\nr', content: '' }, { continuationModel: 'Qwen/Qwen3-32B', engine: 'sglang' });
    expect(withDateRule(qwen3, nextDay)).toBe(qwen3);
  });
});

describe("the engine's verdict", () => {
  const tableDesign = designLeg2(
    body(),
    { reasoning: '\nr\n', content: '\n\nThe' },
    { continuationModel: 'Qwen/Qwen3-32B', engine: 'vllm' },
  );
  const viaEngine = designLeg2(
    body(),
    { reasoning: '', content: 'The' },
    {
      continuationModel: 'my-finetune',
      engine: 'llamacpp',
      served: served('Qwen-Qwen2.5-7B-Instruct.jinja'),
      clock: sameDay,
    },
  );

  it('wins where it differs; where it cannot answer, only what our render of the template verified goes', () => {
    const differs = { kind: 'differs', detail: 'engine-prompt-differs', tokenAt: 7 } as const;
    expect(withEngineVerdict(tableDesign, differs)).toMatchObject({
      reason: 'continuation-unverified',
      unsupported: 'engine-prompt-differs',
    });
    const unavailable = { kind: 'unavailable', detail: 'timeout' } as const;
    // No template here (CHAT_TEMPLATE=auto on vLLM): the engine is the only check, and it did not answer.
    expect(design(tableDesign).verifiedBy).toBeNull();
    expect(withEngineVerdict(tableDesign, unavailable)).toMatchObject({
      reason: 'continuation-unverified',
      unsupported: 'engine-check-unavailable:timeout',
    });
    expect(withEngineVerdict(tableDesign, { kind: 'agrees', message: design(tableDesign).shape.message })).toMatchObject({
      design: { verifiedBy: 'engine' },
    });
    // llama.cpp's template path: only the engine renders its prompts.
    expect(design(viaEngine).verifiedBy).toBe('engine');
    expect(withEngineVerdict(viaEngine, unavailable)).toMatchObject({ unsupported: 'engine-check-unavailable:timeout' });
    // Our render of CHAT_TEMPLATE verified it: that verification stands when the engine is late.
    const rendered = designLeg2(
      body(),
      { reasoning: '\nr\n', content: '\n\nThe' },
      { continuationModel: 'Qwen/Qwen3-32B', engine: 'vllm', served: served('Qwen-Qwen3-0.6B.jinja'), clock: sameDay },
    );
    expect(design(rendered).verifiedBy).toBe('template');
    expect(withEngineVerdict(rendered, unavailable)).toBe(rendered);
  });

  it('llama.cpp: the shape the engine rendered exactly is the one sent', () => {
    const chosen = withEngineVerdict(viaEngine, { kind: 'agrees', message: { content: 'The' } });
    expect(design(chosen)).toMatchObject({ verifiedBy: 'engine', shape: { message: { content: 'The' } } });
  });
});
