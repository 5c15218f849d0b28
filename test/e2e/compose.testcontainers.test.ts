// deploy/docker-compose.yaml end to end: build the image, bring up Envoy + sidecar + two fake SGLang replicas
// with testcontainers' DockerComposeEnvironment, and recover one stream whose replica crashes mid-answer.
// Skipped (with the reason printed) when no Docker engine is reachable.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { DockerComposeEnvironment, type StartedDockerComposeEnvironment, Wait } from 'testcontainers';
import { repoRoot } from '../../tools/stack/envoy-config';
import { chatBody, newRequestId, postChat } from '../support/client';
import { expectOneCompleteStream } from './helpers';

const DEPLOY = path.join(repoRoot(), 'deploy');

/**
 * Asks testcontainers itself whether it can reach a container runtime. Done in a child process so the answer is
 * known synchronously, when the suite is declared, and the tests are reported as skipped rather than passed.
 */
function dockerUnavailableReason(): string | null {
  const probe =
    "require('testcontainers').getContainerRuntimeClient()" +
    '.then(()=>process.exit(0),e=>{process.stderr.write(String(e&&e.message||e));process.exit(1)})';
  const r = spawnSync(process.execPath, ['-e', probe], { timeout: 30_000, encoding: 'utf8' });
  if (r.status === 0) return null;
  return (r.stderr || r.error?.message || `probe exited with ${r.status ?? r.signal}`).trim().split('\n')[0];
}

const unavailable = dockerUnavailableReason();
if (unavailable) {
  process.stderr.write(`compose.testcontainers: SKIPPED, no Docker engine reachable (${unavailable})\n`);
}
const describeWithDocker = unavailable ? describe.skip : describe;

describeWithDocker('deploy/docker-compose.yaml (testcontainers)', () => {
  let env: StartedDockerComposeEnvironment | undefined;
  let url: string;

  beforeAll(async () => {
    env = await new DockerComposeEnvironment(DEPLOY, 'docker-compose.yaml')
      .withBuild()
      .withWaitStrategy('replica-a-1', Wait.forHealthCheck())
      .withWaitStrategy('replica-b-1', Wait.forHealthCheck())
      .withWaitStrategy('sidecar-1', Wait.forLogMessage(/SIDECAR listening/))
      .withWaitStrategy('envoy-1', Wait.forListeningPorts())
      .withStartupTimeout(300_000)
      .up();
    const envoy = env.getContainer('envoy-1');
    url = `http://${envoy.getHost()}:${envoy.getMappedPort(8080)}`;
    // Envoy health-checks the sidecar every second before it routes chat requests to it (fail-open otherwise).
    await new Promise((r) => setTimeout(r, 2_000));
  }, 600_000);

  afterAll(async () => {
    await env?.down({ timeout: 10_000 });
  }, 120_000);

  test('a replica crash at token 30 is continued into one complete stream', async () => {
    const body = chatBody({ model: 'fake-model' });
    const reference = await postChat(url, body, { 'x-request-id': newRequestId('compose-ref') });
    expectOneCompleteStream(reference);

    const r = await postChat(url, body, { 'x-request-id': newRequestId('compose-crash'), 'x-fake-fault': 'crash@30' });
    expectOneCompleteStream(r);
    expect(r.content).toBe(reference.content);
  }, 120_000);
});
