// Jest global teardown: runs once, in the parent process, after every worker has ended. Stops the private Docker
// engine the global setup started for the container tests (test/support/docker-engine.ts); if jest itself is
// killed before this runs, the engine's watchdog stops it (scripts/docker-engine.sh).
import * as path from 'node:path';
import { releaseDocker } from './docker-engine';

const ROOT = path.resolve(__dirname, '..', '..', '..'); // dist/test/support -> repository root

export default async function globalTeardown(): Promise<void> {
  releaseDocker(ROOT);
}
