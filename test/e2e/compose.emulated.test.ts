// deploy/docker-compose.yaml run WITHOUT a container engine: every service of the shipped file becomes local
// processes with that service's command and environment, each service with a network of its own (a network
// namespace on a private bridge, like compose's default network; `network_mode: service:envoy` shares Envoy's),
// service names resolving through a private /etc/hosts (glibc and Envoy's c-ares resolver both read it). Envoy
// runs the shipped deploy/envoy/envoy.compose.json unchanged (the volume's container path in the command is
// replaced by the file's host path, the only rewrite). The images' stages are emulated by
// ../support/emulation/image.ts from the Dockerfile's own lines (what each stage COPYs, production
// dependencies, its ENV, WORKDIR, USER uid 1000 and CMD): the sidecar runs the default target (runtime, the
// product: dist/src + proto), the replicas the demo target (the fake engine). See docs/deploy.md for what this
// does and does not cover.
//
// Skipped, with the reason printed, where network namespaces cannot be made (not Linux, no unshare, no veth).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse } from 'yaml';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';
import { repoRoot } from '../../tools/stack/envoy-config';
import { chatBody, newRequestId, postChat } from '../support/client';
import { buildImage, defaultTarget, imageFiles, type RuntimeImage } from '../support/emulation/image';
import { canSwitchUid, emulationTmpDir, type ProcessSpec, Sandbox, sandboxUnavailableReason } from '../support/emulation/sandbox';
import { expectOneCompleteStream } from './helpers';

/* eslint-disable @typescript-eslint/no-explicit-any */

const ROOT = repoRoot();
const DEPLOY = path.join(ROOT, 'deploy');
const unavailable = sandboxUnavailableReason();
if (unavailable) process.stderr.write(`compose.emulated: SKIPPED, ${unavailable}\n`);
const describeIf = unavailable ? describe.skip : describe;

/** The envoyproxy/envoy image's entrypoint runs Envoy as the `envoy` user, uid 101. */
const ENVOY_IMAGE_UID = 101;

