// Configuration from environment variables, validated once at start and frozen (fastify-style): a wrong
// value stops the process with one line per bad variable, naming it. Names follow the reference gateway
// (modelsphere/continuation_gateway) so a deployment can switch without renaming anything.
import { ERROR_CODES, GatewayError } from '../errors';
import type { TracingConfig } from '../obs/tracing';
import { checkTokenizerSetting } from '../templates/model-tokenizer';
import { AUTO_ON_SGLANG, ChatTemplateConfigError, isTemplateAuto, templateFromFiles } from '../templates/provider';
import { resolveWorkers, type WorkersSource } from './cpu-limit';
import { tracingConfig } from './otel-env';
import { schema, type Variables } from './schema';

export interface GatewayConfig {
  /** Where every leg goes: Envoy's egress listener in the stack (the router tier behind it). */
  readonly downstreamUrl: string;
  /** Where leg2 goes; defaults to downstreamUrl. */
  readonly continuationUrl: string;
  /** The model family the deployment serves; unset = no request is ever in scope. */
  readonly continuationModel: string | undefined;
  /**
   * CHAT_TEMPLATE: a .jinja, tokenizer_config.json or chat_template.json file, the model directory, or `auto`
   * (llama.cpp: llama-server's /props; vLLM: only the engine's own check; refused on SGLang); undefined = none
   * (src/templates/provider.ts).
   */
  readonly chatTemplate: string | undefined;
  /** Which engine serves the model: how a continuation request is rendered (src/families/). */
  readonly engine: 'sglang' | 'vllm' | 'llamacpp';
  readonly continuationEnabled: boolean;
  /**
   * CONTINUATION_UNVERIFIED: a leg 2 nothing checks (the generic guess: no family entry, no CHAT_TEMPLATE) is sent
   * (allow), or refused once the stream has shown reasoning (refuse: the interruption event continuation-unverified).
   */
  readonly continuationUnverified: 'allow' | 'refuse';
  /** Continue by token ids where leg 1 streams them (TOKEN_IDS_CONTINUATION; auto: vllm and llamacpp). */
  readonly tokenIdsContinuation: boolean;
  readonly stallIdleTimeoutMs: number;
  readonly maxStallMs: number;
  readonly connectTimeoutMs: number;
  readonly upstreamHeadersTimeoutMs: number;
  /** Legs over HTTP/2 (h2c to an http: URL), multiplexed on one connection per origin (src/upstream/client.ts). */
  readonly upstreamHttp2: boolean;
  /** With upstreamHttp2: legs per HTTP/2 connection before the next leg opens another connection. */
  readonly upstreamHttp2StreamsPerConnection: number;
  /** Per attempt: re-run an attempt without a first delta after this long; 0 = no per-attempt limit. */
  readonly firstDeltaTimeoutMs: number;
  /**
   * Per request, every attempt, backoff and admission wait together: the client has its first delta (or the
   * engine's own answer) or an explicit error this long after the request arrived.
   */
  readonly firstDeltaDeadlineMs: number;
  readonly maxAttempts: number;
  /** Continuation legs per request (1 = the reference's two legs at most); each one re-prefills all delivered text. */
  readonly maxContinuations: number;
  /** A re-run before the first delta waits base x 2^(n-1), jittered over its upper half, at most the max ... */
  readonly retryBackoffMs: number;
  readonly retryBackoffMaxMs: number;
  /** ... or the engine's Retry-After, when it asks for no more than this; a longer one is passed to the client. */
  readonly retryAfterMaxMs: number;
  /** Re-prefills in flight at once (a recovery leg from its send to its first token), at most ... */
  readonly recoveryMaxConcurrent: number;
  /** ... and as a percentage of the streams in progress ... */
  readonly recoveryBudgetPercent: number;
  /** ... but always at least this many (light traffic is never refused). */
  readonly recoveryMinConcurrent: number;
  /** RECOVERY_ADAPTIVE: the limit follows recovery legs' first-token latency (src/recovery/adaptive-limit.ts). */
  readonly recoveryAdaptive: boolean;
  /** How many times the pool's normal first-token latency a recovery leg may take before the adaptive limit shrinks. */
  readonly recoveryAdaptiveTolerance: number;
  /** How long a recovery waits for a free re-prefill slot before its stream ends explicitly. */
  readonly recoveryQueueTimeoutMs: number;
  /** The brake: this many failed recovery legs within the window (and no fewer than succeeded) open it. */
  readonly recoveryBrakeFailures: number;
  readonly recoveryBrakeWindowMs: number;
  /** How long the brake stays open before one probe recovery may go. */
  readonly recoveryBrakeOpenMs: number;
  /** Re-prefills larger than this (prompt plus delivered text, in tokens) are not started; 0 = no limit. */
  readonly maxRecoveryPromptTokens: number;
  /** The most delivered text (UTF-8 bytes) a stream keeps for a continuation; past it, it can no longer be continued. */
  readonly maxContinuationPrefixBytes: number;
  /** INTERRUPTION_NEXT_REQUEST_MAX_BYTES: the interruption event carries a continuation request up to this size (0: never). */
  readonly interruptionNextRequestMaxBytes: number;
  /** Response header naming a leg's model revision (else system_fingerprint); undefined = not read. */
  readonly modelRevisionHeader: string | undefined;
  readonly maxContinuationBodyBytes: number;
  readonly maxRequestBodyBytes: number;
  /** MAX_BODY_JSON_DEPTH: a request body nested deeper is out of scope, never parsed. */
  readonly maxBodyJsonDepth: number;
  readonly cjkCharsPerToken: number;
  readonly otherCharsPerToken: number;
  /** TOKENIZER: the model's tokenizer.json (or its directory), counted in process; first for exact accounting. */
  readonly tokenizer: string | undefined;
  /** The engine's /tokenize endpoint for exact accounting (after TOKENIZER); unset = character estimate. */
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
  /** OpenTelemetry traces; undefined = off (no OTLP endpoint, or OTEL_SDK_DISABLED=true). */
  readonly tracing: TracingConfig | undefined;
}

