// A property test over generated engine streams (issue 39): whatever an engine sends (deltas, valid and
// malformed finish_reasons, a second finish, content after it, usage, error events, comments, [DONE], in any
// order and cut into any TCP pieces), what the leg loop relays (src/stream/legs/leg-loop.ts with the finish gate,
// src/sse/finish-gate.ts) carries at most one finish_reason, a known one, nothing of substance after it, and at
// most one [DONE], last. A small generator of our own (a seeded PRNG): no property-testing dependency.
import { KNOWN_FINISH_REASONS } from '../../../src/sse/finish-reason';
import { KEEP_ALIVE_INTERVAL_MS, keepAliveDue } from '../../../src/sse/keep-alives';
import { SseParser } from '../../../src/sse/parser';
import { type LegHooks, type LegOutcome, type Outgoing, readLeg } from '../../../src/stream/legs/leg-loop';
import type { LegBodySink } from '../../../src/upstream/leg-body';
import { LegReader } from '../../../src/upstream/leg-reader';

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const chunk = (choice: Record<string, unknown> | null, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: choice ? [{ index: 0, ...choice }] : [], ...extra })}\n\n`;
const MALFORMED_FINISHES: unknown[] = [42, { type: 'stop' }, '', 'STOP', true, ['stop'], 'eos', 0];
const VALID_FINISHES = ['stop', 'length', 'tool_calls'];

/** One engine event, and what a reference reading of it says (independent of the gateway's code). */
interface Gen {
  text: string;
  content: string;
  finish: 'none' | 'valid' | 'malformed' | 'abort';
  kind: 'chunk' | 'error' | 'done' | 'comment' | 'garbage';
}

function genEvent(r: () => number): Gen {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)];
  const word = `w${Math.floor(r() * 1000)} `;
  const x = r();
  if (x < 0.4) return { text: chunk({ delta: { content: word }, finish_reason: null }), content: word, finish: 'none', kind: 'chunk' };
  if (x < 0.5) {
    const f = pick(VALID_FINISHES);
    const withText = r() < 0.5;
    const text = chunk({ delta: withText ? { content: word } : {}, finish_reason: f });
    return { text, content: withText ? word : '', finish: 'valid', kind: 'chunk' };
  }
  if (x < 0.58) {
    const f = pick(MALFORMED_FINISHES);
    return { text: chunk({ delta: { content: word }, finish_reason: f }), content: word, finish: 'malformed', kind: 'chunk' };
  }
  if (x < 0.62) return { text: chunk({ delta: {}, finish_reason: 'abort' }), content: '', finish: 'abort', kind: 'chunk' };
  if (x < 0.7)
    return { text: chunk(null, { usage: { prompt_tokens: 3, completion_tokens: 5 } }), content: '', finish: 'none', kind: 'chunk' };
  if (x < 0.74) return { text: 'data: {"error":{"message":"boom"}}\n\n', content: '', finish: 'none', kind: 'error' };
  if (x < 0.84) return { text: pick([':\n\n', ': keep-alive\n\n']), content: '', finish: 'none', kind: 'comment' };
  if (x < 0.88) return { text: pick(['data:\n\n', 'data: {nope\n\n']), content: '', finish: 'none', kind: 'garbage' };
  return { text: 'data: [DONE]\n\n', content: '', finish: 'none', kind: 'done' };
}

/** The reference reading: the content the client must get, and whether the leg finished or failed. */
function expected(events: readonly Gen[]): { content: string; ending: 'finished' | 'failed' } {
  let content = '';
  for (const e of events) {
    if (e.kind === 'error' || e.finish === 'abort' || e.finish === 'malformed' || e.kind === 'done') return { content, ending: 'failed' };
    if (e.kind !== 'chunk') continue;
    content += e.content;
    if (e.finish === 'valid') return { content, ending: 'finished' };
  }
  return { content, ending: 'failed' };
}

/** Leg 1's relay, reduced to what the gate rests on: every event passed on as it came, finished at its finish. */
function relayHooks(out: Buffer[]): LegHooks {
  let sawFinish = false;
  const quiet: any = { warn() {}, info() {}, debug() {}, error() {} };
  return {
    metrics: { malformedEvent() {}, droppedAfterFinish() {}, engineCommentsDropped() {} },
    log: quiet,
    leg: 1,
    isGone: () => false,
    idlePeriodMs: () => 60_000,
    onSilence: () => ({ action: 'wait' }) as any,
    finished: () => sawFinish,
    failed: (failure, detail) => ({ type: 'failed', failure, detail }),
    onEvent: (o, raw): Outgoing[] => {
      if (o.finishReason !== null) sawFinish = true;
      return [{ bytes: raw, events: [o] }];
    },
    deliver: (items) => {
      for (const i of items) out.push(i.bytes);
      return undefined;
    },
  };
}

async function relay(bytes: Buffer, r: () => number): Promise<{ outcome: LegOutcome; client: string }> {
  const body = { sink: undefined as LegBodySink | undefined, attach: (s: LegBodySink) => (body.sink = s), resume() {}, destroy() {} };
  const reader = new LegReader(body as any);
  const out: Buffer[] = [];
  const running = readLeg(reader, relayHooks(out));
  // Any TCP pieces: an event may be cut anywhere, a UTF-8 sequence too.
  for (let at = 0; at < bytes.length; ) {
    const n = 1 + Math.floor(r() * 200);
    body.sink?.data(bytes.subarray(at, at + n));
    at += n;
    if (r() < 0.3) await new Promise((res) => setImmediate(res));
  }
  body.sink?.end();
  const outcome = await running;
  return { outcome, client: Buffer.concat(out).toString() };
}

describe('finish gate, over 3,000 generated engine streams', () => {
  it('one finish at most, a known one, nothing of substance after it, one [DONE] at most and last', async () => {
    const r = prng(39);
    const tally = { finished: 0, failed: 0, malformed: 0, dropped: 0 };
    for (let n = 0; n < 3000; n++) {
      const events = Array.from({ length: 1 + Math.floor(r() * 25) }, () => genEvent(r));
      const { outcome, client } = await relay(Buffer.from(events.map((e) => e.text).join('')), r);
      const parsed = new SseParser().push(Buffer.from(client)).map((e) => e.data);
      const finishes: unknown[] = [];
      let content = '';
      let afterFinish = '';
      let dones = 0;
      parsed.forEach((data, i) => {
        if (data === null) return;
        if (data.trim() === '[DONE]') {
          dones++;
          expect(i).toBe(parsed.length - 1);
          return;
        }
        let j: any;
        try {
          j = JSON.parse(data);
        } catch {
          throw new Error(`relayed data that is not JSON: ${data}`);
        }
        const c = j.choices?.[0];
        if (finishes.length > 0) afterFinish += c?.delta?.content ?? '';
        else content += c?.delta?.content ?? '';
        if (c && c.finish_reason != null) finishes.push(c.finish_reason);
        if (finishes.length > 0) expect(j.error).toBeUndefined();
      });
      expect(finishes.length).toBeLessThanOrEqual(1);
      for (const f of finishes) expect(KNOWN_FINISH_REASONS.has(f as string)).toBe(true);
      expect(afterFinish).toBe('');
      expect(dones).toBeLessThanOrEqual(1);
      // The reference reading: the same content, the same ending.
      const want = expected(events);
      expect(content).toBe(want.content);
      if (want.ending === 'finished') {
        expect(outcome.type).toBe('finished');
        expect(finishes).toHaveLength(1);
        tally.finished++;
      } else {
        expect(outcome.type).toBe('failed');
        expect(finishes.filter((f) => f !== 'abort')).toHaveLength(0);
        tally.failed++;
        if (outcome.type === 'failed' && outcome.failure === 'malformed-finish') tally.malformed++;
      }
      if (want.ending === 'finished' && events.length > events.findIndex((e) => e.finish === 'valid') + 1) tally.dropped++;
    }
    // The generator reaches every case, each many times.
    expect(tally.finished).toBeGreaterThan(500);
    expect(tally.failed).toBeGreaterThan(500);
    expect(tally.malformed).toBeGreaterThan(200);
    expect(tally.dropped).toBeGreaterThan(300);
  });
});

describe('keepAliveDue', () => {
  it('the first comment, then one per interval', () => {
    expect(keepAliveDue(null, 0)).toBe(true);
    expect(keepAliveDue(1000, 1000 + KEEP_ALIVE_INTERVAL_MS - 1)).toBe(false);
    expect(keepAliveDue(1000, 1000 + KEEP_ALIVE_INTERVAL_MS)).toBe(true);
  });
});
