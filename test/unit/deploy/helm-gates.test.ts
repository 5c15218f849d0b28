// The Helm chart deploy/helm/continuation-gateway (issue 21), in npm test next to the other deployment gates:
// `helm lint`, then `helm template` of the default values and of the two example value files (offline, no
// --kube-version, as a GitOps pipeline renders), each through kubernetes-validate --strict at Kubernetes 1.29 and
// 1.37 and through the project's rules
// (test/support/deploy-rules.ts). The Helm CLI is built from its Go module by scripts/build-helm.sh and cached
// (~/.cache/continuation-gateway/helm/); without a Go toolchain or the module proxy the suite is skipped, saying so.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ensureEnvoy } from '../../../tools/stack/envoy-binary';
import { podSpecs, ruleViolations } from '../../support/deploy-rules';
import { CHART, docsOfYaml, provisionHelm, ROOT, run, venvTool } from '../../support/helm';

/* eslint-disable @typescript-eslint/no-explicit-any */

const VERSIONS = ['1.29.0', '1.37.0'];
const VALUE_FILES: [string, string[]][] = [
  ['default values', []],
  ['examples/vllm.yaml', ['-f', path.join(CHART, 'examples', 'vllm.yaml')]],
  ['examples/istio-sglang.yaml', ['-f', path.join(CHART, 'examples', 'istio-sglang.yaml')]],
];
/** Custom resources kubernetes-validate has no schema for (checked against their CRDs in deploy-gates, helm-chart). */
const CUSTOM_KINDS = ['EnvoyFilter', 'DestinationRule', 'VirtualService', 'PodMonitor', 'ServiceMonitor', 'PrometheusRule'];
const PACKAGE_VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;

const provisioned = provisionHelm();
if (provisioned.skip) process.stderr.write(`helm-gates SKIPPED: ${provisioned.skip}\n`);
const describeHelm = provisioned.helm ? describe : describe.skip;