export class ConfigError extends GatewayError {
  readonly code = ERROR_CODES.configInvalid;
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

const MB = 1024 * 1024;

/** Every variable the sidecar reads (src/config/unknown-vars.ts warns about near misses of these). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(schema.shape);

/** Parses and freezes the configuration; throws ConfigError listing every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const e = parseVariables(env);
  return Object.freeze({
    ...upstreamSettings(e),
    ...recoverySettings(e),
    ...accountingSettings(e),
    ...processSettings(e, resolveWorkers(e.WORKERS, env)),
    tracing: tracingConfig(e, e.CONTINUATION_ENGINE, e.DOWNSTREAM_URL),
  });
}

/** The schema's verdict on every variable at once, then the checks that read files (CHAT_TEMPLATE, TOKENIZER). */
function parseVariables(env: NodeJS.ProcessEnv): Variables {
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
  const templateProblem = checkChatTemplate(e.CHAT_TEMPLATE, e.CONTINUATION_MODEL, e.CONTINUATION_ENGINE);
  const tokenizerProblem = checkTokenizerSetting(e.TOKENIZER);
  // SGLang's streamed chat answers return_token_ids with a 400 (serving_chat.py): leg 1 would fail every time.
  const idsProblem =
    e.TOKEN_IDS_CONTINUATION === 'true' && e.CONTINUATION_ENGINE === 'sglang'
      ? 'config error: TOKEN_IDS_CONTINUATION true needs CONTINUATION_ENGINE vllm or llamacpp (SGLang streams no token ids)'
      : undefined;
  const problems = [templateProblem, tokenizerProblem, idsProblem].filter((p) => p !== undefined);
  if (problems.length > 0) throw new ConfigError(problems);
  return e;
}

/** Where legs go, what is served there, and how long an upstream may take. */
function upstreamSettings(e: Variables) {
  return {
    downstreamUrl: e.DOWNSTREAM_URL,
    continuationUrl: e.CONTINUATION_URL ?? e.DOWNSTREAM_URL,
    continuationModel: e.CONTINUATION_MODEL,
    chatTemplate: e.CHAT_TEMPLATE,
    engine: e.CONTINUATION_ENGINE,
    continuationEnabled: e.CONTINUATION_ENABLED,
    continuationUnverified: e.CONTINUATION_UNVERIFIED,
    tokenIdsContinuation:
      e.TOKEN_IDS_CONTINUATION === 'true' || (e.TOKEN_IDS_CONTINUATION === 'auto' && e.CONTINUATION_ENGINE !== 'sglang'),
    stallIdleTimeoutMs: e.STALL_IDLE_TIMEOUT_SECONDS * 1000,
    maxStallMs: e.MAX_STALL_SECONDS * 1000,
    connectTimeoutMs: e.CONNECT_TIMEOUT_SECONDS * 1000,
    upstreamHeadersTimeoutMs: e.UPSTREAM_HEADERS_TIMEOUT_SECONDS * 1000,
    upstreamHttp2: e.UPSTREAM_HTTP2,
    upstreamHttp2StreamsPerConnection: e.UPSTREAM_HTTP2_STREAMS_PER_CONNECTION,
    firstDeltaTimeoutMs: e.FIRST_DELTA_TIMEOUT_SECONDS * 1000,
    firstDeltaDeadlineMs: e.FIRST_DELTA_DEADLINE_SECONDS * 1000,
  };
}

/** How often, how many at once, and when recovery stops trying. */
function recoverySettings(e: Variables) {
  return {
    maxAttempts: e.MAX_ATTEMPTS,
    maxContinuations: e.MAX_CONTINUATIONS,
    retryBackoffMs: e.RETRY_BACKOFF_SECONDS * 1000,
    retryBackoffMaxMs: e.RETRY_BACKOFF_MAX_SECONDS * 1000,
    retryAfterMaxMs: e.RETRY_AFTER_MAX_SECONDS * 1000,
    recoveryMaxConcurrent: e.RECOVERY_MAX_CONCURRENT,
    recoveryBudgetPercent: e.RECOVERY_BUDGET_PERCENT,
    recoveryMinConcurrent: e.RECOVERY_MIN_CONCURRENT,
    recoveryAdaptive: e.RECOVERY_ADAPTIVE,
    recoveryAdaptiveTolerance: e.RECOVERY_ADAPTIVE_TOLERANCE,
    recoveryQueueTimeoutMs: e.RECOVERY_QUEUE_TIMEOUT_SECONDS * 1000,
    recoveryBrakeFailures: e.RECOVERY_BRAKE_FAILURES,
    recoveryBrakeWindowMs: e.RECOVERY_BRAKE_WINDOW_SECONDS * 1000,
    recoveryBrakeOpenMs: e.RECOVERY_BRAKE_SECONDS * 1000,
  };
}

/** Size limits, token counting and what is buffered. */
function accountingSettings(e: Variables) {
  return {
    maxRecoveryPromptTokens: e.MAX_RECOVERY_PROMPT_TOKENS,
    maxContinuationPrefixBytes: e.MAX_CONTINUATION_PREFIX_BYTES,
    interruptionNextRequestMaxBytes: e.INTERRUPTION_NEXT_REQUEST_MAX_BYTES,
    modelRevisionHeader: e.MODEL_REVISION_HEADER || undefined,
    maxContinuationBodyBytes: Math.floor(e.MAX_CONTINUATION_BODY_MB * MB),
    maxRequestBodyBytes: Math.floor(e.MAX_REQUEST_BODY_MB * MB),
    maxBodyJsonDepth: e.MAX_BODY_JSON_DEPTH,
    cjkCharsPerToken: e.CJK_CHARS_PER_TOKEN,
    otherCharsPerToken: e.OTHER_CHARS_PER_TOKEN,
    tokenizer: e.TOKENIZER,
    tokenizeUrl: e.TOKENIZE_URL,
    tokenizeTimeoutMs: e.TOKENIZE_TIMEOUT_MS,
    tokenizeDialect: e.TOKENIZE_DIALECT,
    bufferToolCalls: e.BUFFER_TOOL_CALLS,
    bufferStructuredOutput: e.BUFFER_STRUCTURED_OUTPUT,
    unreachableStatus: e.UNREACHABLE_STATUS,
  };
}

/** The process: workers, listeners, the drain, logs. */
function processSettings(e: Variables, workers: ReturnType<typeof resolveWorkers>) {
  return {
    workers: workers.workers,
    workersSource: workers.source,
    port: e.PORT,
    host: e.HOST,
    adminPort: e.ADMIN_PORT,
    adminHost: e.ADMIN_HOST ?? e.HOST,
    drainTimeoutMs: e.DRAIN_TIMEOUT_SECONDS * 1000,
    envoyAdminUrl: e.ENVOY_ADMIN_URL,
    logLevel: e.LOG_LEVEL,
  };
}

/**
 * A CHAT_TEMPLATE file that cannot be read or parsed stops the sidecar now, not at the first crash; so does `auto`
 * on SGLang, which answers no template and renders leg 2 without a check the sidecar could ask for.
 */
function checkChatTemplate(setting: string | undefined, model: string | undefined, engine: GatewayConfig['engine']): string | undefined {
  if (setting === undefined) return undefined;
  if (model === undefined)
    return 'config error: CHAT_TEMPLATE needs CONTINUATION_MODEL (the name the model is served as; any name: the template decides the format)';
  if (isTemplateAuto(setting)) return engine === 'sglang' ? AUTO_ON_SGLANG : undefined;
  try {
    templateFromFiles(setting);
    return undefined;
  } catch (err) {
    if (err instanceof ChatTemplateConfigError) return err.message;
    throw err;
  }
}
