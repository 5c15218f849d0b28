// MAX_CONTINUATION_PREFIX_BYTES (issue 19, item 3): what the tracker keeps of the delivered text stops at the
// cap, its counters go on, and the planner ends a failure past it with `continuation-prefix-too-large`.
import { loadConfig } from '../../../src/config/env';
import { decidePostCommit, type PostCommitInput, PREFIX_TOO_LARGE } from '../../../src/recovery/planner';
import { estimateTokens } from '../../../src/recovery/token-estimate';
import type { SseEvent } from '../../../src/sse/parser';
import { DEFAULT_MAX_PREFIX_BYTES, StreamTracker } from '../../../src/sse/tracker';

const ev = (delta: Record<string, unknown>): SseEvent => {
  const s = JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] });
  return { raw: Buffer.from(`data: ${s}\n\n`), data: s };
};
const feed = (t: StreamTracker, ...deltas: Record<string, unknown>[]) => {
  for (const d of deltas) t.apply(StreamTracker.read(ev(d)));
  return t;
};

describe('StreamTracker with a prefix cap', () => {
  it('keeps the text while it fits, byte for byte', () => {
    const t = feed(new StreamTracker(1024), { reasoning_content: 'think ' }, { content: 'héllo' }, { content: ' 世界' });
    expect(t.reasoning).toBe('think ');
    expect(t.content).toBe('héllo 世界');
    expect(t.prefixBytes).toBe(6 + 6 + 7);
    expect(t.prefixCapped).toBe(false);
  });

  it('an event that would cross the cap is not kept, nor any after it; the counters go on', () => {
    const t = new StreamTracker(10);
    feed(t, { content: '12345' }, { content: '6789' }, { content: 'ab' }, { content: 'c' });
    expect(t.content).toBe('123456789');
    expect(t.prefixCapped).toBe(true);
    expect(t.prefixBytes).toBe(9);
    expect(t.contentChars).toBe(12);
    expect(t.recoverable).toBe(true);
  });

  it('counts bytes as UTF-8 (a CJK character is 3)', () => {
    const t = feed(new StreamTracker(8), { content: '你好' }, { content: '世界' });
    expect(t.content).toBe('你好');
    expect(t.prefixCapped).toBe(true);
  });

  it('tool-call text counts toward the cap', () => {
    const t = feed(new StreamTracker(12), {
      tool_calls: [{ index: 0, function: { name: 'lookup', arguments: '{"q":"a long argument"}' } }],
    });
    expect(t.prefixCapped).toBe(true);
    expect(t.toolCallsSeen).toBe(true);
    expect(t.toolCallText).toBe('');
  });

  it('the delivered-token estimate covers the text past the cap too', () => {
    const pieces = ['Okay', ' the', ' 世界', ' stream', '🙂', ' of', ' tokens', '.'];
    const t = new StreamTracker(12);
    for (let i = 0; i < 50; i++) feed(t, ...pieces.map((p) => ({ content: p })));
    expect(t.prefixCapped).toBe(true);
    const all = pieces.join('').repeat(50);
    expect(t.contentChars).toBe(all.length);
    expect(t.deliveredTokenEstimate(1.6, 4)).toBe(estimateTokens(all, 1.6, 4));
  });

  it('reads the same text however many pieces it came in (the slabs are joined in order)', () => {
    const t = new StreamTracker(1_000_000);
    let expected = '';
    for (let i = 0; i < 1000; i++) {
      feed(t, { content: `${i},` });
      expected += `${i},`;
      if (i % 97 === 0) expect(t.content).toBe(expected);
    }
    expect(t.content).toBe(expected);
  });

  it('without an argument, the default cap (4 MiB) applies', () => {
    expect(new StreamTracker().maxPrefixBytes).toBe(DEFAULT_MAX_PREFIX_BYTES);
    expect(DEFAULT_MAX_PREFIX_BYTES).toBe(4 * 1024 * 1024);
  });
});

describe('MAX_CONTINUATION_PREFIX_BYTES', () => {
  const base = { DOWNSTREAM_URL: 'http://127.0.0.1:1' };
  it('defaults to 4 MiB and reads an integer >= 1024', () => {
    expect(loadConfig(base).maxContinuationPrefixBytes).toBe(4 * 1024 * 1024);
    expect(loadConfig({ ...base, MAX_CONTINUATION_PREFIX_BYTES: '2048' }).maxContinuationPrefixBytes).toBe(2048);
  });
  it.each(['100', '1.5', 'x', '-1'])('rejects %s, naming the variable', (v) => {
    expect(() => loadConfig({ ...base, MAX_CONTINUATION_PREFIX_BYTES: v })).toThrow(/MAX_CONTINUATION_PREFIX_BYTES/);
  });
});

describe('decidePostCommit past the cap', () => {
  const leg1: PostCommitInput = {
    failure: 'reset',
    leg: 1,
    toolCallDelivered: false,
    recoverableText: true,
    continuationConfigured: true,
    continuationEnabled: true,
  };

  it('a leg 1 failure past the cap ends with continuation-prefix-too-large instead of a continuation', () => {
    expect(decidePostCommit(leg1)).toEqual({ action: 'continue' });
    expect(decidePostCommit({ ...leg1, prefixTooLarge: true })).toEqual({ action: 'interrupt', reason: PREFIX_TOO_LARGE });
    expect(PREFIX_TOO_LARGE).toBe('continuation-prefix-too-large');
  });

  it('a stream that could not be continued anyway keeps its own reason', () => {
    const p = { ...leg1, prefixTooLarge: true };
    expect(decidePostCommit({ ...p, toolCallDelivered: true })).toMatchObject({ reason: 'tool-call-delivered' });
    expect(decidePostCommit({ ...p, continuationConfigured: false })).toMatchObject({ reason: 'continuation-unsupported' });
    expect(decidePostCommit({ ...p, continuationEnabled: false })).toMatchObject({ reason: 'continuation-disabled' });
  });

  it('leg 2: past the cap where another leg would follow, the same reason; otherwise leg2-<failure>', () => {
    expect(decidePostCommit({ ...leg1, leg: 2, prefixTooLarge: true })).toEqual({ action: 'interrupt', reason: PREFIX_TOO_LARGE });
    expect(decidePostCommit({ ...leg1, leg: 2 })).toEqual({ action: 'interrupt', reason: 'leg2-reset' });
  });
});
