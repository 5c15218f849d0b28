// The bench's fourth target (configuration p): the previous release's sidecar and Envoy bootstrap, built from
// a commit of this repository into a temp directory (or taken from a dist the caller built), so that one run
// measures it beside the current code under the same load (issue 22 item 4).
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The commit the bench compares against unless told otherwise (--previous / BENCH_PREVIOUS). */
export const DEFAULT_PREVIOUS_REF = '15e85a4';

/**
 * The `dist` directory of `ref`, built once per commit under the temp directory: `git archive` of the commit,
 * this checkout's node_modules and .venv linked in (the dependencies of the compared releases are the same
 * packages; a release with other ones needs --previous-dist), then its own `tsc`.
 */
export function previousReleaseDist(root: string, ref: string, log: (line: string) => void): string {
  let sha: string;
  try {
    sha = execFileSync('git', ['-C', root, 'rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`--previous ${ref}: not a commit of ${root} (a shallow clone?); pass --previous-dist, or leave p out of --configs`);
  }
  const dir = path.join(os.tmpdir(), `cgw-bench-previous-${sha.slice(0, 12)}`);
  const dist = path.join(dir, 'dist');
  if (fs.existsSync(path.join(dist, 'src', 'main.js'))) return dist;
  log(`bench: building the previous release ${sha.slice(0, 12)} in ${dir}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const tar = path.join(dir, 'src.tar');
  execFileSync('git', ['-C', root, 'archive', '--format=tar', '-o', tar, sha]);
  execFileSync('tar', ['-xf', tar, '-C', dir]);
  fs.rmSync(tar);
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'));
  if (fs.existsSync(path.join(root, '.venv'))) fs.symlinkSync(fs.realpathSync(path.join(root, '.venv')), path.join(dir, '.venv'));
  execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(dir, 'tsconfig.json')], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return dist;
}

/**
 * A stack module of a previous release's dist: dist/tools/stack since issue 29 moved the stack out of the
 * product tree, dist/src/stack in the releases before (DEFAULT_PREVIOUS_REF among them).
 */
export function previousStackModule(dist: string, file: string): string {
  const now = path.join(dist, 'tools', 'stack', file);
  return fs.existsSync(now) ? now : path.join(dist, 'src/stack', file);
}
