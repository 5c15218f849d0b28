// What an operator alerts on exists from the first scrape: every labelled series with a known value at 0,
// build_info, the process and event-loop metrics, the GenAI-named histograms; every name of the sidecar's own
// under one prefix.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EnvoyVersionCheck } from '../../../src/extproc/envoy-version';
import { AdmissionMetrics } from '../../../src/obs/admission-metrics';
import { createLogger } from '../../../src/obs/logger';
import { CONTINUATION_VERIFICATION, INTERRUPTION_REASONS, LEG_FAILURE_REASONS, REQUEST_OUTCOMES } from '../../../src/obs/metric-labels';
import { Metrics } from '../../../src/obs/metrics';

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const VERSION = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', '..', 'package.json'), 'utf8')).version;

describe('Metrics before any request', () => {
  let text: string;
  beforeAll(async () => {
    text = await new Metrics().render();
  });

  it("has every request_end outcome at 0, and the request duration's series per outcome", () => {
    for (const outcome of REQUEST_OUTCOMES) {
      for (const c of CONTINUATION_VERIFICATION) {
        const series = `continuation_gateway_request_outcomes_total{outcome="${outcome}",continuation="${c}"}`;
        expect([series, sample(text, series)]).toEqual([series, 0]);
      }
      expect([outcome, sample(text, `continuation_gateway_request_duration_seconds_count{outcome="${outcome}"}`)]).toEqual([outcome, 0]);
    }
  });

  it('has the leg failures, interruption events and passthrough reasons at 0', () => {
    for (const reason of LEG_FAILURE_REASONS)
      for (const phase of ['prefill', 'decode'])
        expect(sample(text, `continuation_gateway_leg_failures_total{reason="${reason}",phase="${phase}"}`)).toBe(0);
    for (const reason of INTERRUPTION_REASONS)
      expect(sample(text, `continuation_gateway_interruption_events_total{reason="${reason}"}`)).toBe(0);
    expect(sample(text, 'continuation_gateway_requests_total{scope="passthrough",reason="continuation-model-unset"}')).toBe(0);
    expect(sample(text, 'continuation_gateway_requests_total{scope="originated",reason=""}')).toBe(0);
    expect(sample(text, 'continuation_gateway_recoveries_total{kind="continuation",outcome="succeeded"}')).toBe(0);
    expect(sample(text, 'continuation_gateway_recovery_refusals_total{reason="brake-open",phase="decode"}')).toBe(0);
    // One name per series: the aliases of a release that was never published are gone.
    expect(text).not.toMatch(/^(continuation_)?gateway_(interruptions_total|time_to_first_delta_seconds)/m);
  });

  it("says which build runs (package.json's version, this Node) and exports the process and event-loop metrics", () => {
    expect(sample(text, `continuation_gateway_build_info{version="${VERSION}",node_version="${process.version}"}`)).toBe(1);
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^process_resident_memory_bytes \d/m);
    expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds /m);
  });
});

describe('Metrics after requests', () => {
  it('counts each request_end outcome once, with its duration; and the TTFT histogram', async () => {
    const m = new Metrics();
    m.requestOutcome('completed-after-continuation', 'verified', 3.2);
    m.requestOutcome('interrupted', 'unverified', 1.1);
    m.requestOutcome('interrupted', 'none', 0.4);
    m.requestOutcome('completed-after-continuation', 'unverified', 2.0);
    m.observeFirstDelta(0.03);
    m.legFailure('reset', 'decode');
    const t = await m.render();
    const outcomes = 'continuation_gateway_request_outcomes_total';
    expect(sample(t, `${outcomes}{outcome="completed-after-continuation",continuation="verified"}`)).toBe(1);
    expect(sample(t, `${outcomes}{outcome="completed-after-continuation",continuation="unverified"}`)).toBe(1);
    expect(sample(t, `${outcomes}{outcome="interrupted",continuation="unverified"}`)).toBe(1);
    expect(sample(t, `${outcomes}{outcome="interrupted",continuation="none"}`)).toBe(1);
    expect(sample(t, `${outcomes}{outcome="completed",continuation="none"}`)).toBe(0);
    // The README's grep (`outcomes_total{outcome="completed-after-continuation"`): the outcome label comes first.
    expect(t.split('\n').filter((l) => l.includes('outcomes_total{outcome="completed-after-continuation"'))).toHaveLength(3);
    expect(sample(t, 'continuation_gateway_request_duration_seconds_sum{outcome="interrupted"}')).toBeCloseTo(1.5);
    expect(sample(t, 'continuation_gateway_time_to_first_token_seconds_bucket{le="0.04"}')).toBe(1);
    expect(sample(t, 'continuation_gateway_time_to_first_token_seconds_count')).toBe(1);
    expect(sample(t, 'continuation_gateway_leg_failures_total{reason="reset",phase="decode"}')).toBe(1);
  });
});

describe('metric names', () => {
  it('every metric the sidecar registers is continuation_gateway_*, apart from prom-client’s process_* and nodejs_*', async () => {
    const m = new Metrics();
    new AdmissionMetrics(m.registry, createLogger('silent'), () => undefined);
    new EnvoyVersionCheck({ adminUrl: undefined, log: createLogger('silent'), registry: m.registry });
    const names = (await m.registry.getMetricsAsJSON()).map((x) => x.name);
    expect(names.length).toBeGreaterThan(30);
    expect(names.filter((n) => !/^(continuation_gateway_|process_|nodejs_)/.test(n))).toEqual([]);
    expect(names).toEqual(
      expect.arrayContaining([
        'continuation_gateway_request_outcomes_total',
        'continuation_gateway_reprefill_limit',
        'continuation_gateway_envoy_too_old',
      ]),
    );
  });
});
