// What a client reads when the gateway gives up is a stable code (src/recovery/reasons.ts) and a fixed
// message: never an exception's text (which may name an internal address) nor Envoy's %RESPONSE_FLAGS%.
// Those reach the log records only.
import { LegOpenError } from '../../../src/upstream/client';
import { reassemble } from '../../support/client';
import { chunk, ROLE, settle, startCore } from '../../support/core-fakes';

const INTERNAL = '10.0.0.7:8000';
const leak = (e: string) => Object.assign(new Error(`connect ECONNREFUSED ${INTERNAL}`), { code: e });

/** Nothing internal in what the client got: no address, no exception text, no Envoy flag, no header name. */
function expectNoInternalText(body: string): void {
  expect(body).not.toContain(INTERNAL);
  expect(body).not.toMatch(/ECONNREFUSED|Error:|x-gateway|\b(UF|URX|UC|UH)\b/);
}

describe('client bodies carry codes, never raw text', () => {
  it("a router tier Envoy cannot reach: UNREACHABLE_STATUS with reason router-tier-unreachable; Envoy's flags in the log", async () => {
    const t = startCore({ MAX_ATTEMPTS: '1' });
    (await t.upstream.next(0)).head(503, { 'content-type': 'text/plain', 'x-gateway-upstream-flags': 'UF,URX' }).end();
    await t.done;
    expect(t.stream.status).toBe(429);
    expect(JSON.parse(t.stream.body).error).toMatchObject({ code: 'router_unreachable', reason: 'router-tier-unreachable' });
    expectNoInternalText(t.stream.body);
    expect(t.logs.find((l) => l.decision === 'FAILED')).toMatchObject({ reason: 'router-tier-unreachable', upstream_flags: 'UF,URX' });
  });

  it('a replica reset before its headers (flag UC), attempts exhausted: 502 reset:attempts-exhausted', async () => {
    const t = startCore({ MAX_ATTEMPTS: '1' });
    (await t.upstream.next(0)).head(503, { 'content-type': 'text/plain', 'x-gateway-upstream-flags': 'UC' }).end();
    await t.done;
    expect(t.stream.status).toBe(502);
    expect(JSON.parse(t.stream.body).error).toMatchObject({ code: 'upstream_failed', reason: 'reset:attempts-exhausted' });
    expectNoInternalText(t.stream.body);
  });

  it('leg 1 reset with an address in its error, the continuation unable to connect: leg2-failed-to-start:connect', async () => {
    const t = startCore();
    const leg1 = await t.upstream.next(0);
    leg1.head().events(ROLE, chunk({ content: 'Part' }));
    await settle();
    leg1.body.fail(new Error(`read ${INTERNAL} closed`));
    (await t.upstream.next(1)).failBeforeHead(new LegOpenError('connect', leak('ECONNREFUSED')));
    await t.done;
    expect(reassemble(t.stream.body).errors).toEqual([
      expect.objectContaining({ code: 'upstream_decode_interrupted', reason: 'leg2-failed-to-start:connect' }),
    ]);
    expectNoInternalText(t.stream.body);
    // The log keeps the detail.
    expect(t.logs.find((l) => l.decision === 'TRIGGERED').detail).toContain(INTERNAL);
  });

  it('an unexpected exception before the first delta: 500 gateway_error, gateway-internal-error, its text in the log', async () => {
    const t = startCore();
    (await t.upstream.next(0)).failBeforeHead(leak('EWHATEVER'));
    await t.done;
    expect(t.stream.status).toBe(500);
    expect(JSON.parse(t.stream.body).error).toMatchObject({ code: 'gateway_error', reason: 'gateway-internal-error' });
    expectNoInternalText(t.stream.body);
    expect(JSON.stringify(t.logs)).toContain(INTERNAL);
  });

  it('an unexpected exception after the commit point: the interruption event, gateway-internal-error', async () => {
    const t = startCore();
    const leg1 = await t.upstream.next(0);
    leg1.head().events(ROLE, chunk({ content: 'Part' }));
    await settle();
    leg1.crash();
    (await t.upstream.next(1)).failBeforeHead(leak('EWHATEVER'));
    await t.done;
    expect(reassemble(t.stream.body).errors).toEqual([expect.objectContaining({ reason: 'gateway-internal-error' })]);
    expect(t.stream.body.endsWith('data: [DONE]\n\n')).toBe(true);
    expectNoInternalText(t.stream.body);
  });
});
