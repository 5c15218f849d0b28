// No recovery leg is lost to a pooled connection (issue 18 item 3). The engine here closes idle keep-alive
// connections after a few milliseconds, so the continuation that follows a clean EOF (leg 1 ended without a
// finish_reason) is regularly sent by Envoy on the connection leg 1 just released, at the moment the engine
// closes it: Envoy answers 503 with flag UC (upstream_reset_before_response_started{connection_termination}).
// The sidecar re-runs such a leg once (src/upstream/client.ts). 100 repeats, every one rescued, and the race
// must actually have happened (Envoy logged UC on the egress listener) or the test proves nothing.
import * as http from 'node:http';
import type * as net from 'node:net';
import { UPSTREAM_FLAGS_HEADER } from '../../src/request/forward-headers';
import { LegAbort, UpstreamClient } from '../../src/upstream/client';
import { resetFaults } from '../../tools/fake-engine/faults';
import { startFakeEngine } from '../../tools/fake-engine/server';
import { chatBody, newRequestId, postChat } from '../support/client';
import { type IdleClosingEngine, startIdleClosingEngine } from '../support/idle-closing-engine';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream } from './helpers';

jest.setTimeout(180_000);

const REPEATS = 100;
/** The engine's keep-alive timeout, per repeat: a spread around the sidecar's EOF-to-leg-2 time (~1-5 ms). */
const IDLE_MS = [1, 2, 3, 4, 6];

describe('clean EOF, then leg 2, against an engine that closes idle connections after a few ms', () => {
  const fronts: IdleClosingEngine[] = [];
  let engine: Awaited<ReturnType<typeof startFakeEngine>>;
  const stacks: TestStack[] = [];

  afterAll(async () => {
    for (const s of stacks) await s.stop();
    for (const f of fronts) await f.close();
    await engine?.close();
  });

  test(`${REPEATS} of ${REPEATS} rescued; Envoy's UC on the egress is re-run, once, and logged as a second egress line`, async () => {
    engine = await startFakeEngine({ name: 'replica-a', tokenIntervalMs: 1 });
    const results: { i: number; idleMs: number; ok: boolean; why?: string }[] = [];
    const body = chatBody();
    const size = { 'x-fake-answer-tokens': '8,12' };
    let reference: string | undefined;
    let ucLines = 0;
    let reruns = 0;
    // The race is timing: a pass of the sweep can miss it (a Node 24 CI run saw 0 UC in 100). Up to 3 passes,
    // until it happened at least once; every request of every pass must be rescued.
    let passes = 0;
    for (; passes < 3 && (passes === 0 || ucLines === 0); passes++)
      for (const idleMs of IDLE_MS) {
        const front = await startIdleClosingEngine(engine.port, idleMs);
        fronts.push(front);
        // One replica: leg 2 goes to the replica whose connection leg 1 just released (the avoid header falls
        // back to any replica), which is where the race is.
        const stack = await startTestStack({ routerTier: [{ host: '127.0.0.1', port: front.port }] });
        stacks.push(stack);
        if (reference === undefined) {
          const ref = await postChat(stack.url, body, size);
          expectOneCompleteStream(ref);
          reference = ref.content;
        }
        for (let k = 0; k < REPEATS / IDLE_MS.length; k++) {
          const i = results.length;
          resetFaults();
          const rid = newRequestId(`stale-${idleMs}-${k}`);
          const r = await postChat(stack.url, body, { ...size, 'x-request-id': rid, 'x-fake-fault': 'eof@5;-' });
          const end = await stack.waitForEnd(rid, 10_000);
          const ok =
            r.status === 200 &&
            r.transportError === null &&
            r.errors.length === 0 &&
            r.finishReasons.length === 1 &&
            r.done &&
            r.content === reference &&
            end.outcome === 'completed-after-continuation';
          results.push({ i, idleMs, ok, why: ok ? undefined : `${end.outcome} ${end.reason ?? ''} ${JSON.stringify(r.errors)}` });
        }
        // Envoy's access log is flushed every second.
        await new Promise((res) => setTimeout(res, 1200));
        ucLines += stack.envoy
          .logs()
          .split('\n')
          .filter((l) => / egress POST .* code=503 flags=UC /.test(l)).length;
        reruns += (stack.sidecar!.ctx.upstream as UpstreamClient).connectionTerminationReruns;
        process.stderr.write(
          `stale-connection: engine idle ${idleMs} ms: ${front.stats.requests} requests, ${front.stats.connections} connections, ${front.stats.idleCloses} idle closes, ` +
            `egress UC so far ${ucLines}, re-runs so far ${reruns}\n`,
        );
      }
    const failed = results.filter((r) => !r.ok);
    process.stderr.write(
      `stale-connection: ${results.length - failed.length}/${results.length} rescued, ${ucLines} egress 503 UC, ${reruns} re-runs\n`,
    );
    expect(failed).toEqual([]);
    expect(results).toHaveLength(REPEATS * passes);
    // The race happened (else this test proves nothing), and every UC was re-run (one access-log line each).
    expect(ucLines).toBeGreaterThan(0);
    expect(reruns).toBe(ucLines);
  });
});

describe('UpstreamClient: what is re-run (no Envoy: a server answering as the egress listener would)', () => {
  const answers: { status: number; flags: string }[] = [];
  let seen = 0;
  let server: http.Server;
  let url: string;
  let client: UpstreamClient;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      seen++;
      const a = answers.shift() ?? { status: 200, flags: '-' };
      res.writeHead(a.status, { 'content-type': a.status === 200 ? 'text/event-stream' : 'text/plain', [UPSTREAM_FLAGS_HEADER]: a.flags });
      res.end(a.status === 200 ? 'data: [DONE]\n\n' : 'upstream connect error or disconnect/reset before headers');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/v1/chat/completions`;
    client = new UpstreamClient({ connectTimeoutMs: 2000, headersTimeoutMs: 2000 });
  });
  afterAll(async () => {
    await client.close();
    await new Promise((r) => server.close(r));
  });

  async function open(...script: { status: number; flags: string }[]): Promise<{ status: number; requests: number }> {
    answers.splice(0, answers.length, ...script);
    seen = 0;
    const res = await client.open(url, { 'content-type': 'application/json' }, Buffer.from('{}'), new LegAbort());
    await res.body.readAll(65536);
    return { status: res.status, requests: seen };
  }

  test("Envoy's 503 UC is sent once more, and the second answer is the leg's", async () => {
    const before = client.connectionTerminationReruns;
    expect(await open({ status: 503, flags: 'UC' }, { status: 200, flags: '-' })).toEqual({ status: 200, requests: 2 });
    // Twice UC: no third request; the leg fails as before (reset before headers).
    expect(await open({ status: 503, flags: 'UC' }, { status: 503, flags: 'UC' })).toEqual({ status: 503, requests: 2 });
    expect(client.connectionTerminationReruns - before).toBe(2);
  });

  test("not re-run: a router's or replica's own 503, Envoy's other local replies, other statuses", async () => {
    for (const first of [
      { status: 503, flags: '-' },
      { status: 503, flags: 'UF,URX' },
      { status: 503, flags: 'UH' },
      { status: 503, flags: 'UR' },
      { status: 500, flags: 'UC' },
      { status: 200, flags: '-' },
    ]) {
      expect({ first, ...(await open(first, { status: 200, flags: '-' })) }).toEqual({ first, status: first.status, requests: 1 });
    }
  });
});
