// deploy/monitoring/ as an operator with several gateways reads it: every alert grouped by (namespace, pod) or
// (namespace, job) and linked to its runbook section (docs/alerts.md, which must exist), the dashboard filtered by
// its data source, namespace and job variables in every query. Static (the metric names are checked against a
// live stack by test/e2e/monitoring.e2e.test.ts).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';
import { repoRoot } from '../../../tools/stack/envoy-config';

/* eslint-disable @typescript-eslint/no-explicit-any */

const ROOT = repoRoot();
const rules = (): any[] =>
  parse(fs.readFileSync(path.join(ROOT, 'deploy', 'monitoring', 'alerts.yaml'), 'utf8')).groups.flatMap((g: any) => g.rules);
/** Grafana's reference to the data source variable. */
const DATASOURCE = ['$', '{datasource}'].join('');
const dashboard = () => JSON.parse(fs.readFileSync(path.join(ROOT, 'deploy', 'monitoring', 'continuation-gateway.dashboard.json'), 'utf8'));

/** GitHub's anchor of every markdown heading: lower case, punctuation dropped, spaces to dashes. */
function anchors(file: string): Set<string> {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  return new Set(
    [...text.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) =>
      m[1]
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

/** Aggregations (sum, max, ...) in a PromQL expression without `by (...)` naming namespace. */
function ungrouped(expr: string): string[] {
  const out: string[] = [];
  for (const m of expr.matchAll(/\b(sum|max|min|avg|count)\b\s*(by\s*\(([^)]*)\))?\s*\(/g)) {
    const labels = (m[3] ?? '').split(',').map((l) => l.trim());
    if (!labels.includes('namespace')) out.push(m[0]);
  }
  return out;
}

describe('deploy/monitoring/alerts.yaml', () => {
  it('groups every aggregation by namespace (and pod or job): one alert per deployment or pod, not one for all', () => {
    const rs = rules();
    expect(rs.length).toBeGreaterThanOrEqual(7);
    expect(rs.flatMap((r) => ungrouped(r.expr).map((a) => `${r.alert}: ${a}`))).toEqual([]);
    for (const r of rs) expect([r.alert, /by \(namespace, (pod|job)\b/.test(r.expr)]).toEqual([r.alert, true]);
    // The check can fail.
    expect(ungrouped('sum(rate(x[5m])) > 0 or max by (pod) (y)')).toEqual(['sum(', 'max by (pod) (']);
  });

  it('links every alert to its section of docs/alerts.md, which exists', () => {
    const sections = anchors('docs/alerts.md');
    for (const r of rules()) expect([r.alert, r.annotations.runbook_url]).toEqual([r.alert, `docs/alerts.md#${r.alert.toLowerCase()}`]);
    expect(
      rules()
        .filter((r) => !sections.has(r.annotations.runbook_url.split('#')[1]))
        .map((r) => r.alert),
    ).toEqual([]);
    expect(sections.has('nosuchalert')).toBe(false);
  });
});

describe('deploy/monitoring/continuation-gateway.dashboard.json', () => {
  it('has data source, namespace and job variables, and no import-only inputs', () => {
    const d = dashboard();
    expect(d.__inputs).toBeUndefined();
    const vars = Object.fromEntries(d.templating.list.map((v: any) => [v.name, v]));
    expect(Object.keys(vars)).toEqual(['datasource', 'namespace', 'job']);
    expect(vars.datasource).toMatchObject({ type: 'datasource', query: 'prometheus' });
    expect(vars.namespace).toMatchObject({ type: 'query', includeAll: true, multi: true, allValue: '.*' });
    expect(vars.job.definition).toContain('namespace=~"$namespace"');
  });

  it('reads every series through the variables: every selector filters namespace and job, every query the data source', () => {
    const d = dashboard();
    const targets = d.panels.flatMap((p: any) => (p.targets ?? []).map((t: any) => ({ p, t })));
    expect(targets.length).toBeGreaterThanOrEqual(20);
    for (const { p, t } of targets) {
      expect([p.title, p.datasource.uid, t.datasource.uid]).toEqual([p.title, DATASOURCE, DATASOURCE]);
      const selectors = [...t.expr.matchAll(/\b((?:continuation_gateway|envoy|nodejs|process)_\w+)(\{[^}]*\})?/g)].filter(
        (m) => !/^\s*\(/.test(t.expr.slice(m.index! + m[1].length)) && !/\b(by|on)\s*\([^)]*$/.test(t.expr.slice(0, m.index)),
      );
      expect(selectors.length).toBeGreaterThan(0);
      for (const m of selectors)
        expect([m[0], m[2] ?? '']).toEqual([m[0], expect.stringContaining('namespace=~"$namespace", job=~"$job"')]);
    }
  });
});
