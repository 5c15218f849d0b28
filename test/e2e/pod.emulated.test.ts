// deploy/kubernetes/ run WITHOUT a cluster: the gateway pod's containers as local processes sharing one network
// namespace (a pod's localhost), with the manifest's command, args and env, the ConfigMap's files where the
// volume mounts them (/etc/envoy -> a directory holding the ConfigMap's keys), the native sidecar started and
// startup-probed before Envoy, the kubelet's httpGet probes and a Prometheus scrape sent from outside the pod
// (the bridge side, to the pod's address), and the pod's deletion: Envoy's preStop drain, then SIGTERM to Envoy,
// then to the sidecar. The router Service's DNS name resolves to a fake engine in its own network namespace.
// Skipped, with the reason printed, where network namespaces cannot be made.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../tools/stack/envoy-config';
import { chatBody, newRequestId, postChat } from '../support/client';
import { buildImage, buildRuntimeImage, type RuntimeImage } from '../support/emulation/image';
import { canSwitchUid, emulationTmpDir, type ProcessSpec, Sandbox, sandboxUnavailableReason } from '../support/emulation/sandbox';
import { expectOneCompleteStream } from './helpers';

/* eslint-disable @typescript-eslint/no-explicit-any */

const ROOT = repoRoot();
const K8S = path.join(ROOT, 'deploy', 'kubernetes');
const unavailable = sandboxUnavailableReason();
if (unavailable) process.stderr.write(`pod.emulated: SKIPPED, ${unavailable}\n`);
const describeIf = unavailable ? describe.skip : describe;

const docs = ['gateway.yaml', 'envoy-configmap.yaml'].flatMap((f) =>
  parseAllDocuments(fs.readFileSync(path.join(K8S, f), 'utf8')).map((d) => d.toJS()),
);

