// Host side of the compose and pod emulations: starts ./runner.ts in new network, mount and PID namespaces
// (`unshare`), talks to it, turns its published unix sockets into 127.0.0.1:<ephemeral> TCP ports, and kills
// it (and so every process in its PID namespace) on stop(), or when this process dies (stdin closes).
//
// Host files the image's non-root uids must run or read (the Node and Envoy binaries, the production
// node_modules, a compose volume) may live in the checkout, and the checkout under a directory those uids
// cannot traverse (a 0700 home directory, a `mktemp -d` folder). So they are not used in place: each is
// bind-mounted, inside the runner's private mount namespace, onto a path under the sandbox's own world-
// traversable directory (`shared` below), as a container engine mounts a volume.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';

export interface SandboxSpec {
  name: string;
  /** Host names resolving to this sandbox (compose service names, a Service's DNS name). */
  hostnames: string[];
}

export interface RunnerSpec {
  dir: string;
  subnet: string;
  sandboxes: SandboxSpec[];
  publish: { sandbox: string; port: number }[];
  /** Bind mounts the runner makes in its mount namespace before any process starts (targets exist). */
  binds: { source: string; target: string }[];
}

/** True when every directory above and including `dir` lets others through (o+x). */
function traversableByOthers(dir: string): boolean {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if ((fs.statSync(d).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) return true;
  }
}

/**
 * A fresh directory (mode 0755) that the image's non-root uids can reach: under os.tmpdir() when every
 * directory above it is traversable, else under /tmp (TMPDIR inside a 0700 home, say).
 */
export function emulationTmpDir(prefix: string): string {
  const base = [os.tmpdir(), '/tmp'].find((b) => fs.existsSync(b) && traversableByOthers(b));
  if (!base) throw new Error(`no temp directory that other uids can traverse (${os.tmpdir()}, /tmp)`);
  const dir = fs.mkdtempSync(path.join(base, prefix));
  fs.chmodSync(dir, 0o755);
  return dir;
}

export interface ProcessSpec {
  name: string;
  sandbox: string;
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  uid?: number;
  gid?: number;
}

