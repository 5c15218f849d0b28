// The chart's monitoring objects and `helm test` pod, rendered: the PrometheusRule and the dashboard ConfigMap are
// deploy/monitoring/ (runbook links prefixed), the monitors scrape what each mode exports (Istio: istio-proxy's
// merged port, with the ext_proc stats SidecarBypassed reads), every Prometheus Operator object passes its CRD
// schema (deploy/schemas/prometheus-operator/), and the test pod's own script, run against a live test stack,
// passes a ready gateway and fails one that is not. Not run on a mesh or a cluster (docs/deploy.md).
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import { strictCrdSchemaFile } from '../../support/crd-schema';
import { CHART, docsOfYaml, provisionHelm, ROOT, run, venvTool } from '../../support/helm';
import { startTestStack } from '../../support/stack';

/* eslint-disable @typescript-eslint/no-explicit-any */

const MONITORING = path.join(ROOT, 'deploy', 'monitoring');

/** Prometheus' `replace` relabeling (regex anchored at both ends, ${1} in the replacement), for the rules here. */
function relabel(rules: any[], labels: Record<string, string>): Record<string, string> {
  const out = { ...labels };
  for (const r of rules) {
    const value = (r.sourceLabels ?? []).map((l: string) => out[l] ?? '').join(r.separator ?? ';');
    const m = new RegExp(`^(?:${r.regex ?? '(.*)'})$`).exec(value);
    if (m) out[r.targetLabel] = (r.replacement ?? '$1').replace(/\$\{?(\d)\}?/g, (_: string, i: string) => m[Number(i)] ?? '');
  }
  return out;
}

const provisioned = provisionHelm();
if (provisioned.skip) process.stderr.write(`helm-monitoring SKIPPED: ${provisioned.skip}\n`);
const describeHelm = provisioned.helm ? describe : describe.skip;

