// Tracing's pure parts (what becomes an attribute, when a gRPC export is retried), the one property of the off
// state that matters (a sidecar without tracing loads no module of the OpenTelemetry SDK), and the official
// exporters as configured, each in its own process (test/support/trace-one-request.ts: jest's VM cannot load
// them) against real listeners: retries of 429/503 with backoff and Retry-After, the timeout bounding them,
// gzip, headers, propagators, and OTLP/gRPC. The spans of real requests: test/e2e/tracing.e2e.test.ts.
import { execFile, spawn } from 'node:child_process';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { status } from '@grpc/grpc-js';
import { grpcRetryDelayMs } from '../../../src/obs/grpc-retry';
import { commonAttributes, decisionAttributes, outcomeIsError, responseAttributes } from '../../../src/obs/tracing-attributes';
import { legRequestHeaders } from '../../../src/request/forward-headers';
import { startOtlpGrpcReceiver, startRawGrpcSink } from '../../support/otlp-grpc-receiver';
import { startOtlpReceiver } from '../../support/otlp-receiver';

const BASE = { DOWNSTREAM_URL: 'http://127.0.0.1:1' };

describe('span attributes', () => {
  it('decision records: the allow-listed counts and kinds, never free text', () => {
    const a = decisionAttributes({ leg: 2, failure: 'reset', detail: 'connect ECONNREFUSED 10.1.2.3:8000', case: 'content', replica: 'x' });
    expect(a).toEqual({ 'gateway.leg': 2, 'gateway.failure': 'reset', 'gateway.case': 'content' });
  });
  it("a continuation's ATTEMPT: its source and whether nothing checked it (the generic guess) reach the span event", () => {
    const a = decisionAttributes({ leg: 2, family: 'generic', source: 'generic', verified_by: null, unverified: true, engine_check: null });
    expect(a).toEqual({ 'gateway.leg': 2, 'gateway.family': 'generic', 'gateway.source': 'generic', 'gateway.unverified': true });
  });
  it('marks the outcomes that are errors', () => {
    expect(['completed', 'completed-after-continuation', 'passed-through-status', 'client-disconnected'].map(outcomeIsError)).toEqual([
      false,
      false,
      false,
      false,
    ]);
    expect(['interrupted', 'failed-before-first-delta', 'error'].map(outcomeIsError)).toEqual([true, true, true]);
  });
  it('usage and finish reasons from what the stream carried; impossible counts left out', () => {
    expect(responseAttributes('stop', { prompt_tokens: 12, completion_tokens: 40, total_tokens: 52 })).toEqual({
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 40,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    expect(responseAttributes(null, null)).toEqual({});
    expect(responseAttributes('x'.repeat(65), { prompt_tokens: -1, completion_tokens: 1.5 })).toEqual({});
  });
  it('provider and server on every span', () => {
    expect(commonAttributes('vllm', { address: 'router', port: 8000 })).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'vllm',
      'server.address': 'router',
      'server.port': 8000,
    });
    expect(commonAttributes('sglang', undefined)).toEqual({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'sglang' });
  });
  it('a leg that carries its own context drops the client’s trace headers, W3C and B3 alike', () => {
    const client = { traceparent: 'c', tracestate: 'c', b3: 'c', 'x-b3-traceid': 'c', baggage: 'k=v', 'x-other': '1' };
    expect(legRequestHeaders(client, undefined, { traceHeaders: { b3: 'mine' } })).toMatchObject({
      b3: 'mine',
      baggage: 'k=v',
      'x-other': '1',
    });
    expect(Object.keys(legRequestHeaders(client, undefined, { traceHeaders: { b3: 'mine' } }))).not.toContain('traceparent');
    // No context of its own (tracing off, or OTEL_PROPAGATORS=none): the client's pass unchanged.
    expect(legRequestHeaders(client, undefined, { traceHeaders: {} })).toMatchObject({ traceparent: 'c', 'x-b3-traceid': 'c' });
  });
});

describe('gRPC export retries (the OTLP spec’s retryable codes, the SDK HTTP transport’s schedule)', () => {
  it('retries UNAVAILABLE with growing backoff, within the deadline, at most 5 times', () => {
    const unavailable = { code: status.UNAVAILABLE };
    expect([1, 2, 3, 4, 5].map((n) => grpcRetryDelayMs(unavailable, n, 60_000, 0.5))).toEqual([1000, 1500, 2250, 3375, 5000]);
    expect(grpcRetryDelayMs(unavailable, 1, 60_000, 0)).toBe(800);
    expect(grpcRetryDelayMs(unavailable, 1, 60_000, 0.999_999)).toBeCloseTo(1200);
    expect(grpcRetryDelayMs(unavailable, 6, 60_000, 0.5)).toBeUndefined();
    expect(grpcRetryDelayMs(unavailable, 1, 900, 0.5)).toBeUndefined();
  });
  it('never retries a permanent error, or RESOURCE_EXHAUSTED without RetryInfo', () => {
    for (const code of [status.INVALID_ARGUMENT, status.UNAUTHENTICATED, status.PERMISSION_DENIED, status.RESOURCE_EXHAUSTED])
      expect(grpcRetryDelayMs({ code }, 1, 60_000, 0.5)).toBeUndefined();
    expect(grpcRetryDelayMs(new Error('no code'), 1, 60_000, 0.5)).toBeUndefined();
    for (const code of [status.CANCELLED, status.DEADLINE_EXCEEDED, status.ABORTED, status.OUT_OF_RANGE, status.DATA_LOSS])
      expect(grpcRetryDelayMs({ code }, 1, 60_000, 0.5)).toBe(1000);
  });
});

