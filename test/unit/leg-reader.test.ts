import { Readable, PassThrough } from 'node:stream';
import { LegReader, MAX_PARTIAL_EVENT_BYTES } from '../../src/upstream/leg-reader';

describe('LegReader', () => {
  it('returns whole events only, across chunk splits', async () => {
    const r = new LegReader(Readable.from([Buffer.from('data: {"a"'), Buffer.from(':1}\n\ndata: [DONE]\n\n')]));
    const first = await r.next(1000);
    expect(first.type).toBe('events');
    if (first.type === 'events') expect(first.events.map((e) => e.data)).toEqual(['{"a":1}', '[DONE]']);
    expect((await r.next(1000)).type).toBe('end');
  });

  it('reports silence without losing the pending read', async () => {
    const body = new PassThrough();
    const r = new LegReader(body);
    expect((await r.next(30)).type).toBe('idle');
    body.write('data: x\n\n');
    const ev = await r.next(1000);
    expect(ev.type === 'events' && ev.events[0].data).toBe('x');
  });

  it('bounds memory: an event that never ends is treated as a broken leg', async () => {
    const big = Buffer.alloc(64 * 1024, 0x61);
    const chunks = Array.from({ length: Math.ceil(MAX_PARTIAL_EVENT_BYTES / big.length) + 2 }, () => big);
    const r = new LegReader(Readable.from([Buffer.from('data: '), ...chunks]));
    const out = await r.next(1000);
    expect(out.type).toBe('reset');
    if (out.type === 'reset') expect(String(out.error)).toContain('larger than');
  });

  it('fence() destroys the body and ends reads', async () => {
    const body = new PassThrough();
    const r = new LegReader(body);
    r.fence();
    expect(body.destroyed).toBe(true);
    expect((await r.next(10)).type).toBe('end');
  });
});
