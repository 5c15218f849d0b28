// Configuration from environment variables, validated once at start and frozen (fastify-style): a wrong
// value stops the process with one line per bad variable, naming it. Names follow the reference gateway
// (modelsphere/continuation_gateway) so a deployment can switch without renaming anything.
import { z } from 'zod';
import { GatewayError } from '../errors';
import { resolveWorkers, type WorkersSource } from './cpu-limit';

const bool = (def: boolean) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === '') return def;
      const s = v.trim().toLowerCase();
      if (['1', 'true', 'yes', 'on'].includes(s)) return true;
      if (['0', 'false', 'no', 'off'].includes(s)) return false;
      ctx.addIssue({ code: 'custom', message: `expected true or false, got ${JSON.stringify(v)}` });
      return z.NEVER;
    });

const num = (def: number, opts: { min?: number; max?: number; int?: boolean; positive?: boolean } = {}) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (v === undefined || v.trim() === '') return def;
      const n = Number(v);
      const bad =
        !Number.isFinite(n) ||
        (opts.int && !Number.isInteger(n)) ||
        (opts.positive && n <= 0) ||
        (opts.min !== undefined && n < opts.min) ||
        (opts.max !== undefined && n > opts.max);
      if (bad) {
        const what = opts.positive ? 'a positive' : opts.min !== undefined ? `a >= ${opts.min}` : 'a';
        const upTo = opts.max !== undefined ? ` <= ${opts.max}` : '';
        ctx.addIssue({ code: 'custom', message: `expected ${what} ${opts.int ? 'integer' : 'number'}${upTo}, got ${JSON.stringify(v)}` });
        return z.NEVER;
      }
      return n;
    });

/**
 * The longest timer Node can arm, in whole seconds: setTimeout() with more than 2^31-1 ms fires after 1 ms
 * (TimeoutOverflowWarning), so a huge "never" value would turn into an instant timeout.
 */
const MAX_TIMER_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

const httpUrl = z
  .string()
  .trim()
  .transform((v, ctx) => {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      ctx.addIssue({ code: 'custom', message: `expected an http(s) URL, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      ctx.addIssue({ code: 'custom', message: `expected an http(s) URL, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    return v.replace(/\/+$/, '');
  });

/** An optional http(s) URL: unset or blank = undefined; a bad value is reported like DOWNSTREAM_URL's. */
const optionalHttpUrl = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (v === undefined || v.trim() === '') return undefined;
    const r = httpUrl.safeParse(v);
    if (r.success) return r.data;
    for (const issue of r.error.issues) ctx.addIssue({ code: 'custom', message: issue.message });
    return z.NEVER;
  });

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const schema = z.object({
  DOWNSTREAM_URL: httpUrl,
  CONTINUATION_URL: optionalHttpUrl,
  CONTINUATION_MODEL: optionalString,
  CONTINUATION_ENGINE: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'sglang').toLowerCase())
    .pipe(z.enum(['sglang', 'vllm'], { message: 'expected sglang or vllm' })),
  CONTINUATION_ENABLED: bool(true),
  STALL_IDLE_TIMEOUT_SECONDS: num(20, { positive: true, max: MAX_TIMER_SECONDS }),
  MAX_STALL_SECONDS: num(300, { positive: true }),
  CONNECT_TIMEOUT_SECONDS: num(30, { positive: true, max: MAX_TIMER_SECONDS }),
  UPSTREAM_HEADERS_TIMEOUT_SECONDS: num(60, { positive: true, max: MAX_TIMER_SECONDS }),
  FIRST_DELTA_TIMEOUT_SECONDS: num(0, { min: 0, max: MAX_TIMER_SECONDS }),
  MAX_ATTEMPTS: num(2, { int: true, min: 1 }),
  RECOVERY_MAX_CONCURRENT: num(64, { int: true, min: 0 }),
  RECOVERY_BUDGET_PERCENT: num(20, { min: 0 }),
  RECOVERY_MIN_CONCURRENT: num(3, { int: true, min: 0 }),
  RECOVERY_QUEUE_TIMEOUT_SECONDS: num(30, { min: 0, max: MAX_TIMER_SECONDS }),
  RECOVERY_BRAKE_FAILURES: num(5, { int: true, min: 0 }),
  RECOVERY_BRAKE_WINDOW_SECONDS: num(10, { positive: true, max: MAX_TIMER_SECONDS }),
  RECOVERY_BRAKE_SECONDS: num(5, { positive: true, max: MAX_TIMER_SECONDS }),
  MAX_RECOVERY_PROMPT_TOKENS: num(0, { int: true, min: 0 }),
  MODEL_REVISION_HEADER: z
    .string()
    .optional()
    .transform((v) => (v === undefined ? 'x-model-revision' : v.trim().toLowerCase()))
    .pipe(z.string().regex(/^([a-z0-9!#$%&'*+.^_`|~-]+)?$/, { message: 'expected an HTTP header name (or empty to disable)' })),
  MAX_CONTINUATION_BODY_MB: num(10, { positive: true }),
  MAX_REQUEST_BODY_MB: num(100, { positive: true }),
  CJK_CHARS_PER_TOKEN: num(1.6, { positive: true }),
  OTHER_CHARS_PER_TOKEN: num(4.0, { positive: true }),
  TOKENIZE_URL: optionalHttpUrl,
  TOKENIZE_TIMEOUT_MS: num(200, { positive: true }),
  TOKENIZE_DIALECT: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'auto').toLowerCase())
    .pipe(z.enum(['auto', 'sglang', 'vllm', 'llamacpp'], { message: 'expected auto, sglang, vllm or llamacpp' })),
  BUFFER_TOOL_CALLS: bool(false),
  BUFFER_STRUCTURED_OUTPUT: bool(false),
  UNREACHABLE_STATUS: num(429, { int: true, min: 400, max: 599 }),
  WORKERS: num(0, { int: true, min: 0 }),
  PORT: num(50051, { int: true, min: 0, max: 65535 }),
  ADMIN_PORT: num(9090, { int: true, min: 0, max: 65535 }),
  DRAIN_TIMEOUT_SECONDS: num(30, { min: 0, max: MAX_TIMER_SECONDS }),
  HOST: z
    .string()
    .optional()
    .transform((v) => v?.trim() || '127.0.0.1'),
  // Unset = HOST. In a pod: 0.0.0.0, so the kubelet's httpGet probes and Prometheus reach /healthz, /readyz and
  // /metrics on the pod IP while the ext_proc gRPC port stays on loopback.
  ADMIN_HOST: z
    .string()
    .optional()
    .transform((v) => v?.trim() || undefined),
  // Envoy's admin interface (istio-proxy: http://127.0.0.1:15000): the sidecar reads /server_info and passes
  // in-scope requests through while that Envoy is older than 1.37 (src/extproc/envoy-version.ts). Unset = no check.
  ENVOY_ADMIN_URL: optionalHttpUrl,
  LOG_LEVEL: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'info').toLowerCase())
    .pipe(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { message: 'expected a pino level' })),
});

