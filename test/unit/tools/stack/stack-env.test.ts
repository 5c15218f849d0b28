// The settings `npm run stack` reads itself (tools/stack/stack-env.ts): bad values are one clear line.
import { envoyTracingFrom, StackError } from '../../../../tools/stack/stack-env';

describe('ENVOY_OTLP_ENDPOINT (Envoy’s own OpenTelemetry tracer in npm run stack)', () => {
  it('unset or empty: no tracer', () => {
    expect(envoyTracingFrom(undefined)).toBeUndefined();
    expect(envoyTracingFrom('  ')).toBeUndefined();
  });
  it('http://host:port: the collector Envoy reports to', () => {
    expect(envoyTracingFrom('http://127.0.0.1:4318')).toEqual({ collectorHost: '127.0.0.1', collectorPort: 4318 });
    expect(envoyTracingFrom('http://otel-collector/')).toEqual({ collectorHost: 'otel-collector', collectorPort: 80 });
  });
  it.each(['127.0.0.1:4318', 'https://c:4318', 'http://c:4318/v1/traces', 'not a url'])('%s is refused, naming the variable', (v) => {
    expect(() => envoyTracingFrom(v)).toThrow(StackError);
    expect(() => envoyTracingFrom(v)).toThrow(/ENVOY_OTLP_ENDPOINT/);
  });
});
