// `npm run bench`: streaming load against the same fake engines (a) directly, (b) through Envoy's egress
// listener (plain Envoy proxying, no ext_proc: same Envoy process and bootstrap), (c) through the full stack
// (front listener -> ext_proc sidecar -> egress -> engines), at several concurrency levels; then a recovery
// benchmark (replica killed mid-answer) and a crash-under-load run (N streams over 4 engine processes, one
// SIGKILLed once every stream is streaming, the sidecar on its default settings). Every actor is its own process: the generator (forked, IPC), the
// engines (node dist/tools/fake-engine/main.js), Envoy (startEnvoy) and the sidecar (node dist/src/main.js).
//
// Options (flag, or environment variable):
//   --levels 50,200,500,1000   BENCH_LEVELS         concurrent streams per level
//   --duration 6               BENCH_DURATION_S     closed loop: workers start new streams until then (s)
//   --tps 20                   BENCH_TOKENS_PER_S   tokens per second per stream (engine --token-ms 1000/T)
//   --answer 50,50             BENCH_ANSWER_TOKENS  x-fake-answer-tokens R,C (reasoning, content) per stream
//   --engines 2                BENCH_ENGINES        fake-engine processes behind Envoy's router tier
//   --configs a,b,c            BENCH_CONFIGS        which configurations to run
//   --recovery 50              BENCH_RECOVERY       streams in the recovery benchmark (0 = skip)
//   --crash 500                BENCH_CRASH          streams in the crash-under-load run (0 = skip)
//   --crash-engines 4          BENCH_CRASH_ENGINES  engine processes in that run (one of them is SIGKILLed)
//   --crash-answer R,C         BENCH_CRASH_ANSWER   answer size in that run (default: --answer)
//   --crash-only               BENCH_CRASH_ONLY=1   only the crash-under-load run (no levels, recovery, idle runs)
//   --crash-template FILE      BENCH_CRASH_TEMPLATE in that run the engines serve this chat template and the sidecar
//                                                  has it as CHAT_TEMPLATE (the template path: every leg 2 rendered
//                                                  and verified here); its cost per continuation is reported
//   --crash-tokenizer PATH     BENCH_CRASH_TOKENIZER in that run the sidecar counts each continuation in process with
//                                                  this tokenizer.json (or model directory) as TOKENIZER; the cost
//                                                  of counting per continuation is reported in every crash run
//   --idle-streams 1000        BENCH_IDLE_STREAMS   open streams held idle for the memory measurement (0 = skip)
//   --ramp-ms 1000             BENCH_RAMP_MS        stream starts spread over this long
//   --pause-ms 1000            BENCH_PAUSE_MS       pause between two runs
//   --idle-s 3                 BENCH_IDLE_S         idle-CPU window before the first level (0 = skip)
//   --workers N                BENCH_WORKERS        passed to the sidecar as WORKERS (when it supports it)
//   --workers-w N              BENCH_WORKERS_W      configuration w: (c) on a stack of its own with WORKERS=N (2)
//                                                  configuration u: (c) on a stack of its own with UPSTREAM_HTTP2=true
//   --cpu-prof                 BENCH_PROFILE=1      run the sidecar under node --cpu-prof and analyse it
//   --otel                     BENCH_OTEL=1         the sidecar exports traces (OTEL_EXPORTER_OTLP_ENDPOINT) to an OTLP
//                                                  sink in this process, which counts and discards them (Envoy's tracer off)
//                              BENCH_ENGINE_DIALECT vllm: the engines speak vLLM (with CONTINUATION_ENGINE=vllm in the
//                                                  environment leg 1 is asked for its token ids; configuration t is the
//                                                  same stack with TOKEN_IDS_CONTINUATION=false: the A/B of issue 34)
//   --out DIR                  BENCH_OUT            default results/bench-<timestamp>
//   --no-docs                  BENCH_NO_DOCS=1      do not copy the chart to docs/bench/latest.svg
//                              BENCH_SIDECAR_NODE_FLAGS  the sidecar's node flags, space-separated (default: the
//                                                  product's, src/config/node-flags.ts; `none` for none): an A/B
import { type ChildProcess, execFileSync, fork } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SIDECAR_NODE_FLAGS } from '../../src/config/node-flags';
import { readTemplateFiles } from '../../src/templates/source';
import { answerFor } from '../../tools/fake-engine/answer';
import { planTemplateAnswer, templateModel } from '../../tools/fake-engine/template-model';
import { type ManagedChild, type RunningEnvoy, spawnManaged, startEnvoy } from '../../tools/stack/envoy-process';
import { freePorts } from '../../tools/stack/ports';
import { analyseProfile, formatProfile, type ProfileSummary } from './cpuprofile';
import { type LoadResult, type LoadSpec, type RunMessage, requestMessages, type StreamRecord, streamError } from './generator';
import { type OtlpSink, startOtlpSink } from './otlp-sink';
import { DEFAULT_PREVIOUS_REF, previousReleaseDist, previousStackModule } from './previous-release';
import { processTree, rssBytes, TreeMeter } from './proc';
import { type ChartPanel, cdfChart, cdfPoints, round, type Summary, sortedFloat64, summarize } from './stats';

const ROOT = path.resolve(__dirname, '../../..');
const DIST = path.join(ROOT, 'dist');

export type ConfigName = 'a' | 'b' | 'c' | 'n' | 'h' | 'p' | 'w' | 'u' | 't';
export const CONFIG_NAMES: readonly ConfigName[] = ['a', 'b', 'n', 'c', 'h', 'p', 'w', 'u', 't'];
export const CONFIG_LABEL: Record<ConfigName, string> = {
  a: '(a) direct to engines',
  b: '(b) Envoy only (egress listener)',
  c: '(c) full stack (ext_proc sidecar)',
  n: '(n) native: the full stack, nothing in scope',
  h: '(h) full stack without the memory-cap hop',
  p: '(p) previous release, full stack',
  w: '(w) full stack, the sidecar with --workers-w processes',
  u: '(u) full stack, legs over HTTP/2 (UPSTREAM_HTTP2=true)',
  t: '(t) full stack, leg 1 not asked for token ids (TOKEN_IDS_CONTINUATION=false)',
};
const CONFIG_COLOR: Record<ConfigName, string> = {
  a: '#2b8a3e',
  b: '#1c7ed6',
  c: '#e8590c',
  n: '#7048e8',
  h: '#f08c00',
  p: '#868e96',
  w: '#c2255c',
  u: '#0b7285',
  t: '#862e9c',
};
/** Configurations with a sidecar of their own in the path (its CPU and memory are reported). */
const WITH_SIDECAR: ReadonlySet<ConfigName> = new Set(['c', 'n', 'h', 'p', 'w', 'u', 't']);
/** Configurations served by a stack of their own (n, h, p, w, u), beside the main one (a, b, c). */
const OWN_STACK: ReadonlySet<ConfigName> = new Set(['n', 'h', 'p', 'w', 'u', 't']);

export interface BenchOptions {
  levels: number[];
  durationS: number;
  tokensPerSecond: number;
  answerTokens: string;
  engines: number;
  configs: ConfigName[];
  recovery: number;
  /** Crash under load: streams, engine processes (one is killed), answer size "R,C". */
  crash: number;
  crashEngines: number;
  crashAnswer: string;
  /** The crash run's engines serve this template, the sidecar reads it as CHAT_TEMPLATE (the template path). */
  crashTemplate?: string;
  /** The crash run's sidecar counts with this tokenizer.json (or model directory) as TOKENIZER. */
  crashTokenizer?: string;
  idleStreams: number;
  rampMs: number;
  /** Pause between two runs (ms) and the idle-CPU window before the first level (s; 0 = skip). */
  pauseMs: number;
  idleS: number;
  workers?: string;
  /** Configuration w: the sidecar's WORKERS there (the worker-count A/B against c in one run). */
  workersW: string;
  /** Runs of every configuration per level, alternating (a b c a b c ...): same-run A/B pairs. */
  rounds: number;
  /** Configuration p: the commit to build (default DEFAULT_PREVIOUS_REF), or an already built dist of it. */
  previousRef: string;
  previousDist?: string;
  cpuProf: boolean;
  /** The sidecar's tracing on, exporting to an OTLP sink (otlp-sink.ts). */
  otel: boolean;
  outDir: string;
  copyToDocs: boolean;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
}

export interface RunSummary {
  config: ConfigName;
  level: number;
  /** Which of the --rounds alternations (1-based). */
  round: number;
  streams: number;
  errors: number;
  errorSamples: string[];
  chunks: number;
  bytes: number;
  wallMs: number;
  gaps: Summary;
  /** gap - expected gap */
  addedP50: number;
  addedP99: number;
  ttft: Summary;
  total: Summary;
  cdf: Array<[number, number]>;
  cpuMs: { envoy: number; sidecar: number; engines: number; generator: number };
  cpuPer1kChunks: { envoy: number; sidecar: number; engines: number };
  rss: { envoyIdle: number; envoyPeak: number; sidecarIdle: number; sidecarPeak: number };
  sidecarBytesPerStream: number;
  /**
   * The same CPU, split: measured over a window in the middle of the level in which (almost) no stream
   * starts or ends, it is the cost of relaying alone; what remains of the total, divided by the streams, is
   * the cost of starting and ending one stream (ext_proc stream, request body, leg request, headers).
   */
  steady?: SteadyWindow;
  /** Processes in the sidecar's tree (1 = single process; 1 + N with WORKERS=N cluster workers). */
  sidecarProcesses: number;
  /**
   * Chat requests of this run that Envoy sent past the sidecar (http.front_chat.ext_proc.failure_mode_allowed:
   * a health check of the sidecar failed, docs/envoy.md (d)); undefined without a sidecar. Above 0, part of the
   * run was plain proxying and its figures are not the continuation path's.
   */
  bypassed?: number;
}

export interface SteadyWindow {
  windowMs: number;
  chunks: number;
  /** Streams that started inside the window (0 or close to it: the window is churn-free by construction). */
  starts: number;
  cpuPer1kChunks: { envoy: number; sidecar: number };
  /** (total sidecar CPU - steady per-chunk cost x all chunks) / streams. */
  sidecarMsPerStream: number;
  /** Inter-chunk gaps whose both ends fall in the window: latency while only relaying, no stream starting. */
  gaps: Summary;
}

/** Sidecar memory with N streams open and waiting for their next token (nothing relayed meanwhile). */
export interface IdleMemory {
  streams: number;
  errors: number;
  rssBeforeMiB: number;
  rssIdleStreamsMiB: number;
  kibPerStream: number;
  /** The sidecar's heap + external memory per idle stream after GC (idle-memory.ts), when it ran. */
  liveKibPerStream?: number;
}