export interface GatewayConfig {
  /** Where every leg goes: Envoy's egress listener in the stack (the router tier behind it). */
  readonly downstreamUrl: string;
  /** Where leg2 goes; defaults to downstreamUrl. */
  readonly continuationUrl: string;
  /** The model family the deployment serves; unset = no request is ever in scope. */
  readonly continuationModel: string | undefined;
  readonly engine: 'sglang' | 'vllm';
  readonly continuationEnabled: boolean;
  readonly stallIdleTimeoutMs: number;
  readonly maxStallMs: number;
  readonly connectTimeoutMs: number;
  readonly upstreamHeadersTimeoutMs: number;
  /** 0 = wait for the first delta as long as it takes (a slow prefill is not a failure). */
  readonly firstDeltaTimeoutMs: number;
  readonly maxAttempts: number;
  /** Re-prefills in flight at once (a recovery leg from its send to its first token), at most ... */
  readonly recoveryMaxConcurrent: number;
  /** ... and as a percentage of the streams in progress ... */
  readonly recoveryBudgetPercent: number;
  /** ... but always at least this many (light traffic is never refused). */
  readonly recoveryMinConcurrent: number;
  /** How long a recovery waits for a free re-prefill slot before its stream ends explicitly. */
  readonly recoveryQueueTimeoutMs: number;
  /** The brake: this many failed recovery legs within the window (and no fewer than succeeded) open it. */
  readonly recoveryBrakeFailures: number;
  readonly recoveryBrakeWindowMs: number;
  /** How long the brake stays open before one probe recovery may go. */
  readonly recoveryBrakeOpenMs: number;
  /** Re-prefills larger than this (prompt plus delivered text, in tokens) are not started; 0 = no limit. */
  readonly maxRecoveryPromptTokens: number;
  /** Response header naming a leg's model revision (else system_fingerprint); undefined = not read. */
  readonly modelRevisionHeader: string | undefined;
  readonly maxContinuationBodyBytes: number;
  readonly maxRequestBodyBytes: number;
  readonly cjkCharsPerToken: number;
  readonly otherCharsPerToken: number;
  /** The engine's /tokenize endpoint for exact accounting; unset = character estimate. */
  readonly tokenizeUrl: string | undefined;
  readonly tokenizeTimeoutMs: number;
  /** Which /tokenize body TOKENIZE_URL reads (src/upstream/tokenizer.ts); auto = detected once per URL. */
  readonly tokenizeDialect: 'auto' | 'sglang' | 'vllm' | 'llamacpp';
  readonly bufferToolCalls: boolean;
  readonly bufferStructuredOutput: boolean;
  readonly unreachableStatus: number;
  /**
   * Sidecar processes sharing the gRPC port (Node cluster; 1 = a single process). WORKERS=0 (the default): the
   * cgroup CPU limit, or 1 in a container without one, or the CPUs available outside containers (cpu-limit.ts).
   */
  readonly workers: number;
  /** Where `workers` came from (logged at start). */
  readonly workersSource: WorkersSource;
  readonly port: number;
  readonly host: string;
  /** The HTTP admin server (/healthz, /readyz, /metrics) on ADMIN_HOST; 0 = an ephemeral port. */
  readonly adminPort: number;
  /** The admin server's bind address: ADMIN_HOST, or HOST when unset. */
  readonly adminHost: string;
  /** SIGTERM: how long streams in flight may take to finish before the sidecar closes. */
  readonly drainTimeoutMs: number;
  /** Envoy's admin interface, for the startup version check (ENVOY_ADMIN_URL); undefined = no check. */
  readonly envoyAdminUrl?: string;
  readonly logLevel: string;
}

