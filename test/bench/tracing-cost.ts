// `node dist/test/bench/tracing-cost.js [requests]`: the CPU the tracing hooks cost per request, in this process
// alone (no Envoy, no engines, no other load in the measurement): a rescued request's hooks (request span, two
// leg spans, five decision events, the ends) through the real SDK, BatchSpanProcessor and OTLP protobuf
// serialization, exported to a sink in this process, against the same hooks on the no-op trace (tracing off).
// The figure goes next to the bench's sidecar CPU per stream (docs/performance.md, "Tracing on and off").
import { createTracing, NO_TRACING, type Tracing } from '../../src/obs/tracing';
import { testTracingConfig } from '../support/tracing-config';
import { startOtlpSink } from './otlp-sink';

const HEADERS = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'x-request-id': 'bench' };

function rescued(t: Tracing): void {
  const r = t.request(HEADERS, 'bench-model', 512);
  r.decision('ATTEMPT', { leg: 1 });
  r.legStarted({ sent: 1, attempt: 1, continuation: false });
  r.legAnswered(200, 'replica-a:8000');
  r.legFirstToken();
  r.decision('FIRST_DELTA', { ttfd_ms: 40 });
  r.legEnded('failed', 'reset');
  r.decision('TRIGGERED', { failure: 'reset', case: 'content', detail: 'x' });
  r.decision('ATTEMPT', { leg: 2, case: 'content', family: 'generic', phase: 'content' });
  r.legStarted({ sent: 2, attempt: 1, continuation: true });
  r.legAnswered(200, 'replica-b:8000');
  r.legFirstToken();
  r.legEnded('finished');
  r.decision('SUCCEEDED', { leg: 2 });
  r.end({
    outcome: 'completed-after-continuation',
    reason: undefined,
    attempt: 1,
    legs: 2,
    firstDeltaAt: Date.now(),
    started: Date.now() - 100,
    tracker: {
      id: 'chatcmpl-1',
      model: 'bench-model',
      finishReason: 'stop',
      lastUsage: { prompt_tokens: 20, completion_tokens: 512, total_tokens: 532 },
    },
  });
}

async function cpuUs(n: number, t: Tracing, settle: () => Promise<void>): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    rescued(t);
    if (i % 200 === 199) await new Promise((r) => setImmediate(r)); // let the batch processor export as it would
  }
  await settle();
  const d = process.cpuUsage(start);
  return (d.user + d.system) / n;
}

async function main(): Promise<void> {
  const n = Number(process.argv[2] ?? 20000);
  const sink = await startOtlpSink();
  const on = createTracing(
    testTracingConfig(`${sink.url}/v1/traces`, { serviceName: 'bench', maxQueueSize: 1_000_000, scheduleDelayMs: 200 }),
  );
  await cpuUs(2000, on, async () => undefined); // warm-up (JIT)
  const offUs = await cpuUs(n, NO_TRACING, async () => undefined);
  const onUs = await cpuUs(n, on, () => on.shutdown());
  process.stdout.write(
    `${JSON.stringify({ requests: n, cpu_us_per_request_off: Math.round(offUs * 100) / 100, cpu_us_per_request_on: Math.round(onUs * 10) / 10, otlp_posts: sink.posts, otlp_bytes: sink.bytes })}\n`,
  );
  await sink.close();
}

void main();