const ROOT = path.resolve(__dirname, '../../..');

/** One request's spans exported by the real SDK in its own process; resolves with the leg's trace headers. */
function traceOneRequest(
  url: string,
  over: object = {},
  client: object = {},
  env: Record<string, string> = {},
): Promise<Record<string, string>> {
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [path.join(ROOT, 'test/support/trace-one-request.js'), url, JSON.stringify(over), JSON.stringify(client)],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 30_000 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(JSON.parse(stdout.trim().split('\n').pop() ?? '{}')),
    ),
  );
}

describe('the official OTLP/HTTP exporter, as configured', () => {
  it('retries an export answered 429, then 503 with Retry-After, and delivers it', async () => {
    const rx = await startOtlpReceiver({ refuseFirst: [{ status: 429 }, { status: 503, retryAfter: '2' }] });
    try {
      await traceOneRequest(`${rx.url}/v1/traces`);
      expect(rx.received.map((p) => p.status)).toEqual([429, 503, 200]);
      expect(rx.spans.map((s) => s.name).sort()).toEqual(['chat m', 'chat m leg1']);
      const [a, b, c] = rx.received.map((p) => p.at);
      // Backed off: the first retry after 1 s +-20 %, the second after the 2 s the collector asked for.
      expect(b - a).toBeGreaterThanOrEqual(750);
      expect(c - b).toBeGreaterThanOrEqual(1900);
    } finally {
      await rx.close();
    }
  });
  it('OTEL_EXPORTER_OTLP_TIMEOUT bounds the retries: 1.5 s leaves room for one', async () => {
    const rx = await startOtlpReceiver({ refuseFirst: Array(10).fill({ status: 503 }) });
    try {
      await traceOneRequest(`${rx.url}/v1/traces`, { timeoutMs: 1500 });
      expect(rx.received.map((p) => p.status)).toEqual([503, 503]);
      expect(rx.spans).toEqual([]);
    } finally {
      await rx.close();
    }
  });
  it('never retries a 400 (a permanent refusal)', async () => {
    const rx = await startOtlpReceiver({ refuseFirst: [{ status: 400 }] });
    try {
      await traceOneRequest(`${rx.url}/v1/traces`);
      expect(rx.received.map((p) => p.status)).toEqual([400]);
    } finally {
      await rx.close();
    }
  });
  it('sends gzip and the configured headers; the spans carry the GenAI attributes', async () => {
    const rx = await startOtlpReceiver();
    try {
      await traceOneRequest(`${rx.url}/v1/traces`, { compression: 'gzip', headers: { 'api-key': 'k1' }, providerName: 'vllm' });
      expect(rx.received[0].headers).toMatchObject({
        'content-encoding': 'gzip',
        'api-key': 'k1',
        'content-type': 'application/x-protobuf',
      });
      const request = rx.spans.find((s) => s.kind === 'SPAN_KIND_SERVER');
      expect(request?.attributes).toMatchObject({
        'gen_ai.provider.name': 'vllm',
        'gen_ai.usage.input_tokens': 7,
        'gen_ai.usage.output_tokens': 5,
        'gen_ai.response.finish_reasons': ['stop'],
      });
    } finally {
      await rx.close();
    }
  });
  it('propagators: b3 reads the client’s B3 context and writes the leg’s; none writes nothing', async () => {
    const rx = await startOtlpReceiver();
    try {
      const traceId = '463ac35c9f6413ad48485a3953bb6124';
      const client = { b3: `${traceId}-0020000000000001-1` };
      const b3 = await traceOneRequest(`${rx.url}/v1/traces`, { propagators: ['b3'] }, client);
      expect(b3.b3).toMatch(new RegExp(`^${traceId}-[0-9a-f]{16}-1$`));
      expect(b3.traceparent).toBeUndefined();
      const multi = await traceOneRequest(`${rx.url}/v1/traces`, { propagators: ['b3multi'] }, client);
      expect(multi).toMatchObject({ 'x-b3-traceid': traceId, 'x-b3-sampled': '1' });
      expect(await traceOneRequest(`${rx.url}/v1/traces`, { propagators: [] }, client)).toEqual({});
      await rx.waitFor((s) => s.length >= 6);
      // The request span joined the client's B3 span: same trace, the client's span as parent.
      const request = rx.spans.find((s) => s.kind === 'SPAN_KIND_SERVER' && s.traceId === traceId);
      expect(request?.parentSpanId).toBe('0020000000000001');
    } finally {
      await rx.close();
    }
  });
  it('OTEL_TRACES_SAMPLER (read by the SDK): always_off sends nothing', async () => {
    const rx = await startOtlpReceiver();
    try {
      await traceOneRequest(`${rx.url}/v1/traces`, {}, {}, { OTEL_TRACES_SAMPLER: 'always_off' });
      expect(rx.posts).toBe(0);
    } finally {
      await rx.close();
    }
  });
});