describeIf('deploy/docker-compose.yaml, emulated without a container engine', () => {
  const compose = parse(fs.readFileSync(path.join(DEPLOY, 'docker-compose.yaml'), 'utf8'), { merge: true });
  const services: Record<string, any> = compose.services;
  let sb: Sandbox;
  /** One emulated image per Dockerfile target the services build (no target: the default one). */
  const images = new Map<string, RuntimeImage>();
  const targetOf = (name: string): string => services[name].build?.target ?? defaultTarget();
  const imageOf = (name: string): RuntimeImage => images.get(targetOf(name))!;
  let tmp: string;
  let url: string;
  const specs = new Map<string, ProcessSpec>();

  // Host files the services use, seen through the sandbox's bind mounts (a checkout under a 0700 directory is
  // not reachable for uids 1000 and 101): the Node running the tests stands for the image's, the Envoy binary
  // for the Envoy image's, and each volume's host file.
  const volumeSource = (v: string): string => path.resolve(DEPLOY, v.split(':')[0]);
  const volumes = Object.values(services).flatMap((s: any) => (s.volumes ?? []).map(volumeSource));
  const node = (): string => sb.shared(process.execPath);

  const sandboxOf = (name: string): string => {
    const nm = services[name].network_mode as string | undefined;
    return nm?.startsWith('service:') ? nm.slice('service:'.length) : name;
  };

  /** A service as the process compose would start: command (or the image's CMD), environment, user, cwd. */
  function processSpec(name: string): ProcessSpec {
    const s = services[name];
    const basePath = `${path.dirname(process.execPath)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;
    if (s.build) {
      const image = imageOf(name);
      const argv = [...(s.command ?? image.cmd)];
      if (argv[0] === 'node') argv[0] = node(); // the image's node
      return {
        name,
        sandbox: sandboxOf(name),
        argv,
        env: { PATH: basePath, HOME: '/tmp', ...image.env, ...(s.environment ?? {}) },
        cwd: image.app,
        ...(canSwitchUid() ? { uid: image.user.uid, gid: image.user.gid } : {}),
      };
    }
    expect(s.image).toMatch(/^envoyproxy\/envoy:/);
    // Volumes: the container path in the command stands for the mounted host file.
    const mounts = new Map<string, string>(
      (s.volumes ?? []).map((v: string) => {
        const container = v.split(':')[1];
        return [container, sb.shared(volumeSource(v))] as [string, string];
      }),
    );
    const argv = (s.command as string[]).map((a) => mounts.get(a) ?? a);
    expect(argv[0]).toBe('envoy');
    argv[0] = sb.shared(process.env.ENVOY_BIN!);
    return {
      name,
      sandbox: sandboxOf(name),
      argv,
      env: { PATH: basePath, ...(s.environment ?? {}) },
      cwd: tmp,
      ...(canSwitchUid() ? { uid: ENVOY_IMAGE_UID, gid: ENVOY_IMAGE_UID } : {}),
    };
  }

  async function healthcheck(name: string): Promise<number | null> {
    const test: string[] = services[name].healthcheck.test;
    expect(test[0]).toBe('CMD');
    const p = specs.get(name)!;
    const argv = test.slice(1).map((a, i) => (i === 0 && a === 'node' ? node() : a));
    return (await sb.exec({ sandbox: p.sandbox, argv, env: p.env, cwd: p.cwd, uid: p.uid, gid: p.gid, timeoutMs: 3000 })).code;
  }

  async function waitHealthy(name: string, timeoutMs = 20_000): Promise<void> {
    const t0 = Date.now();
    while ((await healthcheck(name)) !== 0) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`${name} not healthy within ${timeoutMs} ms:\n${sb.log(name)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async function waitLog(name: string, re: RegExp, timeoutMs = 20_000): Promise<void> {
    const t0 = Date.now();
    while (!re.test(sb.log(name))) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`${name}: no ${re} within ${timeoutMs} ms:\n${sb.log(name)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    tmp = emulationTmpDir('compose-emulated-');
    const built = Object.keys(services).filter((n) => services[n].build);
    for (const target of new Set(built.map(targetOf))) images.set(target, buildImage(path.join(tmp, `image-${target}`), target));
    const own = Object.keys(services).filter((n) => sandboxOf(n) === n);
    const published = (services.envoy.ports as string[]).map((p) => Number(p.split(':')[1]));
    sb = await Sandbox.start(
      own.map((n) => ({ name: n, hostnames: [n] })),
      published.map((port) => ({ sandbox: 'envoy', port })),
      [process.execPath, process.env.ENVOY_BIN!, ...volumes],
      [...images.values()].flatMap((i) => i.binds),
    );
    for (const n of Object.keys(services)) specs.set(n, processSpec(n));
    // depends_on: the replicas (service_healthy) before Envoy, Envoy before the sidecar.
    for (const n of ['replica-a', 'replica-b']) await sb.startProcess(specs.get(n)!);
    for (const [dep, c] of Object.entries<any>(services.envoy.depends_on)) {
      expect(c.condition).toBe('service_healthy');
      await waitHealthy(dep);
    }
    await sb.startProcess(specs.get('envoy')!);
    await waitLog('envoy', /starting main dispatch loop/);
    await sb.startProcess(specs.get('sidecar')!);
    await waitLog('sidecar', /SIDECAR listening/);
    url = sb.url('envoy', 8080);
    // Envoy health-checks the sidecar every second before routing chat requests to it (fail-open before).
    await sb.waitForExtProcHealthy('envoy', tmp);
  }, 240_000);

  afterAll(async () => {
    if (process.env.EMULATION_LOGS) for (const n of Object.keys(services)) process.stderr.write(`==== ${n}\n${sb?.log(n)}\n`);
    await sb?.stop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }, 30_000);

  test('every service runs as compose would start it; the processes of the image run as a non-root uid', () => {
    expect(specs.get('sidecar')!.argv.slice(1)).toEqual([...SIDECAR_NODE_FLAGS, 'dist/src/main.js']); // the image's CMD
    expect(specs.get('sidecar')!.env).toMatchObject({ NODE_ENV: 'production', DOWNSTREAM_URL: 'http://127.0.0.1:10001' });
    if (canSwitchUid()) for (const n of ['sidecar', 'replica-a', 'replica-b']) expect(specs.get(n)!.uid).toBe(1000);
    // The sidecar runs the product image (the default target), the replicas the demo image.
    expect([targetOf('sidecar'), targetOf('replica-a'), targetOf('replica-b')]).toEqual(['runtime', 'demo', 'demo']);
    const image = imageOf('sidecar');
    // Only what the runtime stage copies.
    expect(fs.readdirSync(image.app).sort()).toEqual(['dist', 'node_modules', 'package-lock.json', 'package.json', 'proto']);
    expect(fs.readdirSync(path.join(image.app, 'dist'))).toEqual(['src']);
    expect(fs.existsSync(path.join(image.modules, 'jest'))).toBe(false);
    expect(fs.existsSync(path.join(image.modules, 'pino'))).toBe(true);
  });

  test('the product image holds no tools/ code; the demo image holds the fake engine and not the stack', () => {
    const product = imageFiles(imageOf('sidecar').app);
    expect(product).toContain('dist/src/main.js');
    expect(product.filter((f) => !/^(dist\/src\/|proto\/|package(-lock)?\.json$)/.test(f))).toEqual([]);
    expect(product.filter((f) => f.split('/').includes('tools') || /fake-engine|stack\//.test(f))).toEqual([]);
    // The same scan finds the tools where a stage copies them.
    const demo = imageFiles(imageOf('replica-a').app);
    expect(demo).toContain('dist/tools/fake-engine/main.js');
    expect(demo.filter((f) => f.startsWith('dist/tools/') && !f.startsWith('dist/tools/fake-engine/'))).toEqual([]);
  });

  test("the healthcheck commands: each replica's, and the image's HEALTHCHECK in the sidecar", async () => {
    expect(await healthcheck('replica-a')).toBe(0);
    expect(await healthcheck('replica-b')).toBe(0);
    const p = specs.get('sidecar')!;
    const argv = imageOf('sidecar').healthcheck!.map((a, i) => (i === 0 && a === 'node' ? node() : a));
    const r = await sb.exec({ sandbox: p.sandbox, argv, env: p.env, cwd: p.cwd, uid: p.uid, gid: p.gid, timeoutMs: 5000 });
    expect(r).toMatchObject({ code: 0, output: '' });
  });

  test("docs/deploy.md's fault header (x-fake-fault: crash@30), sent three times: each stream crashes and is continued", async () => {
    // The replicas count a fault script per client request (--fault-scope request): the same curl line crashes
    // every time, and a one-step script never hits the continuation on the other replica.
    const body = chatBody({ model: 'fake-model' });
    const reference = await postChat(url, body, { 'x-request-id': newRequestId('compose-ref-fault') });
    const succeeded = () =>
      sb
        .log('sidecar')
        .split('\n')
        .filter((l) => l.includes('"decision":"SUCCEEDED"')).length;
    const before = succeeded();
    for (let i = 0; i < 3; i++) {
      const r = await postChat(url, body, { 'x-fake-fault': 'crash@30', 'x-fake-token-ms': '5' });
      expectOneCompleteStream(r);
      expect(r.content).toBe(reference.content);
    }
    const t0 = Date.now();
    while (succeeded() - before < 3 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    expect(succeeded() - before).toBe(3);
  });

  test('kill a replica for real (SIGKILL) while streams run: every client still gets one complete stream', async () => {
    const body = chatBody({ model: 'fake-model' });
    const reference = await postChat(url, body, { 'x-request-id': newRequestId('compose-ref2') });
    let started = 0;
    const streams = [0, 1, 2, 3].map((i) => {
      let seen = false;
      return postChat(url, body, { 'x-request-id': newRequestId(`compose-kill-${i}`) }, () => {
        if (!seen) (seen = true), started++;
      });
    });
    const t0 = Date.now();
    while (started < 4 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
    await new Promise((r) => setTimeout(r, 400)); // ~10 tokens into every stream
    await sb.signal('replica-a', 'SIGKILL'); // docker compose kill -s SIGKILL replica-a
    expect((await sb.waitExit('replica-a', 5000)).signal).toBe('SIGKILL');
    for (const r of await Promise.all(streams)) {
      expectOneCompleteStream(r);
      expect(r.content).toBe(reference.content);
    }
    // The sidecar continued the streams that were on replica-a (round robin put some of them there).
    const metrics = await sb.exec({
      sandbox: 'envoy',
      argv: [process.execPath, '-e', "fetch('http://127.0.0.1:9090/metrics').then(r=>r.text()).then(t=>{process.stdout.write(t)})"],
      env: {},
      cwd: tmp,
      timeoutMs: 5000,
    });
    expect(metrics.output).toMatch(/continuation_gateway_recoveries_total\{kind="continuation",outcome="succeeded"\} [1-9]/);
    // The same from the host, through compose's published admin port (README: the rescued count).
    const fromHost = await (await fetch(`${sb.url('envoy', 9090)}/metrics`)).text();
    expect(fromHost).toMatch(
      /^continuation_gateway_request_outcomes_total\{outcome="completed-after-continuation",continuation="(verified|unverified)"\} [1-9]/m,
    );
    // docker compose start replica-a
    await sb.startProcess(specs.get('replica-a')!);
    await waitHealthy('replica-a');
  }, 90_000);
});
