// The Docker engine the container tests run on (test/e2e/compose.testcontainers.test.ts, pod.docker.test.ts),
// provisioned once per jest run by the global setup (in jest's parent process, before any worker starts; the
// workers inherit the environment it exports) and stopped by the global teardown:
//   1. an engine: scripts/docker-engine.sh (a reachable one, else a private dockerd it starts, with a watchdog
//      that stops it if jest itself is killed);
//   2. the `docker compose` v2 CLI plugin testcontainers runs: scripts/build-compose.sh (built from its Go
//      module, cached), reached through a DOCKER_CONFIG of its own (the user's ~/.docker is not touched);
//   3. the base images, when the engine lacks them: scripts/base-images.sh (no registry is reachable here);
//   4. the gateway's images, built once (`docker compose build`) so that the two files do not build them at
//      the same time; their own `up --build` then finds them cached.
// Any step that cannot be done here sets GATEWAY_DOCKER_SKIP to the reason, and the container tests skip with it.
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { provisionGoTool } from './go-tool';

/** What the workers read (process.env, exported by the global setup). */
export const DOCKER_SKIP_ENV = 'GATEWAY_DOCKER_SKIP';
const STARTED_ENV = 'GATEWAY_DOCKER_STARTED';

/** Files whose tests need the engine: a run that names test paths matching none of them starts nothing. */
const CONTAINER_TEST_FILES = /compose\.testcontainers|pod\.docker/;

export function cacheBase(): string {
  return (
    process.env.GATEWAY_CACHE_DIR ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'continuation-gateway')
  );
}

/** True unless the run names test paths and none of them is a container test file. */
export function runIncludesContainerTests(patterns: readonly string[]): boolean {
  if (patterns.length === 0) return true;
  return patterns.some((p) => CONTAINER_TEST_FILES.test(p) || /^(dist\/)?test\/?(e2e\/?)?$/.test(p));
}

function log(line: string): void {
  process.stderr.write(`[docker] ${line}\n`);
}

function run(root: string, script: string, args: string[], timeoutMs: number, env: NodeJS.ProcessEnv = process.env) {
  return spawnSync('bash', [path.join(root, 'scripts', script), ...args], {
    encoding: 'utf8',
    timeout: timeoutMs,
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** Steps 1-4 above; on success the workers' environment names the engine and the plugin. */
export function provisionDocker(root: string): void {
  const started = Date.now();
  const skip = (reason: string): void => {
    process.env[DOCKER_SKIP_ENV] = reason;
    log(`container tests will skip: ${reason}`);
  };
  const engine = run(root, 'docker-engine.sh', ['start', '--owner', String(process.pid)], 120_000);
  const last = (engine.stdout ?? '').trim().split('\n').pop() ?? '';
  if (engine.status !== 0 || !last.startsWith('DOCKER_HOST=')) {
    if (engine.status === 0 && last.startsWith('SKIP: ')) return skip(last.slice('SKIP: '.length));
    return skip(`scripts/docker-engine.sh failed (exit ${engine.status ?? engine.signal})`);
  }
  process.env.DOCKER_HOST = last.slice('DOCKER_HOST='.length);
  if (/^STARTED=1$/m.test(engine.stdout)) process.env[STARTED_ENV] = '1';
  // No ryuk reaper container (its image is on Docker Hub): the tests bring their containers down themselves,
  // and a private engine's teardown (or its watchdog) removes whatever is left.
  process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
  // The tests publish ports on 127.0.0.1 only; testcontainers' default host, "localhost", resolves to ::1 first.
  process.env.TESTCONTAINERS_HOST_OVERRIDE = '127.0.0.1';
  // The classic builder: the engine's BuildKit would fetch the Dockerfile's `# syntax=docker/dockerfile:1`
  // frontend image from Docker Hub; the classic builder reads the same Dockerfile with its own parser.
  process.env.DOCKER_BUILDKIT = '0';

  const compose = provisionGoTool(root, 'build-compose.sh', 40 * 60_000);
  if (!compose.bin) return skip(compose.skip ?? 'no docker compose v2 plugin');
  const config = path.join(cacheBase(), 'docker', 'config');
  fs.mkdirSync(path.join(config, 'cli-plugins'), { recursive: true });
  const link = path.join(config, 'cli-plugins', 'docker-compose');
  fs.rmSync(link, { force: true });
  fs.symlinkSync(compose.bin, link);
  process.env.DOCKER_CONFIG = config;

  const base = run(root, 'base-images.sh', [], 40 * 60_000);
  if (base.status === 3) return skip('scripts/base-images.sh cannot make the base images here (see its message above)');
  if (base.status !== 0) return skip(`scripts/base-images.sh failed (exit ${base.status ?? base.signal})`);

  try {
    execFileSync('docker', ['compose', '-f', path.join(root, 'deploy', 'docker-compose.yaml'), 'build', '--quiet'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      timeout: 40 * 60_000,
    });
  } catch (e) {
    return skip(`docker compose build failed: ${String((e as Error).message).split('\n')[0]}`);
  }
  log(`engine ${process.env.DOCKER_HOST}, compose plugin, base and gateway images ready in ${Math.round((Date.now() - started) / 1000)} s`);
}

/** The global teardown: stops the private engine the setup started (nothing when it used a reachable one). */
export function releaseDocker(root: string): void {
  if (process.env[STARTED_ENV] !== '1') return;
  run(root, 'docker-engine.sh', ['stop'], 120_000);
  delete process.env[STARTED_ENV];
}
