// Fake engine replicas as separate OS processes, so a test can do to them what happens to a real replica:
// SIGKILL (crash), SIGSTOP (hung: the kernel still accepts its connections), SIGUSR1 (falls over, answers 503
// for a while). Every process is killed and reaped by stopReplicaProcesses, whatever state it is in.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';

export interface ReplicaProcess {
  readonly name: string;
  readonly port: number;
  readonly proc: ChildProcess;
  signal(sig: NodeJS.Signals): void;
}

const FAKE_ENGINE_MAIN = path.resolve(__dirname, '../../tools/fake-engine/main.js');

export async function startReplicaProcesses(n: number, args: string[] = []): Promise<ReplicaProcess[]> {
  const started: ReplicaProcess[] = [];
  try {
    for (let i = 0; i < n; i++) started.push(await startOne(`proc-${String.fromCharCode(97 + i)}`, args));
  } catch (e) {
    await stopReplicaProcesses(started);
    throw e;
  }
  return started;
}

function startOne(name: string, args: string[]): Promise<ReplicaProcess> {
  const proc = spawn(process.execPath, [FAKE_ENGINE_MAIN, '--port', '0', '--name', name, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`replica ${name} did not start: ${err}`));
    }, 10_000);
    proc.stderr!.on('data', (d) => (err += d));
    proc.stdout!.on('data', (d) => {
      out += d;
      const m = /listening http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      resolve({ name, port: Number(m[1]), proc, signal: (sig) => proc.exitCode === null && proc.signalCode === null && proc.kill(sig) });
    });
    proc.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`replica ${name} exited (${code ?? sig}) before listening: ${err}`));
    });
  });
}

/** SIGCONT (a stopped process cannot die of SIGKILL until it runs), SIGKILL, and wait until each is reaped. */
export async function stopReplicaProcesses(replicas: ReplicaProcess[]): Promise<void> {
  await Promise.all(
    replicas.map(
      (r) =>
        new Promise<void>((resolve) => {
          if (r.proc.exitCode !== null || r.proc.signalCode !== null) return resolve();
          r.proc.once('exit', () => resolve());
          r.proc.kill('SIGCONT');
          r.proc.kill('SIGKILL');
        }),
    ),
  );
}
