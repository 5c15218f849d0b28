// Runs INSIDE fresh network, mount and PID namespaces (started by ./sandbox.ts through `unshare`): the
// "container host" of the compose and pod emulations. It is PID 1 there, so when it dies, for whatever reason,
// the kernel kills every process it started: nothing can outlive a test.
//
// It builds a bridge (the compose network / the pod network), one network namespace per sandbox (a compose
// service with its own network, or a pod) joined to the bridge by a veth pair, and a private /etc/hosts that
// maps every service name to its sandbox's address (glibc and Envoy's c-ares resolver both read it). Processes
// run in their sandbox through `nsenter --net`, under the uid the image or manifest says. Published ports are
// unix sockets in a shared directory (filesystem sockets cross network namespaces); the test process turns
// them into 127.0.0.1:<ephemeral> ports.
//
// Protocol: one JSON command per line on stdin, one JSON reply per line on stdout ({id, ...}); process exits
// are reported as {event: 'exit', name, code, signal}.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';

import type { ProcessSpec, RunnerSpec } from './sandbox';

const specFile = process.argv[2];
const spec: RunnerSpec = JSON.parse(fs.readFileSync(specFile, 'utf8'));
const holders = new Map<string, ChildProcess>();
const addresses = new Map<string, string>();
const procs = new Map<string, ChildProcess>();

