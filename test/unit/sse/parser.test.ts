import { type SseEvent, SseParser } from '../../../src/sse/parser';
import { prng } from '../../../tools/fake-engine/answer';

type Eol = '\n' | '\r\n' | '\r';
const EOLS: Array<[string, Eol]> = [
  ['LF', '\n'],
  ['CRLF', '\r\n'],
  ['lone CR', '\r'],
];

interface Expected {
  raw: string;
  data: string | null;
  event?: string;
}

const view = (evs: SseEvent[]) =>
  evs.map((e) => ({ raw: e.raw.toString('utf8'), data: e.data, ...(e.event !== undefined ? { event: e.event } : {}) }));
const rawOf = (evs: SseEvent[]) => Buffer.concat(evs.map((e) => e.raw));
const pushAll = (p: SseParser, chunks: Buffer[]) => chunks.flatMap((c) => p.push(c));
const byteChunks = (b: Buffer) => Array.from({ length: b.length }, (_, i) => b.subarray(i, i + 1));

/**
 * A realistic stream: keep-alive comment, role chunk, CJK reasoning, an `event:` name with emoji content,
 * multi-line data (no space / two spaces / bare `data`), ignored fields, stray blank lines, [DONE], then an
 * incomplete trailing event (one complete line and one partial line).
 */
function realisticStream(eol: Eol): { input: Buffer; expected: Expected[]; trailing: Buffer } {
  const events: Array<{ lines: string[]; data: string | null; event?: string; strayBefore?: number }> = [
    { lines: [': keep-alive'], data: null },
    {
      lines: ['data: {"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}'],
      data: '{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
    },
    {
      lines: ['data: {"choices":[{"index":0,"delta":{"reasoning_content":"思考中…让我想想"}}]}'],
      data: '{"choices":[{"index":0,"delta":{"reasoning_content":"思考中…让我想想"}}]}',
    },
    {
      lines: ['event: message', 'data: {"choices":[{"index":0,"delta":{"content":"héllo 👋🏽 wörld 🎉"}}]}'],
      data: '{"choices":[{"index":0,"delta":{"content":"héllo 👋🏽 wörld 🎉"}}]}',
      event: 'message',
    },
    { lines: ['data: line one', 'data:line two', 'data:  two spaces', 'data'], data: 'line one\nline two\n two spaces\n' },
    { lines: ['id: 7', 'retry: 1000', ': comment inside', 'data: x:y: z', 'unknown: field'], data: 'x:y: z' },
    { lines: ['data: [DONE]'], data: '[DONE]', strayBefore: 2 },
  ];
  let text = '';
  const expected: Expected[] = [];
  for (const e of events) {
    const raw = eol.repeat(e.strayBefore ?? 0) + e.lines.map((l) => l + eol).join('') + eol;
    text += raw;
    expected.push({ raw, data: e.data, ...(e.event !== undefined ? { event: e.event } : {}) });
  }
  const trailing = Buffer.from(`data: {"partial":"日本${eol}data: 語`);
  return { input: Buffer.concat([Buffer.from(text), trailing]), expected, trailing };
}

/** End offsets (in bytes) of each expected event within the input. */
const endOffsets = (expected: Expected[]) => {
  let off = 0;
  return expected.map((e) => (off += Buffer.byteLength(e.raw)));
};

