// `node dist/test/support/trace-one-request.js <traces URL> [TracingConfig overrides as JSON] [client headers as
// JSON]`: one request's spans (a request span, one leg) through the real SDK and the official exporter, then a
// shutdown that exports them. Run as its own process by test/unit/obs/tracing.test.ts: the exporters load their
// transport with import(), which jest's VM refuses. Prints the leg's trace headers as one JSON line.
import { createTracing } from '../../src/obs/tracing';
import { testTracingConfig } from './tracing-config';

async function main(): Promise<void> {
  const [url, over, client] = process.argv.slice(2);
  const t = createTracing(testTracingConfig(url, over ? JSON.parse(over) : {}));
  const r = t.request(client ? JSON.parse(client) : {}, 'm', 64);
  const legHeaders = r.legStarted({ sent: 1, attempt: 1, continuation: false });
  r.legAnswered(200, 'replica-a');
  r.legFirstToken();
  r.legEnded('finished');
  r.end({
    outcome: 'completed',
    reason: undefined,
    attempt: 1,
    legs: 1,
    firstDeltaAt: Date.now(),
    started: Date.now() - 5,
    tracker: { id: 'chatcmpl-1', model: 'm', finishReason: 'stop', lastUsage: { prompt_tokens: 7, completion_tokens: 5 } },
  });
  await t.shutdown();
  process.stdout.write(`${JSON.stringify(legHeaders ?? {})}\n`);
}

void main();