describeHelm('the chart: monitoring objects and the helm test pod', () => {
  const helm = provisioned.helm!;
  let tmp: string;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-monitoring-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  async function docs(args: string[]): Promise<any[]> {
    const r = await run(helm, ['template', 'gw', CHART, '-n', 'inference', ...args]);
    if (r.code !== 0) throw new Error(`helm template ${args.join(' ')} (exit ${r.code}):\n${r.out}`);
    return docsOfYaml(r.stdout);
  }
  const ofKind = (d: any[], kind: string) => d.filter((x) => x.kind === kind);

  /** check-jsonschema against the vendored CRD schema, strict. */
  async function crdCheck(doc: any): Promise<string> {
    const file = path.join(tmp, `${doc.kind}-${Math.random().toString(36).slice(2)}.json`);
    fs.writeFileSync(file, JSON.stringify(doc));
    const schema = strictCrdSchemaFile('prometheus-operator', doc.kind, 'v1', tmp);
    const r = await run(venvTool('check-jsonschema'), ['--schemafile', schema, file]);
    return r.code === 0 ? 'ok' : r.out;
  }

  test('off by default; the PrometheusRule is deploy/monitoring/alerts.yaml with runbook_url prefixed', async () => {
    expect(ofKind(await docs([]), 'PrometheusRule')).toEqual([]);
    const d = await docs([
      '--set',
      'monitoring.prometheusRule.enabled=true',
      '--set',
      'monitoring.prometheusRule.labels.release=kps',
      '--set',
      'monitoring.runbookBaseUrl=https://git.example.com/gw/blob/v0.1.0/',
    ]);
    const [rule] = ofKind(d, 'PrometheusRule');
    expect(rule.metadata.labels.release).toBe('kps');
    const shipped = parse(fs.readFileSync(path.join(MONITORING, 'alerts.yaml'), 'utf8'));
    for (const g of shipped.groups)
      for (const r of g.rules) r.annotations.runbook_url = `https://git.example.com/gw/blob/v0.1.0/${r.annotations.runbook_url}`;
    expect(rule.spec.groups).toEqual(shipped.groups);
    expect(await crdCheck(rule)).toBe('ok');
    rule.spec.groups[0].rules[0].exprr = 'x';
    expect(await crdCheck(rule)).toContain('exprr');
  });

  test('the dashboard ConfigMap carries the Grafana sidecar label and the dashboard as it is', async () => {
    expect(ofKind(await docs([]), 'ConfigMap').map((c) => c.metadata.name)).toEqual(['gw-continuation-gateway-envoy']);
    const d = await docs([
      '--set',
      'monitoring.dashboard.enabled=true',
      '--set',
      'monitoring.dashboard.namespace=monitoring',
      '--set',
      'monitoring.dashboard.annotations.grafana_folder=LLM',
    ]);
    const cm = ofKind(d, 'ConfigMap').find((c) => c.metadata.name === 'gw-continuation-gateway-dashboard');
    expect(cm.metadata).toMatchObject({
      namespace: 'monitoring',
      labels: { grafana_dashboard: '1' },
      annotations: { grafana_folder: 'LLM' },
    });
    const file = JSON.parse(fs.readFileSync(path.join(MONITORING, 'continuation-gateway.dashboard.json'), 'utf8'));
    expect(JSON.parse(cm.data['continuation-gateway.json'])).toEqual(file);
  });

  const monitorArgs = ['--set', 'podMonitor.enabled=true', '--set', 'serviceMonitor.enabled=true'];
  test('kubernetes mode: the sidecar on admin, Envoy on envoy-ready; both monitors pass the CRD schemas', async () => {
    const d = await docs(monitorArgs);
    const [pm] = ofKind(d, 'PodMonitor');
    const [sm] = ofKind(d, 'ServiceMonitor');
    const want = [
      { port: 'admin', path: '/metrics', interval: '30s' },
      { port: 'envoy-ready', path: '/stats/prometheus', interval: '30s' },
    ];
    expect([pm.spec.podMetricsEndpoints, sm.spec.endpoints]).toEqual([want, want]);
    const svc = ofKind(d, 'Service').find((s) => s.metadata.name === 'gw-continuation-gateway');
    expect(svc.spec.ports.map((p: any) => p.name)).toEqual(['http', 'admin', 'envoy-ready']);
    expect([await crdCheck(pm), await crdCheck(sm)]).toEqual(['ok', 'ok']);
    pm.spec.podMetricsEndpoints[0].relabelings = [{ sourceLabel: ['x'] }];
    expect(await crdCheck(pm)).toContain('sourceLabel');
  });

  test('istio mode: one scrape of istio-proxy’s merged port 15020 (IPv4 and IPv6 pods), or 9090 + 15090 without merging', async () => {
    const d = await docs(['--set', 'mode=istio', ...monitorArgs]);
    for (const m of [...ofKind(d, 'PodMonitor'), ...ofKind(d, 'ServiceMonitor')]) {
      const endpoints = m.spec.podMetricsEndpoints ?? m.spec.endpoints;
      expect(endpoints).toHaveLength(1);
      expect(endpoints[0]).toMatchObject({ port: 'admin', path: '/stats/prometheus' });
      const address = (ip: string) =>
        relabel(endpoints[0].relabelings, { __meta_kubernetes_pod_ip: ip, __address__: `${ip}:9090` }).__address__;
      expect([address('10.1.2.3'), address('fd00:10::7')]).toEqual(['10.1.2.3:15020', '[fd00:10::7]:15020']);
      expect(await crdCheck(m)).toBe('ok');
    }
    const pod = ofKind(d, 'Deployment')[0].spec.template.metadata.annotations;
    // What pilot-agent merges into 15020: the sidecar's /metrics, named by the annotations istiod rewrites.
    expect(pod).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090', 'prometheus.io/path': '/metrics' });
    const np = ofKind(d, 'NetworkPolicy')[0].spec.ingress.flatMap((r: any) => r.ports.map((p: any) => p.port));
    expect(np).toEqual(expect.arrayContaining([15020, 15090]));
    const plain = await docs(['--set', 'mode=istio', '--set', 'istio.mergedMetrics=false', ...monitorArgs]);
    const [pm] = ofKind(plain, 'PodMonitor');
    expect(pm.spec.podMetricsEndpoints.map((e: any) => [e.port, e.path])).toEqual([
      ['admin', '/metrics'],
      ['admin', '/stats/prometheus'],
    ]);
    expect(relabel(pm.spec.podMetricsEndpoints[1].relabelings, { __meta_kubernetes_pod_ip: '10.1.2.3' }).__address__).toBe(
      '10.1.2.3:15090',
    );
  });

  test('istio mode: istio-proxy exports the ext_proc stats (SidecarBypassed’s counter), which it does not by default', async () => {
    const d = await docs(['--set', 'mode=istio']);
    const cfg = JSON.parse(ofKind(d, 'Deployment')[0].spec.template.metadata.annotations['proxy.istio.io/config']);
    // Envoy matches stats_matcher patterns against the whole stat name; Istio adds inclusionRegexps to them.
    const exported = (stat: string) => cfg.proxyStatsMatcher.inclusionRegexps.some((re: string) => new RegExp(`^(?:${re})$`).test(stat));
    // The ext_proc filter's counters live under the inbound connection manager's prefix; the cluster is ours.
    expect(exported('http.inbound_0.0.0.0_8080.ext_proc.failure_mode_allowed')).toBe(true);
    expect(exported('cluster.ext_proc.health_check.failure')).toBe(true);
    expect(exported('cluster.outbound|8000||inference-router.default.svc.cluster.local.upstream_rq_total')).toBe(false);
    const alert = parse(fs.readFileSync(path.join(MONITORING, 'alerts.yaml'), 'utf8'))
      .groups.flatMap((g: any) => g.rules)
      .find((r: any) => r.alert === 'SidecarBypassed');
    // envoy_ + the stat name without the tag Envoy extracts (envoy_http_conn_manager_prefix), dots to underscores.
    expect(alert.expr).toContain('envoy_http_ext_proc_failure_mode_allowed');
  });

  test('helm test: its pod asks the Service’s admin (/readyz) and envoy-ready (/ready) ports, which reach the probes’ endpoints', async () => {
    const d = await docs(['--set', 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring']);
    const pod = ofKind(d, 'Pod')[0];
    expect(pod.metadata.annotations['helm.sh/hook']).toBe('test');
    const env = Object.fromEntries(pod.spec.containers[0].env.map((e: any) => [e.name, e.value]));
    expect(env.READY_URLS).toBe(
      'http://gw-continuation-gateway.inference.svc:9090/readyz,http://gw-continuation-gateway.inference.svc:9902/ready',
    );
    const svc = ofKind(d, 'Service').find((s) => s.metadata.name === 'gw-continuation-gateway');
    const deployment = ofKind(d, 'Deployment')[0];
    const dep = deployment.spec.template.spec;
    const side = dep.initContainers[0];
    const envoy = dep.containers[0];
    expect(svc.spec.ports.filter((p: any) => [9090, 9902].includes(p.port)).map((p: any) => p.targetPort)).toEqual([
      'admin',
      'envoy-ready',
    ]);
    expect([side.readinessProbe.httpGet, envoy.readinessProbe.httpGet]).toEqual([
      { path: '/readyz', port: 'admin' },
      { path: '/ready', port: 'envoy-ready' },
    ]);
    // A NetworkPolicy limited to the scrapers lets the test pod in too.
    const metricsRule = ofKind(d, 'NetworkPolicy')[0].spec.ingress[1];
    const testPeer = { 'app.kubernetes.io/name': 'continuation-gateway-test', 'app.kubernetes.io/instance': 'gw' };
    expect(metricsRule.from).toContainEqual({ podSelector: { matchLabels: testPeer } });
    expect(pod.metadata.labels).toMatchObject(testPeer);
    // Not the Deployment's selector: its ReplicaSet would adopt the pod.
    const selector = Object.entries(deployment.spec.selector.matchLabels);
    expect(selector.every(([k, v]) => pod.metadata.labels[k] === v)).toBe(false);
    const istio = ofKind(await docs(['--set', 'mode=istio']), 'Pod')[0];
    expect(istio.spec.containers[0].env[0].value).toBe('http://gw-continuation-gateway.inference.svc:9090/readyz');
    expect(istio.metadata.labels['sidecar.istio.io/inject']).toBe('false');
  });

  test('helm test: the pod’s own script passes a ready gateway, and fails a refused port and a 503', async () => {
    const pod = ofKind(await docs([]), 'Pod')[0];
    const [bin, flag, script] = pod.spec.containers[0].command;
    expect([bin, flag]).toEqual(['node', '-e']);
    const check = (urls: string, timeout = '1') =>
      run(process.execPath, ['-e', script], { ...process.env, READY_URLS: urls, READY_TIMEOUT_SECONDS: timeout });
    const stack = await startTestStack();
    const busy = http.createServer((_q, s) => s.writeHead(503).end());
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    try {
      const ready = `http://127.0.0.1:${stack.sidecar!.adminPort}/readyz,${stack.envoy.adminUrl}/ready`;
      const ok = await check(ready);
      expect([ok.code, ok.stdout]).toEqual([0, expect.stringMatching(/\/readyz: 200\n.*\/ready: 200\n$/)]);
      // A port nobody listens on: bound, then closed.
      const gone = http.createServer();
      await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
      const port = (gone.address() as AddressInfo).port;
      await new Promise<void>((r) => gone.close(() => r()));
      expect(await check(`http://127.0.0.1:${port}/ready`)).toMatchObject({ code: 1, stdout: expect.stringContaining('ECONNREFUSED') });
      const r503 = await check(`http://127.0.0.1:${(busy.address() as AddressInfo).port}/readyz`);
      expect(r503).toMatchObject({ code: 1, stdout: expect.stringContaining(': 503') });
    } finally {
      busy.close();
      await stack.stop();
    }
  }, 60_000);
});