describe('SseParser: realistic stream, every split point', () => {
  for (const [name, eol] of EOLS) {
    describe(name, () => {
      const { input, expected, trailing } = realisticStream(eol);
      const completeLen = input.length - trailing.length;
      const ends = endOffsets(expected);

      it('one push: the exact events, raw concatenation equals the input up to the last complete event', () => {
        const p = new SseParser();
        const evs = p.push(input);
        expect(view(evs)).toEqual(expected);
        expect(rawOf(evs).equals(input.subarray(0, completeLen))).toBe(true);
        expect(p.bufferedBytes).toBe(trailing.length);
      });

      it('two pushes split at every byte index give the same events, each emitted as soon as it is complete', () => {
        // Mismatches are collected and asserted once: an expect() per split point would be slow.
        const want = JSON.stringify(expected);
        const bad: unknown[] = [];
        for (let i = 0; i <= input.length; i++) {
          const p = new SseParser();
          const first = p.push(input.subarray(0, i));
          // Events whose last byte is in the first chunk are out; with lone CR, an event whose final CR is the
          // last byte of the chunk is held (the CR may be half of a CRLF).
          let n = ends.filter((e) => e <= i).length;
          if (eol === '\r' && ends.includes(i)) n--;
          const firstRaw = rawOf(first);
          if (first.length !== n || !firstRaw.equals(input.subarray(0, firstRaw.length)) || p.bufferedBytes !== i - firstRaw.length) {
            bad.push({ i, emitted: first.length, want: n, buffered: p.bufferedBytes });
          }
          const all = [...first, ...p.push(input.subarray(i))];
          if (JSON.stringify(view(all)) !== want) bad.push({ i, got: view(all) });
          if (!rawOf(all).equals(input.subarray(0, completeLen)) || p.bufferedBytes !== trailing.length)
            bad.push({ i, buffered: p.bufferedBytes });
        }
        expect(bad).toEqual([]);
      });

      it('byte by byte gives the same events', () => {
        const p = new SseParser();
        const evs = pushAll(p, byteChunks(input));
        expect(view(evs)).toEqual(expected);
        expect(rawOf(evs).equals(input.subarray(0, completeLen))).toBe(true);
        expect(p.bufferedBytes).toBe(trailing.length);
      });

      it('three pushes at a sample of split pairs', () => {
        const want = JSON.stringify(expected);
        const bad: unknown[] = [];
        for (let i = 0; i <= input.length; i += 7) {
          for (let j = i; j <= input.length; j += 13) {
            const evs = pushAll(new SseParser(), [input.subarray(0, i), input.subarray(i, j), input.subarray(j)]);
            if (JSON.stringify(view(evs)) !== want) bad.push({ i, j, got: view(evs) });
          }
        }
        expect(bad).toEqual([]);
      });
    });
  }
});

describe('SseParser: line endings', () => {
  it('a CR at the end of one chunk and the LF at the start of the next are one line ending', () => {
    const p = new SseParser();
    expect(p.push(Buffer.from('data: a\r\n\r'))).toEqual([]);
    expect(p.bufferedBytes).toBe(10);
    const evs = p.push(Buffer.from('\ndata: b\r\n\r\n'));
    expect(view(evs)).toEqual([
      { raw: 'data: a\r\n\r\n', data: 'a' },
      { raw: 'data: b\r\n\r\n', data: 'b' },
    ]);
    expect(p.bufferedBytes).toBe(0);
  });

  it('a CR ending a data line, with LF in the next chunk, does not count as a blank line', () => {
    const p = new SseParser();
    expect(p.push(Buffer.from('data: a\r'))).toEqual([]);
    expect(p.push(Buffer.from('\ndata: b\r\n'))).toEqual([]);
    expect(view(p.push(Buffer.from('\r\n')))).toEqual([{ raw: 'data: a\r\ndata: b\r\n\r\n', data: 'a\nb' }]);
  });

  it('lone CR: an event whose final CR ends the chunk is held until the next byte, then emitted alone', () => {
    const p = new SseParser();
    expect(p.push(Buffer.from('data: a\r\r'))).toEqual([]);
    expect(p.bufferedBytes).toBe(9);
    expect(view(p.push(Buffer.from('d')))).toEqual([{ raw: 'data: a\r\r', data: 'a' }]);
    expect(p.bufferedBytes).toBe(1);
  });

  it('mixed line endings within one event', () => {
    const p = new SseParser();
    expect(view(p.push(Buffer.from('data: a\rdata: b\ndata: c\r\n\n')))).toEqual([
      { raw: 'data: a\rdata: b\ndata: c\r\n\n', data: 'a\nb\nc' },
    ]);
  });

  it('CR CR LF is two line endings (CR, then CRLF): a blank line', () => {
    const p = new SseParser();
    expect(view(p.push(Buffer.from('data: a\r\r\n')))).toEqual([{ raw: 'data: a\r\r\n', data: 'a' }]);
  });
});

