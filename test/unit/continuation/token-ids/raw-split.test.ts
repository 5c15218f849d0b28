import { partialSuffix, RawSplitter } from '../../../../src/continuation/token-ids/raw-split';

const run = (s: RawSplitter, pieces: string[]) => {
  const out = { reasoning: '', content: '' };
  for (const p of pieces) {
    const r = s.push(p);
    out.reasoning += r.reasoning;
    out.content += r.content;
  }
  const e = s.end();
  return { reasoning: out.reasoning + e.reasoning, content: out.content + e.content };
};

describe('RawSplitter: leg 2 raw text split from the parser state at the cut', () => {
  test('a cut in the content: everything is content, markers included', () => {
    expect(run(new RawSplitter('content', '</think>'), ['a </think>', ' b'])).toEqual({ reasoning: '', content: 'a </think> b' });
  });

  test('a cut in the reasoning: reasoning to the marker, content after it, the marker never shown', () => {
    expect(run(new RawSplitter('reasoning', '</think>'), ['so', ' four.', '</think>', '\n\nA: 4'])).toEqual({
      reasoning: 'so four.',
      content: '\n\nA: 4',
    });
  });

  test('a marker split across pieces is held until whole', () => {
    const s = new RawSplitter('reasoning', '</think>');
    expect(s.push('x </')).toEqual({ reasoning: 'x ', content: '' });
    expect(s.push('thi')).toEqual({ reasoning: '', content: '' });
    expect(s.push('nk>y')).toEqual({ reasoning: '', content: 'y' });
    expect(s.current).toBe('content');
  });

  test('a held start that is no marker after all is reasoning, at once or at the end', () => {
    const s = new RawSplitter('reasoning', '</think>');
    expect(s.push('a <')).toEqual({ reasoning: 'a ', content: '' });
    expect(s.push('b')).toEqual({ reasoning: '<b', content: '' });
    expect(s.push(' </th')).toEqual({ reasoning: ' ', content: '' });
    expect(s.end()).toEqual({ reasoning: '</th', content: '' });
  });

  test('the whitespace after the marker is content, as the parsers hand it out', () => {
    expect(run(new RawSplitter('reasoning', '</think>'), ['r</think>\n', '\nA'])).toEqual({ reasoning: 'r', content: '\n\nA' });
  });

  test('a cut in the reasoning without a closing marker is refused', () => {
    expect(() => new RawSplitter('reasoning', null)).toThrow();
  });

  test('partialSuffix', () => {
    expect(partialSuffix('abc</th', '</think>')).toBe(4);
    expect(partialSuffix('abc', '</think>')).toBe(0);
    expect(partialSuffix('<', '</think>')).toBe(1);
  });
});
