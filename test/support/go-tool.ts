// The tools the suites build from Go modules and cache (scripts/build-helm.sh, build-otelcol.sh,
// build-promtool.sh): run the script, take the binary it names on its last line, or the reason it cannot
// (exit 3: no Go toolchain, or no module proxy) for the suite to skip with. Anything else is a failure.
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';

export function provisionGoTool(root: string, script: string, timeoutMs: number): { bin?: string; skip?: string } {
  try {
    const out = execFileSync('bash', [path.join(root, 'scripts', script)], {
      encoding: 'utf8',
      timeout: timeoutMs,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { bin: out.trim().split('\n').pop() };
  } catch (e) {
    const err = e as { status?: number; stderr?: unknown };
    if (err.status === 3) return { skip: String(err.stderr ?? '').trim() || `scripts/${script}: no Go toolchain or module proxy` };
    throw e;
  }
}
