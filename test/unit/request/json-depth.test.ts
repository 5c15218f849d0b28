import { exceedsJsonDepth } from '../../../src/request/json-depth';

const deep = (n: number, open = '[', close = ']') => Buffer.from(open.repeat(n) + close.repeat(n));

describe('exceedsJsonDepth: an iterative scan of the raw bytes', () => {
  it('counts arrays and objects, at the limit and one past it', () => {
    expect(exceedsJsonDepth(deep(128), 128)).toBe(false);
    expect(exceedsJsonDepth(deep(129), 128)).toBe(true);
    const objects = Buffer.from(`${'{"k":'.repeat(64)}1${'}'.repeat(64)}`);
    expect(exceedsJsonDepth(objects, 64)).toBe(false);
    expect(exceedsJsonDepth(objects, 63)).toBe(true);
    expect(exceedsJsonDepth(Buffer.from('{"a":[1]}'), 2)).toBe(false);
    expect(exceedsJsonDepth(Buffer.from('{"a":[1]}'), 1)).toBe(true);
    expect(exceedsJsonDepth(Buffer.from('1'), 1)).toBe(false);
  });
  it('siblings do not add up: depth is the deepest path', () => {
    expect(exceedsJsonDepth(Buffer.from(JSON.stringify({ a: [[1]], b: [[2]], c: { d: [3] } })), 3)).toBe(false);
  });
  it('brackets inside strings do not count, escaped quotes do not end a string', () => {
    expect(exceedsJsonDepth(Buffer.from(JSON.stringify({ t: '[[[[{{{{' })), 1)).toBe(false);
    expect(exceedsJsonDepth(Buffer.from(JSON.stringify({ t: 'a"[[[["b' })), 1)).toBe(false);
    expect(exceedsJsonDepth(Buffer.from(JSON.stringify({ t: 'ends in a backslash\\', u: [[1]] })), 2)).toBe(true);
    expect(exceedsJsonDepth(Buffer.from(JSON.stringify({ t: 'ends in a backslash\\', u: [[1]] })), 3)).toBe(false);
    expect(exceedsJsonDepth(Buffer.from(JSON.stringify({ t: '漢字 [🙂] é' })), 1)).toBe(false);
  });
  it('an unterminated string or invalid bytes end the scan without a throw', () => {
    expect(exceedsJsonDepth(Buffer.from('["never closed [[[[[['), 1)).toBe(false);
    expect(exceedsJsonDepth(Buffer.from([0x5b, 0xff, 0xfe, 0x5b, 0x5b]), 2)).toBe(true);
    expect(exceedsJsonDepth(Buffer.alloc(0), 1)).toBe(false);
  });
  it('a million levels: no recursion, an answer at once', () => {
    expect(exceedsJsonDepth(deep(1_000_000), 128)).toBe(true);
    expect(exceedsJsonDepth(deep(1_000_000), 2_000_000)).toBe(false);
  });
});
