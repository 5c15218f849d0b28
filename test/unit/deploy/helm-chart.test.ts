// What a platform team hits on its first install of deploy/helm/continuation-gateway (issue 28): offline rendering
// with no flag, values.schema.json refusing typos, extraEnv refusing the chart's own variables, the spans'
// server.address, the Envoy checksum over the rendered ConfigMap, the drain computed from values, NOTES.txt's
// warnings and the minimum Kubernetes checked against a cluster (Helm talking to test/support/fake-kube-api.ts: no
// cluster runs here), and `helm package`. Monitoring objects and the `helm test` pod: helm-monitoring.test.ts; the
// chat template, the tokenizer and the model volume: helm-model-files.test.ts. The Helm CLI: test/support/helm.ts
// (skipped, saying so, without Go).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '../../../src/config/env';
import { podSpecs, ruleViolations } from '../../support/deploy-rules';
import { startFakeKubeApi } from '../../support/fake-kube-api';
import { CHART, docsOfYaml, provisionHelm, run } from '../../support/helm';

/* eslint-disable @typescript-eslint/no-explicit-any */

const SCHEMA = JSON.parse(fs.readFileSync(path.join(CHART, 'values.schema.json'), 'utf8'));

const deref = (n: any) => (n?.$ref ? SCHEMA.definitions[n.$ref.split('/').pop()] : n);

/** The schema node for key k under node (properties, else additionalProperties; anyOf alternatives and if/then tried). */
function child(node: any, k: string): any {
  const n = deref(node);
  const alternatives = [n, ...(n?.anyOf ?? []).map(deref), ...(n?.then ? [n.then] : [])];
  const named = alternatives.find((a: any) => a?.properties?.[k]);
  if (named) return deref(named.properties[k]);
  const map = alternatives.find((a: any) => typeof a?.additionalProperties === 'object');
  return map ? deref(map.additionalProperties) : undefined;
}

/** Key paths of a values document the schema does not name. A Kubernetes object the chart passes on as it is
 *  (an env valueFrom, affinity: type object, nothing more said) is the API server's to check. */
function unknownKeys(v: any, node: any, at: string[] = []): string[] {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return [];
  const n = deref(node);
  const opaque = (x: any) => x?.type === 'object' && !x.properties && x.additionalProperties === undefined && !x.anyOf;
  if (opaque(n)) return [];
  return Object.entries(v).flatMap(([k, x]) => {
    const c = child(n, k);
    return c === undefined ? [[...at, k].join('.')] : unknownKeys(x, c, [...at, k]);
  });
}

describe('values.schema.json', () => {
  const files = ['values.yaml', 'examples/vllm.yaml', 'examples/istio-sglang.yaml'];
  test.each(files)('covers every key of %s', (f) => {
    const values = parse(fs.readFileSync(path.join(CHART, f), 'utf8'));
    expect(unknownKeys(values, SCHEMA)).toEqual([]);
    // The walk can fail: a misspelt key is named.
    expect(unknownKeys({ recovery: { maxAtempts: 3 }, extraEnv: { A: { valueFrm: {} } } }, SCHEMA)).toEqual([
      'recovery.maxAtempts',
      'extraEnv.A.valueFrm',
    ]);
  });

  test('closes every object a typo would silently leave out, and only maps of names stay open', () => {
    const open: string[] = [];
    const walk = (n: any, at: string) => {
      if (!n || typeof n !== 'object') return;
      if (n.properties && n.additionalProperties !== false) open.push(at);
      for (const [k, v] of Object.entries(n)) walk(v, `${at}/${k}`);
    };
    walk(SCHEMA, '#');
    // Resource requests and limits: any resource name (cpu, memory, ephemeral-storage, nvidia.com/gpu).
    expect(open).toEqual(['#/definitions/resources/properties/requests', '#/definitions/resources/properties/limits']);
  });
});