export class ConfigError extends GatewayError {
  readonly code = 'GW_ERR_CONFIG_INVALID';
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

const MB = 1024 * 1024;

/** Parses and freezes the configuration; throws ConfigError listing every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const picked: Record<string, string | undefined> = {};
  for (const key of Object.keys(schema.shape)) picked[key] = env[key];
  const parsed = schema.safeParse(picked);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => {
      const name = String(i.path[0] ?? 'config');
      const msg = i.code === 'invalid_type' && picked[name] === undefined ? 'is required' : i.message;
      return `config error: ${name} ${msg}`;
    });
    throw new ConfigError(problems);
  }
  const e = parsed.data;
  const workers = resolveWorkers(e.WORKERS, env);
  return Object.freeze({
    downstreamUrl: e.DOWNSTREAM_URL,
    continuationUrl: e.CONTINUATION_URL ?? e.DOWNSTREAM_URL,
    continuationModel: e.CONTINUATION_MODEL,
    engine: e.CONTINUATION_ENGINE,
    continuationEnabled: e.CONTINUATION_ENABLED,
    stallIdleTimeoutMs: e.STALL_IDLE_TIMEOUT_SECONDS * 1000,
    maxStallMs: e.MAX_STALL_SECONDS * 1000,
    connectTimeoutMs: e.CONNECT_TIMEOUT_SECONDS * 1000,
    upstreamHeadersTimeoutMs: e.UPSTREAM_HEADERS_TIMEOUT_SECONDS * 1000,
    firstDeltaTimeoutMs: e.FIRST_DELTA_TIMEOUT_SECONDS * 1000,
    maxAttempts: e.MAX_ATTEMPTS,
    recoveryMaxConcurrent: e.RECOVERY_MAX_CONCURRENT,
    recoveryBudgetPercent: e.RECOVERY_BUDGET_PERCENT,
    recoveryMinConcurrent: e.RECOVERY_MIN_CONCURRENT,
    recoveryQueueTimeoutMs: e.RECOVERY_QUEUE_TIMEOUT_SECONDS * 1000,
    recoveryBrakeFailures: e.RECOVERY_BRAKE_FAILURES,
    recoveryBrakeWindowMs: e.RECOVERY_BRAKE_WINDOW_SECONDS * 1000,
    recoveryBrakeOpenMs: e.RECOVERY_BRAKE_SECONDS * 1000,
    maxRecoveryPromptTokens: e.MAX_RECOVERY_PROMPT_TOKENS,
    modelRevisionHeader: e.MODEL_REVISION_HEADER || undefined,
    maxContinuationBodyBytes: Math.floor(e.MAX_CONTINUATION_BODY_MB * MB),
    maxRequestBodyBytes: Math.floor(e.MAX_REQUEST_BODY_MB * MB),
    cjkCharsPerToken: e.CJK_CHARS_PER_TOKEN,
    otherCharsPerToken: e.OTHER_CHARS_PER_TOKEN,
    tokenizeUrl: e.TOKENIZE_URL,
    tokenizeTimeoutMs: e.TOKENIZE_TIMEOUT_MS,
    tokenizeDialect: e.TOKENIZE_DIALECT,
    bufferToolCalls: e.BUFFER_TOOL_CALLS,
    bufferStructuredOutput: e.BUFFER_STRUCTURED_OUTPUT,
    unreachableStatus: e.UNREACHABLE_STATUS,
    workers: workers.workers,
    workersSource: workers.source,
    port: e.PORT,
    host: e.HOST,
    adminPort: e.ADMIN_PORT,
    adminHost: e.ADMIN_HOST ?? e.HOST,
    drainTimeoutMs: e.DRAIN_TIMEOUT_SECONDS * 1000,
    envoyAdminUrl: e.ENVOY_ADMIN_URL,
    logLevel: e.LOG_LEVEL,
  });
}
