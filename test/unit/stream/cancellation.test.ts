// The request's one cancellation signal (src/stream/cancellation.ts) and the waits that take it: recovery
// admission (this process's authority and a cluster worker's) refuses a cancelled request at once and lets a
// waiter go when the signal fires.
import { AdmissionAuthority, type AdmissionSettings } from '../../../src/recovery/admission';
import { type AdmissionRequestMessage, RemoteAdmission } from '../../../src/recovery/admission-cluster';
import { RequestCancellation } from '../../../src/stream/cancellation';

describe('RequestCancellation', () => {
  it('fires each subscriber once with the cause; a late subscriber and a late signal see it at once', () => {
    const c = new RequestCancellation();
    const seen: string[] = [];
    c.onCancel((why) => seen.push(`a:${why}`));
    const off = c.onCancel((why) => seen.push(`b:${why}`));
    off();
    c.cancel('shutdown');
    c.cancel('shutdown');
    expect(seen).toEqual(['a:shutdown']);
    c.onCancel((why) => seen.push(`late:${why}`));
    expect(seen).toEqual(['a:shutdown', 'late:shutdown']);
    expect(c.signal.aborted).toBe(true);
    expect(c.signal.reason).toBe('shutdown');
  });

  it('a client that leaves after a shutdown changes the cause; nothing changes it back', () => {
    const c = new RequestCancellation();
    const signal = c.signal;
    c.cancel('shutdown');
    c.cancel('client-gone');
    c.cancel('shutdown');
    expect(c.cause).toBe('client-gone');
    expect(signal.reason).toBe('shutdown'); // the signal fired once, at the first cause
  });
});

const SETTINGS: AdmissionSettings = {
  limits: { maxConcurrent: 1, percent: 0, floor: 1 },
  brake: { failures: 0, windowMs: 10_000, openMs: 5_000 },
  queueTimeoutMs: 60_000,
};

describe('AdmissionAuthority with a cancellation signal', () => {
  it('an already cancelled request is refused at once, even with a slot free', async () => {
    const a = new AdmissionAuthority(SETTINGS, () => 0);
    const c = new RequestCancellation();
    c.cancel('shutdown');
    expect(await a.request(c.signal).result).toMatchObject({ admitted: false, reason: 'cancelled' });
    expect(a.inFlight).toBe(0);
  });

  it('a waiter leaves the queue when its signal fires; the next one still gets the slot', async () => {
    const a = new AdmissionAuthority(SETTINGS, () => 0);
    const held = await a.request().result;
    const c = new RequestCancellation();
    const cancelled = a.request(c.signal);
    const next = a.request(new RequestCancellation().signal);
    expect(a.waiting).toBe(2);
    c.cancel('client-gone');
    expect(await cancelled.result).toMatchObject({ admitted: false, reason: 'cancelled' });
    expect(a.waiting).toBe(1);
    if (held.admitted) held.slot.settle('ok');
    expect(await next.result).toMatchObject({ admitted: true });
  });
});

describe('RemoteAdmission (a cluster worker) with a cancellation signal', () => {
  it('refuses a cancelled request without asking the primary, and sends a cancel when a wait is given up', async () => {
    const sent: AdmissionRequestMessage[] = [];
    const remote = new RemoteAdmission({ active: 0 }, (m) => (sent.push(m), true));
    const gone = new RequestCancellation();
    gone.cancel('shutdown');
    expect(await remote.request(gone.signal).result).toMatchObject({ admitted: false, reason: 'cancelled' });
    expect(sent).toEqual([]);
    const c = new RequestCancellation();
    const waiting = remote.request(c.signal);
    c.cancel('client-gone');
    expect(sent.map((m) => m.op)).toEqual(['request', 'cancel']);
    const id = (sent[0] as { id: number }).id;
    remote.answer({
      type: 'admission',
      op: 'answer',
      id,
      answer: { admitted: false, reason: 'cancelled', retryAfterMs: 1000, waitedMs: 5 },
    });
    expect(await waiting.result).toMatchObject({ admitted: false, reason: 'cancelled' });
  });
});
