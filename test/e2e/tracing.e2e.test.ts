// OpenTelemetry traces (src/obs/tracing.ts) of a rescued stream, through the real Envoy and received by an
// OTLP/HTTP receiver that decodes the protobuf bodies the exporters send (test/support/otlp-receiver.ts): one
// request span joined to the client's traceparent, leg 1's span failed, leg 2's span succeeded under it, the
// decisions as span events, the GenAI attributes, and each leg's traceparent carrying its own span. With
// Envoy's tracer on (tools/stack/envoy-tracing.ts), Envoy's spans arrive in the same trace. Through the real
// OpenTelemetry Collector: OTLP/HTTP, and OTLP/gRPC with gzip, headers and B3 propagation.
//
// The sidecar runs as its own process here (sidecarProcess): its OpenTelemetry exporters load their transport
// with import(), which jest's VM refuses without --experimental-vm-modules (no span would leave).
import * as path from 'node:path';
import { resetFaults } from '../../tools/fake-engine/faults';
import { chatBody, newRequestId, postChat } from '../support/client';
import { type Collector, provisionCollector, startCollector } from '../support/otelcol';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../support/otlp-receiver';
import { startTestStack, type TestStack } from '../support/stack';
import { expectOneCompleteStream, seenFor } from './helpers';

const SIZE = { 'x-fake-answer-tokens': '40,40' };
const SECRET = 'sk-trace-test-secret';
const PROMPT = 'A prompt that must never appear in a span.';
const SERVICE = 'gateway-under-test';

function hex(n: number): string {
  return Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
}

/** A client's traceparent (sampled) and its parts. */
function clientTrace() {
  const traceId = hex(32);
  const spanId = hex(16);
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

/** The W3C traceparent's trace id and parent span id. */
function parseTraceparent(v: string | undefined): { traceId: string; parentId: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(v ?? '');
  if (!m) throw new Error(`not a traceparent: ${v}`);
  return { traceId: m[1], parentId: m[2] };
}

async function rescuedStream(stack: TestStack) {
  const id = newRequestId('trace');
  const client = clientTrace();
  const r = await postChat(stack.url, chatBody({ stream_options: { include_usage: true } }, PROMPT), {
    ...SIZE,
    'x-request-id': id,
    'x-fake-fault': 'crash@12',
    traceparent: client.header,
    authorization: `Bearer ${SECRET}`,
  });
  expectOneCompleteStream(r);
  expect(r.usage).toMatchObject({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) });
  const end = await stack.waitForEnd(id);
  expect(end).toMatchObject({ outcome: 'completed-after-continuation', legs: 2 });
  return { id, client, r };
}

/** The sidecar's request span of the trace and its leg spans, once all three arrived. */
/** Where the spans arrive: the test's receiver or the Collector. */
type SpanSource = Pick<OtlpReceiver, 'waitFor'>;

async function gatewaySpans(rx: SpanSource, traceId: string) {
  const mine = (s: ReceivedSpan) => s.traceId === traceId && s.service === SERVICE;
  const all = await rx.waitFor((spans) => spans.filter(mine).length >= 3);
  const spans = all.filter(mine);
  const request = spans.filter((s) => s.kind === 'SPAN_KIND_SERVER');
  expect(request).toHaveLength(1);
  const legs = spans.filter((s) => s.kind === 'SPAN_KIND_CLIENT');
  return { request: request[0], legs, spans };
}