describe('the official OTLP/gRPC exporter, as configured', () => {
  it('retries UNAVAILABLE twice, then delivers, with the headers as metadata', async () => {
    const rx = await startOtlpGrpcReceiver({ refuseFirst: [status.UNAVAILABLE, status.UNAVAILABLE] });
    try {
      await traceOneRequest(rx.url, { protocol: 'grpc', headers: { 'api-key': 'k2' } });
      expect(rx.calls.map((c) => c.code)).toEqual([status.UNAVAILABLE, status.UNAVAILABLE, status.OK]);
      expect(rx.calls[2].metadata).toMatchObject({ 'api-key': 'k2' });
      expect(rx.calls[1].at - rx.calls[0].at).toBeGreaterThanOrEqual(750);
      expect(rx.spans.map((s) => s.name).sort()).toEqual(['chat m', 'chat m leg1']);
    } finally {
      await rx.close();
    }
  });
  it('compresses with gzip when asked, and not otherwise: the grpc-encoding header and the message flag on the wire', async () => {
    // grpc-js's server decompresses before a handler sees the call, so the wire is read with node:http2 here.
    for (const compression of ['gzip', 'none'] as const) {
      const rx = await startRawGrpcSink();
      try {
        await traceOneRequest(rx.url, { protocol: 'grpc', compression });
        expect(rx.messages).toHaveLength(1);
        const m = rx.messages[0];
        expect(m.path).toBe('/opentelemetry.proto.collector.trace.v1.TraceService/Export');
        expect(m.encoding).toBe(compression === 'gzip' ? 'gzip' : undefined);
        expect(m.compressedFlag).toBe(compression === 'gzip' ? 1 : 0);
        const payload = m.compressedFlag === 1 ? zlib.gunzipSync(m.payload) : m.payload;
        expect(payload.toString('latin1')).toContain('chat m leg1'); // the span name, in the protobuf bytes
      } finally {
        await rx.close();
      }
    }
  });
  it('does not retry INVALID_ARGUMENT', async () => {
    const rx = await startOtlpGrpcReceiver({ refuseFirst: [status.INVALID_ARGUMENT] });
    try {
      await traceOneRequest(rx.url, { protocol: 'grpc' });
      expect(rx.calls.map((c) => c.code)).toEqual([status.INVALID_ARGUMENT]);
    } finally {
      await rx.close();
    }
  });
});

/** Runs the real sidecar process until it listens, stops it, and returns how many OpenTelemetry SDK modules it loaded. */
function otelModulesLoaded(env: Record<string, string>): Promise<number> {
  const hook = path.join(ROOT, 'test/support/print-otel-modules.js');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', hook, path.join(ROOT, 'src/main.js')], {
      env: {
        PATH: process.env.PATH ?? '',
        ...BASE,
        CONTINUATION_MODEL: 'generic-test',
        PORT: '0',
        ADMIN_PORT: '0',
        LOG_LEVEL: 'error',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.stdout.on('data', (d: Buffer) => {
      if (d.toString().includes('SIDECAR listening')) child.kill('SIGTERM');
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const m = /OTEL_SDK_MODULES_LOADED (\d+)/.exec(stderr);
      m ? resolve(Number(m[1])) : reject(new Error(`no module count (exit ${code}, ${signal}); stderr: ${stderr}`));
    });
  });
}

describe('the sidecar process', () => {
  it('with no OTLP endpoint, or OTEL_TRACES_EXPORTER=none, loads no module of the OpenTelemetry SDK', async () => {
    expect(await otelModulesLoaded({ OTEL_SERVICE_NAME: 'gw', OTEL_TRACES_SAMPLER: 'always_on' })).toBe(0);
    expect(await otelModulesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_TRACES_EXPORTER: 'none' })).toBe(0);
  });
  it('with an endpoint, loads the SDK (the control: the count above can be non-zero), gRPC included', async () => {
    // Nothing listens on port 1: the sidecar starts and stops all the same (no span was made, none is sent).
    expect(await otelModulesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1' })).toBeGreaterThan(0);
    expect(
      await otelModulesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).toBeGreaterThan(0);
  });
});
