// deploy/monitoring/ evaluated by Prometheus's own promtool (scripts/build-promtool.sh builds it from its Go
// module and caches it): alerts.yaml passes `promtool check rules`, and `promtool test rules` on
// alerts.test.yaml shows every alert firing for the series that should raise it, after its `for` and not before,
// grouped by its labels and with its annotations rendered, and staying quiet for the neighbouring series. Every
// dashboard query parses as PromQL once Grafana's variables are filled in. The metric names themselves are
// checked against a live stack by test/e2e/monitoring.e2e.test.ts; the chart's PrometheusRule is alerts.yaml
// (test/unit/deploy/helm-monitoring.test.ts). Without a Go toolchain or the module proxy this file skips, saying so.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse, stringify } from 'yaml';
import { provisionGoTool } from '../../support/go-tool';
import { ROOT, run } from '../../support/helm';

/* eslint-disable @typescript-eslint/no-explicit-any */

const MONITORING = path.join(ROOT, 'deploy', 'monitoring');

function provisionPromtool(): { promtool?: string; skip?: string } {
  const { bin, skip } = provisionGoTool(ROOT, 'build-promtool.sh', 1_800_000);
  return { promtool: bin, skip };
}

const provisioned = provisionPromtool();
if (provisioned.skip) process.stderr.write(`monitoring-rules SKIPPED: ${provisioned.skip}\n`);
const describePromtool = provisioned.promtool ? describe : describe.skip;

/** Every dashboard query, with Grafana's variables as a dashboard with "All" selected fills them in. */
function dashboardQueries(): Array<{ panel: string; expr: string }> {
  const d = JSON.parse(fs.readFileSync(path.join(MONITORING, 'continuation-gateway.dashboard.json'), 'utf8'));
  const out: Array<{ panel: string; expr: string }> = [];
  const walk = (panels: any[] = []): void => {
    for (const p of panels) {
      for (const t of p.targets ?? []) if (typeof t.expr === 'string') out.push({ panel: p.title, expr: t.expr });
      walk(p.panels);
    }
  };
  walk(d.panels);
  const fill = (e: string) =>
    e
      .replace(/\$__rate_interval|\$\{__rate_interval\}|\$__interval|\$\{__interval\}/g, '5m')
      .replace(/\$\{?(namespace|job|pod)\}?/g, '.*')
      .replace(/\$__range|\$\{__range\}/g, '1h');
  return out.map((q) => ({ panel: q.panel, expr: fill(q.expr) }));
}

describePromtool('deploy/monitoring, evaluated by promtool', () => {
  const promtool = provisioned.promtool!;
  let tmp: string;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'promtool-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  test('alerts.yaml passes promtool check rules', async () => {
    const r = await run(promtool, ['check', 'rules', path.join(MONITORING, 'alerts.yaml')]);
    expect([r.code, r.out]).toEqual([0, expect.stringMatching(/SUCCESS: \d+ rules found/)]);
  });

  test('every alert fires as alerts.test.yaml expects, and each one is tested', async () => {
    const r = await run(promtool, ['test', 'rules', path.join(MONITORING, 'alerts.test.yaml')]);
    expect([r.code, r.out]).toEqual([0, expect.stringContaining('SUCCESS')]);
    const alerts = parse(fs.readFileSync(path.join(MONITORING, 'alerts.yaml'), 'utf8')).groups.flatMap((g: any) =>
      g.rules.map((x: any) => x.alert),
    );
    const tests = parse(fs.readFileSync(path.join(MONITORING, 'alerts.test.yaml'), 'utf8')).tests.flatMap((t: any) =>
      t.alert_rule_test.filter((a: any) => a.exp_alerts.length > 0).map((a: any) => a.alertname),
    );
    expect([...new Set(tests)].sort()).toEqual([...alerts].sort());
  });

  test('the tests can fail: a threshold changed in a copy of alerts.yaml is caught, naming the alert', async () => {
    const rules = fs.readFileSync(path.join(MONITORING, 'alerts.yaml'), 'utf8');
    const changed = rules.replace('continuation_gateway_build_info) > 0.2', 'continuation_gateway_build_info) > 0.9');
    expect(changed).not.toBe(rules);
    fs.writeFileSync(path.join(tmp, 'alerts.yaml'), changed);
    fs.copyFileSync(path.join(MONITORING, 'alerts.test.yaml'), path.join(tmp, 'alerts.test.yaml'));
    const r = await run(promtool, ['test', 'rules', path.join(tmp, 'alerts.test.yaml')]);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('SidecarEventLoopLag');
  });

  test('every dashboard query parses as PromQL (checked as recording rules)', async () => {
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThanOrEqual(20);
    const file = path.join(tmp, 'dashboard-queries.yaml');
    const rules = queries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr }));
    fs.writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules }] }));
    const r = await run(promtool, ['check', 'rules', file]);
    expect([r.code, r.out]).toEqual([0, expect.stringContaining(`SUCCESS: ${queries.length} rules found`)]);
    // A query that does not parse is named by promtool.
    fs.writeFileSync(
      file,
      stringify({ groups: [{ name: 'dashboard', rules: [{ record: 'dashboard:broken', expr: 'sum(rate(x[5m])' }] }] }),
    );
    expect((await run(promtool, ['check', 'rules', file])).code).not.toBe(0);
  });
});
