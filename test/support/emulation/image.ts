// The image's runtime stage (Dockerfile), emulated without a container engine: a directory laid out like /app
// in the image (package.json + package-lock.json, `npm ci --omit=dev`, dist/src, proto and nothing else), the
// runtime stage's ENV, WORKDIR, USER and CMD parsed from the Dockerfile itself, and the HEALTHCHECK command.
// The production node_modules is cached per lockfile under .cache/runtime-image/ (npm ci takes a while).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from '../../../tools/stack/envoy-config';

export interface RuntimeImage {
  /** The directory standing for WORKDIR /app. */
  app: string;
  /** The production node_modules (a cache under the checkout), mounted on app/node_modules: see `binds`. */
  modules: string;
  /** What Sandbox.start must bind-mount for the image's uid (the checkout may be unreachable for it). */
  binds: { source: string; target: string }[];
  env: Record<string, string>;
  user: { uid: number; gid: number };
  cmd: string[];
  healthcheck: string[];
  nodeImage: string;
}

const ROOT = repoRoot();

export function parseRuntimeStage(dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')) {
  const joined = dockerfile.replace(/\\\n\s*/g, ' ');
  const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(joined)![1];
  const runtime = joined.split(/^FROM \S+ AS runtime$/m)[1];
  const env: Record<string, string> = {};
  for (const m of runtime.matchAll(/^ENV (.+)$/gm))
    for (const kv of m[1].trim().split(/\s+/)) env[kv.split('=')[0]] = kv.slice(kv.indexOf('=') + 1);
  const [uid, gid] = /^USER (\d+):(\d+)$/m.exec(runtime)!.slice(1).map(Number);
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(runtime)![1]) as string[];
  const healthcheck = JSON.parse(/^HEALTHCHECK .*?CMD (\[.*\])$/m.exec(runtime)![1]) as string[];
  const workdir = /^WORKDIR (\S+)$/m.exec(runtime)![1];
  return { nodeImage, env, user: { uid, gid }, cmd, healthcheck, workdir };
}

function productionModules(): string {
  const lock = fs.readFileSync(path.join(ROOT, 'package-lock.json'));
  const pkg = fs.readFileSync(path.join(ROOT, 'package.json'));
  const key = createHash('sha256').update(lock).update(pkg).digest('hex').slice(0, 16);
  const dir = path.join(ROOT, '.cache', 'runtime-image', key);
  if (fs.existsSync(path.join(dir, 'node_modules'))) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  fs.mkdirSync(tmp, { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'package.json'), path.join(tmp, 'package.json'));
  fs.copyFileSync(path.join(ROOT, 'package-lock.json'), path.join(tmp, 'package-lock.json'));
  // What the runtime stage runs: RUN npm ci --omit=dev (from the npm cache when it has everything).
  execFileSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline', '--ignore-scripts'], {
    cwd: tmp,
    stdio: 'ignore',
    timeout: 300_000,
  });
  try {
    fs.renameSync(tmp, dir);
  } catch {
    fs.rmSync(tmp, { recursive: true, force: true }); // another test built it first
  }
  return dir;
}

/**
 * Lays out the image's /app under `into` (made readable by the image's non-root user). The production
 * node_modules is not copied (or linked: a link into a checkout under a 0700 directory cannot be followed by
 * the image's uid, "Cannot find module 'prom-client'"): app/node_modules is a mount point for `binds`.
 */
export function buildRuntimeImage(into: string): RuntimeImage {
  const stage = parseRuntimeStage();
  const app = path.join(into, 'app');
  fs.mkdirSync(app, { recursive: true });
  const modules = path.join(productionModules(), 'node_modules');
  for (const f of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(ROOT, f), path.join(app, f));
  fs.mkdirSync(path.join(app, 'node_modules'));
  fs.cpSync(path.join(ROOT, 'dist', 'src'), path.join(app, 'dist', 'src'), { recursive: true });
  fs.cpSync(path.join(ROOT, 'proto'), path.join(app, 'proto'), { recursive: true });
  execFileSync('chmod', ['-R', 'a+rX', into]);
  return {
    app,
    modules,
    binds: [{ source: modules, target: path.join(app, 'node_modules') }],
    env: stage.env,
    user: stage.user,
    cmd: stage.cmd,
    healthcheck: stage.healthcheck,
    nodeImage: stage.nodeImage,
  };
}