/** `usage`: what the client got in its stream (it asked for usage). */
function expectRescueTrace(request: ReceivedSpan, legs: ReceivedSpan[], usage: { prompt_tokens: number; completion_tokens: number }) {
  expect(request).toMatchObject({
    name: 'chat test-model',
    statusCode: 'STATUS_CODE_OK',
    attributes: expect.objectContaining({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'sglang',
      'gen_ai.request.model': 'test-model',
      'gen_ai.response.finish_reasons': ['stop'],
      'gateway.outcome': 'completed-after-continuation',
      'gateway.legs': 2,
    }),
  });
  // The usage the client got (corrected by the gateway to count the whole answer, both legs).
  expect(request.attributes).toMatchObject({
    'gen_ai.usage.input_tokens': usage.prompt_tokens,
    'gen_ai.usage.output_tokens': usage.completion_tokens,
  });
  for (const leg of legs) expect(leg.attributes['gen_ai.provider.name']).toBe('sglang');
  const events = request.events.map((e) => e.name);
  // ATTEMPT (leg 1), FIRST_DELTA (the commit point), TRIGGERED (leg 1 failed), ATTEMPT (leg 2), SUCCEEDED.
  expect(events).toEqual(['ATTEMPT', 'FIRST_DELTA', 'TRIGGERED', 'ATTEMPT', 'SUCCEEDED']);
  expect(request.events[2].attributes).toMatchObject({ 'gateway.failure': expect.any(String), 'gateway.case': expect.any(String) });
  expect(request.events[3].attributes).toMatchObject({ 'gateway.leg': 2 });
  expect(legs).toHaveLength(2);
  const [leg1, leg2] = [...legs].sort((a, b) => Number(a.attributes['gateway.leg']) - Number(b.attributes['gateway.leg']));
  for (const leg of legs) expect(leg.parentSpanId).toBe(request.spanId);
  expect(leg1).toMatchObject({
    name: 'chat test-model leg1',
    statusCode: 'STATUS_CODE_ERROR',
    attributes: expect.objectContaining({
      'gateway.leg': 1,
      'gateway.attempt': 1,
      'gateway.leg.outcome': 'failed',
      'error.type': expect.any(String),
      'http.response.status_code': 200,
      'gateway.replica': expect.any(String),
      'gateway.time_to_first_token_ms': expect.any(Number),
    }),
  });
  expect(leg2).toMatchObject({
    name: 'chat test-model continuation',
    statusCode: 'STATUS_CODE_OK',
    attributes: expect.objectContaining({
      'gateway.leg': 2,
      'gateway.leg.kind': 'continuation',
      'gateway.leg.outcome': 'finished',
      'http.response.status_code': 200,
      'gateway.replica': expect.any(String),
    }),
  });
  // Leg 2 went to the other replica (the recovery leg avoids the failed one).
  expect(leg2.attributes['gateway.replica']).not.toBe(leg1.attributes['gateway.replica']);
  return { leg1, leg2 };
}

/** No prompt or answer text, no credential in anything the receiver got. */
function expectNoSecrets(spans: ReceivedSpan[], answer: string) {
  const text = JSON.stringify(spans);
  expect(text).not.toContain(SECRET);
  expect(text).not.toContain(PROMPT);
  expect(text.toLowerCase()).not.toContain('authorization');
  // A stretch of the delivered answer (long enough not to match by chance).
  expect(answer.length).toBeGreaterThan(40);
  expect(text).not.toContain(answer.slice(10, 40));
}

/** A rescued stream through a stack where Envoy traces too: its whole trace, Envoy's hops included. */
async function expectEnvoyHops(stack: TestStack, rx: SpanSource) {
  const { id, client, r } = await rescuedStream(stack);
  const { request, legs } = await gatewaySpans(rx, client.traceId);
  const { leg1, leg2 } = expectRescueTrace(request, legs, r.usage);
  const envoyOf = (all: ReceivedSpan[]) => all.filter((x) => x.service === 'envoy-under-test' && x.traceId === client.traceId);
  // The front hop, the chat hop, its ext_proc call, and one egress hop per leg.
  const envoy = envoyOf(await rx.waitFor((all) => envoyOf(all).length >= 5));
  const childOf = (parent: string, kind = 'SPAN_KIND_SERVER') => envoy.filter((x) => x.parentSpanId === parent && x.kind === kind);
  // Envoy's front hop joins the client; the sidecar's request span is under it (ext_proc sees the traceparent
  // the front hop's router passed on to the chat hop).
  const front = childOf(client.spanId);
  expect(front).toHaveLength(1);
  expect(request.parentSpanId).toBe(front[0].spanId);
  const chat = childOf(front[0].spanId);
  expect(chat).toHaveLength(1);
  expect(envoy.filter((x) => x.parentSpanId === chat[0].spanId && x.name.includes('ExternalProcessor.Process'))).toHaveLength(1);
  // Each leg's egress hop is a child of the leg's span, and the replica got the egress hop's context.
  const egress = [leg1, leg2].map((leg) => childOf(leg.spanId));
  for (const e of egress) expect(e).toHaveLength(1);
  expect(seenFor(stack, id).map((s) => parseTraceparent(s.headers.traceparent))).toEqual(
    egress.map((e) => ({ traceId: client.traceId, parentId: e[0].spanId })),
  );
}

