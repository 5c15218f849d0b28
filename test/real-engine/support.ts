// The gateway in front of REAL inference servers: two llama.cpp `llama-server` replicas (built offline by
// scripts/build-llama-server.sh, SmolLM2-135M-Instruct from scripts/fetch-model.sh), the sidecar in this
// process (so its log records can be asserted) and the real Envoy binary, wired as test/support/stack.ts
// wires the fake engines.

import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { request } from 'undici';
import { loadConfig } from '../../src/config/env';
import { createLogger } from '../../src/obs/logger';
import { type Sidecar, startSidecar } from '../../src/sidecar';
import { ROUTER_CLUSTER, repoRoot } from '../../tools/stack/envoy-config';
import { logTail, type ManagedChild, type RunningEnvoy, spawnManaged, startEnvoy } from '../../tools/stack/envoy-process';
import { freePorts } from '../../tools/stack/ports';
import { type ClientResult, reassemble } from '../support/client';
import { captureLogs } from '../support/log-capture';

export const MODEL_FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf';

// ---------------------------------------------------------------------------------------------------------------
// Assets: the llama-server binary and the model
// ---------------------------------------------------------------------------------------------------------------

export interface RealEngineAssets {
  bin: string;
  model: string;
  version: string;
}

function versionOf(bin: string): string | null {
  try {
    const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 20_000 });
    if (r.status !== 0) return null;
    return `${r.stdout ?? ''}${r.stderr ?? ''}`.trim().split('\n').join(' | ');
  } catch {
    return null;
  }
}

/** Outside the clone, so a fresh CI clone on the same machine reuses the build (scripts use the same rule). */
function cacheBase(): string {
  return (
    process.env.GATEWAY_CACHE_DIR ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(require('node:os').homedir(), '.cache'), 'continuation-gateway')
  );
}

function cachedBinary(_root: string): string | null {
  if (process.env.LLAMA_SERVER_BIN) return process.env.LLAMA_SERVER_BIN;
  const dir = path.join(cacheBase(), 'llama-server');
  if (!fs.existsSync(dir)) return null;
  const found = fs
    .readdirSync(dir)
    .map((d) => path.join(dir, d, 'llama-server'))
    .filter((f) => fs.existsSync(f))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
  return found[0] ?? null;
}

/**
 * Finds the binary and the model. When either is missing and REAL_ENGINE_BUILD=1, runs the two scripts
 * (the build takes ~10 minutes on two cores); otherwise returns the reason to skip.
 */
export function locateAssets(): { assets: RealEngineAssets } | { skip: string } {
  const root = repoRoot();
  const model = process.env.REAL_ENGINE_MODEL ?? path.join(cacheBase(), 'models', MODEL_FILE);
  let bin = cachedBinary(root);
  const build = process.env.REAL_ENGINE_BUILD === '1';
  if ((!bin || !versionOf(bin)) && build) {
    const out = execFileSync('bash', [path.join(root, 'scripts', 'build-llama-server.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 90 * 60_000,
    });
    bin = out.trim().split('\n').pop() ?? null;
  }
  if (!fs.existsSync(model) && build) {
    execFileSync('bash', [path.join(root, 'scripts', 'fetch-model.sh')], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 10 * 60_000 });
  }
  const version = bin ? versionOf(bin) : null;
  if (!bin || !version) {
    return {
      skip: `no runnable llama-server (${bin ?? 'none in ~/.cache/continuation-gateway/llama-server/'}); run scripts/build-llama-server.sh or set REAL_ENGINE_BUILD=1`,
    };
  }
  if (!fs.existsSync(model)) return { skip: `model ${model} not found; run scripts/fetch-model.sh or set REAL_ENGINE_BUILD=1` };
  return { assets: { bin, model, version } };
}

// ---------------------------------------------------------------------------------------------------------------
// One llama-server replica (a fixed port, so it can be killed and restarted behind Envoy's STATIC cluster)
// ---------------------------------------------------------------------------------------------------------------

export interface ReplicaOptions {
  ctxSize?: number;
  parallel?: number;
  threads?: number;
  extraArgs?: string[];
}

export class LlamaReplica {
  private proc: ManagedChild | undefined;
  /** Every process this replica ran (for log tails after a kill). */
  readonly history: ManagedChild[] = [];
  starts = 0;

  constructor(
    readonly name: string,
    readonly port: number,
    private readonly assets: RealEngineAssets,
    private readonly o: ReplicaOptions = {},
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc && !this.proc.hasExited() ? this.proc.pid : undefined;
  }

