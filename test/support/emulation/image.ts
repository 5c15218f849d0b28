// A stage of the Dockerfile, emulated without a container engine: a directory laid out like /app in that image,
// built from the stage's own COPY lines (a file of the build context from the checkout; `--from=build /app/X`
// from the checkout's X, the build stage's /app being the checkout with its compiled dist/), plus `npm ci
// --omit=dev` when the stage runs it; the stage's ENV, WORKDIR, USER, CMD and HEALTHCHECK parsed from the
// Dockerfile itself. So what a stage does not copy is not there: the runtime stage (the product image) has no
// dist/tools, the demo stage (the compose demo's fake engines) has dist/tools/fake-engine.
// The production node_modules is cached per lockfile under .cache/runtime-image/ (npm ci takes a while).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from '../../../tools/stack/envoy-config';

export interface RuntimeImage {
  /** The stage (Dockerfile target) this is. */
  target: string;
  /** The directory standing for WORKDIR /app. */
  app: string;
  /** The production node_modules (a cache under the checkout), mounted on app/node_modules: see `binds`. */
  modules: string;
  /** What Sandbox.start must bind-mount for the image's uid (the checkout may be unreachable for it). */
  binds: { source: string; target: string }[];
  env: Record<string, string>;
  user: { uid: number; gid: number };
  cmd: string[];
  /** The stage's HEALTHCHECK command, if it has one. */
  healthcheck?: string[];
  nodeImage: string;
}

const ROOT = repoRoot();

/** One COPY line of a stage: the stage it copies from (undefined: the build context), sources, destination. */
export interface StageCopy {
  from?: string;
  sources: string[];
  dest: string;
}

/** Every stage of the Dockerfile, in order: its name (AS ...) and its instructions (continuation lines joined). */
export function dockerStages(dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')): { name: string; text: string }[] {
  const joined = dockerfile.replace(/\\\n\s*/g, ' ');
  const parts = joined.split(/^FROM \S+ AS (\S+)$/m);
  const out: { name: string; text: string }[] = [];
  for (let i = 1; i < parts.length; i += 2) out.push({ name: parts[i], text: parts[i + 1] });
  return out;
}

/** The stage a build without --target makes: the last one. */
export const defaultTarget = (dockerfile?: string): string => dockerStages(dockerfile).at(-1)!.name;

export function parseStage(target: string, dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')) {
  const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile)![1];
  const stage = dockerStages(dockerfile).find((s) => s.name === target);
  if (!stage) throw new Error(`Dockerfile: no stage ${target}`);
  const text = stage.text;
  const env: Record<string, string> = {};
  for (const m of text.matchAll(/^ENV (.+)$/gm))
    for (const kv of m[1].trim().split(/\s+/)) env[kv.split('=')[0]] = kv.slice(kv.indexOf('=') + 1);
  const [uid, gid] = /^USER (\d+):(\d+)$/m.exec(text)!.slice(1).map(Number);
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(text)![1]) as string[];
  const hc = /^HEALTHCHECK .*?CMD (\[.*\])$/m.exec(text);
  const healthcheck = hc ? (JSON.parse(hc[1]) as string[]) : undefined;
  const workdir = /^WORKDIR (\S+)$/m.exec(text)![1];
  const copies: StageCopy[] = [...text.matchAll(/^COPY (.+)$/gm)].map((m) => {
    const words = m[1].trim().split(/\s+/);
    const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
    const args = words.filter((w) => !w.startsWith('--'));
    return { ...(from ? { from } : {}), sources: args.slice(0, -1), dest: args.at(-1)! };
  });
  const productionDeps = /^RUN npm ci --omit=dev\b/m.test(text);
  return { target, nodeImage, env, user: { uid, gid }, cmd, healthcheck, workdir, copies, productionDeps };
}

/** Where a COPY source is in the checkout: the build context is the checkout, the build stage's /app too. */
function checkoutPath(c: StageCopy, source: string): string {
  if (c.from === undefined) return path.join(ROOT, source);
  const buildWorkdir = parseBuildWorkdir();
  if (c.from !== 'build' || !source.startsWith(`${buildWorkdir}/`)) throw new Error(`emulation: cannot copy ${source} from ${c.from}`);
  return path.join(ROOT, source.slice(buildWorkdir.length + 1));
}

const parseBuildWorkdir = (): string => /^WORKDIR (\S+)$/m.exec(dockerStages().find((s) => s.name === 'build')!.text)![1];

/** Lays out one COPY line under `app` (standing for `workdir`) as Docker does: a directory's contents, or files. */
function applyCopy(c: StageCopy, app: string, workdir: string): void {
  const dest = path.join(app, c.dest.startsWith('/') ? path.relative(workdir, c.dest) : c.dest);
  const intoDir = c.dest.endsWith('/') || c.sources.length > 1;
  for (const source of c.sources) {
    const from = checkoutPath(c, source);
    if (fs.statSync(from).isDirectory()) fs.cpSync(from, dest, { recursive: true });
    else {
      const to = intoDir ? path.join(dest, path.basename(source)) : dest;
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.copyFileSync(from, to);
    }
  }
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
  // What the stage runs: RUN npm ci --omit=dev (from the npm cache when it has everything).
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
 * Lays out stage `target`'s /app under `into` (made readable by the image's non-root user). The production
 * node_modules is not copied (or linked: a link into a checkout under a 0700 directory cannot be followed by
 * the image's uid, "Cannot find module 'prom-client'"): app/node_modules is a mount point for `binds`.
 */
export function buildImage(into: string, target = defaultTarget()): RuntimeImage {
  const stage = parseStage(target);
  if (!stage.productionDeps) throw new Error(`emulation: stage ${target} does not run npm ci --omit=dev`);
  const app = path.join(into, 'app');
  fs.mkdirSync(app, { recursive: true });
  for (const c of stage.copies) applyCopy(c, app, stage.workdir);
  const modules = path.join(productionModules(), 'node_modules');
  fs.mkdirSync(path.join(app, 'node_modules'));
  execFileSync('chmod', ['-R', 'a+rX', into]);
  return {
    target,
    app,
    modules,
    binds: [{ source: modules, target: path.join(app, 'node_modules') }],
    env: stage.env,
    user: stage.user,
    cmd: stage.cmd,
    ...(stage.healthcheck ? { healthcheck: stage.healthcheck } : {}),
    nodeImage: stage.nodeImage,
  };
}

/** The product image: the Dockerfile's default target. */
export const buildRuntimeImage = (into: string): RuntimeImage => buildImage(into, 'runtime');

/** Every file under `dir` (relative, '/'-separated), node_modules left out (the production dependencies). */
export function imageFiles(dir: string, rel = ''): string[] {
  return fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) => {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (p === 'node_modules') return [];
    return e.isDirectory() ? imageFiles(dir, p) : [p];
  });
}