export interface RecoverySummary {
  streams: number;
  errors: number;
  errorSamples: string[];
  complete: number;
  /** Largest gap of each stream (the crash point), and that minus one token interval (crash -> first leg2 delta). */
  crashGap: Summary;
  crashToLeg2: Summary;
}

/** Crash under load: what the clients received, and what the sidecar's /metrics and decision logs say. */
export interface CrashSummary {
  streams: number;
  engines: number;
  /** The engine process SIGKILLed, and when (ms after the first stream started). */
  killed: string;
  killedAtMs: number;
  /** Streams that had received their first delta when the engine was killed (the kill waits for all of them). */
  streamingAtKill: number;
  answerTokens: string;
  tokensPerSecond: number;
  /** Status 200, one finish_reason, [DONE], no error event, the text identical to the engine's uninterrupted answer. */
  complete: number;
  completePercent: number;
  errors: number;
  errorSamples: string[];
  /** Streams that ended cleanly but with another text or several finish_reasons (should be 0). */
  wrongText: number;
  /** Streams whose first leg ran on the killed engine and was still going at the kill (client side, by completion id). */
  affected: number;
  affectedComplete: number;
  /** Per affected stream: kill -> first data event of the continuation at the client (ms). */
  crashToLeg2: Summary;
  /** Streams not on the killed engine: their largest inter-chunk gap in the 2 s after the kill (what the crash costs the others). */
  othersMaxGap: Summary;
  sidecar: {
    /** Decision log counts: TRIGGERED (failure detected), SUCCEEDED with leg 2 (continued), RECOVERY_REFUSED, BRAKE_OPEN. */
    triggered: number;
    continued: number;
    refusedLogged: number;
    brakeOpened: number;
    errorLines: number;
    /** Kill -> TRIGGERED log line (failure detected by the sidecar), per stream (ms; the log's ms clock). */
    detection: Summary;
    /** Processes in the sidecar's tree (its default WORKERS: one per core, plus the cluster primary). */
    processes: number;
    /** continuation_gateway_recovery_refusals_total by reason:phase. */
    refusals: Record<string, number>;
    /** Recoveries admitted (continuation_gateway_recovery_wait_seconds count, outcome=admitted), those that had to wait, timed out. */
    admitted: number;
    waited: number;
    timedOut: number;
    /** Wait for a re-prefill slot per admitted recovery (ms): the RECOVERY_ADMITTED waited_ms, 0 for the others. */
    queueWait: Summary;
    /** The same p99 read from the histogram: the upper bound of its bucket (s -> ms). */
    queueWaitP99BucketMs: number;
    /** continuation_gateway_reprefills_in_flight_peak at the end; the largest continuation_gateway_reprefill_limit polled every 100 ms. */
    reprefillsInFlightMax: number;
    reprefillLimitMax: number;
    /** The smallest continuation_gateway_reprefill_limit polled after the kill, and the one at the end (RECOVERY_ADAPTIVE moves it). */
    reprefillLimitMinAfterKill?: number;
    reprefillLimitAtEnd?: number;
    /** Most recoveries waiting at once: from the RECOVERY_ADMITTED lines (each waited [time - waited_ms, time]). */
    waitingMax: number;
    /** continuation_gateway_recovery_latency_seconds: failure detected -> first byte of leg 2 (count, mean, p99 bucket bound). */
    recoveryLatency: { n: number; meanMs: number; p99BucketMs: number };
    /** continuation_gateway_continuation_prepare_seconds: a leg 2's design (and, with a template, its renders and verification). */
    prepare: { n: number; meanMs: number; p99BucketMs: number; source: string };
    /** continuation_gateway_continuation_count_seconds: counting a continuation (usage, leg 2's budget), by method. */
    count: { n: number; meanMs: number; p99BucketMs: number; method: string };
  };
  node: string;
}

export interface BenchResult {
  startedAt: string;
  options: Omit<BenchOptions, 'log'>;
  machine: { loadAvgAtStart: number[]; cpus: number; cpuModel: string; node: string; memGiB: number; envoyConcurrency: number };
  expectedGapMs: number;
  idle?: { envoyCpuMsPerS: number; sidecarCpuMsPerS: number; sidecarProcesses: number };
  runs: RunSummary[];
  recovery?: RecoverySummary;
  crash?: CrashSummary;
  idleMemory?: IdleMemory;
  profile?: ProfileSummary[];
  targets: Array<{ target: string; value: string; met: boolean | null }>;
  table: string;
  outDir: string;
}

// ---------------------------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------------------------

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): BenchOptions {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const key = a.slice(2);
    if (key === 'cpu-prof' || key === 'no-docs' || key === 'crash-only' || key === 'otel') flags.set(key, '1');
    else {
      const v = argv[++i];
      if (v === undefined) throw new Error(`missing value for ${a}`);
      flags.set(key, v);
    }
  }
  const get = (flag: string, envName: string, def: string) => flags.get(flag) ?? env[envName] ?? def;
  const nums = (s: string) =>
    s
      .split(',')
      .map((x) => Number(x.trim()))
      .filter((n) => Number.isFinite(n) && n > 0);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').replace(/Z$/, '');
  const configs = get('configs', 'BENCH_CONFIGS', 'a,b,n,c,h,p')
    .split(',')
    .map((s) => s.trim()) as ConfigName[];
  for (const c of configs) if (!CONFIG_NAMES.includes(c)) throw new Error(`bad configuration ${c} (${CONFIG_NAMES.join(', ')})`);
  const truthy = (v: string | undefined) => v !== undefined && !['', '0', 'false', 'no'].includes(v.toLowerCase());
  const crashOnly = flags.has('crash-only') || truthy(env.BENCH_CRASH_ONLY);
  const answerTokens = get('answer', 'BENCH_ANSWER_TOKENS', '50,50');
  const o: BenchOptions = {
    levels: nums(get('levels', 'BENCH_LEVELS', '50,200,500,1000')),
    durationS: Number(get('duration', 'BENCH_DURATION_S', '6')),
    tokensPerSecond: Number(get('tps', 'BENCH_TOKENS_PER_S', '20')),
    answerTokens,
    engines: Number(get('engines', 'BENCH_ENGINES', '2')),
    configs,
    recovery: Number(get('recovery', 'BENCH_RECOVERY', '50')),
    crash: Number(get('crash', 'BENCH_CRASH', '500')),
    crashEngines: Number(get('crash-engines', 'BENCH_CRASH_ENGINES', '4')),
    crashAnswer: get('crash-answer', 'BENCH_CRASH_ANSWER', answerTokens),
    crashTemplate: flags.get('crash-template') ?? env.BENCH_CRASH_TEMPLATE,
    crashTokenizer: flags.get('crash-tokenizer') ?? env.BENCH_CRASH_TOKENIZER,
    idleStreams: Number(get('idle-streams', 'BENCH_IDLE_STREAMS', '1000')),
    rampMs: Number(get('ramp-ms', 'BENCH_RAMP_MS', '1000')),
    pauseMs: Number(get('pause-ms', 'BENCH_PAUSE_MS', '1000')),
    idleS: Number(get('idle-s', 'BENCH_IDLE_S', '3')),
    workers: flags.get('workers') ?? env.BENCH_WORKERS,
    workersW: get('workers-w', 'BENCH_WORKERS_W', '2'),
    rounds: Number(get('rounds', 'BENCH_ROUNDS', '1')),
    previousRef: get('previous', 'BENCH_PREVIOUS', DEFAULT_PREVIOUS_REF),
    previousDist: flags.get('previous-dist') ?? env.BENCH_PREVIOUS_DIST,
    cpuProf: flags.has('cpu-prof') || truthy(env.BENCH_PROFILE),
    otel: flags.has('otel') || truthy(env.BENCH_OTEL),
    outDir: path.resolve(get('out', 'BENCH_OUT', path.join(ROOT, 'results', `bench-${stamp}`))),
    copyToDocs: !(flags.has('no-docs') || truthy(env.BENCH_NO_DOCS)),
  };
  if (!(Number.isInteger(o.rounds) && o.rounds >= 1)) throw new Error(`bad --rounds ${o.rounds} (1 or more)`);
  if (!/^\d+,\d+$/.test(o.crashAnswer)) throw new Error(`bad --crash-answer ${o.crashAnswer} (R,C)`);
  if (o.crash > 0 && !(o.crashEngines >= 2)) throw new Error('--crash-engines must be at least 2 (one is killed, the others take over)');
  if (crashOnly) Object.assign(o, { levels: [], recovery: 0, idleStreams: 0, idleS: 0, crash: o.crash > 0 ? o.crash : 500 });
  return o;
}

/**
 * The text a crash-run stream must end with: the fake engine's answer (answerFor), or, with --crash-template, the
 * answer the template's model writes as its engines split it (the same code: tools/fake-engine/template-model.ts).
 */
function crashExpectedText(o: BenchOptions, r: number, c: number): (n: number) => string {
  const messages = (n: number) => requestMessages({ distinctPrompt: 'Crash under load: stream' }, n);
  if (!o.crashTemplate) {
    return (n) => {
      const a = answerFor(messages(n), { reasoning: r, content: c });
      return a.reasoningTokens.join('') + a.contentTokens.join('');
    };
  }
  const files = readTemplateFiles(o.crashTemplate);
  const tm = templateModel({ text: files.templates.default ?? '', special: files.special, parser: 'markers' });
  return (n) => {
    const body = { model: 'm', stream: true, messages: messages(n) };
    const planned = planTemplateAnswer(body, 'sglang', tm, answerFor(messages(n), { reasoning: r, content: c }), new Date());
    if (!planned.ok) throw new Error(`--crash-template: ${planned.message}`);
    return planned.plan.deltas
      .map((d) => (d.kind === 'reasoning' || d.kind === 'content' ? d.text : d.kind === 'split' ? d.reasoning + d.content : ''))
      .join('');
  };
}

/** continuation_gateway_continuation_count_seconds for one method: count, mean, p99 bucket bound (ms). */
function countOf(samples: Sample[], method: string): CrashSummary['sidecar']['count'] {
  const n = metricSum(samples, 'continuation_gateway_continuation_count_seconds_count', { method });
  const sum = metricSum(samples, 'continuation_gateway_continuation_count_seconds_sum', { method });
  return {
    n,
    meanMs: n ? round((1000 * sum) / n, 3) : NaN,
    p99BucketMs: histogramQuantileBound(samples, 'continuation_gateway_continuation_count_seconds', 0.99, { method }) * 1000,
    method,
  };
}

