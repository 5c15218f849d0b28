// The Kubernetes gateway pod's shape in real containers on a Docker engine. NOT a cluster: no kubelet, no
// Service, no scheduler; this test plays the kubelet's part with docker commands. What it does run for real:
//   - one network namespace for the pod: a pause container (the node base image's `sleep`) owns it, and the
//     sidecar and Envoy join it with `--network container:<pause>`, as a pod's containers share the pause's;
//   - each container as the manifest (deploy/kubernetes/gateway.yaml, read here, not copied) states it: the
//     image, command and args, env, runAsUser/runAsGroup, readOnlyRootFilesystem, capabilities dropped,
//     allowPrivilegeEscalation false, the CPU and memory limits, and the ConfigMap's keys mounted read-only at
//     /etc/envoy (deploy/kubernetes/envoy-configmap.yaml);
//   - the native sidecar started and startup-probed before Envoy; the probes sent from outside the pod (the host,
//     to the pod's address on the test's bridge network, as a kubelet does);
//   - the router Service's DNS name (inference-gateway-router) resolving, on the test's network, to two fake
//     SGLang engines from the demo image (tools/fake-engine), one of them killed mid-stream;
//   - a pod's deletion: Envoy's preStop (drain.sh, exec'd in the Envoy container as its user), then SIGTERM to
//     Envoy (`docker stop`), then to the sidecar once Envoy has exited.
// The engine and the images come from the global setup (test/support/docker-engine.ts); skipped, with the
// reason printed, where it could not provide them.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../tools/stack/envoy-config';
import { type ClientResult, chatBody, newRequestId, postChat } from '../support/client';
import { DOCKER_SKIP_ENV } from '../support/docker-engine';
import { expectOneCompleteStream } from './helpers';

/* eslint-disable @typescript-eslint/no-explicit-any */

const K8S = path.join(repoRoot(), 'deploy', 'kubernetes');
const unavailable = process.env.DOCKER_HOST
  ? process.env[DOCKER_SKIP_ENV]
  : (process.env[DOCKER_SKIP_ENV] ?? 'no Docker engine (global setup)');
if (unavailable) process.stderr.write(`pod.docker: SKIPPED, ${unavailable}\n`);
const describeWithDocker = unavailable ? describe.skip : describe;

const docs = ['gateway.yaml', 'envoy-configmap.yaml'].flatMap((f) =>
  parseAllDocuments(fs.readFileSync(path.join(K8S, f), 'utf8')).map((d) => d.toJS()),
);
/** The image the compose demo's build tagged (the same runtime target of the same Dockerfile). */
const BUILT_IMAGE = 'continuation-gateway:local';
const STREAMS = 100;

const run = promisify(execFile);
async function docker(...args: string[]): Promise<string> {
  return (await run('docker', args, { encoding: 'utf8', timeout: 150_000 })).stdout.trim();
}

