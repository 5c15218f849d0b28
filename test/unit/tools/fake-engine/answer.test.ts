// Pure parts of the fake engine: answer determinism, tokenisation round trip, prefix parsing, fault specs.
import { answerFor, promptTokenCount } from '../../../../tools/fake-engine/answer';
import { parseFault, parseFaultList, resetFaults, takeFault } from '../../../../tools/fake-engine/faults';
import { remainderAfter } from '../../../../tools/fake-engine/plan';
import { parsePrefix } from '../../../../tools/fake-engine/prefix-parse';
import { tokenize } from '../../../../tools/fake-engine/tokens';

const convo = (text: string) => [{ role: 'user', content: text }];

describe('answerFor', () => {
  it('is deterministic and ignores a trailing assistant message', () => {
    const a = answerFor(convo('hello'));
    expect(answerFor(convo('hello'))).toEqual(a);
    expect(answerFor([...convo('hello'), { role: 'assistant', content: '<think>x' }])).toEqual(a);
    expect(answerFor(convo('hello!'))).not.toEqual(a);
  });

  it('has 20-40 reasoning and 20-60 content tokens, with multi-byte tokens', () => {
    for (let i = 0; i < 200; i++) {
      const a = answerFor(convo(`question ${i}`));
      expect(a.reasoningTokens.length).toBeGreaterThanOrEqual(20);
      expect(a.reasoningTokens.length).toBeLessThanOrEqual(40);
      expect(a.contentTokens.length).toBeGreaterThanOrEqual(20);
      expect(a.contentTokens.length).toBeLessThanOrEqual(60);
      for (const part of [a.reasoningTokens, a.contentTokens]) {
        expect(part.some((t) => /[\u4e00-\u9fff]/.test(t))).toBe(true);
        expect(part.some((t) => /\p{Extended_Pictographic}/u.test(t))).toBe(true);
      }
    }
  });

  it('re-tokenizes every answer part to exactly its tokens', () => {
    for (let i = 0; i < 300; i++) {
      const a = answerFor(convo(`q${i}`), i % 2 ? { reasoning: 30 + (i % 7), content: 40 + (i % 11) } : undefined);
      expect(tokenize(a.reasoningTokens.join(''))).toEqual(a.reasoningTokens);
      expect(tokenize(a.contentTokens.join(''))).toEqual(a.contentTokens);
    }
  });

  it('honours a forced size', () => {
    const a = answerFor(convo('x'), { reasoning: 30, content: 40 });
    expect([a.reasoningTokens.length, a.contentTokens.length]).toEqual([30, 40]);
  });

  it('counts prompt tokens deterministically', () => {
    expect(promptTokenCount(convo('hello world'))).toBe(promptTokenCount(convo('hello world')));
    expect(promptTokenCount(convo('hello world again'))).toBe(promptTokenCount(convo('hello world')) + 1);
  });
});

describe('remainderAfter', () => {
  const toks = ['Okay', ' the', '你好', '.'];
  it('finds the tokens after a prefix', () => {
    expect(remainderAfter(toks, '')).toEqual(toks);
    expect(remainderAfter(toks, 'Okay the')).toEqual(['你好', '.']);
    expect(remainderAfter(toks, 'Okay the你好.')).toEqual([]);
    expect(remainderAfter(toks, 'Okay th')).toEqual(['e', '你好', '.']);
    expect(remainderAfter(toks, 'Okay a')).toBeNull();
    expect(remainderAfter(toks, 'Okay the你好.!')).toBeNull();
  });
});

describe('parsePrefix', () => {
  it('generic', () => {
    expect(parsePrefix('generic', '<think>abc')).toEqual({ kind: 'split', reasoning: 'abc', content: '' });
    expect(parsePrefix('generic', '<think>abc</think>de')).toEqual({ kind: 'split', reasoning: 'abc', content: 'de' });
    expect(parsePrefix('generic', 'abc</think>de')).toEqual({ kind: 'split', reasoning: 'abc', content: 'de' });
    expect(parsePrefix('generic', 'abc')).toEqual({ kind: 'untagged', text: 'abc' });
  });
  it('kimi-k3', () => {
    const open = '<|open|>think<|sep|>';
    const mid = '<|close|>think<|sep|><|open|>response<|sep|>';
    expect(parsePrefix('kimi-k3', `${open}abc`)).toEqual({ kind: 'split', reasoning: 'abc', content: '' });
    expect(parsePrefix('kimi-k3', `${open}abc${mid}de`)).toEqual({ kind: 'split', reasoning: 'abc', content: 'de' });
    expect(parsePrefix('kimi-k3', `abc${mid}de`)).toEqual({ kind: 'split', reasoning: 'abc', content: 'de' });
    expect(parsePrefix('kimi-k3', '<|open|>response<|sep|>de')).toEqual({ kind: 'split', reasoning: '', content: 'de' });
    expect(parsePrefix('kimi-k3', 'abc')).toEqual({ kind: 'untagged', text: 'abc' });
  });
});

describe('fault specs', () => {
  beforeEach(() => resetFaults());

  it('parses every kind', () => {
    expect(parseFault('crash@12')).toMatchObject({ kind: 'crash', at: 12 });
    expect(parseFault('stall@3')).toMatchObject({ kind: 'stall', at: 3, ms: undefined });
    expect(parseFault('stall@3:500')).toMatchObject({ kind: 'stall', at: 3, ms: 500 });
    expect(parseFault('status@503')).toMatchObject({ kind: 'status', status: 503 });
    expect(parseFault('slow@100')).toMatchObject({ kind: 'slow', ms: 100 });
    expect(parseFault('nodone@-')).toMatchObject({ kind: 'nodone' });
    expect(parseFault('hang')).toMatchObject({ kind: 'hang' });
    expect(parseFault('crash-before-headers')).toMatchObject({ kind: 'crash-before-headers' });
    for (const k of ['fin', 'eof', 'error', 'abort', 'malformed']) expect(parseFault(`${k}@0`).kind).toBe(k);
    expect(() => parseFault('explode@1')).toThrow(/bad fault spec/);
    expect(parseFaultList('crash@1;-;eof@2')[1]).toBeUndefined();
  });

  it('hands specs out in order per header value, then nothing', () => {
    const h = 'crash@12;-;stall@3';
    expect(takeFault(h)?.spec).toBe('crash@12');
    expect(takeFault('eof@1')?.spec).toBe('eof@1');
    expect(takeFault(h)).toBeUndefined();
    expect(takeFault(h)?.spec).toBe('stall@3');
    expect(takeFault(h)).toBeUndefined();
    resetFaults();
    expect(takeFault(h)?.spec).toBe('crash@12');
  });
});
