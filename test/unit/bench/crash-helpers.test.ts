// The crash-under-load run's pure helpers: reading /metrics text (labels in any order, histogram buckets
// summed over the other labels) and its options.
import { histogramQuantileBound, parseMetrics, parseOptions } from '../../bench/run';

const TEXT = `# HELP continuation_gateway_recovery_wait_seconds Time a recovery waited
# TYPE continuation_gateway_recovery_wait_seconds histogram
continuation_gateway_recovery_wait_seconds_bucket{le="0",outcome="admitted"} 60
continuation_gateway_recovery_wait_seconds_bucket{le="0.1",outcome="admitted"} 90
continuation_gateway_recovery_wait_seconds_bucket{le="0.25",outcome="admitted"} 100
continuation_gateway_recovery_wait_seconds_bucket{le="+Inf",outcome="admitted"} 100
continuation_gateway_recovery_wait_seconds_sum{outcome="admitted"} 4.5
continuation_gateway_recovery_wait_seconds_count{outcome="admitted"} 100
continuation_gateway_recovery_wait_seconds_bucket{outcome="timed-out",le="+Inf"} 2
continuation_gateway_recovery_refusals_total{reason="brake-open",phase="decode"} 3
continuation_gateway_reprefills_in_flight_peak 64
`;

test('parseMetrics reads names, labels (any order) and values, skipping comments', () => {
  const s = parseMetrics(TEXT);
  expect(s.find((x) => x.name === 'continuation_gateway_reprefills_in_flight_peak')).toEqual({
    name: 'continuation_gateway_reprefills_in_flight_peak',
    labels: {},
    value: 64,
  });
  expect(s.find((x) => x.name === 'continuation_gateway_recovery_refusals_total')?.labels).toEqual({
    reason: 'brake-open',
    phase: 'decode',
  });
  expect(s.find((x) => x.labels.outcome === 'timed-out')).toEqual({
    name: 'continuation_gateway_recovery_wait_seconds_bucket',
    labels: { outcome: 'timed-out', le: '+Inf' },
    value: 2,
  });
  expect(s.some((x) => x.name.startsWith('#'))).toBe(false);
});

test('histogramQuantileBound: the upper bound of the bucket that holds the quantile', () => {
  const s = parseMetrics(TEXT);
  const admitted = { outcome: 'admitted' };
  expect(histogramQuantileBound(s, 'continuation_gateway_recovery_wait_seconds', 0.5, admitted)).toBe(0);
  expect(histogramQuantileBound(s, 'continuation_gateway_recovery_wait_seconds', 0.9, admitted)).toBe(0.1);
  expect(histogramQuantileBound(s, 'continuation_gateway_recovery_wait_seconds', 0.99, admitted)).toBe(0.25);
  expect(histogramQuantileBound(s, 'continuation_gateway_recovery_wait_seconds', 0.99, { outcome: 'timed-out' })).toBe(Infinity);
  expect(histogramQuantileBound(s, 'continuation_gateway_nothing', 0.99)).toBeNaN();
});

test('crash options: defaults, flags, and --crash-only skipping every other run', () => {
  const d = parseOptions([], {});
  expect({ crash: d.crash, engines: d.crashEngines, answer: d.crashAnswer }).toEqual({ crash: 500, engines: 4, answer: '50,50' });
  const o = parseOptions(['--crash-only', '--crash', '20', '--crash-answer', '5,40'], {});
  expect({ levels: o.levels, recovery: o.recovery, idle: o.idleStreams, idleS: o.idleS, crash: o.crash, answer: o.crashAnswer }).toEqual({
    levels: [],
    recovery: 0,
    idle: 0,
    idleS: 0,
    crash: 20,
    answer: '5,40',
  });
  expect(parseOptions([], { BENCH_CRASH_ONLY: '1' }).levels).toEqual([]);
  expect(parseOptions(['--answer', '5,10'], {}).crashAnswer).toBe('5,10');
  expect(() => parseOptions(['--crash-answer', '5'], {})).toThrow(/crash-answer/);
  expect(() => parseOptions(['--crash-engines', '1'], {})).toThrow(/crash-engines/);
});