/** `docker run` flags for a container's securityContext and resources, as the kubelet applies them. */
function containerFlags(c: any): string[] {
  const sc = c.securityContext ?? {};
  const flags = ['--user', `${sc.runAsUser}:${sc.runAsGroup}`];
  if (sc.readOnlyRootFilesystem) flags.push('--read-only');
  if (sc.allowPrivilegeEscalation === false) flags.push('--security-opt', 'no-new-privileges');
  for (const cap of sc.capabilities?.drop ?? []) flags.push('--cap-drop', cap);
  const limits = c.resources?.limits ?? {};
  if (limits.cpu) flags.push('--cpus', String(limits.cpu));
  if (limits.memory) flags.push('--memory', String(limits.memory).replace(/Mi$/, 'm').replace(/Gi$/, 'g'));
  for (const e of c.env ?? []) flags.push('-e', `${e.name}=${e.value}`);
  return flags;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function httpGet(url: string): Promise<{ status: number | null; body: string; error?: string }> {
  try {
    const r = await fetch(url, { signal: AbortSignal.timeout(3000) });
    return { status: r.status, body: await r.text() };
  } catch (e) {
    return { status: null, body: '', error: String((e as any)?.cause?.code ?? (e as Error).name) };
  }
}

describeWithDocker('deploy/kubernetes gateway pod in real containers (not a cluster)', () => {
  const dep = docs.find((d) => d.kind === 'Deployment');
  const pod = dep.spec.template.spec;
  const sidecar = pod.initContainers[0];
  const envoy = pod.containers.find((c: any) => c.name === 'envoy');
  const cm = docs.find((d) => d.kind === 'ConfigMap');
  const router = JSON.parse(cm.data['envoy.json']).static_resources.clusters.find((c: any) => c.name === 'router_tier').load_assignment
    .endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
  const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));
  const portOf = (c: any, port: string | number): number =>
    typeof port === 'number' ? port : c.ports.find((p: any) => p.name === port).containerPort;
  const prefix = `cg-pod-${process.pid}`;
  const name = (n: string): string => `${prefix}-${n}`;
  let tmp: string;
  let podIp: string;
  let url: string;
  const started: string[] = [];

  const probe = async (c: any, p: any): Promise<number | null> =>
    (await httpGet(`http://${podIp}:${portOf(c, p.httpGet.port)}${p.httpGet.path}`)).status;

  async function startContainer(n: string, args: string[]): Promise<void> {
    started.push(name(n));
    await docker('run', '-d', '--name', name(n), '--label', `${prefix}=1`, ...args);
  }

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pod-docker-'));
    const configDir = path.join(tmp, 'envoy-config');
    fs.mkdirSync(configDir);
    for (const [k, v] of Object.entries<string>(cm.data)) fs.writeFileSync(path.join(configDir, k), v, { mode: 0o644 });
    fs.chmodSync(configDir, 0o755);
    // The manifest's image names: this build, tagged as the manifest names it (kind load does the same).
    await docker('tag', BUILT_IMAGE, sidecar.image);
    await docker('network', 'create', '--label', `${prefix}=1`, name('net'));
    // The router Service: two fake engines answering to its DNS name on the test's network.
    for (const r of ['router-a', 'router-b']) {
      await startContainer(r, [
        '--network',
        name('net'),
        '--network-alias',
        router.address,
        'continuation-gateway-demo:local',
        ...['node', 'dist/tools/fake-engine/main.js', '--port', String(router.port_value), '--host', '0.0.0.0'],
        ...['--name', r, '--dialect', 'sglang', '--token-ms', '40', '--fault-scope', 'request'],
      ]);
    }
    // The pod's network namespace, owned by a pause container as in Kubernetes.
    await startContainer('pause', [
      '--network',
      name('net'),
      '--hostname',
      'inference-gateway-pod',
      '--read-only',
      '--user',
      '65535:65535',
      '--entrypoint',
      'sleep',
      'node:24.19.0-bookworm-slim',
      'infinity',
    ]);
    const inPod = ['--network', `container:${name('pause')}`];
    podIp = await docker('inspect', '--format', `{{(index .NetworkSettings.Networks "${name('net')}").IPAddress}}`, name('pause'));
    // Native sidecar first: started, and startup-probed, before the main container.
    await startContainer('sidecar', [
      ...inPod,
      ...containerFlags(sidecar),
      sidecar.image,
      ...(sidecar.command ?? []),
      ...(sidecar.args ?? []),
    ]);
    await until(
      'the sidecar startup probe',
      async () => (await probe(sidecar, sidecar.startupProbe)) === 200,
      sidecar.startupProbe.failureThreshold * sidecar.startupProbe.periodSeconds * 1000 * 4, // x4: a loaded machine
    );
    expect(envoy.command).toEqual(['envoy']);
    // Kubernetes' `command` replaces the image's ENTRYPOINT, `args` its CMD.
    const mounts = envoy.volumeMounts.map((m: any) => `${configDir}:${m.mountPath}${m.readOnly ? ':ro' : ''}`);
    await startContainer('envoy', [
      ...inPod,
      ...containerFlags(envoy),
      ...mounts.flatMap((m: string) => ['-v', m]),
      '--entrypoint',
      envoy.command[0],
      envoy.image,
      ...envoy.args,
    ]);
    await until(
      'the Envoy startup probe',
      async () => (await probe(envoy, envoy.startupProbe)) === 200,
      envoy.startupProbe.failureThreshold * envoy.startupProbe.periodSeconds * 1000 * 4,
    );
    url = `http://${podIp}:${portOf(envoy, 'http')}`;
    // Envoy routes chat requests to ext_proc once its gRPC health check has seen the sidecar (fail-open before):
    // asked from inside the pod (Envoy's admin is on the pod's loopback), with the sidecar image's node.
    const check =
      "fetch('http://127.0.0.1:9901/clusters').then(r=>r.text()).then(t=>process.exit(/ext_proc::127.0.0.1:50051::health_flags::healthy/.test(t)?0:1),()=>process.exit(1))";
    await until(
      'ext_proc healthy in Envoy',
      () =>
        docker('exec', name('sidecar'), 'node', '-e', check).then(
          () => true,
          () => false,
        ),
      60_000,
    );
  }, 300_000);

  afterAll(async () => {
    const ids = await docker('ps', '-aq', '--filter', `label=${prefix}=1`).catch(() => '');
    if (ids) await docker('rm', '-f', ...ids.split('\n')).catch(() => '');
    await docker('network', 'rm', name('net')).catch(() => '');
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    // Nothing of the pod is left.
    expect(await docker('ps', '-aq', '--filter', `label=${prefix}=1`)).toBe('');
  }, 120_000);

  test('the containers run as the manifest says: users, read-only root filesystems, one network namespace', async () => {
    for (const [n, c] of [
      ['sidecar', sidecar],
      ['envoy', envoy],
    ] as const) {
      const [user, readOnly, netMode] = (
        await docker('inspect', '--format', '{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.NetworkMode}}', name(n))
      ).split(' ');
      expect([n, user, readOnly, netMode]).toEqual([
        n,
        `${c.securityContext.runAsUser}:${c.securityContext.runAsGroup}`,
        'true',
        `container:${await docker('inspect', '--format', '{{.Id}}', name('pause'))}`,
      ]);
    }
    // A write to the root filesystem fails in the sidecar's container.
    await expect(docker('exec', name('sidecar'), 'node', '-e', "require('fs').writeFileSync('/app/x','')")).rejects.toThrow(/EROFS/);
    expect(await docker('exec', name('sidecar'), 'node', '-e', 'process.stdout.write(String(process.getuid()))')).toBe('1000');
  });

  test("probes from outside the pod: the sidecar's admin port and Envoy's ready listener; gRPC and Envoy's admin stay on loopback", async () => {
    expect(await probe(sidecar, sidecar.livenessProbe)).toBe(200);
    expect(await probe(sidecar, sidecar.readinessProbe)).toBe(200);
    expect(await probe(envoy, envoy.readinessProbe)).toBe(200);
    expect((await httpGet(`http://${podIp}:${portOf(envoy, envoy.livenessProbe.tcpSocket.port)}/none`)).status).not.toBeNull();
    const m = await httpGet(`http://${podIp}:9090/metrics`);
    expect(m.status).toBe(200);
    expect(m.body).toMatch(/^# HELP continuation_gateway_requests_total/m);
    expect((await httpGet(`http://${podIp}:50051/`)).error).toBe('ECONNREFUSED');
    expect((await httpGet(`http://${podIp}:9901/ready`)).error).toBe('ECONNREFUSED');
  });

  test(`a router replica container killed (SIGKILL) in the middle of ${STREAMS} streams: every stream completes`, async () => {
    const body = chatBody({ model: envOf(sidecar).CONTINUATION_MODEL });
    const headers = { 'x-fake-answer-tokens': '0,300' };
    const reference = await postChat(url, body, { ...headers, 'x-request-id': newRequestId('pod-ref') });
    expectOneCompleteStream(reference);
    let begun = 0;
    const streams: Promise<ClientResult>[] = [];
    for (let i = 0; i < STREAMS; i++) {
      let seen = false;
      streams.push(
        postChat(url, body, { ...headers, 'x-request-id': newRequestId(`pod-kill-${i}`) }, () => {
          if (!seen) (seen = true), begun++;
        }),
      );
    }
    await until('every stream to start', async () => begun === STREAMS, 60_000);
    await docker('kill', '--signal', 'KILL', name('router-a'));
    for (const r of await Promise.all(streams)) {
      expectOneCompleteStream(r);
      expect(r.content).toBe(reference.content);
    }
    const m = (await httpGet(`http://${podIp}:9090/metrics`)).body;
    expect(m).toMatch(/^continuation_gateway_request_outcomes_total\{outcome="completed-after-continuation"[,}].* [1-9]/m);
    // The replica comes back (its supervisor's part here), so that the router Service has both again.
    await docker('start', name('router-a'));
    const models = `fetch('http://127.0.0.1:${router.port_value}/v1/models').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`;
    await until(
      'router-a answering again',
      () =>
        docker('exec', name('router-a'), 'node', '-e', models).then(
          () => true,
          () => false,
        ),
      60_000,
    );
  }, 180_000);

  test("pod deletion: Envoy's preStop drains (not ready, the stream in flight finishes), then SIGTERM to Envoy, then to the sidecar", async () => {
    const body = chatBody({ model: envOf(sidecar).CONTINUATION_MODEL });
    let firstBytes = 0;
    const inFlight = postChat(url, body, { 'x-request-id': newRequestId('pod-drain'), 'x-fake-fault': 'crash@40' }, () => {
      if (!firstBytes) firstBytes = Date.now();
    });
    await until('the stream to start', async () => firstBytes > 0, 15_000);
    // The kubelet runs the preStop hook in the Envoy container, as its user.
    const preStop = run('docker', ['exec', '--user', '101:101', name('envoy'), ...envoy.lifecycle.preStop.exec.command], {
      encoding: 'utf8',
      timeout: 100_000,
    });
    await until('Envoy not ready', async () => (await probe(envoy, envoy.readinessProbe)) !== 200, 10_000);
    const r = await inFlight;
    const streamDone = Date.now();
    expectOneCompleteStream(r);
    const hook = await preStop;
    const hookDone = Date.now();
    expect(hook.stdout).toMatch(/no active streams after \d+s/);
    expect(hookDone).toBeGreaterThanOrEqual(streamDone);
    // Then SIGTERM: Envoy first, the native sidecar only after Envoy has exited.
    await docker('stop', '--time', '10', name('envoy'));
    expect(await docker('inspect', '--format', '{{.State.Running}} {{.State.ExitCode}}', name('envoy'))).toBe('false 0');
    expect(await docker('inspect', '--format', '{{.State.Running}}', name('sidecar'))).toBe('true');
    await docker('stop', '--time', String(Number(envOf(sidecar).DRAIN_TIMEOUT_SECONDS) + 10), name('sidecar'));
    const [envoyEnd, sidecarEnd, code] = (
      await Promise.all([
        docker('inspect', '--format', '{{.State.FinishedAt}}', name('envoy')),
        docker('inspect', '--format', '{{.State.FinishedAt}} {{.State.ExitCode}}', name('sidecar')),
      ])
    )
      .join(' ')
      .split(' ');
    expect(Date.parse(sidecarEnd)).toBeGreaterThan(Date.parse(envoyEnd));
    expect(code).toBe('0');
    // The sidecar's own SIGTERM drain ran, and found nothing in flight (src/lifecycle/drain.ts).
    expect(await docker('logs', name('sidecar'))).toMatch(/"decision":"DRAINED"/);
  }, 180_000);
});
