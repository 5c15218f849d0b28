// Shared assertions for the end-to-end suites: what the engines saw for a request, and the uninterrupted
// answer a recovered stream must equal.
import type { SeenRequest } from '../../tools/fake-engine/server';
import { type ClientResult, postChat } from '../support/client';
import type { TestStack } from '../support/stack';

/** Every upstream request the replicas saw for a client request id (leg1, retries `-aN`, leg2 `-c1`). */
export function seenFor(stack: TestStack, requestId: string): SeenRequest[] {
  const all = [...stack.engines, ...(stack.continuationEngine ? [stack.continuationEngine] : [])].flatMap((e) => e.requests);
  return all.filter((r) => (r.headers['x-request-id'] ?? '').startsWith(requestId)).sort((a, b) => a.startedAt - b.startedAt);
}

/**
 * Whether the engine saw leg `index` of a request go away, polled: the client can hold the gateway's ending
 * before the replica's socket has reported the close, so an immediate read races (it failed CI on a busy box).
 */
export async function engineSawAbort(stack: TestStack, requestId: string, index: number, timeoutMs = 5000): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (seenFor(stack, requestId)[index]?.clientAborted) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * When the engine saw leg `index` of a request close, polled: the client can finish reading leg 2 before the
 * replica's socket reports leg 1's close (both in this process's event loop; a gpt-oss stall at its last token
 * failed a Node 24 CI run so). Undefined when it never closed within the timeout.
 */
export async function engineClosedAt(stack: TestStack, requestId: string, index: number, timeoutMs = 5000): Promise<number | undefined> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const at = seenFor(stack, requestId)[index]?.closedAt;
    if (at !== undefined || Date.now() > until) return at;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The same request without any fault, through the same stack: the reference answer. */
export async function uninterrupted(stack: TestStack, body: unknown, headers: Record<string, string> = {}): Promise<ClientResult> {
  const clean = { ...headers };
  delete clean['x-fake-fault'];
  const r = await postChat(stack.url, body, clean);
  if (r.status !== 200 || r.finishReasons.length !== 1) throw new Error(`reference run failed: ${r.status} ${r.raw.slice(0, 300)}`);
  return r;
}

/** A complete, single stream: one id, one role chunk, one finish_reason, [DONE], no error event. */
export function expectOneCompleteStream(r: ClientResult): void {
  expect(r.transportError).toBeNull();
  expect(r.status).toBe(200);
  expect(r.errors).toEqual([]);
  expect(r.ids).toHaveLength(1);
  expect(r.roleChunks).toBe(1);
  expect(r.finishReasons).toHaveLength(1);
  expect(r.done).toBe(true);
}

/** The interruption contract: one machine-readable error event, then [DONE], nothing after. */
export function expectInterruption(r: ClientResult, reason?: string): any {
  expect(r.transportError).toBeNull();
  expect(r.errors).toHaveLength(1);
  const e = r.errors[0];
  expect(e.code).toBe('upstream_decode_interrupted');
  expect(e.type).toBe('server_error');
  expect(e.partial_output).toBe(true);
  expect(e.retryable).toBe(false);
  expect(typeof e.delivered_output_tokens).toBe('number');
  if (reason) expect(e.reason).toBe(reason);
  expect(r.done).toBe(true);
  expect(r.raw.endsWith('data: [DONE]\n\n')).toBe(true);
  expect(r.finishReasons).toHaveLength(0);
  return e;
}
