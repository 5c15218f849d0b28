// The Helm CLI for the chart gates (test/unit/deploy/helm-gates.test.ts, test/unit/deploy/helm-chart.test.ts): built from its Go
// module by scripts/build-helm.sh and cached (~/.cache/continuation-gateway/helm/); without a Go toolchain or the
// module proxy the suites skip, saying so.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../tools/stack/envoy-config';
import { provisionGoTool } from './go-tool';

/* eslint-disable @typescript-eslint/no-explicit-any */

export const ROOT = repoRoot();
export const CHART = path.join(ROOT, 'deploy', 'helm', 'continuation-gateway');

/** scripts/build-helm.sh: the cached binary, or why there is none (exit 3: no Go, no module proxy). */
export function provisionHelm(): { helm?: string; skip?: string } {
  const { bin, skip } = provisionGoTool(ROOT, 'build-helm.sh', 900_000);
  return { helm: bin, skip };
}

export interface Run {
  code: number;
  /** stdout and stderr */
  out: string;
  stdout: string;
}

/** Runs bin (never a shell); a non-zero exit is a result, not an error. */
export function run(bin: string, args: string[], env?: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { cwd: ROOT, timeout: 120_000, maxBuffer: 32 * 1024 * 1024, env: env ?? process.env }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? Number(err.code) : 0, out: `${stdout}${stderr}`, stdout });
    });
  });
}

/** The objects of a YAML stream (empty documents dropped). */
export function docsOfYaml(text: string): any[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS())
    .filter((d) => d != null);
}

/** A tool of the project's .venv (scripts/python-deps.sh). */
export function venvTool(name: string): string {
  const p = path.join(process.env.VENV_DIR ?? path.join(ROOT, '.venv'), 'bin', name);
  if (!fs.existsSync(p)) throw new Error(`${name} not found in ${path.dirname(p)}: bash scripts/python-deps.sh`);
  return p;
}
