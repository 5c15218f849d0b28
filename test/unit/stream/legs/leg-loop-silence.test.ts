// The leg loop's silence and end rules (issue 19 items 1-3), on a LegReader fed by hand: silence is counted from
// the last complete event (a partial event that trickles in is still silence), a silence of exactly the stall
// timer is a stall at its first check (never one period late), and `[DONE]` before a finish_reason is a failure.
import { decideOnSilence } from '../../../../src/recovery/planner';
import { type LegHooks, type LegOutcome, readLeg } from '../../../../src/stream/legs/leg-loop';
import type { LegBodySink } from '../../../../src/upstream/leg-body';
import { LegReader } from '../../../../src/upstream/leg-reader';

function fakeBody() {
  const b = {
    sink: undefined as LegBodySink | undefined,
    attach(s: LegBodySink) {
      b.sink = s;
    },
    resume() {},
    destroy() {},
  };
  return b;
}

const quietLog: any = { warn() {}, info() {}, debug() {}, error() {} };

function hooks(period: number, calls: { silences: number }, finished = () => false): LegHooks {
  return {
    metrics: { malformedEvent() {}, droppedAfterFinish() {}, engineCommentsDropped() {} },
    log: quietLog,
    leg: 1,
    isGone: () => false,
    idlePeriodMs: () => period,
    onSilence: (s) => {
      calls.silences++;
      return decideOnSilence({
        ...s,
        committed: true,
        leg: 1,
        recoverable: true,
        stallIdleTimeoutMs: period,
        maxStallMs: 60_000,
        firstDeltaTimeoutMs: 0,
      });
    },
    finished,
    failed: (failure, detail) => ({ type: 'failed', failure, detail }),
    onEvent: () => [],
    deliver: () => undefined,
  };
}

const CHUNK = Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n');

describe('readLeg: silence', () => {
  it('1,000 stalls: each one detected at its first check, none one period late', async () => {
    const late: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const body = fakeBody();
      const reader = new LegReader(body as any);
      body.sink?.data(CHUNK);
      const calls = { silences: 0 };
      const out: LegOutcome = await readLeg(reader, hooks(2, calls));
      expect(out).toMatchObject({ type: 'failed', failure: 'stall' });
      if (calls.silences !== 1) late.push(i);
    }
    expect(late).toEqual([]);
  });

  it('a timer that fires milliseconds before its deadline still detects the stall at the first check', async () => {
    // What the soak saw (WAITING silent_ms 19999 at a 20000 ms timer, then a stall one period later): here a
    // reader whose idle verdict comes 3 ms early, every time.
    let firstRead = true;
    const early: any = {
      anyBytes: true,
      partialBytes: 0,
      fence() {},
      async next(timeoutMs: number) {
        if (firstRead) {
          firstRead = false;
          return { type: 'events', events: [{ raw: CHUNK, data: CHUNK.toString().slice(6, -2) }] };
        }
        await new Promise((r) => setTimeout(r, Math.max(0, timeoutMs - 3)));
        return { type: 'idle' };
      },
    };
    const calls = { silences: 0 };
    expect(await readLeg(early, hooks(30, calls))).toMatchObject({ type: 'failed', failure: 'stall' });
    expect(calls.silences).toBe(1);
  });

  it('a partial event trickling in byte by byte is silence: a stall on the timer, with its size named', async () => {
    const body = fakeBody();
    const reader = new LegReader(body as any);
    body.sink?.data(CHUNK);
    body.sink?.data(Buffer.from('data: {"id":"x", '));
    const drip = setInterval(() => body.sink?.data(Buffer.from(' ')), 5);
    try {
      const calls = { silences: 0 };
      const out = await readLeg(reader, hooks(40, calls));
      expect(out).toMatchObject({ type: 'failed', failure: 'stall' });
      expect((out as any).detail).toMatch(/^partial-event\(\d+B\)$/);
      expect(calls.silences).toBe(1);
    } finally {
      clearInterval(drip);
    }
  });
});

describe('readLeg: [DONE]', () => {
  it('[DONE] before any finish_reason is a failure (eof, done-without-finish), never forwarded', async () => {
    const body = fakeBody();
    const reader = new LegReader(body as any);
    body.sink?.data(Buffer.concat([CHUNK, Buffer.from('data: [DONE]\n\n')]));
    const seen: string[] = [];
    const h = hooks(1000, { silences: 0 });
    const out = await readLeg(reader, {
      ...h,
      onEvent: (o) => {
        seen.push(o.kind);
        return [];
      },
    });
    expect(out).toEqual({ type: 'failed', failure: 'eof', detail: 'done-without-finish' });
    expect(seen).toEqual(['chunk']);
  });

  it('after a finish_reason, [DONE] is the normal end', async () => {
    const body = fakeBody();
    const reader = new LegReader(body as any);
    body.sink?.data(Buffer.from('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'));
    body.sink?.end();
    const seen: string[] = [];
    let finished = false;
    const h = hooks(1000, { silences: 0 }, () => finished);
    const out = await readLeg(reader, {
      ...h,
      onEvent: (o) => {
        seen.push(o.kind);
        if (o.finishReason) finished = true;
        return [];
      },
    });
    expect(out).toEqual({ type: 'finished', how: 'eof' });
    expect(seen).toEqual(['chunk', 'done']);
  });
});
