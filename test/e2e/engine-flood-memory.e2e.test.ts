// Bounded memory for what an engine sends that is no event (issue 39, item 2), through the real Envoy binary
// with the sidecar as its own process (its VmRSS alone, as deployed: WORKERS=1, its V8 flags): an engine that,
// after a few tokens, writes keep-alive comments (`:\n\n`) as fast as they are read for 10 s, or empty `data:`
// events, or `data:` lines of an event that never ends, or a 1 MB event without a newline. The client's stream
// stays one complete answer (the last two: the leg is reset at MAX_PARTIAL_EVENT_BYTES and continued), at most
// one comment per 5 s reaches it, and the sidecar's and Envoy's RSS stay within the bound docs/memory.md states.
// The floods are the fake engine's (`flood@N:...`, `bigline@N:...`: our reading of a misbehaving engine, which
// waits for its socket to drain as uvicorn does); Envoy and the sidecar are the real ones.
//
// FLOOD_TEST_MS sets each flood's length (default 10000).
import * as fs from 'node:fs';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, uninterrupted } from './helpers';

const FLOOD_MS = Number(process.env.FLOOD_TEST_MS ?? 10_000);
/** The bounds (docs/memory.md): the sidecar's RSS rises at most this much during one stream, Envoy's at most that. */
const SIDECAR_RISE_BOUND_MB = 150;
const ENVOY_RISE_BOUND_MB = 64;
const SIZE = { 'x-fake-answer-tokens': '10,30' };

jest.setTimeout(120_000 + 4 * FLOOD_MS);

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack({
    engine: { tokenIntervalMs: 5 },
    env: { LOG_LEVEL: 'info', STALL_IDLE_TIMEOUT_SECONDS: '5' },
    sidecarProcess: true,
    sidecarNodeFlags: [...SIDECAR_NODE_FLAGS],
  });
});
afterAll(async () => stack?.stop());
beforeEach(() => resetFaults());

const cases: [string, string][] = [
  ['keep-alive comments', `flood@12:comment:${FLOOD_MS}`],
  ['empty data: events', `flood@12:empty-data:${FLOOD_MS}`],
  ['data: lines of an event that never ends', `flood@12:data-lines:${FLOOD_MS}`],
  ['a 1 MB event without a newline', `bigline@12:${1024 * 1024 + 16}`],
];

const figures: string[] = [];
afterAll(() => process.stderr.write(`[engine-flood-memory]\n${figures.join('\n')}\n`));

test.each(cases)('%s: one complete answer, the sidecar and Envoy within their bounds', async (what, fault) => {
  const body = chatBody();
  const ref = await uninterrupted(stack, body, SIZE);
  const sidecar = stack.sidecarPid as number;
  const envoy = stack.envoy.pid;
  await new Promise((r) => setTimeout(r, 300));
  const idle = { sidecar: rssMb(sidecar), envoy: rssMb(envoy) };
  const peak = { ...idle };
  const sampler = setInterval(() => {
    peak.sidecar = Math.max(peak.sidecar, rssMb(sidecar));
    peak.envoy = Math.max(peak.envoy, rssMb(envoy));
  }, 100);
  const id = newRequestId('flood');
  const started = Date.now();
  const r = await postChat(stack.url, body, { ...SIZE, 'x-request-id': id, 'x-fake-fault': fault }).finally(() => clearInterval(sampler));
  const seconds = (Date.now() - started) / 1000;
  expectOneCompleteStream(r);
  expect(r.content).toBe(ref.content);
  expect(r.reasoning).toBe(ref.reasoning);
  // At most one comment per 5 s of the stream reaches the client; no empty or broken event at all.
  const comments = r.raw.split('\n\n').filter((e) => e.startsWith(':')).length;
  expect(comments).toBeLessThanOrEqual(1 + Math.ceil((seconds * 1000) / 5000));
  expect(r.raw).not.toMatch(/^data:\s*$/m);
  const end = await stack.waitForEnd(id);
  figures.push(
    `  ${what} (${fault}): ${seconds.toFixed(1)} s, ${comments} comments relayed, outcome ${end.outcome}, malformed ${end.malformed_events}; ` +
      `sidecar VmRSS ${idle.sidecar.toFixed(0)} -> peak ${peak.sidecar.toFixed(0)} MB (+${(peak.sidecar - idle.sidecar).toFixed(0)}), ` +
      `Envoy ${idle.envoy.toFixed(0)} -> ${peak.envoy.toFixed(0)} MB (+${(peak.envoy - idle.envoy).toFixed(0)})`,
  );
  // Logged once per leg, however many (a flood of malformed events is not a flood of log lines).
  expect(stack.records({ request_id: id, decision: 'MALFORMED_EVENT' }).length).toBeLessThanOrEqual(2);
  expect(peak.sidecar - idle.sidecar).toBeLessThan(SIDECAR_RISE_BOUND_MB);
  expect(peak.envoy - idle.envoy).toBeLessThan(ENVOY_RISE_BOUND_MB);
});
