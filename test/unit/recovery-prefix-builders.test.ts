import { classifyCase, familyFor, needsThinkingDisabled, PREFIX_FAMILIES } from '../../src/recovery/prefix-builders';

describe('classifyCase', () => {
  it('orders evidence as the reference: tool call, then content, then reasoning', () => {
    expect(classifyCase(true, 'r', 'c')).toBe('tool-call-seen');
    expect(classifyCase(true, '', '')).toBe('tool-call-seen');
    expect(classifyCase(false, 'r', 'c')).toBe('content-done');
    expect(classifyCase(false, '', 'c')).toBe('content-done');
    expect(classifyCase(false, 'r', '')).toBe('thinking-partial');
  });
  it('nothing seen (a role-only chunk) is no-recoverable-content, never thinking-partial', () => {
    expect(classifyCase(false, '', '')).toBe('no-recoverable-content');
  });
});

describe('prefix families', () => {
  it('has one entry per family, generic last as the catch-all', () => {
    expect(PREFIX_FAMILIES.map((f) => f.name)).toEqual(['kimi-k3', 'plain', 'generic']);
  });

  it('matches kimi-k3 exactly, case-insensitively; every other name is generic', () => {
    expect(familyFor('kimi-k3').name).toBe('kimi-k3');
    expect(familyFor('Kimi-K3').name).toBe('kimi-k3');
    expect(familyFor(' KIMI-K3 ').name).toBe('kimi-k3');
    for (const m of ['kimi-k3.1', 'Kimi-K3-Instruct', 'kimi-k2.6', 'qwen3.6-35b-a3b', 'glm-5.3', 'test-model', '']) {
      expect(familyFor(m).name).toBe('generic');
    }
  });

  it('generic: thinking-partial leaves <think> open', () => {
    expect(familyFor('test-model').build('step one. step two', '')).toBe('<think>step one. step two');
  });
  it('generic: content-done closes the think block and continues the content', () => {
    expect(familyFor('test-model').build('let me think. ', 'The answer is par')).toBe('<think>let me think. </think>The answer is par');
    expect(familyFor('test-model').build('thinking. ', 'I will call a tool. ')).toBe('<think>thinking. </think>I will call a tool. ');
  });
  it('generic: content without any reasoning still closes an empty think block', () => {
    expect(familyFor('x').build('', 'hello')).toBe('<think></think>hello');
  });

  it('kimi-k3: thinking-partial leaves the XTML think block open', () => {
    expect(familyFor('kimi-k3').build('k3 thinking. ', '')).toBe('<|open|>think<|sep|>k3 thinking. ');
  });
  it('kimi-k3: content-done closes think and opens response (reference smoke test string)', () => {
    expect(familyFor('kimi-k3').build('k3 thinking. ', 'k3 answer')).toBe(
      '<|open|>think<|sep|>k3 thinking. <|close|>think<|sep|><|open|>response<|sep|>k3 answer',
    );
  });

  it('no built-in family assumes a generation prompt that already opens <think> (reference behaviour)', () => {
    for (const f of PREFIX_FAMILIES) expect(f.generationPromptOpensThink).toBe(false);
  });

  it('builders work when called detached', () => {
    const { build } = familyFor('test-model');
    expect(build('a', 'b')).toBe('<think>a</think>b');
  });
});

describe('needsThinkingDisabled', () => {
  it('is true once content has started, false while only reasoning was seen', () => {
    expect(needsThinkingDisabled('x')).toBe(true);
    expect(needsThinkingDisabled('')).toBe(false);
  });
});

describe('plain family (models without a reasoning format)', () => {
  it('is chosen for plain / no-reasoning / smollm* and builds the bare delivered text', () => {
    for (const m of ['plain', 'No-Reasoning', 'SmolLM2-135M-Instruct']) expect(familyFor(m).name).toBe('plain');
    expect(familyFor('qwen3').name).toBe('generic');
    expect(familyFor('plain').build('', 'The sky is')).toBe('The sky is');
    expect(familyFor('plain').build('', '')).toBe('');
  });
});
