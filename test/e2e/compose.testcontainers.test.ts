// deploy/docker-compose.yaml on a real Docker engine, with testcontainers' DockerComposeEnvironment: the four
// services from the real images (`up --build`: the Dockerfile's runtime and demo targets on the base images of
// scripts/base-images.sh), streams answered through Envoy, replica-a's process killed with SIGKILL in the middle
// of a batch of streams (every stream completes; the continuations are counted in the sidecar's /metrics),
// `restart: unless-stopped` bringing replica-a back healthy, the sidecar's container running as its non-root
// user, and `docker compose down` leaving nothing. The replicas are the demo's fake engine (tools/fake-engine).
//
// The engine, the compose plugin and the images come from the global setup (test/support/docker-engine.ts);
// the file skips, with the reason printed, where it could not provide them. The one change to the shipped file:
// an override file publishes Envoy's ports on 127.0.0.1 at ports Docker picks (the demo's 8080/9090 are fixed).
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DockerComposeEnvironment, type StartedDockerComposeEnvironment, Wait } from 'testcontainers';
import { repoRoot } from '../../tools/stack/envoy-config';
import { type ClientResult, chatBody, newRequestId, postChat } from '../support/client';
import { DOCKER_SKIP_ENV } from '../support/docker-engine';
import { expectOneCompleteStream } from './helpers';

const DEPLOY = path.join(repoRoot(), 'deploy');
const unavailable = process.env.DOCKER_HOST
  ? process.env[DOCKER_SKIP_ENV]
  : (process.env[DOCKER_SKIP_ENV] ?? 'no Docker engine (global setup)');
if (unavailable) process.stderr.write(`compose.testcontainers: SKIPPED, ${unavailable}\n`);
const describeWithDocker = unavailable ? describe.skip : describe;

/** A burst: a crash hits every stream of a replica together. */
const STREAMS = 100;

function docker(args: string[]): string {
  return execFileSync('docker', args, { encoding: 'utf8', timeout: 60_000 }).trim();
}

