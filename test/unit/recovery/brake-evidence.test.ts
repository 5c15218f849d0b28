// The recovery brake cannot be opened by a client (issue 19, item 5): what a failed recovery leg says about
// the pool (brakeEvidence), how the brake counts it (a `repeat` failure once per source), and who a request
// came from (requestSource).

import { brakeEvidence, RecoveryBrake } from '../../../src/recovery/admission-policy';
import { requestSource } from '../../../src/recovery/request-source';
import { headersExceed, parseFault, resetFaults, takeFault } from '../../../tools/fake-engine/faults';

const S = { failures: 3, windowMs: 10_000, openMs: 5_000 };
const repeat = (source: string) => ({ failed: 'repeat' as const, source });

describe('brakeEvidence', () => {
  it('a 4xx other than 429 is the request its own answer: neutral', () => {
    for (const status of [400, 404, 413, 422, 431]) expect(brakeEvidence({ failure: 'status', status, source: 's' })).toBe('neutral');
  });
  it('a 429, a 503 and other 5xx are the pool', () => {
    for (const status of [429, 500, 502, 503, 504])
      expect(brakeEvidence({ failure: 'status', status, source: 's' })).toEqual({ failed: 'pool' });
    expect(brakeEvidence({ failure: 'overloaded', previous: 'overloaded', source: 's' })).toEqual({ failed: 'pool' });
    expect(brakeEvidence({ failure: 'connect', previous: 'connect', source: 's' })).toEqual({ failed: 'pool' });
  });
  it('a reset (stall, EOF, ...) like the same request its previous attempt: a repeat, with its source', () => {
    for (const f of ['reset', 'eof', 'stall', 'error-event', 'abort-finish', 'headers-timeout', 'first-delta-timeout'])
      expect(brakeEvidence({ failure: f, previous: f, source: 'src-1' })).toEqual(repeat('src-1'));
  });
  it('a failure unlike the previous one, or with none before it (a continuation), is the pool', () => {
    expect(brakeEvidence({ failure: 'reset', previous: 'overloaded', source: 's' })).toEqual({ failed: 'pool' });
    expect(brakeEvidence({ failure: 'reset', previous: 'stall', source: 's' })).toEqual({ failed: 'pool' });
    expect(brakeEvidence({ failure: 'reset', source: 's' })).toEqual({ failed: 'pool' });
  });
});

describe('RecoveryBrake with evidence', () => {
  it('one source repeating its failure never opens it, however often', () => {
    const b = new RecoveryBrake(S);
    for (let i = 0; i < 50; i++) expect(b.settle(i, repeat('one-client'), false)).toBe(false);
    expect(b.mode(100)).toBe('closed');
  });
  it('repeats from distinct sources open it (resets across distinct requests: a dying pool)', () => {
    const b = new RecoveryBrake(S);
    expect(b.settle(0, repeat('a'), false)).toBe(false);
    expect(b.settle(1, repeat('a'), false)).toBe(false);
    expect(b.settle(2, repeat('b'), false)).toBe(false);
    expect(b.settle(3, repeat('c'), false)).toBe(true);
  });
  it("one source's repeats add one failure to the pool's own", () => {
    const b = new RecoveryBrake(S);
    for (let i = 0; i < 5; i++) b.settle(i, repeat('bad'), false);
    expect(b.settle(10, { failed: 'pool' }, false)).toBe(false);
    expect(b.settle(11, 'failed', false)).toBe(true);
  });
  it('successes still weigh against counted failures only', () => {
    const b = new RecoveryBrake(S);
    for (let i = 0; i < 3; i++) b.settle(i, 'ok', false);
    for (let i = 0; i < 20; i++) b.settle(10 + i, repeat('bad'), false);
    expect(b.settle(40, 'failed', false)).toBe(false); // 2 counted vs 3 ok
    expect(b.settle(41, 'failed', false)).toBe(true); // 3 counted vs 3 ok
  });
  it('a probe that fails as its own request had failed does not reopen it; the next probe decides', () => {
    const b = new RecoveryBrake(S);
    for (let i = 0; i < 3; i++) b.settle(i, 'failed', false);
    expect(b.verdict(5_002)).toEqual({ go: true, probe: true });
    expect(b.settle(5_010, repeat('bad'), true)).toBe(false);
    expect(b.mode(5_011)).toBe('half-open');
    expect(b.verdict(5_012)).toEqual({ go: true, probe: true });
    expect(b.settle(5_020, 'ok', true)).toBe(false);
    expect(b.mode(5_021)).toBe('closed');
  });
});

describe('requestSource', () => {
  const body = Buffer.from('{"messages":[{"role":"user","content":"secret prompt"}]}');
  it('the forwarded client address when there is one: the same for every request of that client', () => {
    const a = requestSource({ 'x-forwarded-for': '203.0.113.7, 10.0.0.1' }, body);
    expect(requestSource({ 'x-forwarded-for': '203.0.113.7' }, Buffer.from('{}'))).toBe(a);
    expect(requestSource({ 'x-forwarded-for': '203.0.113.8' }, body)).not.toBe(a);
  });
  it('else the request shape: the same body is one source, another body another', () => {
    expect(requestSource({}, body)).toBe(requestSource({}, Buffer.from(body)));
    expect(requestSource({}, body)).not.toBe(requestSource({}, Buffer.from('{"messages":[]}')));
  });
  it('a digest: neither the address nor the body appears in it', () => {
    const s = requestSource({ 'x-forwarded-for': '203.0.113.7' }, body);
    expect(s).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(requestSource({}, body)).not.toContain('secret');
  });
});

describe('fake engine fault reject-headers@N', () => {
  beforeEach(() => resetFaults());
  it('parses, and applies to every request that sends it (never consumed)', () => {
    expect(parseFault('reject-headers@8000')).toMatchObject({ kind: 'reject-headers', at: 8000 });
    for (let i = 0; i < 5; i++) expect(takeFault('reject-headers@8000')?.kind).toBe('reject-headers');
    expect(takeFault('reject-headers@8000', true)?.kind).toBe('reject-headers');
  });
  it('compares the headers its names and values total with the limit', () => {
    expect(headersExceed({ a: 'b'.repeat(10) }, 11)).toBe(false);
    expect(headersExceed({ a: 'b'.repeat(11) }, 11)).toBe(true);
  });
});
