// The sidecar logs asynchronously to stdout and flushes synchronously when it exits. With stdout a pipe whose
// reader is gone (the stack or supervisor reading it was killed), that flush used to retry forever: the
// process never finished exiting and, stuck in a synchronous loop, ignored SIGTERM (orphaned cluster
// workers, parent pid 1, for as long as anyone watched).
import { spawn } from 'node:child_process';
import * as path from 'node:path';

const LOGGER = path.resolve(__dirname, '../../../src/obs/logger.js');

// Logs, waits for the go (the reader is gone by then), logs more than a pipe holds, exits.
const CHILD = `
const log = require(${JSON.stringify(LOGGER)}).createLogger('info');
log.info('started');
process.stdin.once('data', () => {
  for (let i = 0; i < 2000; i++) log.info({ i, pad: 'x'.repeat(200) }, 'line');
  process.stderr.write('exiting\\n');
  process.exit(0);
});
`;

test('process.exit() returns with stdout a pipe nobody reads any more (EPIPE)', async () => {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  child.stdout.destroy(); // the only read end: the pipe is now broken
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const t0 = Date.now();
  child.stdin.write('go\n');
  const timeout = new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 5000).unref());
  const result = await Promise.race([exited, timeout]);
  if (result === 'hung') child.kill('SIGKILL');
  expect(result).toBe(0);
  expect(Date.now() - t0).toBeLessThan(2000);
  expect(err).toContain('exiting');
});