function inspect(id: string, format: string): string {
  return docker(['inspect', '--format', format, id]);
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The sum of a counter's series whose labels begin with `labels` (further labels, e.g. `continuation`, may follow). */
function counter(metrics: string, name: string, labels: string): number {
  return metrics
    .split('\n')
    .filter((l) => l.startsWith(`${name}{${labels}} `) || l.startsWith(`${name}{${labels},`))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

describeWithDocker('deploy/docker-compose.yaml on a Docker engine (testcontainers)', () => {
  let env: StartedDockerComposeEnvironment | undefined;
  let project: string;
  let tmp: string;
  let url: string;
  let adminUrl: string;

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'compose-tc-'));
    const override = path.join(tmp, 'ports.override.yaml');
    fs.writeFileSync(
      override,
      ['services:', '  envoy:', '    ports: !override', '      - "127.0.0.1::8080"', '      - "127.0.0.1::9090"', ''].join('\n'),
    );
    project = `cg-compose-${process.pid}`;
    env = await new DockerComposeEnvironment(DEPLOY, ['docker-compose.yaml', override])
      .withProjectName(project)
      .withBuild()
      .withWaitStrategy('replica-a-1', Wait.forHealthCheck())
      .withWaitStrategy('replica-b-1', Wait.forHealthCheck())
      .withWaitStrategy('sidecar-1', Wait.forLogMessage(/SIDECAR listening/))
      .withWaitStrategy('envoy-1', Wait.forListeningPorts())
      .withStartupTimeout(300_000)
      .up();
    const envoy = env.getContainer('envoy-1');
    url = `http://${envoy.getHost()}:${envoy.getMappedPort(8080)}`;
    adminUrl = `http://${envoy.getHost()}:${envoy.getMappedPort(9090)}`;
    // Envoy health-checks the sidecar before it routes chat requests through it: wait until a stream is answered.
    await until('a first answer through Envoy', async () => (await postChat(url, chatBody({ model: 'fake-model' }))).done, 60_000);
  }, 900_000);

  afterAll(async () => {
    await env?.down({ timeout: 10_000 });
    if (project) {
      // `docker compose down` leaves nothing of the project: no container, no network.
      expect(docker(['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`])).toBe('');
      expect(docker(['network', 'ls', '-q', '--filter', `label=com.docker.compose.project=${project}`])).toBe('');
    }
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  }, 120_000);

  test('the sidecar runs as its non-root user, healthy, within its resource limits', async () => {
    const sidecar = env!.getContainer('sidecar-1');
    expect(inspect(sidecar.getId(), '{{.Config.User}}')).toBe('1000:1000');
    const id = await sidecar.exec(['node', '-e', 'process.stdout.write(String(process.getuid()))']);
    expect(id.output.trim()).toBe('1000');
    // The image's HEALTHCHECK passes, and compose applied deploy.resources.limits (cpus "2", memory 512M).
    await until('the sidecar healthy', async () => inspect(sidecar.getId(), '{{.State.Health.Status}}') === 'healthy', 60_000);
    expect(inspect(sidecar.getId(), '{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}')).toBe(`${2e9} ${512 * 1024 * 1024}`);
  });

  test('the runtime image holds the product alone: dist/src, proto, production dependencies', async () => {
    const image = inspect(env!.getContainer('sidecar-1').getId(), '{{.Config.Image}}');
    const files = docker([
      'run',
      '--rm',
      '--entrypoint',
      'find',
      image,
      '/app',
      '-path',
      '/app/node_modules',
      '-prune',
      '-o',
      '-type',
      'f',
      '-print',
    ]).split('\n');
    expect(new Set(files.map((f) => f.split('/')[2]))).toEqual(new Set(['dist', 'proto', 'package.json', 'package-lock.json']));
    expect(files.filter((f) => f.startsWith('/app/dist/') && !f.startsWith('/app/dist/src/'))).toEqual([]);
    expect(files.filter((f) => /\.test\.|\/test\//.test(f))).toEqual([]);
    expect(files).toContain('/app/dist/src/main.js');
    // No development tools (npm ci --omit=dev): the compiler, the test runner, the linter, testcontainers.
    const list = 'ls /app/node_modules; ls /app/node_modules/@biomejs 2>/dev/null; true';
    const modules = docker(['run', '--rm', '--entrypoint', 'sh', image, '-c', list]);
    expect(modules.split(/\s+/)).toContain('@grpc');
    for (const tool of ['typescript', 'jest', 'testcontainers', 'biome']) expect(modules.split(/\s+/)).not.toContain(tool);
  });

  test('a replica crash at token 30 is continued into one complete stream', async () => {
    const body = chatBody({ model: 'fake-model' });
    const reference = await postChat(url, body, { 'x-request-id': newRequestId('compose-ref') });
    expectOneCompleteStream(reference);
    const r = await postChat(url, body, { 'x-request-id': newRequestId('compose-crash'), 'x-fake-fault': 'crash@30' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(reference.content);
  }, 120_000);

  test(`replica-a killed (SIGKILL) in the middle of ${STREAMS} streams: every stream completes, restart brings it back`, async () => {
    const replicaA = env!.getContainer('replica-a-1').getId();
    // Long enough answers that every stream is still running when the kill lands (40 ms a token: ~16 s).
    const headers = { 'x-fake-answer-tokens': '0,400' };
    const body = chatBody({ model: 'fake-model' });
    const reference = await postChat(url, body, { ...headers, 'x-request-id': newRequestId('compose-burst-ref') });
    expectOneCompleteStream(reference);
    const before = await (await fetch(`${adminUrl}/metrics`)).text();

    let started = 0;
    const streams: Promise<ClientResult>[] = [];
    for (let i = 0; i < STREAMS; i++) {
      let seen = false;
      streams.push(
        postChat(url, body, { ...headers, 'x-request-id': newRequestId(`compose-burst-${i}`) }, () => {
          if (!seen) (seen = true), started++;
        }),
      );
    }
    await until('every stream to start', () => started === STREAMS, 60_000);
    // The replica's process dies as a crash does, from outside Docker (docker kill would count as a stop the
    // restart policy honours): SIGKILL to its host pid.
    const pid = Number(inspect(replicaA, '{{.State.Pid}}'));
    const restartsBefore = Number(inspect(replicaA, '{{.RestartCount}}'));
    process.kill(pid, 'SIGKILL');

    const results = await Promise.all(streams);
    for (const r of results) {
      expectOneCompleteStream(r);
      expect(r.content).toBe(reference.content);
    }
    const after = await (await fetch(`${adminUrl}/metrics`)).text();
    const rescued = (m: string): number =>
      counter(m, 'continuation_gateway_request_outcomes_total', 'outcome="completed-after-continuation"');
    // Round robin put some of the streams on replica-a: each of those was continued.
    expect(rescued(after) - rescued(before)).toBeGreaterThan(0);
    expect(rescued(after) - rescued(before)).toBeLessThanOrEqual(STREAMS);
    process.stderr.write(
      `compose.testcontainers: ${STREAMS} streams, ${rescued(after) - rescued(before)} continued after replica-a's SIGKILL\n`,
    );

    // restart: unless-stopped brings replica-a back, and its health check passes again.
    await until(
      'replica-a restarted and healthy',
      () => {
        const [restarts, health] = inspect(replicaA, '{{.RestartCount}} {{.State.Health.Status}}').split(' ');
        return Number(restarts) > restartsBefore && health === 'healthy';
      },
      120_000,
    );
    const again = await postChat(url, body, { 'x-request-id': newRequestId('compose-after') });
    expectOneCompleteStream(again);
  }, 300_000);
});