const provisioned = provisionHelm();
if (provisioned.skip) process.stderr.write(`helm-chart SKIPPED: ${provisioned.skip}\n`);
const describeHelm = provisioned.helm ? describe : describe.skip;

describeHelm('the chart on a first install', () => {
  const helm = provisioned.helm!;
  let tmp: string;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-chart-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  async function docs(args: string[]): Promise<any[]> {
    const r = await run(helm, ['template', 'gw', CHART, '-n', 'inference', ...args]);
    if (r.code !== 0) throw new Error(`helm template ${args.join(' ')} (exit ${r.code}):\n${r.out}`);
    return docsOfYaml(r.stdout);
  }
  const deployment = (d: any[]) => d.find((x) => x.kind === 'Deployment').spec.template;

  test('helm template and helm lint --strict need no flag (no --kube-version, no namespace)', async () => {
    const t = await run(helm, ['template', CHART]);
    expect([t.code, t.out]).toEqual([0, expect.stringContaining('kind: Deployment')]);
    const l = await run(helm, ['lint', '--strict', CHART]);
    expect([l.code, l.out]).toEqual([0, expect.stringContaining('1 chart(s) linted, 0 chart(s) failed')]);
  });

  const typos: [string, string, RegExp][] = [
    ['modle=x', '--set', /additional properties 'modle' not allowed/],
    ['replicas=two', '--set', /at '\/replicas': got string, want integer/],
    ['recovery.maxAtempts=3', '--set', /at '\/recovery': additional properties 'maxAtempts' not allowed/],
    ['extraEnv.OTLP_KEY.valueFrm.secretKeyRef.name=x', '--set', /at '\/extraEnv\/OTLP_KEY': additional properties 'valueFrm' not allowed/],
    [
      'extraEnv.OTLP_KEY.valueFrom.secretKeyRef.nmae=otlp-auth',
      '--set',
      /at '\/extraEnv\/OTLP_KEY\/valueFrom\/secretKeyRef': additional properties 'nmae' not allowed/,
    ],
    [
      'extraEnv.OTLP_KEY.valueFrom.configMapKeyRef.name=otlp',
      '--set',
      /at '\/extraEnv\/OTLP_KEY\/valueFrom\/configMapKeyRef': missing property 'key'/,
    ],
    ['extraEnv.OTLP_KEY.valueFrom.secretKeyRef.optional=maybe', '--set', /secretKeyRef\/optional': got string, want boolean/],
    ['recovery.unverified=deny', '--set', /at '\/recovery\/unverified': value must be one of 'allow', 'refuse'/],
  ];
  test.each(typos)('helm lint --strict and helm template refuse --set %s', async (value, flag, message) => {
    const t = await run(helm, ['template', 'gw', CHART, flag, value]);
    expect([t.code, t.out]).toEqual([1, expect.stringMatching(message)]);
    const l = await run(helm, ['lint', '--strict', CHART, flag, value]);
    expect([l.code, l.out]).toEqual([1, expect.stringMatching(message)]);
  });

  test('what the schema accepts: numbers as --set or --set-string, an env value or valueFrom', async () => {
    for (const a of [
      ['--set', 'recovery.maxAttempts=3'],
      ['--set-string', 'recovery.maxAttempts=3'],
      ['--set', 'istio.nativeSidecar=false'],
    ])
      expect((await run(helm, ['template', 'gw', CHART, ...a])).code).toBe(0);
    const env = {
      OTEL_EXPORTER_OTLP_HEADERS: { valueFrom: { secretKeyRef: { name: 'otlp-auth', key: 'headers' } } },
      TOKENIZE_TIMEOUT_MS: 500,
      LOG_PRETTY: { value: 'no' },
    };
    const side = (await docs(['--set-json', `extraEnv=${JSON.stringify(env)}`]))
      .find((x) => x.kind === 'Deployment')
      .spec.template.spec.initContainers[0].env.filter((e: any) => e.name in env);
    expect(side).toEqual([
      { name: 'LOG_PRETTY', value: 'no' },
      { name: 'OTEL_EXPORTER_OTLP_HEADERS', valueFrom: { secretKeyRef: { name: 'otlp-auth', key: 'headers' } } },
      { name: 'TOKENIZE_TIMEOUT_MS', value: '500' },
    ]);
    const optional = { valueFrom: { configMapKeyRef: { name: 'gw-env', key: 'tz', optional: true } } };
    expect((await run(helm, ['template', 'gw', CHART, '--set-json', `extraEnv={"TZ":${JSON.stringify(optional)}}`])).code).toBe(0);
  });

  test('extraEnv refuses every variable the chart sets, naming the value that sets it', async () => {
    // Every setting on, both modes: the names the chart renders for the sidecar.
    const all = [
      '--set',
      'model=m',
      '--set',
      'engine=vllm',
      '--set',
      'tracing.otlpEndpoint=http://c:4318',
      '--set',
      'chatTemplate.auto=true',
    ];
    const recovery = [
      'maxAttempts',
      'maxContinuations',
      'stallIdleTimeoutSeconds',
      'maxStallSeconds',
      'firstDeltaDeadlineSeconds',
      'interruptionNextRequestMaxBytes',
    ];
    all.push(...recovery.flatMap((k) => ['--set', `recovery.${k}=3`]), '--set', 'recovery.tokenizeUrl=http://t/tokenize');
    all.push('--set', 'tokenizer.path=/t', '--set', 'tokenizer.inImage=true', '--set', 'resources.sidecar.limits.memory=1Gi');
    const names = new Set<string>();
    for (const mode of ['kubernetes', 'istio']) {
      const t = deployment(await docs([...all, '--set', `mode=${mode}`])).spec;
      const side = [...(t.initContainers ?? []), ...t.containers].find((c: any) => c.name === 'continuation-sidecar');
      for (const e of side.env) names.add(e.name);
    }
    expect(names.size).toBe(26);
    for (const name of names) {
      const r = await run(helm, ['template', 'gw', CHART, '--set', `extraEnv.${name}=x`]);
      expect([name, r.code, r.out]).toEqual([name, 1, expect.stringContaining(`extraEnv.${name}: the chart sets ${name}`)]);
    }
    const r = await run(helm, ['template', 'gw', CHART, '--set', 'extraEnv.DRAIN_TIMEOUT_SECONDS=60']);
    expect(r.out).toContain('extraEnv.DRAIN_TIMEOUT_SECONDS: the chart sets DRAIN_TIMEOUT_SECONDS; set drainTimeoutSeconds instead');
    expect((await run(helm, ['template', 'gw', CHART, '--set', 'extraEnv.PORT=1'])).out).toContain('the chart sets PORT, fixed');
  });

  test('recovery.unverified is CONTINUATION_UNVERIFIED: allow by default, refuse when set, as the sidecar reads it', async () => {
    const env = async (args: string[]) => {
      const t = deployment(await docs(['--set', 'model=acme/house-reasoner', ...args])).spec;
      const side = [...(t.initContainers ?? []), ...t.containers].find((c: any) => c.name === 'continuation-sidecar');
      return Object.fromEntries(side.env.map((e: any) => [e.name, e.value]));
    };
    const byDefault = await env([]);
    expect(byDefault.CONTINUATION_UNVERIFIED).toBe('allow');
    expect(loadConfig(byDefault).continuationUnverified).toBe('allow');
    const refuse = await env(['--set', 'recovery.unverified=refuse']);
    expect(refuse.CONTINUATION_UNVERIFIED).toBe('refuse');
    expect(loadConfig(refuse).continuationUnverified).toBe('refuse');
  });

  test("tracing: the spans' server.address is the router tier in both modes (DOWNSTREAM_URL is loopback in kubernetes mode)", async () => {
    const env = async (args: string[]) => {
      const t = deployment(
        await docs(['--set', 'router.service=vllm-router.llm.svc.cluster.local', '--set', 'router.port=8001', ...args]),
      ).spec;
      const side = [...(t.initContainers ?? []), ...t.containers].find((c: any) => c.name === 'continuation-sidecar');
      return Object.fromEntries(side.env.map((e: any) => [e.name, e.value]));
    };
    const want = { address: 'vllm-router.llm.svc.cluster.local', port: 8001 };
    for (const mode of ['kubernetes', 'istio']) {
      const on = await env(['--set', `mode=${mode}`, '--set', 'tracing.otlpEndpoint=http://otel:4318']);
      expect([mode, on.TRACE_SERVER_ADDRESS]).toEqual([mode, 'vllm-router.llm.svc.cluster.local:8001']);
      // What the sidecar makes of the rendered environment.
      expect([mode, loadConfig(on).tracing?.serverAddress]).toEqual([mode, want]);
      expect((await env(['--set', `mode=${mode}`])).TRACE_SERVER_ADDRESS).toBeUndefined();
    }
    // Without it, kubernetes mode's spans named no server (Envoy's loopback egress listener).
    const { TRACE_SERVER_ADDRESS: _, ...without } = await env(['--set', 'tracing.otlpEndpoint=http://otel:4318']);
    expect(loadConfig(without).tracing?.serverAddress).toBeUndefined();
    // A traces endpoint of its own (extraEnv, e.g. from a Secret) is tracing too.
    const own = await env(['--set', 'extraEnv.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://otel:4318/v1/traces']);
    expect([own.TRACE_SERVER_ADDRESS, own.OTEL_SERVICE_NAME]).toEqual(['vllm-router.llm.svc.cluster.local:8001', 'continuation-gateway']);
  });

  test('recovery.tokenIds: TOKEN_IDS_CONTINUATION as the sidecar reads it; true with SGLang refused', async () => {
    const env = async (args: string[]) => {
      const t = deployment(await docs(args)).spec;
      const side = [...(t.initContainers ?? []), ...t.containers].find((c: any) => c.name === 'continuation-sidecar');
      return Object.fromEntries(side.env.map((e: any) => [e.name, e.value]));
    };
    const auto = await env(['--set', 'engine=vllm']);
    expect([auto.TOKEN_IDS_CONTINUATION, loadConfig(auto).tokenIdsContinuation]).toEqual(['auto', true]);
    const off = await env(['--set', 'engine=vllm', '--set', 'recovery.tokenIds=false']);
    expect([off.TOKEN_IDS_CONTINUATION, loadConfig(off).tokenIdsContinuation]).toEqual(['false', false]);
    expect(loadConfig(await env([])).tokenIdsContinuation).toBe(false); // the chart's default engine, sglang
    const refused = await run(helm, ['template', 'gw', CHART, '--set', 'recovery.tokenIds=true']);
    expect([refused.code, refused.out]).toEqual([1, expect.stringContaining('SGLang')]);
  });

  test('checksum/envoy follows the rendered Envoy ConfigMap: a bootstrap change rolls the pods, nothing else does', async () => {
    const sum = async (args: string[]) => deployment(await docs(args)).metadata.annotations['checksum/envoy'];
    const base = await sum([]);
    expect(base).toMatch(/^[0-9a-f]{64}$/);
    expect(await sum([])).toBe(base);
    expect(await sum(['--set', 'router.port=9000'])).not.toBe(base);
    expect(await sum(['--set', 'router.port=9000'])).toBe(await sum(['--set', 'router.port=9000']));
    expect(await sum(['--set', 'tracing.envoy.enabled=true', '--set', 'tracing.envoy.collectorHost=otel'])).not.toBe(base);
    // Not in Envoy's bootstrap: the same checksum (the router's name is a DNS alias, the model the sidecar's).
    expect(await sum(['--set', 'model=Qwen/Qwen3-32B', '--set', 'router.service=r.x.svc.cluster.local', '--set', 'replicas=5'])).toBe(base);
  });

  test("envoyRequestBodyTimeoutSeconds sets the front listener's request timeout (60 s by default), and only that", async () => {
    const timeouts = async (args: string[]) => {
      const cm = (await docs(args)).find((x) => x.kind === 'ConfigMap' && x.data?.['envoy.json']);
      const listeners = JSON.parse(cm.data['envoy.json']).static_resources.listeners;
      return listeners.map((l: any) => [l.name, l.filter_chains?.[0]?.filters?.[0]?.typed_config?.request_timeout]);
    };
    const base = await timeouts([]);
    expect(base.find((x: any) => x[0] === 'front')[1]).toBe('60s');
    const set = await timeouts(['--set', 'envoyRequestBodyTimeoutSeconds=15']);
    expect(set.find((x: any) => x[0] === 'front')[1]).toBe('15s');
    expect(set.filter((x: any) => x[0] !== 'front')).toEqual(base.filter((x: any) => x[0] !== 'front'));
  });

  const drains: [string, string[], { grace: number; drain: string; envoyDrain?: string; proxyDrain?: string }][] = [
    ['kubernetes defaults', [], { grace: 120, drain: '30', envoyDrain: '80' }],
    ['kubernetes, a longer Envoy drain', ['--set', 'envoyDrainSeconds=200'], { grace: 240, drain: '30', envoyDrain: '200' }],
    ['istio defaults', ['--set', 'mode=istio'], { grace: 110, drain: '100', proxyDrain: '105s' }],
    ['istio, 300 s streams', ['--set', 'mode=istio', '--set', 'drainTimeoutSeconds=300'], { grace: 310, drain: '300', proxyDrain: '305s' }],
    [
      'istio, a grace set above',
      ['--set', 'mode=istio', '--set', 'terminationGracePeriodSeconds=200'],
      { grace: 200, drain: '100', proxyDrain: '105s' },
    ],
  ];
  test.each(drains)('the drain fits the grace period: %s', async (name, args, want) => {
    const d = await docs(args);
    const t = deployment(d);
    const containers = [...(t.spec.initContainers ?? []), ...t.spec.containers];
    const env = (c: string, n: string) => containers.find((x: any) => x.name === c)?.env?.find((e: any) => e.name === n)?.value;
    const proxy = JSON.parse(t.metadata.annotations['proxy.istio.io/config'] ?? '{}');
    expect({
      grace: t.spec.terminationGracePeriodSeconds,
      drain: env('continuation-sidecar', 'DRAIN_TIMEOUT_SECONDS'),
      ...(want.envoyDrain ? { envoyDrain: env('envoy', 'DRAIN_MAX_SECONDS') } : {}),
      ...(want.proxyDrain ? { proxyDrain: proxy.terminationDrainDuration } : {}),
    }).toEqual(want);
    const s = podSpecs(d, name);
    expect(ruleViolations({ sidecars: [s.sidecar], envoys: [s.envoy], pods: [s.pod] })).toEqual([]);
  });

  test('a drain that does not fit is refused, saying why', async () => {
    const refused = async (args: string[]) => (await run(helm, ['template', 'gw', CHART, ...args])).out;
    expect(await refused(['--set', 'terminationGracePeriodSeconds=60'])).toContain(
      'terminationGracePeriodSeconds 60 is shorter than the drain (120 s',
    );
    expect(await refused(['--set', 'mode=istio', '--set', 'istio.terminationDrainDuration=90s'])).toContain(
      'istio.terminationDrainDuration 90s must exceed drainTimeoutSeconds 100',
    );
  });

  /** helm install --dry-run against the fake API server: NOTES.txt, and the checks that need a cluster. */
  async function dryRun(version: string, rootCaIn: string[], mode: 'client' | 'server', args: string[] = []) {
    const api = await startFakeKubeApi(tmp, { version, rootCaIn });
    try {
      const env = { ...process.env, KUBECONFIG: api.kubeconfig, HELM_CACHE_HOME: tmp, HELM_CONFIG_HOME: tmp, HELM_DATA_HOME: tmp };
      const install = ['install', 'gw', CHART, '-n', 'inference', `--dry-run=${mode}`, '--disable-openapi-validation'];
      const r = await run(helm, [...install, ...args], env);
      return { ...r, notes: r.stdout.slice(r.stdout.indexOf('NOTES:')) };
    } finally {
      await api.stop();
    }
  }

  test('NOTES.txt warns when model is empty (no crash protection) and when the image names no registry', async () => {
    const warned = await dryRun('v1.33.2', [], 'client');
    expect(warned.code).toBe(0);
    expect(warned.notes).toContain('WARNING: model is empty');
    expect(warned.notes).toContain('WITHOUT crash protection');
    expect(warned.notes).toContain('WARNING: image.repository "continuation-gateway" names no registry');
    expect(warned.notes).toContain('helm test gw -n inference');
    const quiet = await dryRun('v1.33.2', [], 'client', [
      '--set',
      'model=Qwen/Qwen3-32B',
      '--set',
      'image.repository=registry.example.com/ml/continuation-gateway',
    ]);
    expect([quiet.code, quiet.notes]).toEqual([0, expect.not.stringContaining('WARNING')]);
    for (const repo of ['localhost:5000/continuation-gateway', 'ghcr.io/org/continuation-gateway'])
      expect((await dryRun('v1.33.2', [], 'client', ['--set', `image.repository=${repo}`])).notes).not.toContain('names no registry');
    expect((await dryRun('v1.33.2', [], 'client', ['--set', 'image.repository=org/continuation-gateway'])).notes).toContain(
      'names no registry',
    );
  });

  test('Kubernetes below 1.29 is refused when Helm talks to a cluster, and only then', async () => {
    const old = await dryRun('v1.28.9', ['inference'], 'server');
    expect([old.code, old.out]).toEqual([1, expect.stringContaining('Kubernetes v1.28.9: this chart needs 1.29 or later')]);
    expect((await dryRun('v1.29.0', ['inference'], 'server')).code).toBe(0);
    // No namespace yet (helm install --create-namespace): lookup finds nothing, the check is skipped.
    expect((await dryRun('v1.28.9', [], 'server')).code).toBe(0);
    expect((await dryRun('v1.28.9', ['inference'], 'server', ['--set', 'kubeVersionCheck=never'])).code).toBe(0);
    // Offline: nothing to compare with, unless asked (a pipeline that knows its cluster's version).
    expect((await run(helm, ['template', 'gw', CHART, '--kube-version', '1.28.0'])).code).toBe(0);
    const always = await run(helm, ['template', 'gw', CHART, '--kube-version', '1.28.0', '--set', 'kubeVersionCheck=always']);
    expect([always.code, always.out]).toEqual([1, expect.stringContaining('needs 1.29 or later')]);
  });

  test('helm package: the archive lints and renders exactly as the directory', async () => {
    const p = await run(helm, ['package', CHART, '-d', tmp]);
    const tgz = path.join(tmp, 'continuation-gateway-0.1.0.tgz');
    expect([p.code, p.out]).toEqual([0, expect.stringContaining(tgz)]);
    const l = await run(helm, ['lint', '--strict', tgz]);
    expect([l.code, l.out]).toEqual([0, expect.stringContaining('0 chart(s) failed')]);
    for (const args of [[], ['-f', path.join(CHART, 'examples', 'vllm.yaml')], ['-f', path.join(CHART, 'examples', 'istio-sglang.yaml')]]) {
      const fromDir = await run(helm, ['template', 'gw', CHART, ...args]);
      const fromTgz = await run(helm, ['template', 'gw', tgz, ...args]);
      expect([fromTgz.code, fromTgz.stdout]).toEqual([0, fromDir.stdout]);
    }
  });
});