describeIf('deploy/kubernetes gateway pod, emulated without a cluster', () => {
  const dep = docs.find((d) => d.kind === 'Deployment');
  const pod = dep.spec.template.spec;
  const sidecar = pod.initContainers[0];
  const envoy = pod.containers.find((c: any) => c.name === 'envoy');
  const cm = docs.find((d) => d.kind === 'ConfigMap');
  const routerHost = JSON.parse(cm.data['envoy.json']).static_resources.clusters.find((c: any) => c.name === 'router_tier').load_assignment
    .endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
  let sb: Sandbox;
  let image: RuntimeImage;
  /** The router Service's fake engine: the Dockerfile's demo target (the product image has no tools/). */
  let demo: RuntimeImage;
  let tmp: string;
  let configDir: string;
  let url: string;
  const specs = new Map<string, ProcessSpec>();
  const basePath = `${path.dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;
  const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));
  const mountPath = (p: string) => p.replace(/^\/etc\/envoy\//, `${configDir}/`);
  const portOf = (c: any, port: string | number): number =>
    typeof port === 'number' ? port : c.ports.find((p: any) => p.name === port).containerPort;

  async function probe(c: any, p: any): Promise<number | null> {
    return (await sb.httpGet('pod', portOf(c, p.httpGet.port), p.httpGet.path)).status;
  }

  async function until(what: string, f: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const t0 = Date.now();
    while (!(await f())) {
      if (Date.now() - t0 > timeoutMs)
        throw new Error(`${what} within ${timeoutMs} ms; sidecar:\n${sb.log('sidecar')}\nenvoy:\n${sb.log('envoy')}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  beforeAll(async () => {
    tmp = emulationTmpDir('pod-emulated-');
    image = buildRuntimeImage(path.join(tmp, 'image-runtime'));
    demo = buildImage(path.join(tmp, 'image-demo'), 'demo');
    configDir = path.join(tmp, 'envoy-config');
    fs.mkdirSync(configDir);
    for (const [k, v] of Object.entries<string>(cm.data)) fs.writeFileSync(path.join(configDir, k), v);
    fs.chmodSync(configDir, 0o755);
    sb = await Sandbox.start(
      [
        { name: 'pod', hostnames: ['inference-gateway-pod'] },
        { name: 'router', hostnames: [routerHost.address] },
      ],
      [{ sandbox: 'pod', port: 8080 }],
      // The Node and Envoy binaries may be in the checkout, unreachable for the pod's uids: bind-mounted.
      [process.execPath, process.env.ENVOY_BIN!],
      [...image.binds, ...demo.binds],
    );
    const node = sb.shared(process.execPath);
    // The router Service: a fake SGLang engine from the demo image.
    specs.set('router', {
      name: 'router',
      sandbox: 'router',
      argv: [
        process.execPath,
        'dist/tools/fake-engine/main.js',
        '--port',
        String(routerHost.port_value),
        '--host',
        '0.0.0.0',
        '--name',
        'router',
        '--dialect',
        'sglang',
        '--token-ms',
        '40',
      ],
      env: { PATH: basePath },
      cwd: demo.app,
    });
    specs.set('sidecar', {
      name: 'sidecar',
      sandbox: 'pod',
      argv: (sidecar.command ?? image.cmd).map((a: string, i: number) => (i === 0 && a === 'node' ? node : a)),
      env: { PATH: basePath, HOME: '/tmp', ...image.env, ...envOf(sidecar) },
      cwd: image.app,
      ...(canSwitchUid() ? { uid: sidecar.securityContext.runAsUser, gid: sidecar.securityContext.runAsGroup } : {}),
    });
    expect(envoy.command).toEqual(['envoy']);
    specs.set('envoy', {
      name: 'envoy',
      sandbox: 'pod',
      argv: [sb.shared(process.env.ENVOY_BIN!), ...envoy.args.map(mountPath)],
      env: { PATH: basePath, ...envOf(envoy) },
      cwd: tmp,
      ...(canSwitchUid() ? { uid: envoy.securityContext.runAsUser, gid: envoy.securityContext.runAsGroup } : {}),
    });
    await sb.startProcess(specs.get('router')!);
    // Native sidecar: started, and startup-probed, before the main container.
    await sb.startProcess(specs.get('sidecar')!);
    await until(
      'sidecar startup probe',
      async () => (await probe(sidecar, sidecar.startupProbe)) === 200,
      sidecar.startupProbe.failureThreshold * sidecar.startupProbe.periodSeconds * 1000,
    );
    await sb.startProcess(specs.get('envoy')!);
    await until(
      'envoy startup probe',
      async () => (await probe(envoy, envoy.startupProbe)) === 200,
      envoy.startupProbe.failureThreshold * envoy.startupProbe.periodSeconds * 1000,
    );
    url = sb.url('pod', 8080);
    // Envoy routes chat requests to ext_proc once its gRPC health check has seen the sidecar (fail-open before).
    await sb.waitForExtProcHealthy('pod', tmp);
  }, 240_000);

  afterAll(async () => {
    if (process.env.EMULATION_LOGS) for (const n of ['router', 'sidecar', 'envoy']) process.stderr.write(`==== ${n}\n${sb?.log(n)}\n`);
    await sb?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }, 30_000);

  test("probes from outside the pod: httpGet on the sidecar's admin port and on Envoy's ready listener", async () => {
    expect(await probe(sidecar, sidecar.livenessProbe)).toBe(200);
    expect(await probe(sidecar, sidecar.readinessProbe)).toBe(200);
    expect(await probe(envoy, envoy.readinessProbe)).toBe(200);
    // Envoy's liveness: a TCP connect to the front listener.
    expect((await sb.httpGet('pod', portOf(envoy, envoy.livenessProbe.tcpSocket.port), '/none')).status).not.toBeNull();
  });

  test("Prometheus can scrape /metrics on the pod address; ext_proc gRPC and Envoy's admin stay on loopback", async () => {
    const m = await sb.httpGet('pod', 9090, '/metrics');
    expect(m.status).toBe(200);
    expect(m.body).toMatch(/^# HELP continuation_gateway_requests_total/m);
    expect((await sb.httpGet('pod', 50051, '/')).error).toBe('ECONNREFUSED');
    expect((await sb.httpGet('pod', 9901, '/ready')).error).toBe('ECONNREFUSED');
    // WORKERS=2 from the manifest: a cluster primary and two workers.
    expect(sb.log('sidecar')).toMatch(/"workers":2/);
    // Aggregated over the workers, the build is still one series at 1 (issue 21).
    expect(m.body).toMatch(/^continuation_gateway_build_info\{version="[^"]+",node_version="v[^"]+"\} 1$/m);
  });

  test("Envoy's /stats/prometheus on the ready listener (the pod address); nothing else of its admin interface", async () => {
    const ready = portOf(envoy, envoy.readinessProbe.httpGet.port);
    const s = await sb.httpGet('pod', ready, '/stats/prometheus');
    expect(s.status).toBe(200);
    expect(s.body).toMatch(/^envoy_cluster_upstream_rq_total\{envoy_cluster_name="router_tier"\} \d+$/m);
    for (const p of ['/config_dump', '/quitquitquit', '/stats', '/stats/prometheus/x']) {
      expect([p, (await sb.httpGet('pod', ready, p)).status]).toEqual([p, 404]);
    }
  });

  test('a crash at token 30 is continued into one complete stream', async () => {
    const body = chatBody({ model: envOf(sidecar).CONTINUATION_MODEL });
    const reference = await postChat(url, body, { 'x-request-id': newRequestId('pod-ref') });
    expectOneCompleteStream(reference);
    // One router process here, so the continuation leg takes the fault list's next (empty) spec.
    const r = await postChat(url, body, { 'x-request-id': newRequestId('pod-crash'), 'x-fake-fault': 'crash@30' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(reference.content);
  }, 60_000);

  test("pod deletion: Envoy's preStop drains (not ready, streams finish, a crash in flight is still continued), then SIGTERM to Envoy, then to the sidecar", async () => {
    const body = chatBody({ model: envOf(sidecar).CONTINUATION_MODEL });
    let firstBytes = 0;
    const inFlight = postChat(url, body, { 'x-request-id': newRequestId('pod-drain'), 'x-fake-fault': 'crash@40' }, () => {
      if (!firstBytes) firstBytes = Date.now();
    });
    await until('stream started', async () => firstBytes > 0, 10_000);
    const t0 = Date.now();
    const preStop = sb.exec({
      sandbox: 'pod',
      argv: envoy.lifecycle.preStop.exec.command.map(mountPath),
      env: specs.get('envoy')!.env,
      cwd: tmp,
      uid: specs.get('envoy')!.uid,
      gid: specs.get('envoy')!.gid,
      timeoutMs: 100_000,
    });
    // Readiness fails soon after the hook starts: the Service stops sending new connections.
    await until('Envoy not ready', async () => (await probe(envoy, envoy.readinessProbe)) !== 200, 5_000).catch(async (e) => {
      throw new Error(`${e.message}\npreStop: ${JSON.stringify(await preStop)}`);
    });
    const r = await inFlight;
    const streamDone = Date.now();
    expectOneCompleteStream(r); // the crash at token 40 was continued through the still-open egress listener
    const hook = await preStop;
    expect(hook.code).toBe(0);
    expect(hook.output).toMatch(/no active streams after \d+s/);
    // The hook returned only once the stream had ended (its 1 s polling at most later).
    expect(Date.now()).toBeGreaterThanOrEqual(streamDone);
    expect(streamDone - t0).toBeGreaterThan(500);
    // Then the kubelet's SIGTERM: Envoy first, the native sidecar after Envoy has exited.
    await sb.signal('envoy', 'SIGTERM');
    await sb.waitExit('envoy', 10_000);
    await sb.signal('sidecar', 'SIGTERM');
    const e = await sb.waitExit('sidecar', (Number(envOf(sidecar).DRAIN_TIMEOUT_SECONDS) + 10) * 1000);
    expect(e.code).toBe(0);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(80 + Number(envOf(sidecar).DRAIN_TIMEOUT_SECONDS));
  }, 120_000);
});
