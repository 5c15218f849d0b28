// Health, readiness and metrics: the Metrics class and the gRPC health service on their own, then the admin
// server and grpc.health.v1 of a sidecar in the real stack, with /metrics read after a recovered stream.
import * as grpc from '@grpc/grpc-js';
import { ConfigError, loadConfig } from '../../../src/config/env';
import { EXT_PROC_SERVICE, HealthStatus, healthServiceDefinition } from '../../../src/extproc/health';
import { Metrics } from '../../../src/obs/metrics';
import { chatBody, newRequestId, postChat } from '../../support/client';
import { startTestStack, type TestStack } from '../../support/stack';

type HealthClient = grpc.Client & {
  Check(req: { service: string }, cb: (err: grpc.ServiceError | null, res?: { status: string }) => void): void;
  Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
};

function healthClient(port: number): HealthClient {
  const Ctor = grpc.makeGenericClientConstructor(healthServiceDefinition(), 'Health');
  return new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as HealthClient;
}

function check(c: HealthClient, service: string): Promise<string> {
  return new Promise((resolve, reject) => c.Check({ service }, (err, res) => (err ? reject(err) : resolve(res!.status))));
}

async function get(url: string): Promise<{ status: number; body: string; type: string | null }> {
  const r = await fetch(url);
  return { status: r.status, body: await r.text(), type: r.headers.get('content-type') };
}