/** Why namespaces cannot be used here, or null when they can (checked once, synchronously). */
export function sandboxUnavailableReason(): string | null {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  for (const tool of ['unshare', 'nsenter', 'ip']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} not found (util-linux, iproute2)`;
  }
  const r = spawnSync('unshare', [...namespaceFlags(), 'sh', '-c', 'ip link add b0 type bridge && ip link add v0 type veth peer name v1'], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  if (r.status !== 0)
    return `cannot create network namespaces with a bridge and veth pairs: ${(r.stderr || r.error?.message || '').trim()}`;
  return null;
}

/** As root: no user namespace (processes can then run under the image's uid). Otherwise a user namespace. */
function userFlags(): string[] {
  return process.getuid?.() === 0 ? [] : ['--user', '--map-root-user'];
}

/** unshare's flags for the sandbox: its own network, mounts and PIDs (the probe and the runner alike). */
function namespaceFlags(): string[] {
  return [...userFlags(), '--net', '--mount', '--pid', '--fork', '--mount-proc'];
}

export const canSwitchUid = (): boolean => process.getuid?.() === 0;

export class Sandbox {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, (r: any) => void>();
  private readonly servers: net.Server[] = [];
  private nextId = 1;
  readonly exits: { name: string; code: number | null; signal: string | null }[] = [];
  private readonly exitWaiters: { name: string; resolve: (e: { code: number | null; signal: string | null }) => void }[] = [];
  addresses: Record<string, string> = {};
  readonly published = new Map<string, number>();
  private readonly sharedPaths = new Map<string, string>();

  private constructor(
    readonly dir: string,
    readonly _spec: RunnerSpec,
  ) {
    const runner = path.join(__dirname, 'runner.js');
    this.child = spawn('unshare', [...namespaceFlags(), '--kill-child', process.execPath, runner, path.join(dir, 'spec.json')], {
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    this.child.stderr!.on('data', (d) => fs.appendFileSync(path.join(dir, 'runner.stderr'), d));
    readline.createInterface({ input: this.child.stdout! }).on('line', (line) => this.onLine(line));
  }

  private readyResolve?: () => void;
  private readyReject?: (e: Error) => void;

  private onLine(line: string): void {
    let m: any;
    try {
      m = JSON.parse(line);
    } catch {
      return;
    }
    if (m.event === 'ready') {
      this.addresses = m.addresses;
      this.readyResolve?.();
    } else if (m.event === 'failed') {
      this.readyReject?.(new Error(m.error));
    } else if (m.event === 'exit') {
      this.exits.push({ name: m.name, code: m.code, signal: m.signal });
      for (const w of this.exitWaiters.filter((x) => x.name === m.name)) w.resolve({ code: m.code, signal: m.signal });
      this.exitWaiters.splice(0, this.exitWaiters.length, ...this.exitWaiters.filter((x) => x.name !== m.name));
    } else if (m.id !== undefined) {
      this.pending.get(m.id)?.(m);
      this.pending.delete(m.id);
    }
  }

  /**
   * `share`: host files and directories the emulated processes use (see the file comment); `shared()` names
   * where each is seen inside. `binds`: more bind mounts onto targets the caller made (a directory of an image).
   */
  static async start(
    sandboxes: SandboxSpec[],
    publish: { sandbox: string; port: number }[],
    share: string[] = [],
    binds: { source: string; target: string }[] = [],
  ): Promise<Sandbox> {
    const dir = emulationTmpDir('emulation-');
    // A private subnet per run: two emulations never share addresses (each has its own namespaces anyway).
    const subnet = `10.${200 + Math.floor(Math.random() * 50)}.${Math.floor(Math.random() * 250)}`;
    const hostDir = path.join(dir, 'host');
    fs.mkdirSync(hostDir, { mode: 0o755 });
    const sharedBinds = share.map((p, i) => {
      const source = fs.realpathSync(p);
      const target = path.join(hostDir, `${i}-${path.basename(source)}`);
      // The mount point: an empty directory or file of the same kind (its own mode is hidden by the mount).
      if (fs.statSync(source).isDirectory()) fs.mkdirSync(target, { mode: 0o755 });
      else fs.writeFileSync(target, '', { mode: 0o644 });
      return { source, target };
    });
    const spec: RunnerSpec = { dir, subnet, sandboxes, publish, binds: [...sharedBinds, ...binds] };
    fs.writeFileSync(path.join(dir, 'spec.json'), JSON.stringify(spec));
    const sb = new Sandbox(dir, spec);
    share.forEach((p, i) => sb.sharedPaths.set(p, sharedBinds[i].target));
    await new Promise<void>((resolve, reject) => {
      sb.readyResolve = resolve;
      sb.readyReject = reject;
      sb.child.once('exit', (c, s) => reject(new Error(`runner exited (${c ?? s}) before it was ready: ${sb.stderr()}`)));
      setTimeout(() => reject(new Error(`runner not ready within 20 s: ${sb.stderr()}`)), 20_000).unref();
    });
    for (const p of publish) {
      const sock = path.join(dir, `publish-${p.sandbox}-${p.port}.sock`);
      const server = net.createServer((c) => {
        const u = net.connect(sock);
        c.pipe(u).pipe(c);
        u.on('error', () => c.destroy());
        c.on('error', () => u.destroy());
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      sb.servers.push(server);
      sb.published.set(`${p.sandbox}:${p.port}`, (server.address() as net.AddressInfo).port);
    }
    return sb;
  }

  /** Where a host path given in `share` is seen by the emulated processes. */
  shared(hostPath: string): string {
    const p = this.sharedPaths.get(hostPath);
    if (!p) throw new Error(`${hostPath} was not shared with the sandbox (Sandbox.start's share list)`);
    return p;
  }

  stderr(): string {
    try {
      return fs.readFileSync(path.join(this.dir, 'runner.stderr'), 'utf8');
    } catch {
      return '';
    }
  }

  private call(cmd: object): Promise<any> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, (r) => (r.ok ? resolve(r) : reject(new Error(r.error))));
      this.child.stdin!.write(`${JSON.stringify({ id, ...cmd })}\n`);
    });
  }

  startProcess(p: ProcessSpec): Promise<void> {
    return this.call({ op: 'start', process: p });
  }

  signal(name: string, signal: NodeJS.Signals): Promise<void> {
    return this.call({ op: 'signal', name, signal });
  }

  exec(p: Omit<ProcessSpec, 'name'> & { timeoutMs: number }): Promise<{ code: number | null; output: string }> {
    return this.call({ op: 'exec', ...p });
  }

  /**
   * Waits until the Envoy in `sandbox` has seen the sidecar healthy (admin on 9901, ext_proc on 50051, the shipped
   * configs): before that it routes chat requests around the sidecar (fail-open), so a test would see no recovery.
   */
  async waitForExtProcHealthy(sandbox: string, cwd: string, timeoutMs = 15_000): Promise<void> {
    const check =
      "fetch('http://127.0.0.1:9901/clusters').then(r=>r.text()).then(t=>process.exit(/ext_proc::127.0.0.1:50051::health_flags::healthy/.test(t)?0:1),()=>process.exit(1))";
    const t0 = Date.now();
    while ((await this.exec({ sandbox, argv: [process.execPath, '-e', check], env: {}, cwd, timeoutMs: 3000 })).code !== 0) {
      if (Date.now() - t0 > timeoutMs) throw new Error(`ext_proc not healthy in ${sandbox}'s Envoy within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** An HTTP GET from the bridge side (the node, for a kubelet probe or a Prometheus scrape). */
  httpGet(
    sandbox: string,
    port: number,
    urlPath: string,
    timeoutMs = 2000,
  ): Promise<{ status: number | null; body: string; error?: string }> {
    return this.call({ op: 'httpGet', sandbox, port, path: urlPath, timeoutMs });
  }

  waitExit(name: string, timeoutMs: number): Promise<{ code: number | null; signal: string | null }> {
    const done = this.exits.find((e) => e.name === name);
    if (done) return Promise.resolve(done);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${name} did not exit within ${timeoutMs} ms`)), timeoutMs);
      this.exitWaiters.push({ name, resolve: (e) => (clearTimeout(t), resolve(e)) });
    });
  }

  log(name: string): string {
    try {
      return fs.readFileSync(path.join(this.dir, `${name}.log`), 'utf8');
    } catch {
      return '';
    }
  }

  url(sandbox: string, port: number): string {
    return `http://127.0.0.1:${this.published.get(`${sandbox}:${port}`)}`;
  }

  /** Kills the runner; its PID namespace dies with it (every process the emulation started). */
  async stop(): Promise<void> {
    for (const s of this.servers) s.close();
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      try {
        process.kill(-this.child.pid!, 'SIGKILL');
      } catch {
        this.child.kill('SIGKILL');
      }
      await exited;
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
