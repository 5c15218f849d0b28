import { DONE_EVENT, INTERRUPTION_CODE, interruptionEvent, interruptionPayload } from '../../../src/recovery/interruption';
import type { InterruptReason } from '../../../src/recovery/reasons';
import { SseParser } from '../../../src/sse/parser';
import { StreamTracker } from '../../../src/sse/tracker';

describe('interruptionEvent', () => {
  const info = { requestId: 'req-123', deliveredOutputTokens: 57, reason: 'leg2-reset' as const };

  it('is exactly one data event with the error object, then data: [DONE]', () => {
    const bytes = interruptionEvent(info).toString('utf8');
    const m = /^data: (\{[^\n\r]*\})\n\ndata: \[DONE\]\n\n$/.exec(bytes);
    expect(m).not.toBeNull();
    expect(JSON.parse(m![1])).toEqual(interruptionPayload(info));
  });

  it('carries the documented fields', () => {
    const bytes = interruptionEvent(info).toString('utf8');
    const json = JSON.parse(bytes.slice('data: '.length, bytes.indexOf('\n')));
    expect(Object.keys(json)).toEqual(['error']);
    expect(json.error).toEqual({
      code: 'upstream_decode_interrupted',
      message: expect.stringContaining('(leg2-reset)'),
      type: 'server_error',
      request_id: 'req-123',
      partial_output: true,
      delivered_output_tokens: 57,
      retryable: false,
      reason: 'leg2-reset',
    });
    expect(json.error.message).toMatch(/incomplete/);
    expect(INTERRUPTION_CODE).toBe('upstream_decode_interrupted');
  });

  it('an absent request id is null, not missing', () => {
    const p = interruptionPayload({ requestId: undefined, deliveredOutputTokens: 0, reason: 'leg2-eof' }) as {
      error: Record<string, unknown>;
    };
    expect(p.error).toHaveProperty('request_id', null);
  });

  it('partialOutput false: partial_output false and a different message', () => {
    const p = interruptionPayload({ ...info, partialOutput: false, deliveredOutputTokens: 0 }) as { error: Record<string, unknown> };
    expect(p.error).toMatchObject({ partial_output: false, delivered_output_tokens: 0, retryable: false, code: INTERRUPTION_CODE });
    expect(p.error.message).toBe('The stream from the model replica failed before any output was delivered (leg2-reset).');
  });

  it('a gateway stop is not called a replica failure', () => {
    const p = interruptionPayload({ ...info, reason: 'gateway-shutdown' }) as { error: Record<string, unknown> };
    expect(p.error.message).toMatch(/^The gateway was stopping after part of the answer was delivered/);
    expect(p.error.message).not.toMatch(/replica/);
  });

  it('a reason with newlines and quotes still gives one data line per event', () => {
    // Not a code the gateway sends: the encoding alone is under test.
    const reason = 'weird\r\n"reason"\nline\u2028' as InterruptReason;
    const bytes = interruptionEvent({ ...info, reason });
    const evs = new SseParser().push(bytes);
    expect(evs).toHaveLength(2);
    expect(
      evs[0].raw
        .toString()
        .split(/\r\n|\r|\n/)
        .filter(Boolean),
    ).toHaveLength(1);
    const o = StreamTracker.read(evs[0]);
    expect(o.kind).toBe('error');
    expect((o.json as any).error.reason).toBe(reason);
    expect(StreamTracker.read(evs[1]).kind).toBe('done');
    expect(Buffer.concat(evs.map((e) => e.raw)).equals(bytes)).toBe(true);
  });

  it('the tracker classifies the event as an in-band error', () => {
    const t = new StreamTracker();
    const observed = new SseParser().push(interruptionEvent(info)).map((e) => StreamTracker.read(e));
    for (const o of observed) t.apply(o);
    expect(observed[0].kind).toBe('error');
    expect(observed[0].json.error).toMatchObject({ code: 'upstream_decode_interrupted', retryable: false });
    expect(t.doneSeen).toBe(true);
  });

  it('DONE_EVENT is data: [DONE] and a blank line', () => {
    expect(DONE_EVENT.toString('utf8')).toBe('data: [DONE]\n\n');
  });
});
