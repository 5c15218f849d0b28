// deploy/monitoring/: every query of the Grafana dashboard and every alert rule uses only metrics that the
// sidecar's /metrics or Envoy's /stats/prometheus export, read live from a test stack (the real Envoy) after a
// rescued and an interrupted stream. The PromQL is parsed for its metric names (no Prometheus here: promtool
// is not among the gate tools), so a renamed or misspelled metric fails this test.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../tools/stack/envoy-config';
import { chatBody, newRequestId, postChat } from '../support/client';
import { startTestStack, type TestStack } from '../support/stack';

/* eslint-disable @typescript-eslint/no-explicit-any */

const DIR = path.join(repoRoot(), 'deploy', 'monitoring');

/** PromQL words that are not metric names: functions are followed by "(", these are not always. */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'offset',
  'bool',
  'inf',
  'nan',
]);

/** The metric names a PromQL expression reads. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings (label values)
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // grouping labels
    .replace(/\[[^\]]*\]/g, '') // ranges
    .replace(/\$\w+/g, '') // Grafana variables
    .replace(/\boffset\s+\w+/gi, '') // offset durations
    .replace(/\b\d+(?:\.\d+)?(?:e[+-]?\d+)?[a-z]*\b/gi, ''); // numbers and durations
  const names = new Set<string>();
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = bare.slice(m.index! + m[0].length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(m[0].toLowerCase())) continue;
    names.add(m[0]);
  }
  return [...names];
}

/** Series names in a Prometheus text exposition. */
function exported(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    out.add(/^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0]);
  }
  return out;
}

function dashboardExprs(): string[] {
  const d = JSON.parse(fs.readFileSync(path.join(DIR, 'continuation-gateway.dashboard.json'), 'utf8'));
  return d.panels.flatMap((p: any) => (p.targets ?? []).map((t: any) => t.expr));
}

function alertExprs(): { alert: string; expr: string }[] {
  const doc = parseAllDocuments(fs.readFileSync(path.join(DIR, 'alerts.yaml'), 'utf8'))[0].toJS();
  return doc.groups.flatMap((g: any) => g.rules.map((r: any) => ({ alert: r.alert, expr: r.expr })));
}

describe('metricNames (the PromQL reader the gate relies on)', () => {
  it('finds the metrics, not functions, labels, grouping or ranges', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, outcome) (rate(continuation_gateway_request_duration_seconds_bucket{outcome=~"a|b"}[$__rate_interval]))) / clamp_min(sum(up), 1) > 0.5 or absent_thing offset 5m',
      ).sort(),
    ).toEqual(['absent_thing', 'continuation_gateway_request_duration_seconds_bucket', 'up']);
  });
});

describe('deploy/monitoring against a live stack', () => {
  let stack: TestStack;
  let names: Set<string>;
  beforeAll(async () => {
    stack = await startTestStack({ env: { MAX_ATTEMPTS: '1' } });
    const rescued = newRequestId('mon-rescued');
    await postChat(stack.url, chatBody(), { 'x-request-id': rescued, 'x-fake-answer-tokens': '20,30', 'x-fake-fault': 'crash@25' });
    const interrupted = newRequestId('mon-interrupted');
    await postChat(stack.url, chatBody(), {
      'x-request-id': interrupted,
      'x-fake-answer-tokens': '20,30',
      'x-fake-fault': 'crash@25;crash@3',
    });
    await stack.waitForEnd(rescued);
    await stack.waitForEnd(interrupted);
    const sidecar = await (await fetch(`http://127.0.0.1:${stack.sidecar!.adminPort}/metrics`)).text();
    const envoy = await (await fetch(`${stack.envoy.adminUrl}/stats/prometheus`)).text();
    names = new Set([...exported(sidecar), ...exported(envoy)]);
  }, 60_000);
  afterAll(async () => stack?.stop());

  it('every dashboard query reads only exported metrics', () => {
    const exprs = dashboardExprs();
    expect(exprs.length).toBeGreaterThanOrEqual(20);
    const missing = exprs.flatMap((e) =>
      metricNames(e)
        .filter((n) => !names.has(n))
        .map((n) => `${n} in ${e}`),
    );
    expect(missing).toEqual([]);
    // Both sources are used.
    expect(exprs.some((e) => /\benvoy_/.test(e))).toBe(true);
    expect(exprs.some((e) => /\bcontinuation_gateway_/.test(e))).toBe(true);
  });

  it('every alert rule reads only exported metrics (rescue rate, interruptions, brake, admission waits)', () => {
    const rules = alertExprs();
    expect(rules.map((r) => r.alert)).toEqual(
      expect.arrayContaining([
        'ContinuationRescueRateLow',
        'InterruptionEventsHigh',
        'RecoveryBrakeOpen',
        'RecoveryAdmissionWaitsLong',
        'SidecarBypassed',
      ]),
    );
    const missing = rules.flatMap((r) =>
      metricNames(r.expr)
        .filter((n) => !names.has(n))
        .map((n) => `${n} in ${r.alert}`),
    );
    expect(missing).toEqual([]);
  });

  it('fails on a metric nobody exports', () => {
    expect(metricNames('sum(rate(continuation_gateway_interruptionz_total[5m]))').filter((n) => !names.has(n))).toEqual([
      'continuation_gateway_interruptionz_total',
    ]);
  });
});
