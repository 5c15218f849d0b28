// The sidecar as its own process (`node dist/src/main.js`, one worker), for suites that must see it exactly as
// deployed: its OpenTelemetry exporters load their transports with import(), which jest's VM does not run
// without --experimental-vm-modules, so a tracing suite cannot host the sidecar in the jest process. Its JSON
// log lines (stdout) go to the stack's log capture, so records() and waitForEnd() work as in-process.
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import type { Writable } from 'node:stream';

export interface SidecarProcess {
  readonly port: number;
  readonly adminPort: number;
  readonly pid: number;
  /** SIGTERM (a drain: queued spans are exported), SIGKILL after 20 s; resolves once the process is gone. */
  stop(): Promise<void>;
}

const MAIN = path.resolve(__dirname, '../../src/main.js');

/** `nodeFlags`: V8/Node flags before the script (the soak's `--heapsnapshot-signal`, `--diagnostic-dir`). */
export function startSidecarProcess(env: Record<string, string>, logSink: Writable, nodeFlags: string[] = []): Promise<SidecarProcess> {
  const child = spawn(process.execPath, [...nodeFlags, MAIN], {
    // Only what is given: an OTEL_* variable of the shell running jest must not reach the sidecar under test.
    env: { PATH: process.env.PATH ?? '', ...env, WORKERS: '1', PORT: '0', ADMIN_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const gone = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-8000);
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await gone;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    let pending = '';
    child.stdout.on('data', (d: Buffer) => {
      pending += d.toString();
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const m = /^SIDECAR listening (\d+) admin (-?\d+)$/.exec(line.trim());
        if (m) resolve({ port: Number(m[1]), adminPort: Number(m[2]), pid: child.pid as number, stop });
        else if (line.startsWith('{')) logSink.write(`${line}\n`);
      }
    });
    child.once('close', (code, signal) => reject(new Error(`sidecar process exited (${code ?? signal}) before listening: ${stderr}`)));
    child.once('error', reject);
  });
}