  args(): string[] {
    return [
      '-m',
      this.assets.model,
      '--host',
      '127.0.0.1',
      '--port',
      String(this.port),
      '--ctx-size',
      String(this.o.ctxSize ?? 2048),
      '--parallel',
      String(this.o.parallel ?? 2),
      '--threads',
      String(this.o.threads ?? 1),
      '--threads-batch',
      String(this.o.threads ?? 1),
      '--no-webui',
      ...(this.o.extraArgs ?? []),
    ];
  }

  async start(timeoutMs = 120_000): Promise<void> {
    if (this.pid) throw new Error(`${this.name} is already running (pid ${this.pid})`);
    // LLAMA_SERVER_SLOTS_DEBUG=1: GET /slots also returns each slot's last prompt (detokenized, special
    // tokens included) and generated text. That is how the tests see what leg2 asked the engine.
    const proc = spawnManaged(this.assets.bin, this.args(), { name: this.name, env: { ...process.env, LLAMA_SERVER_SLOTS_DEBUG: '1' } });
    this.proc = proc;
    this.history.push(proc);
    this.starts++;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (proc.hasExited()) throw new Error(`${this.name} exited during start. Log tail:\n${logTail(proc.logs())}`);
      try {
        const r = await request(`${this.url}/health`, { headersTimeout: 2000, bodyTimeout: 2000 });
        const text = await r.body.text();
        if (r.statusCode === 200) return;
        void text;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await proc.stop();
        throw new Error(`${this.name} not healthy within ${timeoutMs} ms. Log tail:\n${logTail(proc.logs())}`);
      }
      await sleep(100);
    }
  }

  /** SIGKILL now (synchronously sent); resolves when the process is gone. */
  kill(): Promise<unknown> {
    const p = this.proc;
    if (!p || p.hasExited()) return Promise.resolve();
    process.kill(p.pid, 'SIGKILL');
    return p.exited;
  }

  async stop(): Promise<void> {
    await this.proc?.stop();
  }

  logs(): string {
    return this.history.map((p) => p.logs()).join(`\n----- ${this.name} restarted -----\n`);
  }

  /** GET /slots (with LLAMA_SERVER_SLOTS_DEBUG=1 it includes prompt and generated text). */
  async slots(): Promise<any[]> {
    const r = await request(`${this.url}/slots`, { headersTimeout: 5000, bodyTimeout: 5000 });
    const body = await r.body.text();
    if (r.statusCode !== 200) throw new Error(`${this.name} /slots ${r.statusCode}: ${body.slice(0, 300)}`);
    return JSON.parse(body);
  }

  /** The slot that ran the most recent task (highest id_task). */
  async lastTaskSlot(): Promise<any | undefined> {
    const slots = await this.slots();
    return slots.filter((s) => typeof s.id_task === 'number').sort((a, b) => b.id_task - a.id_task)[0];
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The stack
// ---------------------------------------------------------------------------------------------------------------

export interface RealStack {
  url: string;
  replicas: LlamaReplica[];
  sidecar: Sidecar;
  envoy: RunningEnvoy;
  logs: any[];
  records(filter: Record<string, unknown>): any[];
  waitForEnd(requestId: string, timeoutMs?: number): Promise<any>;
  /** Requests Envoy's router_tier cluster has in flight per upstream port (admin /clusters rq_active). */
  activeRequestsByPort(): Promise<Map<number, number>>;
  stop(): Promise<void>;
}

export async function startReplicas(assets: RealEngineAssets, n: number, o: ReplicaOptions = {}): Promise<LlamaReplica[]> {
  const ports = await freePorts(n);
  const replicas = ports.map((p, i) => new LlamaReplica(`llama-${String.fromCharCode(97 + i)}`, p, assets, o));
  // One after the other: two model loads at once on two cores only slow each other down.
  for (const r of replicas) await r.start();
  return replicas;
}

export async function startRealStack(replicas: LlamaReplica[], env: Record<string, string> = {}): Promise<RealStack> {
  const [listenPort, adminPort, egressPort, extProcPort] = await freePorts(4);
  const capture = captureLogs();
  const { sink, logs, records } = capture;
  // `{egress}` in a value stands for Envoy's egress listener (e.g. TOKENIZE_URL={egress}/tokenize: the
  // router tier's /tokenize, so a killed replica's calls are retried on the survivor, as the legs are).
  const egress = `http://127.0.0.1:${egressPort}`;
  const sidecarEnv: Record<string, string> = {
    // The deployment's model: SmolLM2 has no reasoning format, so the `plain` prefix family (bare delivered
    // text). REAL_ENGINE_CONTINUATION_MODEL=generic reproduces the <think></think> measurements.
    CONTINUATION_MODEL: process.env.REAL_ENGINE_CONTINUATION_MODEL ?? 'SmolLM2-135M-Instruct',
    CONTINUATION_ENGINE: 'llamacpp',
    // These suites measure the text path (the served template, the table, the counts); the continuation by
    // token ids, on by default for llama.cpp, has its own (token-ids.test.ts sets it back to auto).
    TOKEN_IDS_CONTINUATION: 'false',
    STALL_IDLE_TIMEOUT_SECONDS: '3',
    ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v.replace('{egress}', egress)])),
  };
  const config = loadConfig({
    ...sidecarEnv,
    DOWNSTREAM_URL: `http://127.0.0.1:${egressPort}`,
    PORT: String(extProcPort),
    ADMIN_PORT: sidecarEnv.ADMIN_PORT ?? '0',
    LOG_LEVEL: env.LOG_LEVEL ?? 'debug',
  });
  const sidecar = await startSidecar(config, createLogger(config.logLevel, sink));
  let envoy: RunningEnvoy;
  try {
    envoy = await startEnvoy({
      listenPort,
      adminPort,
      egressPort,
      extProcHost: '127.0.0.1',
      extProcPort,
      routerTier: replicas.map((r) => ({ host: '127.0.0.1', port: r.port })),
      stallTimeoutSeconds: Number(sidecarEnv.STALL_IDLE_TIMEOUT_SECONDS),
      maxStallSeconds: Number(sidecarEnv.MAX_STALL_SECONDS ?? 300),
      waitForExtProcHealthy: true,
    });
  } catch (e) {
    await sidecar.close();
    throw e;
  }
  return {
    url: `http://127.0.0.1:${listenPort}`,
    replicas,
    sidecar,
    envoy,
    logs,
    records,
    waitForEnd: (requestId: string, timeoutMs = 10_000) => capture.waitForEnd(requestId, timeoutMs),
    async activeRequestsByPort() {
      const r = await request(`${envoy.adminUrl}/clusters`, { headersTimeout: 2000, bodyTimeout: 2000 });
      const text = await r.body.text();
      const out = new Map<number, number>();
      // router_tier::127.0.0.1:41234::rq_active::1
      const re = new RegExp(`^${ROUTER_CLUSTER}::[^:]+:(\\d+)::rq_active::(\\d+)$`, 'gm');
      for (const m of text.matchAll(re)) out.set(Number(m[1]), Number(m[2]));
      return out;
    },
    async stop() {
      await envoy.stop();
      await sidecar.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// A streaming client that can act in the middle of the stream
// ---------------------------------------------------------------------------------------------------------------

export interface StreamProgress {
  /** Content-bearing chunks received so far. */
  contentChunks: number;
  content: string;
  /** Reasoning-bearing chunks (`delta.reasoning_content`) received so far, and their text. */
  reasoningChunks: number;
  reasoning: string;
}

/**
 * POSTs a streaming chat request and reads it event by event. `onContent` is awaited after each
 * content- or reasoning-bearing chunk, and reading pauses meanwhile: what the client has when it acts is exactly
 * `progress.content` and `progress.reasoning` (more bytes may already sit in socket buffers; they are read
 * afterwards).
 */
export async function streamChat(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  onContent?: (p: StreamProgress) => Promise<void> | void,
): Promise<ClientResult> {
  const res = await request(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    headersTimeout: 120_000,
    bodyTimeout: 120_000,
  });
  let raw = '';
  let pending = '';
  const progress: StreamProgress = { contentChunks: 0, content: '', reasoningChunks: 0, reasoning: '' };
  let transportError: string | null = null;
  try {
    for await (const chunk of res.body) {
      const text = chunk.toString('utf8');
      raw += text;
      pending += text;
      const blocks = pending.split(/\r?\n\r?\n/);
      pending = blocks.pop() as string;
      for (const block of blocks) {
        const data = block
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).trimStart())
          .join('\n');
        if (!data || data === '[DONE]') continue;
        let j: any;
        try {
          j = JSON.parse(data);
        } catch {
          continue;
        }
        const piece = (j.choices ?? []).map((c: any) => c?.delta?.content ?? '').join('');
        const thought = (j.choices ?? []).map((c: any) => c?.delta?.reasoning_content ?? '').join('');
        if (!piece && !thought) continue;
        if (piece) {
          progress.contentChunks++;
          progress.content += piece;
        }
        if (thought) {
          progress.reasoningChunks++;
          progress.reasoning += thought;
        }
        if (onContent) await onContent({ ...progress });
      }
    }
  } catch (e) {
    transportError = (e as Error).message;
  }
  return { status: res.statusCode, headers: res.headers, raw, transportError, ...reassemble(raw) };
}

/** Index of the first differing character (-1 when equal). */
export function firstDifference(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