describe('SseParser: fields', () => {
  const one = (s: string) => {
    const evs = new SseParser().push(Buffer.from(s));
    expect(evs).toHaveLength(1);
    return evs[0];
  };

  it('comment-only event (keep-alive) has data null and no event name', () => {
    const ev = one(': keep-alive\n\n');
    expect(ev.data).toBeNull();
    expect(ev.event).toBeUndefined();
    expect('event' in ev).toBe(false);
    expect(ev.raw.toString()).toBe(': keep-alive\n\n');
  });

  it('a comment does not add a data line', () => {
    expect(one('data: a\n: note\ndata: b\n\n').data).toBe('a\nb');
  });

  it('multi-line data is joined with \\n, including empty lines of data', () => {
    expect(one('data: a\ndata:\ndata: c\n\n').data).toBe('a\n\nc');
    expect(one('data\n\n').data).toBe('');
  });

  it('only one leading space after the colon is removed; no space is fine', () => {
    expect(one('data:   three\n\n').data).toBe('  three');
    expect(one('data:nospace\n\n').data).toBe('nospace');
    expect(one('data: \n\n').data).toBe('');
    expect(one('data:\ttab\n\n').data).toBe('\ttab');
  });

  it('the value keeps colons after the first one', () => {
    expect(one('data: {"a":"b:c"}\n\n').data).toBe('{"a":"b:c"}');
  });

  it('event: names are reported, the last one wins, and do not leak into the next event', () => {
    const evs = new SseParser().push(Buffer.from('event: first\nevent: second\ndata: x\n\ndata: y\n\n'));
    expect(evs.map((e) => [e.event, e.data])).toEqual([
      ['second', 'x'],
      [undefined, 'y'],
    ]);
  });

  it('an event with only an event: line has data null', () => {
    const ev = one('event: ping\n\n');
    expect(ev).toMatchObject({ data: null, event: 'ping' });
  });

  it('field names are case-sensitive and unknown fields are ignored', () => {
    expect(one('Data: X\nDATA: Y\nid: 1\nretry: 5\n\n').data).toBeNull();
  });

  it('trailing whitespace in a value is kept', () => {
    expect(one('data: a  \n\n').data).toBe('a  ');
  });
});

describe('SseParser: stray blank lines, partial events, reset', () => {
  it('blank lines before any field dispatch nothing and ride along with the next event', () => {
    const p = new SseParser();
    expect(p.push(Buffer.from('\n\n\n'))).toEqual([]);
    expect(p.bufferedBytes).toBe(3);
    expect(view(p.push(Buffer.from('data: a\n\n\n\ndata: b\n\n')))).toEqual([
      { raw: '\n\n\ndata: a\n\n', data: 'a' },
      { raw: '\n\ndata: b\n\n', data: 'b' },
    ]);
    expect(p.bufferedBytes).toBe(0);
  });

  it('an incomplete trailing event is not emitted and is counted by bufferedBytes', () => {
    const p = new SseParser();
    const evs = p.push(Buffer.from('data: done\n\ndata: part'));
    expect(evs.map((e) => e.data)).toEqual(['done']);
    expect(p.bufferedBytes).toBe(Buffer.byteLength('data: part'));
    expect(p.push(Buffer.from('ial\n'))).toEqual([]);
    expect(p.bufferedBytes).toBe(Buffer.byteLength('data: partial\n'));
    expect(view(p.push(Buffer.from('\n')))).toEqual([{ raw: 'data: partial\n\n', data: 'partial' }]);
    expect(p.bufferedBytes).toBe(0);
  });

  it('bufferedBytes counts bytes, not characters', () => {
    const p = new SseParser();
    p.push(Buffer.from('data: 日本'));
    expect(p.bufferedBytes).toBe(6 + 6);
  });

  it('empty pushes are harmless', () => {
    const p = new SseParser();
    expect(p.push(Buffer.alloc(0))).toEqual([]);
    p.push(Buffer.from('data: a\n'));
    expect(p.push(Buffer.alloc(0))).toEqual([]);
    expect(view(p.push(Buffer.from('\n')))).toEqual([{ raw: 'data: a\n\n', data: 'a' }]);
    expect(p.push(Buffer.alloc(0))).toEqual([]);
    expect(p.bufferedBytes).toBe(0);
  });

  it('reset() returns the buffered incomplete bytes and forgets the half-parsed event', () => {
    const p = new SseParser();
    p.push(Buffer.from('data: ok\n\nevent: stale\ndata: a\ndata: par'));
    const rest = p.reset();
    expect(rest.toString()).toBe('event: stale\ndata: a\ndata: par');
    expect(p.bufferedBytes).toBe(0);
    const evs = p.push(Buffer.from('data: b\n\n'));
    expect(view(evs)).toEqual([{ raw: 'data: b\n\n', data: 'b' }]);
    expect(p.reset().length).toBe(0);
  });

  it('reset() also forgets a pending CR', () => {
    const p = new SseParser();
    p.push(Buffer.from('data: a\r'));
    expect(p.reset().toString()).toBe('data: a\r');
    expect(view(p.push(Buffer.from('\ndata: b\n\n')))).toEqual([{ raw: '\ndata: b\n\n', data: 'b' }]);
  });

  it('raw buffers are not disturbed by later pushes', () => {
    const p = new SseParser();
    const evs = p.push(Buffer.from('data: a\n\ndata: b'));
    p.push(Buffer.from('bb\n\n'));
    expect(evs[0].raw.toString()).toBe('data: a\n\n');
  });
});