/** continuation_gateway_continuation_prepare_seconds for one source: count, mean, p99 bucket bound (ms). */
function prepareOf(samples: Sample[], source: string): CrashSummary['sidecar']['prepare'] {
  const n = metricSum(samples, 'continuation_gateway_continuation_prepare_seconds_count', { source });
  const sum = metricSum(samples, 'continuation_gateway_continuation_prepare_seconds_sum', { source });
  return {
    n,
    meanMs: n ? round((1000 * sum) / n, 3) : NaN,
    p99BucketMs: histogramQuantileBound(samples, 'continuation_gateway_continuation_prepare_seconds', 0.99, { source }) * 1000,
    source,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------------------------

async function startEngines(n: number, tokenMs: number, prefix: string, extraArgs: string[] = []): Promise<ManagedChild[]> {
  const ports = await freePorts(n);
  const engines = ports.map((port, i) =>
    spawnManaged(
      process.execPath,
      [
        path.join(DIST, 'tools/fake-engine/main.js'),
        '--port',
        String(port),
        '--name',
        `${prefix}-${i}`,
        '--dialect',
        // BENCH_ENGINE_DIALECT=vllm (with CONTINUATION_ENGINE=vllm): leg 1 asked for its token ids (configuration t: not).
        process.env.BENCH_ENGINE_DIALECT === 'vllm' ? 'vllm' : 'sglang',
        '--token-ms',
        String(tokenMs),
        ...extraArgs,
      ],
      { name: `${prefix}-${i}`, keepBytes: 20_000 },
    ),
  );
  await Promise.all(engines.map((e) => e.waitForLine(/^FAKE_ENGINE .* listening/, 15_000, 'FAKE_ENGINE listening')));
  (engines as Array<ManagedChild & { port?: number }>).forEach((e, i) => (e.port = ports[i]));
  return engines;
}

interface Gateway {
  envoy: RunningEnvoy;
  sidecar: ManagedChild;
  frontUrl: string;
  egressUrl: string;
  /** With --otel: where the sidecar's spans went (counted). */
  sink?: OtlpSink;
  stop(): Promise<void>;
}

/**
 * Settings the crash-under-load run must not inherit from the caller's environment: it measures what the
 * sidecar's defaults do (recovery admission, brake, stall timers, log level).
 */
const TUNABLES = /^(RECOVERY_|MAX_RECOVERY_|STALL_|MAX_STALL_|LOG_LEVEL$|CONNECT_TIMEOUT|UPSTREAM_)/;

interface GatewayOptions {
  profileDir?: string;
  /** The sidecar's default settings (no RECOVERY_* overrides, LOG_LEVEL info) instead of the bench's. */
  defaults?: boolean;
  /** A fixed admin port (/metrics); default: an ephemeral one nobody reads. */
  adminPort?: number;
  /** Every line the sidecar writes (its pino log). */
  onLine?: (line: string) => void;
  /** Another build's dist (configuration p): its sidecar and its Envoy bootstrap. */
  dist?: string;
  /** Nothing in scope (configuration n): CONTINUATION_MODEL unset, so the sidecar answers CONTINUE. */
  native?: boolean;
  /** false: Envoy without the memory-cap chat hop (configuration h; envoy-config.ts chatHop). */
  chatHop?: boolean;
  /** Sidecar variables on top of the defaults (the adaptive-admission comparison, test/bench/adaptive.ts). */
  env?: Record<string, string>;
  /** The sidecar's WORKERS, over --workers (configuration w). */
  workers?: string;
}

async function startGateway(enginePorts: number[], o: BenchOptions, g: GatewayOptions = {}): Promise<Gateway> {
  const { profileDir } = g;
  const [listenPort, adminPort, egressPort, extProcPort] = await freePorts(4);
  const inherited = g.defaults ? Object.fromEntries(Object.entries(process.env).filter(([k]) => !TUNABLES.test(k))) : process.env;
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    DOWNSTREAM_URL: `http://127.0.0.1:${egressPort}`,
    PORT: String(extProcPort),
    ADMIN_PORT: String(g.adminPort ?? 0),
    CONTINUATION_MODEL: 'generic',
    ...g.env,
    ...(g.defaults
      ? {}
      : {
          LOG_LEVEL: 'warn',
          // The recovery benchmark kills many streams at once; the default 20 % share would queue most of them.
          RECOVERY_BUDGET_PERCENT: '100',
          RECOVERY_MAX_CONCURRENT: '100000',
        }),
  };
  if (g.native) delete env.CONTINUATION_MODEL;
  if (o.workers !== undefined) env.WORKERS = o.workers;
  if (g.workers !== undefined) env.WORKERS = g.workers;
  const sink: OtlpSink | undefined = o.otel ? await startOtlpSink() : undefined;
  if (sink) env.OTEL_EXPORTER_OTLP_ENDPOINT = sink.url;
  const dist = g.dist ?? DIST;
  const args = [...(profileDir ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []), ...sidecarNodeFlags(), path.join(dist, 'src/main.js')];
  const sidecar = spawnManaged(process.execPath, args, { name: 'sidecar', env, keepBytes: 50_000, onLine: g.onLine });
  await sidecar.waitForLine(/SIDECAR listening/, 20_000, 'SIDECAR listening');
  let envoy: RunningEnvoy;
  // The previous release starts Envoy with its own bootstrap generator.
  const start: typeof startEnvoy = g.dist ? require(previousStackModule(g.dist, 'envoy-process.js')).startEnvoy : startEnvoy;
  try {
    envoy = await start({
      ...(g.chatHop === false ? { chatHop: false } : {}),
      listenPort,
      adminPort,
      egressPort,
      extProcHost: '127.0.0.1',
      extProcPort,
      routerTier: enginePorts.map((port) => ({ host: '127.0.0.1', port })),
      // The sidecar's defaults (STALL_IDLE_TIMEOUT_SECONDS, MAX_STALL_SECONDS): Envoy's timers follow them.
      stallTimeoutSeconds: 20,
      maxStallSeconds: 300,
      logLevel: 'warn',
      // What `npm run stack` and deploy/ use: a check the sidecar's event loop answers, so a saturated sidecar
      // can fail it (counted per run: RunSummary.bypassed). A TCP check would pass on the kernel's accept alone.
      extProcHealthCheck: 'grpc',
    });
  } catch (e) {
    await sidecar.stop();
    throw e;
  }
  return {
    envoy,
    sidecar,
    frontUrl: `http://127.0.0.1:${listenPort}`,
    egressUrl: envoy.egressUrl,
    sink,
    async stop() {
      await envoy.stop();
      await sidecar.stop();
      await sink?.close();
    },
  };
}

export class Generator {
  private constructor(private readonly child: ChildProcess) {}

  static async start(): Promise<Generator> {
    const child = fork(path.join(__dirname, 'generator.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
    process.once('exit', () => child.kill('SIGKILL'));
    await new Promise<void>((resolve, reject) => {
      child.once('message', (m: any) => (m?.type === 'ready' ? resolve() : reject(new Error('generator: unexpected first message'))));
      child.once('exit', (code) => reject(new Error(`generator exited (${code}) before ready`)));
    });
    return new Generator(child);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** `onStreaming`: called (with the generator's clock, epoch ms) once spec.notifyStreaming streams have had their first delta. */
  run(
    spec: Omit<LoadSpec, 'headersFor' | 'onStreaming'>,
    uniqueFault?: string,
    onStreaming?: (atEpochMs: number) => void,
  ): Promise<LoadResult> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => {
        this.child.off('message', onMessage);
        reject(new Error(`generator exited (${code}) during a run`));
      };
      const onMessage = (m: any) => {
        if (m?.type === 'streaming') return onStreaming?.(m.atEpochMs as number);
        this.child.off('exit', onExit);
        this.child.off('message', onMessage);
        if (m?.type === 'result') resolve(m.result as LoadResult);
        else reject(new Error(`generator: ${m?.message ?? 'bad message'}`));
      };
      this.child.once('exit', onExit);
      this.child.on('message', onMessage);
      const msg: RunMessage = { type: 'run', spec, uniqueFault };
      this.child.send(msg);
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.send({ type: 'exit' });
    setTimeout(() => this.child.kill('SIGKILL'), 2000).unref();
    await exited;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One level, one configuration
// ---------------------------------------------------------------------------------------------------------------

/**
 * Envoy's count of chat requests sent past the sidecar (fail-open) so far, summed over the listeners that run
 * ext_proc (front_chat; front without the chat hop); NaN if Envoy does not answer.
 */
async function failOpenCount(g: Gateway): Promise<number> {
  try {
    const res = await fetch(`${g.envoy.adminUrl}/stats?filter=${encodeURIComponent('\\.ext_proc\\.failure_mode_allowed$')}`, {
      signal: AbortSignal.timeout(5000),
    });
    const counts = [...(await res.text()).matchAll(/: (\d+)$/gm)].map((m) => Number(m[1]));
    return counts.length ? counts.reduce((a, b) => a + b, 0) : NaN;
  } catch {
    return NaN;
  }
}

function gapsOf(streams: StreamRecord[]): number[] {
  const gaps: number[] = [];
  for (const s of streams) {
    if (s.firstDelta < 0) continue;
    for (let j = s.firstDelta + 1; j < s.events.length; j++) gaps.push(s.events[j] - s.events[j - 1]);
  }
  return gaps;
}

function errorsOf(streams: StreamRecord[]): { count: number; samples: string[] } {
  const errs = streams.map((s) => streamError(s)).filter((e): e is string => e !== undefined);
  const counts = new Map<string, number>();
  for (const e of errs) counts.set(e, (counts.get(e) ?? 0) + 1);
  const distinct = [...counts].slice(0, 5).map(([e, n]) => `${e} (${n})`);
  return { count: errs.length, samples: distinct };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WindowCpu {
  fromEpochMs: number;
  toEpochMs: number;
  envoy: number;
  sidecar: number;
}

/**
 * CPU read at the edges of the churn-free middle of a level: every worker's first stream has started once
 * the ramp is over, and none ends before it has lasted a whole answer (the bench's answers last ~5 s).
 * Window = [ramp + 1 s, min(duration, ramp + 4 s)]; none when that is shorter than a second.
 */
function steadyWindow(o: BenchOptions, meters: { envoy: TreeMeter; sidecar: TreeMeter }): { done: Promise<WindowCpu | undefined> } {
  const from = o.rampMs + 1000;
  const to = Math.min(o.durationS * 1000, from + 3000);
  if (to - from < 1000) return { done: Promise.resolve(undefined) };
  const done = (async () => {
    await sleep(from);
    const a = { at: Date.now(), envoy: meters.envoy.cpuSoFar(), sidecar: meters.sidecar.cpuSoFar() };
    await sleep(to - from);
    const b = { at: Date.now(), envoy: meters.envoy.cpuSoFar(), sidecar: meters.sidecar.cpuSoFar() };
    return { fromEpochMs: a.at, toEpochMs: b.at, envoy: b.envoy - a.envoy, sidecar: b.sidecar - a.sidecar };
  })();
  return { done };
}

function steadySummary(w: WindowCpu, streams: StreamRecord[], sidecarTotalMs: number): SteadyWindow {
  let chunks = 0;
  let starts = 0;
  let total = 0;
  const gaps: number[] = [];
  const inWindow = (at: number) => at >= w.fromEpochMs && at < w.toEpochMs;
  for (const s of streams) {
    total += s.events.length;
    if (inWindow(s.startEpochMs)) starts++;
    for (let j = 0; j < s.events.length; j++) {
      const at = s.startEpochMs + s.events[j];
      if (!inWindow(at)) continue;
      chunks++;
      if (s.firstDelta >= 0 && j > s.firstDelta && inWindow(s.startEpochMs + s.events[j - 1])) gaps.push(s.events[j] - s.events[j - 1]);
    }
  }
  const per1k = (ms: number) => (chunks ? round((ms * 1000) / chunks, 2) : NaN);
  const sidecarPerChunk = chunks ? w.sidecar / chunks : NaN;
  return {
    windowMs: Math.round(w.toEpochMs - w.fromEpochMs),
    chunks,
    starts,
    cpuPer1kChunks: { envoy: per1k(w.envoy), sidecar: per1k(w.sidecar) },
    sidecarMsPerStream: streams.length ? round((sidecarTotalMs - sidecarPerChunk * total) / streams.length, 2) : NaN,
    gaps: roundSummary(summarize(sortedFloat64(gaps))),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------------------------

const f1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '-');
const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '-');

function pad(rows: string[][], left = 2): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => (i < left ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i < left ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(rows[0]), rule, ...rows.slice(1).map(line)].join('\n');
}

export function formatCrash(k: CrashSummary): string {
  const sc = k.sidecar;
  const refusals =
    Object.entries(sc.refusals)
      .map(([r, n]) => `${r} ${n}`)
      .join(', ') || '0';
  return [
    `crash under load: ${k.streams} streams over ${k.engines} engine processes (answer ${k.answerTokens} tokens at ${k.tokensPerSecond} tokens/s), ` +
      `${k.killed} SIGKILLed ${k.killedAtMs} ms after the first stream started (${k.streamingAtKill} streams had their first delta); ` +
      `sidecar on its default settings (${sc.processes} processes); node ${k.node}`,
    pad(
      [
        ['measure', 'value'],
        ['streams completed (exact text, one finish_reason)', `${k.complete}/${k.streams} (${f2(k.completePercent)} %)`],
        ['errors / wrong text', `${k.errors} / ${k.wrongText}${k.errorSamples.length ? ` (${k.errorSamples.join('; ')})` : ''}`],
        ['streams hit by the kill (client side) / completed', `${k.affected} / ${k.affectedComplete}`],
        [
          'crash -> first leg-2 delta at the client p50 / p99 / max (ms)',
          `${f1(k.crashToLeg2.p50)} / ${f1(k.crashToLeg2.p99)} / ${f1(k.crashToLeg2.max)}`,
        ],
        ['crash -> failure detected by the sidecar p50 / p99 (ms)', `${f1(sc.detection.p50)} / ${f1(sc.detection.p99)}`],
        ['other streams: largest gap in the 2 s after the kill p50 / p99 (ms)', `${f1(k.othersMaxGap.p50)} / ${f1(k.othersMaxGap.p99)}`],
        ['failures detected / continued (decision logs)', `${sc.triggered} / ${sc.continued}`],
        ['recoveries admitted / waited for a slot / timed out', `${sc.admitted} / ${sc.waited} / ${sc.timedOut}`],
        [
          'queue wait p50 / p99 / max (ms)',
          `${f1(sc.queueWait.p50)} / ${f1(sc.queueWait.p99)} / ${f1(sc.queueWait.max)} (histogram p99 bucket <= ${f1(sc.queueWaitP99BucketMs)})`,
        ],
        ['re-prefills in flight max / limit', `${sc.reprefillsInFlightMax} / ${sc.reprefillLimitMax}`],
        ['recoveries waiting at once, max', String(sc.waitingMax)],
        ['refusals / brake opened', `${refusals} / ${sc.brakeOpened}`],
        [
          'sidecar recovery latency (detected -> leg-2 first byte) mean / p99 bucket (ms)',
          `${f1(sc.recoveryLatency.meanMs)} / <= ${f1(sc.recoveryLatency.p99BucketMs)}`,
        ],
      ],
      1,
    ),
  ].join('\n');
}

/** Envoy + sidecar CPU per 1,000 chunks the clients received (the whole gateway; (a) and (b) have no sidecar). */
export function gatewayCpuPer1k(r: RunSummary): number {
  return r.cpuPer1kChunks.envoy + (WITH_SIDECAR.has(r.config) ? r.cpuPer1kChunks.sidecar : 0);
}

/** Chunks per second delivered while only relaying (the churn-free window), else over the whole run. */
export function deliveredPerS(r: RunSummary): number {
  return r.steady?.windowMs ? (r.steady.chunks * 1000) / r.steady.windowMs : (r.chunks * 1000) / r.wallMs;
}

/**
 * Issue 22's table, one row per level and round: the gateway's CPU per chunk (Envoy + sidecar) on the
 * continuation path (c), native (n), the previous release (p) and (c) without the memory-cap hop (h); the p99
 * gap over direct (a); what was delivered against what the streams ask for (level x tokens/s).
 */
export function formatIssueTable(runs: RunSummary[], tokensPerSecond: number): string {
  const rows: string[][] = [
    [
      'streams',
      'round',
      'c CPU ms/1k (Envoy+sidecar)',
      'n native',
      'c/n',
      'p previous',
      'c/p',
      'h no hop',
      'c/h',
      'p99 gap c-a',
      'p99 gap n-a',
      'p99 gap p-a',
      'delivered/s c',
      'n',
      'p',
      'asked',
    ],
  ];
  const keys = [...new Set(runs.map((r) => `${r.level}:${r.round}`))];
  for (const k of keys) {
    const [level, round] = k.split(':').map(Number);
    const at = (c: ConfigName) => runs.find((r) => r.level === level && r.round === round && r.config === c);
    const [a, c, n, p, h] = [at('a'), at('c'), at('n'), at('p'), at('h')];
    if (!c) continue;
    const cpu = (r?: RunSummary) => (r ? gatewayCpuPer1k(r) : NaN);
    const gap = (r?: RunSummary) => (r && a ? r.gaps.p99 - a.gaps.p99 : NaN);
    const rate = (r?: RunSummary) => (r ? Math.round(deliveredPerS(r)).toLocaleString('en-US') : '-');
    rows.push([
      String(level),
      String(round),
      f1(cpu(c)),
      f1(cpu(n)),
      f2(cpu(c) / cpu(n)),
      f1(cpu(p)),
      f2(cpu(c) / cpu(p)),
      f1(cpu(h)),
      f2(cpu(c) / cpu(h)),
      f1(gap(c)),
      f1(gap(n)),
      f1(gap(p)),
      rate(c),
      rate(n),
      rate(p),
      (level * tokensPerSecond).toLocaleString('en-US'),
    ]);
  }
  if (rows.length === 1) return '';
  return `issue 22: gateway CPU per 1,000 delivered chunks, p99 gap over direct (ms), chunks/s delivered while only relaying:\n${pad(rows, 1)}`;
}

export function formatTables(
  runs: RunSummary[],
  recovery?: RecoverySummary,
  idleMemory?: IdleMemory,
  crash?: CrashSummary,
  tokensPerSecond = 20,
): string {
  const rows: string[][] = [
    [
      'streams',
      'config',
      'runs',
      'errors',
      'past the sidecar',
      'chunks',
      'gap p50',
      'gap p99',
      'gap p99.9',
      'gap max',
      'TTFT p50',
      'TTFT p99',
      'Envoy CPU ms/1k',
      'sidecar CPU ms/1k',
      'engines CPU ms/1k',
      'sidecar RSS idle->peak MiB',
      'sidecar KiB/stream',
      'steady: Envoy ms/1k',
      'steady: sidecar ms/1k',
      'sidecar ms/stream',
    ],
  ];
  for (const r of runs) {
    rows.push([
      String(r.level),
      r.round > 1 ? `${r.config}#${r.round}` : r.config,
      String(r.streams),
      String(r.errors),
      r.bypassed === undefined ? '-' : String(r.bypassed),
      String(r.chunks),
      f1(r.gaps.p50),
      f1(r.gaps.p99),
      f1(r.gaps.p999),
      f1(r.gaps.max),
      f1(r.ttft.p50),
      f1(r.ttft.p99),
      r.config === 'a' ? '-' : f2(r.cpuPer1kChunks.envoy),
      WITH_SIDECAR.has(r.config) ? f2(r.cpuPer1kChunks.sidecar) : '-',
      f2(r.cpuPer1kChunks.engines),
      WITH_SIDECAR.has(r.config) ? `${f1(r.rss.sidecarIdle / 2 ** 20)}->${f1(r.rss.sidecarPeak / 2 ** 20)}` : '-',
      WITH_SIDECAR.has(r.config) ? f1(r.sidecarBytesPerStream / 1024) : '-',
      r.config === 'a' || !r.steady ? '-' : f2(r.steady.cpuPer1kChunks.envoy),
      WITH_SIDECAR.has(r.config) && r.steady ? f2(r.steady.cpuPer1kChunks.sidecar) : '-',
      WITH_SIDECAR.has(r.config) && r.steady ? f2(r.steady.sidecarMsPerStream) : '-',
    ]);
  }
  const out = runs.length ? [pad(rows)] : [];
  const levels = [...new Set(runs.map((r) => r.level))];
  const cmp: string[][] = [
    [
      'streams',
      'p50 a',
      'p50 b',
      'p50 c',
      'p50 c/b',
      'p50 c-b',
      'p99 a',
      'p99 b',
      'p99 c',
      'p99 c/b',
      'p99 c-b',
      'steady p99 b',
      'steady p99 c',
      'steady p99 c-b',
    ],
  ];
  for (const l of levels) {
    const run = (c: ConfigName) => runs.find((r) => r.level === l && r.config === c);
    const [a, b, c] = [run('a')?.gaps, run('b')?.gaps, run('c')?.gaps];
    if (!b || !c) continue;
    const [sb, sc] = [run('b')?.steady?.gaps.p99 ?? NaN, run('c')?.steady?.gaps.p99 ?? NaN];
    cmp.push([
      String(l),
      ...[a?.p50 ?? NaN, b.p50, c.p50].map(f1),
      f2(c.p50 / b.p50),
      f2(c.p50 - b.p50),
      ...[a?.p99 ?? NaN, b.p99, c.p99].map(f1),
      f2(c.p99 / b.p99),
      f2(c.p99 - b.p99),
      f1(sb),
      f1(sc),
      f2(sc - sb),
    ]);
  }
  if (cmp.length > 1) {
    out.push('');
    out.push('inter-chunk gaps (ms), (c) full stack against (b) Envoy alone:');
    out.push(pad(cmp, 1));
  }
  const issue = formatIssueTable(runs, tokensPerSecond);
  if (issue) out.push('', issue);
  if (recovery) {
    out.push('');
    out.push(
      `recovery: ${recovery.streams} streams killed at token 30 (x-fake-fault crash@30), ${recovery.complete} complete, ${recovery.errors} errors; ` +
        `largest gap p50 ${f1(recovery.crashGap.p50)} / p99 ${f1(recovery.crashGap.p99)} ms; ` +
        `crash -> first leg2 delta at the client p50 ${f1(recovery.crashToLeg2.p50)} / p99 ${f1(recovery.crashToLeg2.p99)} / max ${f1(recovery.crashToLeg2.max)} ms`,
    );
  }
  if (crash) {
    if (out.length) out.push('');
    out.push(formatCrash(crash));
  }
  if (idleMemory) {
    out.push('');
    out.push(
      `idle streams: ${idleMemory.streams} streams open through (c), each waiting for its next token; sidecar RSS ${f1(idleMemory.rssBeforeMiB)} -> ` +
        `${f1(idleMemory.rssIdleStreamsMiB)} MiB = ${f1(idleMemory.kibPerStream)} KiB per stream (${idleMemory.errors} errors); ` +
        `live heap + external after GC: ${idleMemory.liveKibPerStream ?? '-'} KiB per stream`,
    );
  }
  return out.join('\n');
}

function evaluateTargets(
  runs: RunSummary[],
  answerBodyBytes: number,
  idleMemory?: IdleMemory,
  crash?: CrashSummary,
): BenchResult['targets'] {
  const t: BenchResult['targets'] = [];
  if (crash) {
    const sc = crash.sidecar;
    t.push({
      target: `crash under load: ${crash.streams} streams over ${crash.engines} replicas, one SIGKILLed, default settings: 100 % of streams complete`,
      value:
        `${crash.complete}/${crash.streams} (${f2(crash.completePercent)} %); crash -> first leg-2 delta p50 ${f1(crash.crashToLeg2.p50)} / p99 ${f1(crash.crashToLeg2.p99)} ms (${crash.affected} streams hit); ` +
        `queue wait p99 ${f1(sc.queueWait.p99)} ms; re-prefills in flight max ${sc.reprefillsInFlightMax} (limit ${sc.reprefillLimitMax}); refusals ${Object.values(sc.refusals).reduce((a, b) => a + b, 0)}`,
      met: crash.complete === crash.streams && crash.affected > 0,
    });
  }
  if (!runs.length) return t;
  const at = (l: number, c: ConfigName) => runs.find((r) => r.level === l && r.config === c);
  const b500 = at(500, 'b');
  const c500 = at(500, 'c');
  if (b500 && c500) {
    const d = c500.gaps.p99 - b500.gaps.p99;
    const steady =
      b500.steady && c500.steady ? `; while only relaying (no stream starting): ${f2(c500.steady.gaps.p99 - b500.steady.gaps.p99)} ms` : '';
    t.push({
      target: '500 streams x 20 tok/s: p99 inter-chunk gap (c) - (b) <= 2 ms, no errors',
      value: `${f2(d)} ms${steady}, errors b=${b500.errors} c=${c500.errors}`,
      met: d <= 2 && b500.errors === 0 && c500.errors === 0,
    });
  } else t.push({ target: '500 streams: p99 (c) - (b) <= 2 ms', value: 'not run', met: null });
  const k = runs.filter((r) => r.level === 1000);
  if (k.length) {
    const errs = k.map((r) => `${r.config}=${r.errors}`).join(' ');
    t.push({ target: '1,000 streams x 20 tok/s without errors', value: errs, met: k.every((r) => r.errors === 0) });
  } else t.push({ target: '1,000 streams without errors', value: 'not run', met: null });
  // Issue 22 (first round of each level; the table has every round).
  for (const l of [200, 500, 1000]) {
    const [c, n] = [at(l, 'c'), at(l, 'n')];
    if (!c || !n) continue;
    t.push({
      target: `issue 22, ${l} streams: continuation-path CPU per chunk (Envoy + sidecar) <= 2x native`,
      value: `${f1(gatewayCpuPer1k(c))} vs ${f1(gatewayCpuPer1k(n))} ms per 1,000 chunks = ${f2(gatewayCpuPer1k(c) / gatewayCpuPer1k(n))}x`,
      met: gatewayCpuPer1k(c) <= 2 * gatewayCpuPer1k(n),
    });
  }
  for (const [l, margin] of [
    [500, 10],
    [1000, 25],
  ] as const) {
    const [a, c, n] = [at(l, 'a'), at(l, 'c'), at(l, 'n')];
    if (!a || !c) continue;
    const gap = c.gaps.p99 - a.gaps.p99;
    const delivered = n ? `; delivered ${Math.round(deliveredPerS(c))} vs native ${Math.round(deliveredPerS(n))} chunks/s` : '';
    t.push({
      target: `issue 22, ${l} streams: p99 gap <= direct + ${margin} ms${l === 1000 ? ', delivering at least what native delivers' : ''}`,
      value: `+${f1(gap)} ms (${f1(c.gaps.p99)} vs ${f1(a.gaps.p99)})${delivered}`,
      met: gap <= margin && (l !== 1000 || !n || deliveredPerS(c) >= deliveredPerS(n)),
    });
  }
  const cs = runs.filter((r) => r.config === 'c');
  if (cs.length) {
    const worst = Math.max(...cs.map((r) => r.cpuPer1kChunks.sidecar));
    const steady = (r: RunSummary) =>
      r.steady ? ` (relaying alone ${f2(r.steady.cpuPer1kChunks.sidecar)}, + ${f2(r.steady.sidecarMsPerStream)} ms per stream)` : '';
    t.push({
      target: 'sidecar CPU <= 25 ms per 1,000 relayed chunks',
      value: cs.map((r) => `${r.level}: ${f2(r.cpuPer1kChunks.sidecar)}${steady(r)}`).join(', '),
      met: worst <= 25,
    });
  }
  const limitKiB = 64 + answerBodyBytes / 1024;
  const during = cs.length
    ? `; while relaying (peak RSS, garbage included): ${cs.map((r) => `${r.level}: ${f1(r.sidecarBytesPerStream / 1024)}`).join(', ')} KiB`
    : '';
  if (idleMemory) {
    t.push({
      target: `sidecar memory <= 64 KiB per idle stream + the request body (${answerBodyBytes} B here)`,
      value: `${idleMemory.liveKibPerStream ?? '-'} KiB live after GC, ${f1(idleMemory.kibPerStream)} KiB of RSS, with ${idleMemory.streams} idle streams${during}`,
      // Live memory decides (RSS growth includes garbage not yet collected); without it, RSS does.
      met: idleMemory.errors === 0 && (idleMemory.liveKibPerStream ?? idleMemory.kibPerStream) <= limitKiB,
    });
  } else if (cs.length) {
    const worst = Math.max(...cs.map((r) => r.sidecarBytesPerStream)) / 1024;
    t.push({
      target: `sidecar memory <= 64 KiB per stream + the request body (${answerBodyBytes} B here)`,
      value: `no idle-stream run${during}`,
      met: worst <= limitKiB,
    });
  }
  return t;
}

// ---------------------------------------------------------------------------------------------------------------
// The benchmark
// ---------------------------------------------------------------------------------------------------------------

export async function runBench(o: BenchOptions): Promise<BenchResult> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const startedAt = new Date().toISOString();
  // Other work on the machine (other test suites) distorts every number: recorded with the results.
  const loadAvgAtStart = os.loadavg().map((v) => round(v, 2));
  fs.mkdirSync(o.outDir, { recursive: true });
  const tokenMs = 1000 / o.tokensPerSecond;
  const headers = { 'x-fake-answer-tokens': o.answerTokens };
  const requestBodyBytes = Buffer.byteLength(
    JSON.stringify({ model: 'bench-model', stream: true, messages: [{ role: 'user', content: 'Benchmark: tell me about continuation.' }] }),
  );
  const profileDir = o.cpuProf ? path.join(o.outDir, 'profile') : undefined;
  if (profileDir) fs.mkdirSync(profileDir, { recursive: true });

  const stops: Array<() => Promise<unknown>> = [];
  let gw: Gateway | undefined;
  let gen: Generator | undefined;
  const runs: RunSummary[] = [];
  let recovery: RecoverySummary | undefined;
  let crash: CrashSummary | undefined;
  let idleMemory: IdleMemory | undefined;
  let profile: ProfileSummary[] | undefined;
  let idle: BenchResult['idle'];
  const mainStack = o.levels.length > 0 || o.idleS > 0 || (o.idleStreams > 0 && o.configs.includes('c')) || o.recovery > 0;
  try {
    gen = await Generator.start();
    const generator = gen;
    if (mainStack) {
      log(
        `bench: ${o.engines} engine processes at ${o.tokensPerSecond} tokens/s (token-ms ${round(tokenMs, 2)}), answer ${o.answerTokens}, levels ${o.levels.join(',')}, configs ${o.configs.join(',')}, ${o.durationS} s per level; node ${process.version}`,
      );
      const engines = await startEngines(o.engines, tokenMs, 'engine');
      const enginePorts = (engines as Array<ManagedChild & { port?: number }>).map((e) => e.port as number);
      stops.push(async () => Promise.all(engines.map((e) => e.stop())));
      gw = await startGateway(enginePorts, o, { profileDir });
      const g = gw;
      stops.unshift(() => g.stop());
      log(
        `bench: Envoy pid ${g.envoy.pid} (front ${g.frontUrl}, egress ${g.egressUrl}), sidecar pid ${g.sidecar.pid}, engines ${enginePorts.join(',')}, generator pid ${generator.pid}`,
      );
      // n, h and p have stacks of their own against the same engines (idle while the others run: a few
      // health checks, measured by the idle window below for the main stack).
      const stackOf: Partial<Record<ConfigName, Gateway>> = { a: g, b: g, c: g };
      for (const c of o.configs.filter((x) => OWN_STACK.has(x))) {
        const own: GatewayOptions =
          c === 'n'
            ? { native: true }
            : c === 'h'
              ? { chatHop: false }
              : c === 'w'
                ? { workers: o.workersW }
                : c === 'u'
                  ? { env: { UPSTREAM_HTTP2: 'true' } }
                  : c === 't'
                    ? { env: { TOKEN_IDS_CONTINUATION: 'false' } }
                    : { dist: o.previousDist ? path.resolve(o.previousDist) : previousReleaseDist(ROOT, o.previousRef, log) };
        const extra = await startGateway(enginePorts, o, { ...own, profileDir: undefined });
        stops.unshift(() => extra.stop());
        stackOf[c] = extra;
        log(`bench: ${CONFIG_LABEL[c]}: Envoy pid ${extra.envoy.pid}, sidecar pid ${extra.sidecar.pid}, front ${extra.frontUrl}`);
      }
      const stack = (c: ConfigName) => stackOf[c] as Gateway;
      const urls: Record<ConfigName, string[]> = {
        a: enginePorts.map((p) => `http://127.0.0.1:${p}`),
        b: [g.egressUrl],
        c: [g.frontUrl],
        n: [stackOf.n?.frontUrl ?? ''],
        h: [stackOf.h?.frontUrl ?? ''],
        p: [stackOf.p?.frontUrl ?? ''],
        w: [stackOf.w?.frontUrl ?? ''],
        u: [stackOf.u?.frontUrl ?? ''],
        t: [stackOf.t?.frontUrl ?? ''],
      };
      // Warm-up: a few streams through every path (JIT, connection pools).
      for (const c of o.configs)
        for (const url of urls[c])
          await generator.run({
            url,
            concurrency: 20,
            durationMs: 0,
            maxStreams: 60,
            rampMs: 200,
            headers: { ...headers, 'x-fake-answer-tokens': '5,5' },
          });

      // Idle cost (timers, health checks): 3 s with no traffic, reported in CPU ms per second.
      if (o.idleS > 0) {
        const idleMeters = { envoy: new TreeMeter(() => [g.envoy.pid]), sidecar: new TreeMeter(() => [g.sidecar.pid]) };
        Object.values(idleMeters).forEach((m) => m.start());
        await sleep(o.idleS * 1000);
        idle = {
          envoyCpuMsPerS: round(idleMeters.envoy.stop().cpuMs / o.idleS, 1),
          sidecarCpuMsPerS: round(idleMeters.sidecar.stop().cpuMs / o.idleS, 1),
          sidecarProcesses: idleMeters.sidecar.processes,
        };
        log(`bench: idle CPU ms/s: Envoy ${idle.envoyCpuMsPerS}, sidecar ${idle.sidecarCpuMsPerS} (${idle.sidecarProcesses} processes)`);
      }

      // Before the load levels: their garbage would leave heap room that idle streams could fill unseen.
      if (o.idleStreams > 0 && o.configs.includes('c')) {
        idleMemory = await runIdleMemory(o, generator, g, headers, log);
        await sleep(o.pauseMs);
      }

      for (const level of o.levels) {
        for (let rnd = 1; rnd <= o.rounds; rnd++)
          for (const config of o.configs) {
            const st = stack(config);
            const meters = {
              envoy: new TreeMeter(() => [st.envoy.pid]),
              sidecar: new TreeMeter(() => [st.sidecar.pid]),
              engines: new TreeMeter(() => engines.map((e) => e.pid)),
              generator: new TreeMeter(() => [generator.pid]),
            };
            Object.values(meters).forEach((m) => m.start());
            const bypassedBefore = WITH_SIDECAR.has(config) ? await failOpenCount(st) : NaN;
            // (a) has one URL per engine process: split the streams over them (what Envoy's balancer does for b, c).
            const targets = urls[config];
            const share = (i: number) => Math.floor(level / targets.length) + (i < level % targets.length ? 1 : 0);
            const t0 = performance.now();
            const window = steadyWindow(o, meters);
            const results = await Promise.all(
              targets.map((url, i) =>
                // Several URLs need several generator runs; one generator handles one run at a time, so (a) with
                // several engines uses extra short-lived generators.
                i === 0
                  ? generator.run({ url, concurrency: share(i), durationMs: o.durationS * 1000, rampMs: o.rampMs, headers })
                  : Generator.start().then(async (extra) => {
                      try {
                        return await extra.run({ url, concurrency: share(i), durationMs: o.durationS * 1000, rampMs: o.rampMs, headers });
                      } finally {
                        await extra.stop();
                      }
                    }),
              ),
            );
            const wallMs = performance.now() - t0;
            const steadyCpu = await window.done;
            const m = Object.fromEntries(Object.entries(meters).map(([k, v]) => [k, v.stop()])) as Record<
              keyof typeof meters,
              ReturnType<TreeMeter['stop']>
            >;
            const streams = results.flatMap((r) => r.streams);
            const gaps = sortedFloat64(gapsOf(streams));
            const chunks = streams.reduce((s, r) => s + r.events.length, 0);
            const errs = errorsOf(streams);
            const gapSum = summarize(gaps);
            const per1k = (ms: number) => (chunks ? (ms * 1000) / chunks : NaN);
            const run: RunSummary = {
              config,
              level,
              round: rnd,
              streams: streams.length,
              errors: errs.count,
              errorSamples: errs.samples,
              chunks,
              bytes: streams.reduce((s, r) => s + r.bytes, 0),
              wallMs: Math.round(wallMs),
              gaps: roundSummary(gapSum),
              addedP50: round(gapSum.p50 - tokenMs, 3),
              addedP99: round(gapSum.p99 - tokenMs, 3),
              ttft: roundSummary(summarize(sortedFloat64(streams.filter((s) => s.ttftMs >= 0).map((s) => s.ttftMs)))),
              total: roundSummary(summarize(sortedFloat64(streams.map((s) => s.totalMs)))),
              cdf: cdfPoints(gaps),
              cpuMs: {
                envoy: Math.round(m.envoy.cpuMs),
                sidecar: Math.round(m.sidecar.cpuMs),
                engines: Math.round(m.engines.cpuMs),
                generator: Math.round(m.generator.cpuMs + results.slice(1).reduce((s, r) => s + r.cpuMs, 0)),
              },
              cpuPer1kChunks: {
                envoy: round(per1k(m.envoy.cpuMs), 2),
                sidecar: round(per1k(m.sidecar.cpuMs), 2),
                engines: round(per1k(m.engines.cpuMs), 2),
              },
              rss: {
                envoyIdle: m.envoy.idleRss,
                envoyPeak: m.envoy.peakRss,
                sidecarIdle: m.sidecar.idleRss,
                sidecarPeak: m.sidecar.peakRss,
              },
              sidecarBytesPerStream: Math.round((m.sidecar.peakRss - m.sidecar.idleRss) / level),
              steady: steadyCpu ? steadySummary(steadyCpu, streams, m.sidecar.cpuMs) : undefined,
              sidecarProcesses: m.sidecar.processes,
              ...(WITH_SIDECAR.has(config) ? { bypassed: (await failOpenCount(st)) - bypassedBefore } : {}),
            };
            runs.push(run);
            log(
              `bench: ${level} streams ${CONFIG_LABEL[config]}: ${run.streams} streams, ${run.errors} errors${errs.samples.length ? ` (${errs.samples.join('; ')})` : ''}, ` +
                (run.bypassed ? `${run.bypassed} PAST THE SIDECAR (failed health check), ` : '') +
                `gap p50 ${f1(run.gaps.p50)} p99 ${f1(run.gaps.p99)} ms, CPU ms envoy ${run.cpuMs.envoy} sidecar ${run.cpuMs.sidecar} engines ${run.cpuMs.engines} generator ${run.cpuMs.generator}, ${run.wallMs} ms` +
                (st.sink ? `, OTLP exports so far ${st.sink.posts} (${st.sink.bytes} bytes)` : ''),
            );
            await sleep(o.pauseMs);
          }
      }

      if (o.recovery > 0) recovery = await runRecovery(o, generator, tokenMs, log);
      const problems = g.sidecar
        .logs()
        .split('\n')
        .filter((l) => /"level":(50|60)/.test(l));
      if (problems.length) log(`bench: the sidecar logged ${problems.length} error lines, e.g.\n${problems.slice(0, 5).join('\n')}`);
      // The crash run has its own stack: this one's processes go first (their idle cost would be noise there).
      for (const stop of stops.splice(0)) await stop().catch(() => undefined);
    }

    if (o.crash > 0) {
      if (mainStack) await sleep(o.pauseMs);
      crash = await runCrash(o, generator, log);
    }
  } finally {
    await gen?.stop().catch(() => undefined);
    for (const s of stops) await s().catch(() => undefined);
  }

  if (profileDir) {
    const files = fs.readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'));
    if (files.length) {
      // One file per process (the cluster primary and each worker): the busiest first.
      profile = files.map((f) => analyseProfile(path.join(profileDir, f), 30)).sort((x, y) => y.busyMs - x.busyMs);
      for (const p of profile) log(formatProfile(p));
    } else log(`bench: no .cpuprofile written in ${profileDir}`);
  }

  const table = formatTables(runs, recovery, idleMemory, crash, o.tokensPerSecond);
  const targets = evaluateTargets(runs, requestBodyBytes, idleMemory, crash);
  const result: BenchResult = {
    startedAt,
    options: { ...o, log: undefined } as Omit<BenchOptions, 'log'>,
    machine: {
      loadAvgAtStart,
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model ?? '?',
      node: process.version,
      memGiB: round(os.totalmem() / 2 ** 30, 1),
      envoyConcurrency: 2,
    },
    expectedGapMs: tokenMs,
    idle,
    runs,
    recovery,
    crash,
    idleMemory,
    profile,
    targets,
    table,
    outDir: o.outDir,
  };
  fs.writeFileSync(path.join(o.outDir, 'results.json'), `${JSON.stringify(result, null, 1)}\n`);
  const machine = `node ${result.machine.node}, ${result.machine.cpus} CPUs (${result.machine.cpuModel}), ${result.machine.memGiB} GiB, load average at start ${loadAvgAtStart.join(' ')}`;
  fs.writeFileSync(path.join(o.outDir, 'table.md'), `${machine}\n\n${table}\n\n${formatTargets(targets)}\n`);
  // No load level ran (--crash-only): no chart, and docs/bench/latest.svg stays as it is.
  if (runs.length === 0) return result;
  const panels: ChartPanel[] = o.levels.map((level) => ({
    title: `${level} concurrent streams`,
    series: runs
      .filter((r) => r.level === level)
      .map((r) => ({
        label: `${CONFIG_LABEL[r.config]}: p50 ${f1(r.gaps.p50)}, p99 ${f1(r.gaps.p99)} ms`,
        color: CONFIG_COLOR[r.config],
        points: r.cdf,
      })),
  }));
  const svg = cdfChart(
    'Inter-chunk gaps at the client',
    `${o.tokensPerSecond} tokens/s per stream, ${o.durationS} s closed loop per level, ${os.cpus().length} CPUs shared by generator, engines, Envoy and sidecar (${startedAt.slice(0, 16)}Z)`,
    panels,
    tokenMs,
  );
  fs.writeFileSync(path.join(o.outDir, 'gaps-cdf.svg'), svg);
  if (o.copyToDocs) {
    fs.mkdirSync(path.join(ROOT, 'docs/bench'), { recursive: true });
    fs.writeFileSync(path.join(ROOT, 'docs/bench/latest.svg'), svg);
  }
  return result;
}

function roundSummary(s: Summary): Summary {
  return Object.fromEntries(Object.entries(s).map(([k, v]) => [k, k === 'n' ? v : round(v, 2)])) as unknown as Summary;
}

export function formatTargets(targets: BenchResult['targets']): string {
  return targets
    .map(
      (t) =>
        `- [${t.met === null ? ' ' : t.met ? 'x' : ' '}] ${t.target}: ${t.value}${t.met === false ? ' (MISSED)' : t.met ? ' (met)' : ''}`,
    )
    .join('\n');
}

/**
 * Memory per idle stream: N streams through the full stack whose engine sends a token every 2.5 s (two
 * tokens, then the finish). RSS is read at ramp + 3 s: every stream has had its first token (it is past the
 * commit point, its headers and first delta delivered) and waits for the second. Each holds its ext_proc
 * stream, its leg and the gateway's state, but no chunk is in flight: the figure the issue's target means.
 */
async function runIdleMemory(
  o: BenchOptions,
  generator: Generator,
  g: Gateway,
  headers: Record<string, string>,
  log: (l: string) => void,
): Promise<IdleMemory> {
  const meter = new TreeMeter(() => [g.sidecar.pid]);
  meter.start();
  const before = meter.idleRss;
  const run = generator.run({
    url: g.frontUrl,
    concurrency: o.idleStreams,
    durationMs: 1,
    maxStreams: o.idleStreams,
    rampMs: o.rampMs,
    headers: { ...headers, 'x-fake-token-ms': '2500', 'x-fake-answer-tokens': '2,0' },
  });
  await sleep(o.rampMs + 3000);
  const during = rssBytes(processTree(g.sidecar.pid));
  meter.stop();
  const res = await run;
  const errors = errorsOf(res.streams).count;
  const out: IdleMemory = {
    streams: o.idleStreams,
    errors,
    rssBeforeMiB: round(before / 2 ** 20, 1),
    rssIdleStreamsMiB: round(during / 2 ** 20, 1),
    kibPerStream: round((during - before) / 1024 / o.idleStreams, 1),
  };
  log(
    `bench: ${o.idleStreams} idle streams: sidecar RSS ${out.rssBeforeMiB} -> ${out.rssIdleStreamsMiB} MiB, ${out.kibPerStream} KiB per stream, ${errors} errors`,
  );
  try {
    const line = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'idle-memory.js'), String(o.idleStreams)], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    out.liveKibPerStream = (
      JSON.parse(line.trim().split('\n').pop() ?? '{}') as { sidecarKibPerIdleStream?: number }
    ).sidecarKibPerIdleStream;
    log(
      `bench: ${o.idleStreams} idle streams, after GC: the sidecar's heap + external memory is ${out.liveKibPerStream} KiB per stream (idle-memory.js)`,
    );
  } catch (e) {
    log(`bench: idle-memory.js failed: ${(e as Error).message}`);
  }
  return out;
}

/**
 * The recovery benchmark, on its own small stack (one engine process behind its own Envoy and sidecar): the
 * fake engine consumes a fault script per header value in a per-process registry, so leg2 must land in the
 * process that served leg1 to see "no fault" for its second entry.
 */
async function runRecovery(o: BenchOptions, generator: Generator, tokenMs: number, log: (l: string) => void): Promise<RecoverySummary> {
  const [engine] = await startEngines(1, tokenMs, 'recovery-engine');
  const port = (engine as ManagedChild & { port?: number }).port as number;
  let gw: Gateway | undefined;
  try {
    gw = await startGateway([port], o);
    const res = await generator.run(
      {
        url: gw.frontUrl,
        concurrency: o.recovery,
        durationMs: 1,
        rampMs: o.rampMs,
        maxStreams: o.recovery,
        headers: { 'x-fake-answer-tokens': o.answerTokens },
      },
      'crash@30',
    );
    const [r, c] = o.answerTokens.split(',').map(Number);
    const expectedDeltas = r + c;
    const errs = errorsOf(res.streams);
    const maxGaps: number[] = [];
    let complete = 0;
    for (const s of res.streams) {
      if (!streamError(s) && s.deltas === expectedDeltas) complete++;
      let g = 0;
      for (let j = s.firstDelta + 1; s.firstDelta >= 0 && j < s.events.length; j++) g = Math.max(g, s.events[j] - s.events[j - 1]);
      if (g > 0) maxGaps.push(g);
    }
    const crashGap = summarize(sortedFloat64(maxGaps));
    const crashToLeg2 = summarize(sortedFloat64(maxGaps.map((g) => g - tokenMs)));
    log(
      `bench: recovery ${res.streams.length} streams, ${complete} complete, ${errs.count} errors, crash -> leg2 first delta p50 ${f1(crashToLeg2.p50)} p99 ${f1(crashToLeg2.p99)} ms`,
    );
    return {
      streams: res.streams.length,
      errors: errs.count,
      errorSamples: errs.samples,
      complete,
      crashGap: roundSummary(crashGap),
      crashToLeg2: roundSummary(crashToLeg2),
    };
  } finally {
    await gw?.stop().catch(() => undefined);
    await engine.stop();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Crash under load
// ---------------------------------------------------------------------------------------------------------------

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format -> samples (no HELP/TYPE lines). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line.trim());
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

const metricSum = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples
    .filter((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
    .reduce((sum, x) => sum + x.value, 0);

/** The upper bound (`le`) of the bucket that holds quantile q of a histogram (summed over the other labels); NaN when empty. */
export function histogramQuantileBound(samples: Sample[], name: string, q: number, labels: Record<string, string> = {}): number {
  const byLe = new Map<number, number>();
  for (const x of samples) {
    if (x.name !== `${name}_bucket` || !Object.entries(labels).every(([k, v]) => x.labels[k] === v)) continue;
    const le = x.labels.le === '+Inf' ? Infinity : Number(x.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + x.value);
  }
  const bounds = [...byLe.entries()].sort((a, b) => a[0] - b[0]);
  const total = bounds.length ? bounds[bounds.length - 1][1] : 0;
  if (!total) return NaN;
  return bounds.find(([, cum]) => cum >= q * total)?.[0] ?? Infinity;
}

/**
 * Crash under load, on its own stack with the sidecar's DEFAULT settings: o.crash streams (each with its own
 * prompt, so each has its own expected text) over o.crashEngines engine processes; once every stream has had
 * its first delta, one engine is SIGKILLed. From the client side: streams complete and byte-identical to the
 * engine's uninterrupted answer (answerFor), and for each stream the kill hit, the time from the kill to the
 * first data event of its continuation. From the sidecar: /metrics (polled, and read at the end) and its
 * decision log lines.
 */
/** A variant of the crash run (test/bench/adaptive.ts): engine flags, sidecar variables, hooks around the kill. */
export interface CrashVariant {
  engineArgs?: string[];
  env?: Record<string, string>;
  /** After the warm-up, before the load: the front URL (calm measurements). */
  beforeLoad?(url: string): Promise<void>;
  /** Right after the kill. */
  onKill?(url: string): void;
}

export async function runCrash(
  o: BenchOptions,
  generator: Generator,
  log: (l: string) => void,
  variant: CrashVariant = {},
): Promise<CrashSummary> {
  const tokenMs = 1000 / o.tokensPerSecond;
  const [r, c] = o.crashAnswer.split(',').map(Number);
  if (o.crashTemplate) {
    // The template path: the engines serve the template, the sidecar renders and verifies every leg 2 with it.
    variant = {
      ...variant,
      engineArgs: [...(variant.engineArgs ?? []), '--chat-template', o.crashTemplate],
      env: { ...variant.env, CHAT_TEMPLATE: o.crashTemplate, CONTINUATION_MODEL: 'bench/template-path-model' },
    };
  }
  if (o.crashTokenizer) variant = { ...variant, env: { ...variant.env, TOKENIZER: o.crashTokenizer } };
  const expectedText = crashExpectedText(o, r, c);
  const engines = await startEngines(o.crashEngines, tokenMs, 'crash-engine', variant.engineArgs);
  const ports = (engines as Array<ManagedChild & { port?: number }>).map((e) => e.port as number);
  const [adminPort] = await freePorts(1);
  const decisions = new Map<string, number>();
  const loggedWaits: number[] = [];
  const waitIntervals: Array<[number, number]> = [];
  const triggeredAt: number[] = [];
  let errorLines = 0;
  const onLine = (line: string) => {
    if (/"level":(50|60)/.test(line)) errorLines++;
    if (!line.includes('"decision"')) return;
    try {
      const rec = JSON.parse(line);
      const key = rec.decision === 'SUCCEEDED' || rec.decision === 'ATTEMPT' ? `${rec.decision}/${rec.leg}` : rec.decision;
      decisions.set(key, (decisions.get(key) ?? 0) + 1);
      // Why a continuation was not sent (reason and detail: stable codes, never text).
      if (rec.decision === 'SKIPPED') {
        const why = `SKIPPED ${rec.reason}:${rec.detail ?? ''}`;
        decisions.set(why, (decisions.get(why) ?? 0) + 1);
      }
      const at = Date.parse(rec.time);
      if (rec.decision === 'TRIGGERED') triggeredAt.push(at);
      if (rec.decision === 'RECOVERY_ADMITTED' && typeof rec.waited_ms === 'number') {
        loggedWaits.push(rec.waited_ms);
        waitIntervals.push([at - rec.waited_ms, at]);
      }
    } catch {
      // not one of ours
    }
  };
  let gw: Gateway | undefined;
  const polled = { limit: 0, inFlight: 0, limitMinAfterKill: Number.POSITIVE_INFINITY, killed: false };
  const scrape = async (): Promise<Sample[]> => {
    const samples = parseMetrics(
      await (await fetch(`http://127.0.0.1:${adminPort}/metrics`, { signal: AbortSignal.timeout(5000) })).text(),
    );
    polled.limit = Math.max(polled.limit, metricSum(samples, 'continuation_gateway_reprefill_limit'));
    if (polled.killed)
      polled.limitMinAfterKill = Math.min(polled.limitMinAfterKill, metricSum(samples, 'continuation_gateway_reprefill_limit'));
    polled.inFlight = Math.max(polled.inFlight, metricSum(samples, 'continuation_gateway_reprefills_in_flight'));
    return samples;
  };
  try {
    gw = await startGateway(ports, o, { defaults: true, adminPort, onLine, env: variant.env });
    const url = gw.frontUrl;
    log(
      `bench: crash under load: ${o.crash} streams over ${o.crashEngines} engine processes (${ports.join(',')}), sidecar on its defaults (admin :${adminPort}), answer ${o.crashAnswer} at ${o.tokensPerSecond} tokens/s`,
    );
    // Warm-up (JIT, connection pools): short answers, no fault.
    await generator.run({ url, concurrency: 20, durationMs: 0, maxStreams: 40, rampMs: 200, headers: { 'x-fake-answer-tokens': '5,5' } });
    await variant.beforeLoad?.(url);
    const victim = engines[1];
    let killedAt = NaN;
    const kill = (why: string) => {
      if (!Number.isNaN(killedAt)) return;
      killedAt = performance.timeOrigin + performance.now();
      victim.child.kill('SIGKILL');
      polled.killed = true;
      variant.onKill?.(url);
      log(`bench: crash under load: SIGKILL ${victim.name} (pid ${victim.pid}): ${why}`);
    };
    // Normally every stream streams long before this; if some never do, kill anyway halfway through the answers.
    const fallback = setTimeout(
      () => kill('not every stream had its first delta: killed anyway'),
      o.rampMs + ((r + c) * tokenMs) / 2 + 1000,
    );
    let polling = true;
    const poller = (async () => {
      while (polling) {
        await scrape().catch(() => undefined);
        await sleep(100);
      }
    })();
    let res: LoadResult;
    try {
      res = await generator.run(
        {
          url,
          concurrency: o.crash,
          durationMs: 1,
          maxStreams: o.crash,
          rampMs: o.rampMs,
          headers: { 'x-fake-answer-tokens': o.crashAnswer },
          distinctPrompt: 'Crash under load: stream',
          collectText: true,
          notifyStreaming: o.crash,
          streamTimeoutMs: 180_000,
        },
        undefined,
        () => kill(`all ${o.crash} streams have had their first delta`),
      );
    } finally {
      clearTimeout(fallback);
      polling = false;
      await poller;
    }
    if (Number.isNaN(killedAt)) log('bench: crash under load: every stream ended before the kill (nothing measured: the target fails)');
    const samples = await scrape();
    const processes = processTree(gw.sidecar.pid).length;

    // Client side.
    const t0 = Math.min(...res.streams.map((x) => x.startEpochMs));
    const victimId = `chatcmpl-${victim.name}-`;
    const errs = errorsOf(res.streams);
    let complete = 0;
    let wrongText = 0;
    let affected = 0;
    let affectedComplete = 0;
    let streamingAtKill = 0;
    const crashToLeg2: number[] = [];
    const othersMaxGap: number[] = [];
    for (const s of res.streams) {
      const clean = !streamError(s);
      const ok = clean && s.finishes === 1 && s.text === expectedText(s.n);
      if (ok) complete++;
      else if (clean) wrongText++;
      const killAt = killedAt - s.startEpochMs; // the kill on this stream's clock
      if (s.firstDelta >= 0 && s.ttftMs <= killAt) streamingAtKill++;
      const onVictim = s.id?.startsWith(victimId) ?? false;
      if (onVictim && s.firstDelta >= 0 && s.ttftMs <= killAt && s.events[s.events.length - 1] > killAt) {
        affected++;
        if (ok) affectedComplete++;
        // The gap the crash opened: the largest one among those ending after the kill (a leg-1 chunk still in
        // flight at the kill may arrive just after it); its end is the continuation's first data event.
        let best = -1;
        let bestGap = -1;
        for (let j = s.firstDelta + 1; j < s.events.length; j++) {
          if (s.events[j] < killAt) continue;
          const gap = s.events[j] - s.events[j - 1];
          if (gap > bestGap) [best, bestGap] = [j, gap];
        }
        if (best >= 0) crashToLeg2.push(s.events[best] - killAt);
      } else if (!onVictim && s.firstDelta >= 0) {
        let g = 0;
        for (let j = s.firstDelta + 1; j < s.events.length; j++)
          if (s.events[j] >= killAt && s.events[j] < killAt + 2000) g = Math.max(g, s.events[j] - s.events[j - 1]);
        othersMaxGap.push(g);
      }
    }

    // Sidecar side.
    const admitted = metricSum(samples, 'continuation_gateway_recovery_wait_seconds_count', { outcome: 'admitted' });
    const timedOut = metricSum(samples, 'continuation_gateway_recovery_wait_seconds_count', { outcome: 'timed-out' });
    const waits = [...loggedWaits, ...new Array(Math.max(0, admitted - loggedWaits.length)).fill(0)];
    const refusals: Record<string, number> = {};
    for (const x of samples)
      if (x.name === 'continuation_gateway_recovery_refusals_total' && x.value > 0)
        refusals[`${x.labels.reason}:${x.labels.phase}`] = x.value;
    const latencyN = metricSum(samples, 'continuation_gateway_recovery_latency_seconds_count');
    // Most waiting at once: sweep over the wait intervals (an end before a start at the same ms).
    const edges = waitIntervals
      .flatMap(
        ([a, b]): Array<[number, number]> => [
          [a, 1],
          [b, -1],
        ],
      )
      .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let waiting = 0;
    let waitingMax = 0;
    for (const [, d] of edges) waitingMax = Math.max(waitingMax, (waiting += d));
    const summary: CrashSummary = {
      streams: res.streams.length,
      engines: o.crashEngines,
      killed: victim.name,
      killedAtMs: Math.round(killedAt - t0),
      streamingAtKill,
      answerTokens: o.crashAnswer,
      tokensPerSecond: o.tokensPerSecond,
      complete,
      completePercent: round((100 * complete) / Math.max(1, res.streams.length), 2),
      errors: errs.count,
      errorSamples: errs.samples,
      wrongText,
      affected,
      affectedComplete,
      crashToLeg2: roundSummary(summarize(sortedFloat64(crashToLeg2))),
      othersMaxGap: roundSummary(summarize(sortedFloat64(othersMaxGap))),
      sidecar: {
        triggered: decisions.get('TRIGGERED') ?? 0,
        continued: decisions.get('SUCCEEDED/2') ?? 0,
        refusedLogged: decisions.get('RECOVERY_REFUSED') ?? 0,
        brakeOpened: decisions.get('BRAKE_OPEN') ?? 0,
        errorLines,
        detection: roundSummary(summarize(sortedFloat64(triggeredAt.map((t) => t - killedAt)))),
        processes,
        refusals,
        admitted,
        waited: loggedWaits.length,
        timedOut,
        queueWait: roundSummary(summarize(sortedFloat64(waits))),
        queueWaitP99BucketMs:
          histogramQuantileBound(samples, 'continuation_gateway_recovery_wait_seconds', 0.99, { outcome: 'admitted' }) * 1000,
        reprefillsInFlightMax: Math.max(metricSum(samples, 'continuation_gateway_reprefills_in_flight_peak'), polled.inFlight),
        reprefillLimitMax: polled.limit,
        reprefillLimitMinAfterKill: polled.limitMinAfterKill,
        reprefillLimitAtEnd: metricSum(samples, 'continuation_gateway_reprefill_limit'),
        waitingMax,
        recoveryLatency: {
          n: latencyN,
          meanMs: latencyN ? round((1000 * metricSum(samples, 'continuation_gateway_recovery_latency_seconds_sum')) / latencyN, 1) : NaN,
          p99BucketMs: histogramQuantileBound(samples, 'continuation_gateway_recovery_latency_seconds', 0.99) * 1000,
        },
        prepare: prepareOf(samples, o.crashTemplate ? 'template' : 'generic'),
        count: countOf(samples, o.crashTokenizer ? 'tokenizer' : 'estimate'),
      },
      node: process.version,
    };
    const sc = summary.sidecar;
    const skipped = [...decisions].filter(([k]) => k.startsWith('SKIPPED ')).map(([k, n]) => `${k.slice(8)} ${n}`);
    log(
      `bench: crash under load: leg 2 design (${sc.prepare.source}): ${sc.prepare.n} continuations, mean ${sc.prepare.meanMs} ms, p99 <= ${sc.prepare.p99BucketMs} ms; not sent: ${skipped.join(', ') || 'none'}`,
    );
    log(
      `bench: crash under load: counting (${sc.count.method}): ${sc.count.n} continuations, mean ${sc.count.meanMs} ms, p99 <= ${sc.count.p99BucketMs} ms`,
    );
    log(
      `bench: crash under load: ${summary.complete}/${summary.streams} complete (${summary.completePercent} %), ${summary.errors} errors${errs.samples.length ? ` (${errs.samples.join('; ')})` : ''}, ${wrongText} wrong text; ` +
        `${affected} streams on ${victim.name} (${affectedComplete} complete), crash -> first leg-2 delta p50 ${f1(summary.crashToLeg2.p50)} p99 ${f1(summary.crashToLeg2.p99)} ms; ` +
        `sidecar: ${sc.triggered} triggered, ${sc.continued} continued, ${sc.admitted} admitted (${sc.waited} waited, ${sc.timedOut} timed out), queue wait p99 ${f1(sc.queueWait.p99)} ms, ` +
        `re-prefills in flight max ${sc.reprefillsInFlightMax} (limit ${sc.reprefillLimitMax}), refusals ${JSON.stringify(refusals)}`,
    );
    return summary;
  } finally {
    await gw?.stop().catch(() => undefined);
    await Promise.all(engines.map((e) => e.stop()));
  }
}

if (require.main === module) {
  let o: BenchOptions;
  try {
    o = parseOptions(process.argv.slice(2), process.env);
  } catch (e) {
    process.stderr.write(`bench: ${(e as Error).message}\n`);
    process.exit(2);
  }
  runBench(o).then(
    (r) => {
      process.stdout.write(
        `\n${r.table}\n\ntargets:\n${formatTargets(r.targets)}\n\nresults: ${r.outDir}${o.copyToDocs ? ' (chart copied to docs/bench/latest.svg)' : ''}\n`,
      );
      process.exit(0);
    },
    (e) => {
      process.stderr.write(`bench failed: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}

/** The sidecar's node flags: the product's, or BENCH_SIDECAR_NODE_FLAGS (`none`: none) for an A/B. */
function sidecarNodeFlags(): readonly string[] {
  const v = process.env.BENCH_SIDECAR_NODE_FLAGS?.trim();
  if (v === undefined || v === '') return SIDECAR_NODE_FLAGS;
  return v === 'none' ? [] : v.split(/\s+/);
}