/** The value of one series in a Prometheus text exposition (undefined when absent). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('ADMIN_PORT and DRAIN_TIMEOUT_SECONDS', () => {
  it('default to 9090 and 30 s; 0 is allowed for both; bad values are named', () => {
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1' })).toMatchObject({ adminPort: 9090, drainTimeoutMs: 30_000 });
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1', ADMIN_PORT: '0', DRAIN_TIMEOUT_SECONDS: '0' })).toMatchObject({
      adminPort: 0,
      drainTimeoutMs: 0,
    });
    expect(loadConfig({ DOWNSTREAM_URL: 'http://h:1', DRAIN_TIMEOUT_SECONDS: '2.5' }).drainTimeoutMs).toBe(2500);
    let err: unknown;
    try {
      loadConfig({ DOWNSTREAM_URL: 'http://h:1', ADMIN_PORT: '70000', DRAIN_TIMEOUT_SECONDS: '-1' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems.map((p) => p.split(' ')[2])).toEqual(['ADMIN_PORT', 'DRAIN_TIMEOUT_SECONDS']);
  });
});

describe('Metrics', () => {
  it('renders Prometheus names, labels and types; each instance has its own registry', async () => {
    const live = { activeStreams: 3 };
    const m = new Metrics(() => live);
    m.scope('originated');
    m.scope('passthrough:not-streaming');
    m.legFailure('reset', 'decode');
    m.recovery('continuation', 'succeeded');
    m.interruptionEvent('leg2-eof');
    m.recoveryRefused('queue-timeout', 'prefill');
    m.observeFirstDelta(0.2);
    m.observeRecoveryLatency(0.05);
    m.requestEnded({ legs: 2, recoveredTokens: 17, retried: true, firstDeltaSent: true });
    const t = await m.render();
    expect(sample(t, 'continuation_gateway_requests_total{scope="originated",reason=""}')).toBe(1);
    expect(sample(t, 'continuation_gateway_requests_total{scope="passthrough",reason="not-streaming"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_leg_failures_total{reason="reset",phase="decode"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_recoveries_total{kind="continuation",outcome="succeeded"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_recoveries_total{kind="retry",outcome="succeeded"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_interruption_events_total{reason="leg2-eof"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_recovery_refusals_total{reason="queue-timeout",phase="prefill"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_legs_total')).toBe(2);
    expect(sample(t, 'continuation_gateway_recovered_tokens_total')).toBe(17);
    expect(sample(t, 'continuation_gateway_active_streams')).toBe(3);
    expect(sample(t, 'continuation_gateway_time_to_first_token_seconds_count')).toBe(1);
    expect(sample(t, 'continuation_gateway_time_to_first_token_seconds_bucket{le="0.25"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_recovery_latency_seconds_sum')).toBeCloseTo(0.05);
    expect(t).toContain('# TYPE continuation_gateway_time_to_first_token_seconds histogram');
    expect(t).toContain('# TYPE continuation_gateway_active_streams gauge');
    expect(t).toContain('# TYPE continuation_gateway_requests_total counter');
    expect(m.recoveryLatencySumSeconds()).toBeCloseTo(0.05);
    // A second instance starts from zero (no global registry).
    expect(sample(await new Metrics().render(), 'continuation_gateway_legs_total')).toBe(0);
  });
});

describe('grpc.health.v1 on its own server', () => {
  let server: grpc.Server;
  let port: number;
  const health = new HealthStatus('SERVING');
  beforeAll(async () => {
    server = new grpc.Server();
    health.addToServer(server);
    port = await new Promise<number>((res, rej) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
    );
  });
  afterAll(() => {
    health.endWatches();
    server.forceShutdown();
  });

  it('Check: SERVING / NOT_SERVING per known service, NOT_FOUND otherwise; Watch streams the changes', async () => {
    const c = healthClient(port);
    try {
      expect(await check(c, '')).toBe('SERVING');
      expect(await check(c, EXT_PROC_SERVICE)).toBe('SERVING');
      await expect(check(c, 'nope')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      const seen: string[] = [];
      const w = c.Watch({ service: '' });
      w.on('error', () => undefined);
      w.on('data', (m) => seen.push(m.status));
      const unknown: string[] = [];
      const wu = c.Watch({ service: 'nope' });
      wu.on('error', () => undefined);
      wu.on('data', (m) => unknown.push(m.status));
      await waitFor(() => seen.length === 1 && unknown.length === 1);
      health.setAll('NOT_SERVING');
      expect(await check(c, EXT_PROC_SERVICE)).toBe('NOT_SERVING');
      await waitFor(() => seen.length === 2);
      expect(seen).toEqual(['SERVING', 'NOT_SERVING']);
      expect(unknown).toEqual(['SERVICE_UNKNOWN']);
      w.cancel();
      wu.cancel();
    } finally {
      c.close();
    }
  });
});

describe('admin server and gRPC health of a sidecar in the real stack', () => {
  let stack: TestStack;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '1' } });
  });
  afterAll(async () => stack?.stop());

  const admin = () => `http://127.0.0.1:${stack.sidecar!.adminPort}`;

  it('/healthz is 200 ok, /readyz is 200, unknown paths 404', async () => {
    expect(stack.sidecar!.adminPort).toBeGreaterThan(0);
    expect(await get(`${admin()}/healthz`)).toMatchObject({ status: 200, body: 'ok' });
    expect(await get(`${admin()}/readyz`)).toMatchObject({ status: 200 });
    expect((await get(`${admin()}/nope`)).status).toBe(404);
  });

  it('grpc.health.v1 Check on the ext_proc port: SERVING for "" and the ext_proc service', async () => {
    const c = healthClient(stack.sidecar!.port);
    try {
      expect(await check(c, '')).toBe('SERVING');
      expect(await check(c, EXT_PROC_SERVICE)).toBe('SERVING');
    } finally {
      c.close();
    }
  });

  it('/metrics after a recovered stream counts the scope, the interruption, the continuation and the latency', async () => {
    const id = newRequestId('metrics');
    const r = await postChat(stack.url, chatBody(), { 'x-fake-answer-tokens': '30,40', 'x-request-id': id, 'x-fake-fault': 'crash@45' });
    expect(r.finishReasons).toEqual(['stop']);
    expect(r.done).toBe(true);
    const end = await stack.waitForEnd(id);
    expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
    const m = await get(`${admin()}/metrics`);
    expect(m.status).toBe(200);
    expect(m.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const t = m.body;
    expect(sample(t, 'continuation_gateway_requests_total{scope="originated",reason=""}')).toBeGreaterThanOrEqual(1);
    expect(sample(t, 'continuation_gateway_leg_failures_total{reason="reset",phase="decode"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_recoveries_total{kind="continuation",outcome="succeeded"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_legs_total')).toBeGreaterThanOrEqual(2);
    expect(sample(t, 'continuation_gateway_recovered_tokens_total')).toBeGreaterThan(0);
    expect(sample(t, 'continuation_gateway_recovery_latency_seconds_count')).toBe(1);
    expect(sample(t, 'continuation_gateway_recovery_latency_seconds_sum')).toBeGreaterThan(0);
    expect(sample(t, 'continuation_gateway_time_to_first_token_seconds_count')).toBeGreaterThanOrEqual(1);
    expect(sample(t, 'continuation_gateway_active_streams')).toBe(0);
    // Admission: the continuation held a re-prefill slot until its first token, then freed it.
    expect(sample(t, 'continuation_gateway_reprefills_in_flight')).toBe(0);
    expect(sample(t, 'continuation_gateway_reprefills_in_flight_peak')).toBe(1);
    expect(sample(t, 'continuation_gateway_reprefill_limit')).toBe(3);
    expect(sample(t, 'continuation_gateway_recoveries_waiting')).toBe(0);
    expect(sample(t, 'continuation_gateway_recovery_brake_open')).toBe(0);
    expect(sample(t, 'continuation_gateway_recovery_wait_seconds_count{outcome="admitted"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_draining')).toBe(0);
    // Out of scope: counted with its reason.
    const p = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chatBody({ stream: false })),
    });
    await p.text();
    const t2 = (await get(`${admin()}/metrics`)).body;
    expect(t2).toMatch(/^continuation_gateway_requests_total\{scope="passthrough",reason="[^"]+"\} 1$/m);
  });
});

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