describe('SseParser: UTF-8 split across chunks', () => {
  const cases: Array<[string, string]> = [
    ['CJK (3 bytes)', '中文字符'],
    ['emoji (4 bytes)', '😀🎉'],
    ['emoji ZWJ sequence', '👩‍💻'],
    ['2-byte', 'ñé'],
  ];
  for (const [name, text] of cases) {
    it(`${name}: every split point decodes correctly`, () => {
      const input = Buffer.from(`data: ${text}\n\n`);
      for (let i = 0; i <= input.length; i++) {
        const p = new SseParser();
        const evs = [...p.push(input.subarray(0, i)), ...p.push(input.subarray(i))];
        expect(evs.map((e) => e.data)).toEqual([text]);
      }
    });
  }

  it('a 4-byte emoji fed one byte per push', () => {
    const input = Buffer.from('data: 😀\n\n');
    const evs = pushAll(new SseParser(), byteChunks(input));
    expect(evs.map((e) => e.data)).toEqual(['😀']);
    expect(rawOf(evs).equals(input)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------------------
// Property-style: random streams, random chunking, seeded PRNG (deterministic, no dependencies).

// mulberry32, the fake engine's seeded PRNG.
const mulberry32 = prng;

const ALPHABET = ['a', 'b', 'Z', '0', ' ', ' ', ':', '"', '{', '}', 'é', '中', '語', '😀', '👋🏽', '\t', '[DONE]'];

function generate(rnd: () => number): { input: Buffer; expected: Expected[]; trailing: number } {
  const int = (n: number) => Math.floor(rnd() * n);
  const pick = <T>(xs: readonly T[]) => xs[int(xs.length)];
  const text = () => Array.from({ length: int(12) }, () => pick(ALPHABET)).join('');
  const eol = pick<Eol>(['\n', '\r\n', '\r']);
  let out = '';
  const expected: Expected[] = [];
  const nEvents = int(8);
  for (let k = 0; k < nEvents; k++) {
    let raw = eol.repeat(rnd() < 0.2 ? 1 + int(3) : 0);
    const data: string[] = [];
    let event: string | undefined;
    const nLines = 1 + int(4);
    for (let l = 0; l < nLines; l++) {
      const r = rnd();
      if (r < 0.55) {
        if (rnd() < 0.1) {
          raw += `data${eol}`;
          data.push('');
        } else {
          const v = pick(['', ' ', '  ']) + text();
          raw += `data:${v}${eol}`;
          data.push(v.startsWith(' ') ? v.slice(1) : v);
        }
      } else if (r < 0.7) {
        const v = pick(['', ' ']) + text();
        raw += `event:${v}${eol}`;
        event = v.startsWith(' ') ? v.slice(1) : v;
      } else if (r < 0.85) {
        raw += `:${text()}${eol}`;
      } else {
        raw += `${pick(['id', 'retry', 'foo'])}: ${text()}${eol}`;
      }
    }
    raw += eol;
    out += raw;
    expected.push({ raw, data: data.length ? data.join('\n') : null, ...(event !== undefined ? { event } : {}) });
  }
  // Trailing incomplete event: stray blank lines, complete field lines, and a partial line that never ends
  // with a line break. Never empty, so a final lone CR of the last event is always followed by a byte.
  let trailing = eol.repeat(int(2));
  for (let l = int(3); l > 0; l--) trailing += `data: ${text()}${eol}`;
  trailing += `data: ${text()}`;
  return { input: Buffer.from(out + trailing), expected, trailing: Buffer.byteLength(trailing) };
}

function randomChunks(rnd: () => number, input: Buffer): Buffer[] {
  const chunks: Buffer[] = [];
  let i = 0;
  while (i < input.length) {
    const r = rnd();
    const size = r < 0.3 ? 1 : r < 0.8 ? 1 + Math.floor(rnd() * 8) : 1 + Math.floor(rnd() * 64);
    chunks.push(input.subarray(i, i + size));
    i += size;
    if (rnd() < 0.05) chunks.push(Buffer.alloc(0));
  }
  return chunks;
}

describe('SseParser: property test with random streams and random chunking', () => {
  it('400 seeded cases: events, byte-exact raw concatenation and bufferedBytes match the model', () => {
    const bad: unknown[] = [];
    for (let seed = 1; seed <= 400; seed++) {
      const rnd = mulberry32(seed);
      const { input, expected, trailing } = generate(rnd);
      const p = new SseParser();
      const evs: SseEvent[] = [];
      for (const c of randomChunks(rnd, input)) evs.push(...p.push(c));
      // Each failure names its seed so it can be replayed.
      if (JSON.stringify(view(evs)) !== JSON.stringify(expected)) bad.push({ seed, got: view(evs), expected });
      if (!rawOf(evs).equals(input.subarray(0, input.length - trailing))) bad.push({ seed, raw: 'not byte-exact' });
      if (p.bufferedBytes !== trailing) bad.push({ seed, buffered: p.bufferedBytes, trailing });
    }
    expect(bad).toEqual([]);
  });

  it('emitted + buffered bytes always equal the bytes pushed so far', () => {
    const bad: unknown[] = [];
    for (let seed = 1000; seed < 1100; seed++) {
      const rnd = mulberry32(seed);
      const { input } = generate(rnd);
      const p = new SseParser();
      let pushed = 0;
      let emitted = 0;
      for (const c of randomChunks(rnd, input)) {
        pushed += c.length;
        emitted += p.push(c).reduce((n, e) => n + e.raw.length, 0);
        if (emitted + p.bufferedBytes !== pushed) bad.push({ seed, pushed, emitted, buffered: p.bufferedBytes });
      }
    }
    expect(bad).toEqual([]);
  });
});

describe('boundedNonEvents (the leg reader: issue 39)', () => {
  it('a flood of comments: one comment event per push, the rest skipped and counted; data events all returned', () => {
    const p = new SseParser(true);
    const flood = Buffer.from(':\n\n'.repeat(10_000));
    const evs = p.push(Buffer.concat([flood, Buffer.from('data: a\n\n'), flood, Buffer.from(': x\ndata: b\n\n')]));
    expect(view(evs)).toEqual([
      { raw: ':\n\n', data: null },
      { raw: 'data: a\n\n', data: 'a' },
      { raw: ': x\ndata: b\n\n', data: 'b' },
    ]);
    expect(p.commentsSkipped).toBe(19_999);
    expect(p.bufferedBytes).toBe(0);
    // The next push returns a comment again (one per chunk read).
    expect(view(p.push(Buffer.from(': ka\n\n: ka\n\n')))).toEqual([{ raw: ': ka\n\n', data: null }]);
  });

  it('a flood of empty data events: one per push returned, the rest skipped and counted; other events all returned', () => {
    const p = new SseParser(true);
    const flood = Buffer.from('data:\n\n'.repeat(10_000));
    const evs = p.push(Buffer.concat([flood, Buffer.from('data: a\n\n'), flood, Buffer.from('event: x\ndata:\n\n')]));
    expect(view(evs)).toEqual([
      { raw: 'data:\n\n', data: '' },
      { raw: 'data: a\n\n', data: 'a' },
      { raw: 'event: x\ndata:\n\n', data: '', event: 'x' },
    ]);
    expect(p.emptyDataSkipped).toBe(19_999);
    expect(p.bufferedBytes).toBe(0);
    expect(view(p.push(Buffer.from('data:\n\ndata:\n\n')))).toEqual([{ raw: 'data:\n\n', data: '' }]);
  });

  it('blank lines before any field are dropped, not kept for the next event: nothing buffered for them', () => {
    const p = new SseParser(true);
    expect(p.push(Buffer.from('\n'.repeat(100_000)))).toEqual([]);
    expect(p.bufferedBytes).toBe(0);
    expect(p.strayBytesDropped).toBe(100_000);
    expect(view(p.push(Buffer.from('\r\n\r\ndata: a\r\n\r\n')))).toEqual([{ raw: 'data: a\r\n\r\n', data: 'a' }]);
  });

  it('without it, the same input is returned byte for byte', () => {
    const p = new SseParser();
    const input = Buffer.from('\n\n:\n\n:\n\ndata: a\n\n');
    expect(rawOf(p.push(input)).equals(input)).toBe(true);
  });
});