function sh(argv: string[]): void {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed: ${r.stderr || r.error?.message}`);
}

function send(o: object): void {
  process.stdout.write(`${JSON.stringify(o)}\n`);
}

async function setup(): Promise<void> {
  sh(['ip', 'link', 'set', 'lo', 'up']);
  sh(['ip', 'link', 'add', 'br0', 'type', 'bridge']);
  sh(['ip', 'addr', 'add', `${spec.subnet}.1/24`, 'dev', 'br0']);
  sh(['ip', 'link', 'set', 'br0', 'up']);
  const hosts = ['127.0.0.1 localhost', '::1 localhost'];
  let i = 2;
  for (const sb of spec.sandboxes) {
    const holder = spawn('unshare', ['--net', 'sleep', 'infinity'], { stdio: 'ignore' });
    holders.set(sb.name, holder);
    // Wait until the holder has its own network namespace.
    const self = fs.readlinkSync('/proc/self/ns/net');
    for (let t = 0; t < 200; t++) {
      try {
        if (fs.readlinkSync(`/proc/${holder.pid}/ns/net`) !== self) break;
      } catch {
        /* not yet */
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    const ip = `${spec.subnet}.${i++}`;
    addresses.set(sb.name, ip);
    const host = `vh${i}`;
    sh(['ip', 'link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0tmp']);
    sh(['ip', 'link', 'set', 'eth0tmp', 'netns', String(holder.pid)]);
    sh(['ip', 'link', 'set', host, 'master', 'br0']);
    sh(['ip', 'link', 'set', host, 'up']);
    const inNs = (...a: string[]) => sh(['nsenter', '-t', String(holder.pid), '-n', ...a]);
    inNs('ip', 'link', 'set', 'lo', 'up');
    inNs('ip', 'link', 'set', 'eth0tmp', 'name', 'eth0');
    inNs('ip', 'addr', 'add', `${ip}/24`, 'dev', 'eth0');
    inNs('ip', 'link', 'set', 'eth0', 'up');
    inNs('ip', 'route', 'add', 'default', 'via', `${spec.subnet}.1`);
    hosts.push(`${ip} ${sb.hostnames.join(' ')}`);
  }
  const hostsFile = path.join(spec.dir, 'hosts');
  fs.writeFileSync(hostsFile, `${hosts.join('\n')}\n`);
  // Private mount namespace: this bind mount is seen by this runner's processes only.
  sh(['mount', '--bind', hostsFile, '/etc/hosts']);
  // No upstream DNS server in here: names not in hosts fail fast instead of timing out.
  const resolv = path.join(spec.dir, 'resolv.conf');
  fs.writeFileSync(resolv, 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n');
  sh(['mount', '--bind', resolv, '/etc/resolv.conf']);
  // Host files for the image's uids, wherever they live (sandbox.ts); read-only, as a container's volume.
  for (const b of spec.binds) {
    sh(['mount', '--bind', b.source, b.target]);
    sh(['mount', '-o', 'remount,bind,ro', b.target]);
  }
  for (const p of spec.publish) {
    const target = addresses.get(p.sandbox)!;
    const sock = path.join(spec.dir, `publish-${p.sandbox}-${p.port}.sock`);
    net
      .createServer((c) => {
        const u = net.connect(p.port, target);
        c.pipe(u).pipe(c);
        u.on('error', () => c.destroy());
        c.on('error', () => u.destroy());
      })
      .listen(sock);
  }
}

function inSandbox(sandbox: string, argv: string[], uid?: number, gid?: number): string[] {
  const holder = holders.get(sandbox);
  if (!holder) throw new Error(`no sandbox ${sandbox}`);
  const ids = uid === undefined ? [] : ['--setuid', String(uid), '--setgid', String(gid ?? uid)];
  return ['nsenter', '-t', String(holder.pid), '--net', ...ids, '--', ...argv];
}

function start(p: ProcessSpec): void {
  const [cmd, ...args] = inSandbox(p.sandbox, p.argv, p.uid, p.gid);
  const log = fs.openSync(path.join(spec.dir, `${p.name}.log`), 'a');
  const child = spawn(cmd, args, { cwd: p.cwd, env: p.env, stdio: ['ignore', log, log] });
  fs.closeSync(log);
  procs.set(p.name, child);
  child.on('exit', (code, signal) => {
    if (procs.get(p.name) === child) procs.delete(p.name);
    send({ event: 'exit', name: p.name, code, signal });
  });
}

function exec(p: Omit<ProcessSpec, 'name'> & { timeoutMs: number }): Promise<{ code: number | null; output: string }> {
  const [cmd, ...args] = inSandbox(p.sandbox, p.argv, p.uid, p.gid);
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: p.cwd, env: p.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    const t = setTimeout(() => child.kill('SIGKILL'), p.timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, output });
    });
  });
}

/** What the kubelet does for an httpGet probe: GET from the node (here: the bridge side) to the pod's address. */
function httpGet(
  sandbox: string,
  port: number,
  urlPath: string,
  timeoutMs: number,
): Promise<{ status: number | null; body: string; error?: string }> {
  return new Promise((resolve) => {
    const req = http.get({ host: addresses.get(sandbox), port, path: urlPath, timeout: timeoutMs }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? null, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ status: null, body: '', error: e.code ?? e.message }));
  });
}

async function handle(cmd: any): Promise<object> {
  switch (cmd.op) {
    case 'start':
      start(cmd.process);
      return { ok: true };
    case 'signal': {
      const child = procs.get(cmd.name);
      if (!child) return { ok: false, error: `${cmd.name} is not running` };
      child.kill(cmd.signal);
      return { ok: true };
    }
    case 'exec':
      return { ok: true, ...(await exec(cmd)) };
    case 'httpGet':
      return { ok: true, ...(await httpGet(cmd.sandbox, cmd.port, cmd.path, cmd.timeoutMs ?? 2000)) };
    case 'address':
      return { ok: true, address: addresses.get(cmd.sandbox) };
    default:
      return { ok: false, error: `unknown op ${cmd.op}` };
  }
}

setup().then(
  () => {
    send({ event: 'ready', addresses: Object.fromEntries(addresses) });
    const rl = readline.createInterface({ input: process.stdin });
    rl.on('line', (line) => {
      const cmd = JSON.parse(line);
      handle(cmd).then(
        (r) => send({ id: cmd.id, ...r }),
        (e: unknown) => send({ id: cmd.id, ok: false, error: e instanceof Error ? e.message : String(e) }),
      );
    });
    // The test process went away: stop; PID 1 exiting takes every process of the namespace with it.
    rl.on('close', () => process.exit(0));
  },
  (e: unknown) => {
    send({ event: 'failed', error: e instanceof Error ? e.message : String(e) });
    process.exit(1);
  },
);