describeHelm('gate: the Helm chart deploy/helm/continuation-gateway', () => {
  const helm = provisioned.helm!;
  let tmp: string;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-gates-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** helm template, as a GitOps pipeline runs it offline: no --kube-version unless kube is given. */
  async function template(args: string[], kube?: string): Promise<{ file: string; docs: any[] }> {
    const r = await run(helm, ['template', 'gw', CHART, '--namespace', 'inference', ...(kube ? ['--kube-version', kube] : []), ...args]);
    if (r.code !== 0) throw new Error(`helm template ${args.join(' ')} (exit ${r.code}):\n${r.out}`);
    const file = path.join(tmp, `t-${args.join('_').replace(/\W+/g, '_')}-${kube ?? 'offline'}.yaml`);
    fs.writeFileSync(file, r.stdout);
    return { file, docs: docsOfYaml(r.stdout) };
  }

  test.each(VALUE_FILES)('helm lint --strict (%s)', async (_n, args) => {
    const r = await run(helm, ['lint', '--strict', CHART, ...args]);
    expect([r.code, r.out]).toEqual([0, expect.stringContaining('1 chart(s) linted, 0 chart(s) failed')]);
  });

  const cases = VALUE_FILES.flatMap(([n, args]) => VERSIONS.map((v) => [n, v, args] as [string, string, string[]]));
  test.each(cases)('%s renders and passes kubernetes-validate --strict at %s', async (_n, version, args) => {
    const { file, docs } = await template(args, version);
    const r = await run(venvTool('kubernetes-validate'), ['--strict', '-k', version, file]);
    const unexpected = r.out
      .split('\n')
      .filter(Boolean)
      .filter(
        (l) =>
          !/^INFO .* passed for resource /.test(l) &&
          !new RegExp(`^WARN .*Couldn't find schema for kind (${CUSTOM_KINDS.join('|')}) `).test(l),
      );
    expect([r.code, unexpected]).toEqual([0, []]);
    const core = docs.filter((d) => !CUSTOM_KINDS.includes(d.kind));
    expect(r.out.match(/ passed for resource /g)?.length).toBe(core.length);
  });

  test.each(VALUE_FILES)("%s: the project's rules hold", async (n, args) => {
    const { docs } = await template(args);
    const s = podSpecs(docs, n);
    expect(ruleViolations({ sidecars: [s.sidecar], envoys: [s.envoy], pods: [s.pod] })).toEqual([]);
  });

  test('the rules can fail: WORKERS above the CPU limit, an Istio proxy drain shorter than the sidecar drain', async () => {
    const { docs } = await template(['--set', 'workers=4', '--set', 'mode=istio']);
    // The chart computes the drain and refuses one that does not fit (helm-chart.test.ts); edited by hand here.
    const dep = docs.find((d) => d.kind === 'Deployment').spec.template;
    dep.spec.containers[0].env.find((e: any) => e.name === 'DRAIN_TIMEOUT_SECONDS').value = '110';
    const cfg = JSON.parse(dep.metadata.annotations['proxy.istio.io/config']);
    delete cfg.proxyMetadata;
    dep.metadata.annotations['proxy.istio.io/config'] = JSON.stringify(cfg);
    const s = podSpecs(docs, 'bad');
    expect(ruleViolations({ sidecars: [s.sidecar], envoys: [s.envoy], pods: [s.pod] })).toEqual([
      'bad sidecar: WORKERS 4 > CPU limit 2',
      'bad sidecar: memory limit below 128 MiB x 5 processes',
      'bad: istio-proxy without EXIT_ON_ZERO_ACTIVE_CONNECTIONS',
      'bad: terminationDrainDuration 105 s <= DRAIN_TIMEOUT_SECONDS 110 s',
    ]);
    await expect(template(['--set', 'engine=tgi'])).rejects.toThrow(/at '\/engine': value must be one of 'sglang', 'vllm', 'llamacpp'/);
  });

  test("every object has the recommended labels, the namespace and the chart version; the version is package.json's", async () => {
    const chart = parseAllDocuments(fs.readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8'))[0].toJS();
    expect([chart.version, chart.appVersion]).toEqual([PACKAGE_VERSION, PACKAGE_VERSION]);
    for (const [, args] of VALUE_FILES) {
      const { docs } = await template(args);
      for (const d of docs) {
        expect([d.kind, d.metadata.namespace]).toEqual([d.kind, 'inference']);
        // `helm test`'s pod is named apart: the gateway's ReplicaSet would adopt a pod with its selector labels.
        const test = d.metadata.annotations?.['helm.sh/hook'] === 'test';
        expect(d.metadata.labels).toMatchObject({
          'app.kubernetes.io/name': test ? 'continuation-gateway-test' : 'continuation-gateway',
          'app.kubernetes.io/instance': 'gw',
          'app.kubernetes.io/version': PACKAGE_VERSION,
          'app.kubernetes.io/managed-by': 'Helm',
        });
      }
      const dep = docs.find((d) => d.kind === 'Deployment').spec.template.spec;
      const side = [...(dep.initContainers ?? []), ...dep.containers].find((c: any) => c.name === 'continuation-sidecar');
      expect(side.image).toMatch(new RegExp(`:${PACKAGE_VERSION.replace(/\./g, '\\.')}$`));
    }
  });

  test('defaults: PDB, NetworkPolicy, ServiceAccount, topology spread, the helm test pod; the examples: HPA, monitors, rules, dashboard', async () => {
    const kinds = async (args: string[]) => (await template(args)).docs.map((d) => d.kind).sort();
    expect(await kinds([])).toEqual([
      'ConfigMap',
      'Deployment',
      'NetworkPolicy',
      'Pod',
      'PodDisruptionBudget',
      'Service',
      'Service',
      'ServiceAccount',
    ]);
    expect(await kinds(VALUE_FILES[1][1])).toEqual(
      expect.arrayContaining(['ConfigMap', 'ConfigMap', 'HorizontalPodAutoscaler', 'PodMonitor', 'PrometheusRule']),
    );
    expect(await kinds(VALUE_FILES[2][1])).toEqual(
      expect.arrayContaining(['DestinationRule', 'EnvoyFilter', 'PrometheusRule', 'ServiceMonitor', 'VirtualService']),
    );
    const { docs } = await template([]);
    expect(docs.find((d) => d.kind === 'Deployment').spec.template.spec.topologySpreadConstraints).toHaveLength(2);
  });

  test('kubernetes mode: the values reach the sidecar and Envoy (router alias, model, engine, workers, recovery)', async () => {
    const { docs } = await template(VALUE_FILES[1][1]);
    const dep = docs.find((d) => d.kind === 'Deployment').spec.template.spec;
    const env = Object.fromEntries(dep.initContainers[0].env.map((e: any) => [e.name, e.value]));
    expect(env).toMatchObject({ CONTINUATION_MODEL: 'Qwen/Qwen3-32B', CONTINUATION_ENGINE: 'vllm', WORKERS: '2', MAX_CONTINUATIONS: '2' });
    const alias = docs.find((d) => d.kind === 'Service' && d.spec.type === 'ExternalName');
    expect(alias.spec.externalName).toBe('vllm-router.llm-serving.svc.cluster.local');
    const cfg = JSON.parse(
      docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'gw-continuation-gateway-envoy').data['envoy.json'],
    );
    const router = cfg.static_resources.clusters.find((c: any) => c.name === 'router_tier');
    expect(router.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: alias.metadata.name,
      port_value: 8000,
    });
  });

  test('tracing: off by default; examples/vllm.yaml turns on the sidecar’s OTLP export and Envoy’s tracer (a valid bootstrap)', async () => {
    const sidecarEnv = (docs: any[]) =>
      Object.fromEntries(
        docs.find((d) => d.kind === 'Deployment').spec.template.spec.initContainers[0].env.map((e: any) => [e.name, e.value]),
      );
    const bootstrap = (docs: any[]) =>
      docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === 'gw-continuation-gateway-envoy').data['envoy.json'] as string;
    const off = (await template([])).docs;
    expect(Object.keys(sidecarEnv(off)).filter((k) => k.startsWith('OTEL_'))).toEqual([]);
    expect(bootstrap(off)).not.toContain('envoy.tracers.opentelemetry');
    const on = (await template(VALUE_FILES[1][1])).docs;
    expect(sidecarEnv(on)).toMatchObject({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability.svc.cluster.local:4318',
      OTEL_SERVICE_NAME: 'continuation-gateway',
    });
    const cfg = JSON.parse(bootstrap(on));
    const collector = cfg.static_resources.clusters.find((c: any) => c.name === 'otel_collector');
    expect(collector.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: 'otel-collector.observability.svc.cluster.local',
      port_value: 4318,
    });
    // Every hop of a request (front, chat hop, egress); the probes' `ready` listener stays untraced.
    const hcms = cfg.static_resources.listeners
      .filter((l: any) => l.name !== 'ready')
      .flatMap((l: any) =>
        (l.filter_chains ?? []).flatMap((c: any) =>
          c.filters.filter((f: any) => f.name === 'envoy.filters.network.http_connection_manager'),
        ),
      );
    expect(hcms.length).toBeGreaterThanOrEqual(3);
    for (const h of hcms)
      expect(h.typed_config.tracing.provider.typed_config.http_service.http_uri.uri).toBe(
        'http://otel-collector.observability.svc.cluster.local:4318/v1/traces',
      );
    const file = path.join(tmp, 'envoy-tracing.json');
    fs.writeFileSync(file, bootstrap(on));
    const envoy = process.env.ENVOY_BIN ?? (await ensureEnvoy());
    const v = await run(envoy, ['--mode', 'validate', '-c', file, '-l', 'warning']);
    expect([v.code, v.out]).toEqual([0, expect.stringContaining('OK')]);
    // Istio's tracer is the mesh's: the switch is refused there, saying why.
    const r = await run(helm, ['template', 'gw', CHART, '--set', 'mode=istio', '--set', 'tracing.envoy.enabled=true']);
    expect([r.code, r.out]).toEqual([1, expect.stringContaining('Telemetry API')]);
  });

  test("istio mode with deploy/istio's router renders deploy/istio's EnvoyFilter patches, DestinationRule and VirtualService", async () => {
    const { docs } = await template(['--set', 'mode=istio']);
    const shipped = parseAllDocuments(
      fs.readFileSync(path.join(ROOT, 'deploy', 'istio', 'envoyfilter.yaml'), 'utf8') +
        fs.readFileSync(path.join(ROOT, 'deploy', 'istio', 'gateway.yaml'), 'utf8').replace(/^/, '---\n'),
    )
      .map((d) => d.toJS())
      .filter((d) => d != null);
    for (const kind of ['EnvoyFilter', 'DestinationRule', 'VirtualService']) {
      const a = docs.find((d) => d.kind === kind);
      const b = shipped.find((d) => d.kind === kind);
      if (kind === 'EnvoyFilter') expect(a.spec.configPatches).toEqual(b.spec.configPatches);
      else expect([kind, a.spec]).toEqual([kind, b.spec]);
    }
    const env = Object.fromEntries(
      docs.find((d) => d.kind === 'Deployment').spec.template.spec.containers[0].env.map((e: any) => [e.name, e.value]),
    );
    expect(env.DOWNSTREAM_URL).toBe('http://inference-router.default.svc.cluster.local:8000');
    expect(env.CONTINUATION_MODEL).toBeUndefined(); // unset by default: nothing in scope, warned at start
  });
});