describe('traces of a rescued stream (sidecar tracer only)', () => {
  let stack: TestStack;
  let rx: OtlpReceiver;
  beforeAll(async () => {
    // Its first export is refused (503): the exporter retries it, and no span is lost.
    rx = await startOtlpReceiver({ refuseFirst: [{ status: 503 }] });
    stack = await startTestStack({
      sidecarProcess: true,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
        OTEL_SERVICE_NAME: SERVICE,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        TRACE_SERVER_ADDRESS: 'router.inference.svc:8000',
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await rx?.close();
  });
  beforeEach(() => resetFaults());

  test('one request span joined to the client, leg 1 failed, leg 2 succeeded, legs carrying their spans', async () => {
    const { id, client, r } = await rescuedStream(stack);
    const { request, legs, spans } = await gatewaySpans(rx, client.traceId);
    // Joined to the client's traceparent (no Envoy tracer: the client's span is the parent).
    expect(request.parentSpanId).toBe(client.spanId);
    const { leg1, leg2 } = expectRescueTrace(request, legs, r.usage);
    // Each leg reached its replica with its own span as the parent: the engine's spans join under the leg.
    const seen = seenFor(stack, id);
    expect(seen.map((s) => s.continuation)).toEqual([false, true]);
    expect(seen.map((s) => parseTraceparent(s.headers.traceparent))).toEqual([
      { traceId: client.traceId, parentId: leg1.spanId },
      { traceId: client.traceId, parentId: leg2.spanId },
    ]);
    expectNoSecrets(spans, r.content);
    // server.address is what configuration names (never a replica's address from the request path).
    for (const s of [request, ...legs])
      expect(s.attributes).toMatchObject({ 'server.address': 'router.inference.svc', 'server.port': 8000 });
    expect(rx.received[0].status).toBe(503);
  });

  test('a re-run before the first delta: leg 1 failed (overloaded), the retry succeeded, RETRY as an event', async () => {
    const id = newRequestId('trace-retry');
    const client = clientTrace();
    const r = await postChat(stack.url, chatBody(), {
      ...SIZE,
      'x-request-id': id,
      'x-fake-fault': 'status@503',
      traceparent: client.header,
    });
    expectOneCompleteStream(r);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-retry' });
    const { request, legs } = await gatewaySpans(rx, client.traceId);
    expect(request.attributes).toMatchObject({ 'gateway.outcome': 'completed-after-retry', 'gateway.attempts': 2 });
    // This client did not ask for usage: the stream carried none, and the span says none.
    expect(request.attributes['gen_ai.usage.output_tokens']).toBeUndefined();
    expect(request.events.map((e) => e.name)).toEqual(['ATTEMPT', 'RETRY', 'ATTEMPT', 'FIRST_DELTA']);
    const byAttempt = [...legs].sort((a, b) => Number(a.attributes['gateway.attempt']) - Number(b.attributes['gateway.attempt']));
    expect(byAttempt.map((l) => [l.name, l.statusCode, l.attributes['http.response.status_code'], l.attributes['error.type']])).toEqual([
      ['chat test-model leg1', 'STATUS_CODE_ERROR', 503, 'overloaded'],
      ['chat test-model retry', 'STATUS_CODE_OK', 200, undefined],
    ]);
  });

  test('an interrupted stream: the request span is an error with the interruption reason', async () => {
    const id = newRequestId('trace-int');
    const client = clientTrace();
    const r = await postChat(stack.url, chatBody(), {
      ...SIZE,
      'x-request-id': id,
      'x-fake-fault': 'crash@10;crash@5',
      traceparent: client.header,
    });
    expect(r.errors).toHaveLength(1);
    const end = await stack.waitForEnd(id);
    expect(end.outcome).toBe('interrupted');
    const { request, legs } = await gatewaySpans(rx, client.traceId);
    expect(request).toMatchObject({
      statusCode: 'STATUS_CODE_ERROR',
      attributes: expect.objectContaining({ 'gateway.outcome': 'interrupted', 'gateway.reason': end.reason, 'error.type': end.reason }),
    });
    expect(legs.map((l) => l.statusCode)).toEqual(['STATUS_CODE_ERROR', 'STATUS_CODE_ERROR']);
    // Decisions the core logs directly are span events too: the interruption (FAILED, with its reason).
    expect(request.events.find((e) => e.name === 'FAILED')?.attributes).toMatchObject({ 'gateway.reason': end.reason });
  });
});

describe('traces with Envoy’s OpenTelemetry tracer on', () => {
  let stack: TestStack;
  let rx: OtlpReceiver;
  beforeAll(async () => {
    rx = await startOtlpReceiver();
    stack = await startTestStack({
      sidecarProcess: true,
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${rx.url}/v1/traces`, OTEL_SERVICE_NAME: SERVICE, OTEL_BSP_SCHEDULE_DELAY: '100' },
      envoyTracing: { collectorHost: '127.0.0.1', collectorPort: rx.port, serviceName: 'envoy-under-test' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await rx?.close();
  });
  beforeEach(() => resetFaults());

  test('Envoy’s hops and the sidecar’s spans are one trace', async () => expectEnvoyHops(stack, rx));
});

// The same trace through a real OpenTelemetry Collector built from its Go modules (scripts/build-otelcol.sh):
// both exporters' protobuf as the Collector decodes it, read back from its debug exporter.
const collectorBin = provisionCollector(path.resolve(__dirname, '../../..'));
if (collectorBin.skip) process.stderr.write(`tracing through the Collector SKIPPED: ${collectorBin.skip}\n`);
const describeCollector = collectorBin.bin ? describe : describe.skip;

describeCollector('traces through a real OpenTelemetry Collector (sidecar and Envoy exporting)', () => {
  let stack: TestStack;
  let col: Collector;
  beforeAll(async () => {
    col = await startCollector(collectorBin.bin as string);
    stack = await startTestStack({
      sidecarProcess: true,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: col.url, OTEL_SERVICE_NAME: SERVICE, OTEL_BSP_SCHEDULE_DELAY: '100' },
      envoyTracing: { collectorHost: '127.0.0.1', collectorPort: col.port, serviceName: 'envoy-under-test' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await col?.stop();
  });
  beforeEach(() => resetFaults());

  test('the Collector received the rescued stream’s trace: request span, failed leg 1, leg 2, Envoy’s hops', async () =>
    expectEnvoyHops(stack, col));
});

describeCollector('traces through a real OpenTelemetry Collector over OTLP/gRPC (gzip, headers, B3)', () => {
  let stack: TestStack;
  let col: Collector;
  beforeAll(async () => {
    col = await startCollector(collectorBin.bin as string);
    stack = await startTestStack({
      sidecarProcess: true,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: col.grpcUrl,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=t1',
        OTEL_EXPORTER_OTLP_TIMEOUT: '5000',
        OTEL_PROPAGATORS: 'b3multi',
        CONTINUATION_ENGINE: 'vllm',
        OTEL_SERVICE_NAME: SERVICE,
        OTEL_BSP_SCHEDULE_DELAY: '100',
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await col?.stop();
  });
  beforeEach(() => resetFaults());

  test('the Collector decoded the rescued stream’s spans; each leg carried its span as B3 headers', async () => {
    const id = newRequestId('trace-grpc');
    const traceId = hex(32);
    const clientSpan = hex(16);
    const r = await postChat(stack.url, chatBody({}, PROMPT), {
      ...SIZE,
      'x-request-id': id,
      'x-fake-fault': 'crash@12',
      'x-b3-traceid': traceId,
      'x-b3-spanid': clientSpan,
      'x-b3-sampled': '1',
    });
    expectOneCompleteStream(r);
    expect(await stack.waitForEnd(id)).toMatchObject({ outcome: 'completed-after-continuation' });
    const { request, legs } = await gatewaySpans(col, traceId);
    expect(request.parentSpanId).toBe(clientSpan);
    expect(request.attributes).toMatchObject({ 'gen_ai.provider.name': 'vllm', 'gen_ai.response.finish_reasons': ['stop'] });
    const bySpan = new Map(legs.map((l) => [l.spanId, l]));
    const seen = seenFor(stack, id);
    expect(seen).toHaveLength(2);
    for (const s of seen) {
      expect(s.headers['x-b3-traceid']).toBe(traceId);
      expect(bySpan.has(String(s.headers['x-b3-spanid']))).toBe(true);
      expect(s.headers.traceparent).toBeUndefined();
    }
  });
});
