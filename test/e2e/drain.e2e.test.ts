// Graceful shutdown through the real Envoy: Sidecar.drain() turns readiness and gRPC health off, passes new
// requests through (native proxying), lets the stream in flight finish, then closes; past the deadline it
// closes anyway.
import * as grpc from '@grpc/grpc-js';
import { EXT_PROC_SERVICE, healthServiceDefinition } from '../../src/extproc/health';
import { waitForExtProcHealth } from '../../tools/stack/envoy-process';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor } from './helpers';

const SLOW = { 'x-fake-answer-tokens': '30,40', 'x-fake-token-ms': '50' }; // ~70 tokens, ~3.5 s

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

function healthCheck(port: number, service: string): Promise<string> {
  const Ctor = grpc.makeGenericClientConstructor(healthServiceDefinition(), 'Health');
  const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as any;
  return new Promise<string>((resolve, reject) =>
    c.Check({ service }, (err: Error | null, res?: { status: string }) => {
      c.close();
      if (err) reject(err);
      else resolve(res!.status);
    }),
  );
}

describe('drain', () => {
  let stack: TestStack;
  beforeAll(async () => {
    // TCP health check here, so the request made during the drain deterministically reaches the sidecar and
    // exercises its own pass-through; the gRPC check is the next describe.
    stack = await startTestStack({ healthCheck: 'tcp' });
  });
  afterAll(async () => stack?.stop());

  it('the stream in flight completes, a request during drain is proxied natively, /readyz is 503', async () => {
    const sidecar = stack.sidecar!;
    const admin = `http://127.0.0.1:${sidecar.adminPort}`;
    expect((await fetch(`${admin}/readyz`)).status).toBe(200);

    const slowId = newRequestId('inflight');
    const slow = postChat(stack.url, chatBody(), { ...SLOW, 'x-request-id': slowId });
    await waitFor(() => stack.records({ request_id: slowId, decision: 'FIRST_DELTA' }).length === 1);

    const started = Date.now();
    const drained = sidecar.drain(20_000);
    expect(sidecar.draining).toBe(true);
    const ready = await fetch(`${admin}/readyz`);
    expect(ready.status).toBe(503);
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
    expect(await healthCheck(sidecar.port, '')).toBe('NOT_SERVING');
    expect(await healthCheck(sidecar.port, EXT_PROC_SERVICE)).toBe('NOT_SERVING');
    const metrics = await (await fetch(`${admin}/metrics`)).text();
    expect(metrics).toMatch(/^continuation_gateway_draining 1$/m);
    expect(metrics).toMatch(/^continuation_gateway_active_streams 1$/m);

    // A new request while draining: handed back to Envoy (CONTINUE + echo), the sidecar originates nothing.
    const lateId = newRequestId('late');
    const late = await postChat(stack.url, chatBody(), { 'x-fake-answer-tokens': '5,5', 'x-request-id': lateId });
    expectOneCompleteStream(late);
    expect(stack.records({ request_id: lateId, decision: 'PASSTHROUGH' })).toEqual([expect.objectContaining({ reason: 'draining' })]);

    expect(stack.logs.filter((l) => l.event === 'request_end' && l.request_id === lateId)).toEqual([]);
    expect(seenFor(stack, lateId)).toHaveLength(1);
    // The slow stream is still running: the late request did not wait for it.
    expect(stack.logs.some((l) => l.event === 'request_end' && l.request_id === slowId)).toBe(false);

    const r = await slow;
    expectOneCompleteStream(r);
    expect(r.finishReasons).toEqual(['stop']);
    expect(r.raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect(await stack.waitForEnd(slowId)).toMatchObject({ outcome: 'completed', legs: 1 });

    await drained;
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(stack.records({ decision: 'DRAINED' })).toHaveLength(1);
    // Closed: the admin port no longer answers.
    await expect(fetch(`${admin}/healthz`)).rejects.toThrow();
  });
});

describe('drain deadline', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack();
  });
  afterAll(async () => stack?.stop());

  it('at the deadline, a stream still in flight ends with the interruption event, then the sidecar closes', async () => {
    const sidecar = stack.sidecar!;
    const id = newRequestId('deadline');
    const slow = postChat(stack.url, chatBody(), { ...SLOW, 'x-fake-token-ms': '200', 'x-request-id': id });
    await waitFor(() => stack.records({ request_id: id, decision: 'FIRST_DELTA' }).length === 1);
    const started = Date.now();
    await sidecar.drain(300);
    // 300 ms deadline + at most the 1 s grace for the gRPC calls left.
    expect(Date.now() - started).toBeLessThan(3000);
    expect(stack.records({ decision: 'DRAIN_TIMEOUT' })).toEqual([expect.objectContaining({ active_streams: 1 })]);
    const r = await slow;
    // Cut short, but never silently: the interruption event, then [DONE].
    expect(r.finishReasons).toEqual([]);
    expect(r.transportError).toBeNull();
    expect(r.errors).toEqual([
      expect.objectContaining({ code: 'upstream_decode_interrupted', reason: 'gateway-shutdown', partial_output: true }),
    ]);
    expect(r.done).toBe(true);
  });
});

describe('drain seen by Envoy (grpc.health.v1 health check)', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ healthCheck: 'grpc' });
  });
  afterAll(async () => stack?.stop());

  it('Envoy takes a draining sidecar out and proxies natively, without opening a processor stream', async () => {
    const sidecar = stack.sidecar!;
    const slowId = newRequestId('hc-inflight');
    const slow = postChat(stack.url, chatBody(), { ...SLOW, 'x-request-id': slowId });
    await waitFor(() => stack.records({ request_id: slowId, decision: 'FIRST_DELTA' }).length === 1);
    const drained = sidecar.drain(20_000);
    await waitForExtProcHealth(stack.envoy.adminUrl, false, 5000);
    const afterId = newRequestId('after-hc');
    expectOneCompleteStream(await postChat(stack.url, chatBody(), { 'x-fake-answer-tokens': '5,5', 'x-request-id': afterId }));
    expect(stack.records({ request_id: afterId })).toEqual([]);
    expect(seenFor(stack, afterId)).toHaveLength(1);
    expectOneCompleteStream(await slow);
    await drained;
  });
});
