// The environment variables the sidecar reads, each with its type, default and bounds (zod). src/config/env.ts
// parses them once and turns them into the frozen GatewayConfig.
import { z } from 'zod';
import { OTEL_VARIABLES } from './otel-env';
import { bool, httpUrl, MAX_TIMER_SECONDS, num, optionalHttpUrl, optionalString } from './values';

export const schema = z.object({
  DOWNSTREAM_URL: httpUrl,
  CONTINUATION_URL: optionalHttpUrl,
  CONTINUATION_MODEL: optionalString,
  // The template the engine serves (src/templates/source.ts): a file, the model directory, or `auto`.
  CHAT_TEMPLATE: optionalString,
  CONTINUATION_ENGINE: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'sglang').toLowerCase())
    .pipe(z.enum(['sglang', 'vllm', 'llamacpp'], { message: 'expected sglang, vllm or llamacpp' })),
  CONTINUATION_ENABLED: bool(true),
  // What a leg 2 nothing can check gets (a name no family knows, no CHAT_TEMPLATE): the reference gateway's
  // `<think>` guess (allow), or, once reasoning was shown, the interruption event continuation-unverified (refuse).
  CONTINUATION_UNVERIFIED: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'allow').toLowerCase())
    .pipe(z.enum(['allow', 'refuse'], { message: 'expected allow or refuse' })),
  // Continuation by token ids (src/continuation/token-ids/): auto = on where the engine streams ids (vllm, llamacpp).
  TOKEN_IDS_CONTINUATION: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'auto').toLowerCase())
    .pipe(z.enum(['auto', 'true', 'false'], { message: 'expected auto, true or false' })),
  STALL_IDLE_TIMEOUT_SECONDS: num(20, { positive: true, max: MAX_TIMER_SECONDS }),
  MAX_STALL_SECONDS: num(300, { positive: true }),
  CONNECT_TIMEOUT_SECONDS: num(30, { positive: true, max: MAX_TIMER_SECONDS }),
  UPSTREAM_HEADERS_TIMEOUT_SECONDS: num(60, { positive: true, max: MAX_TIMER_SECONDS }),
  UPSTREAM_HTTP2: bool(false),
  UPSTREAM_HTTP2_STREAMS_PER_CONNECTION: num(100, { int: true, min: 1, max: 10_000 }),
  FIRST_DELTA_TIMEOUT_SECONDS: num(0, { min: 0, max: MAX_TIMER_SECONDS }),
  FIRST_DELTA_DEADLINE_SECONDS: num(60, { positive: true, max: MAX_TIMER_SECONDS }),
  MAX_ATTEMPTS: num(2, { int: true, min: 1 }),
  MAX_CONTINUATIONS: num(1, { int: true, min: 1, max: 8 }),
  RETRY_BACKOFF_SECONDS: num(0.25, { min: 0, max: MAX_TIMER_SECONDS }),
  RETRY_BACKOFF_MAX_SECONDS: num(5, { min: 0, max: MAX_TIMER_SECONDS }),
  RETRY_AFTER_MAX_SECONDS: num(10, { min: 0, max: MAX_TIMER_SECONDS }),
  RECOVERY_MAX_CONCURRENT: num(64, { int: true, min: 0 }),
  RECOVERY_BUDGET_PERCENT: num(20, { min: 0 }),
  RECOVERY_MIN_CONCURRENT: num(3, { int: true, min: 0 }),
  RECOVERY_ADAPTIVE: bool(false),
  RECOVERY_ADAPTIVE_TOLERANCE: num(1.5, { min: 1, max: 100 }),
  RECOVERY_QUEUE_TIMEOUT_SECONDS: num(30, { min: 0, max: MAX_TIMER_SECONDS }),
  RECOVERY_BRAKE_FAILURES: num(5, { int: true, min: 0 }),
  RECOVERY_BRAKE_WINDOW_SECONDS: num(10, { positive: true, max: MAX_TIMER_SECONDS }),
  RECOVERY_BRAKE_SECONDS: num(5, { positive: true, max: MAX_TIMER_SECONDS }),
  MAX_RECOVERY_PROMPT_TOKENS: num(0, { int: true, min: 0 }),
  MAX_CONTINUATION_PREFIX_BYTES: num(4_194_304, { int: true, min: 1024 }),
  // The interruption event's ready continuation request (src/recovery/next-request.ts): its largest size; 0 = never.
  INTERRUPTION_NEXT_REQUEST_MAX_BYTES: num(1_048_576, { int: true, min: 0, max: 104_857_600 }),
  MODEL_REVISION_HEADER: z
    .string()
    .optional()
    .transform((v) => (v === undefined ? 'x-model-revision' : v.trim().toLowerCase()))
    .pipe(z.string().regex(/^([a-z0-9!#$%&'*+.^_`|~-]+)?$/, { message: 'expected an HTTP header name (or empty to disable)' })),
  MAX_CONTINUATION_BODY_MB: num(10, { positive: true }),
  MAX_REQUEST_BODY_MB: num(100, { positive: true }),
  // Deeper bodies are out of scope (src/request/json-depth.ts); above ~1,000 JSON.stringify may overflow.
  MAX_BODY_JSON_DEPTH: num(128, { int: true, min: 1, max: 1000 }),
  CJK_CHARS_PER_TOKEN: num(1.6, { positive: true }),
  OTHER_CHARS_PER_TOKEN: num(4.0, { positive: true }),
  // The model's tokenizer.json, or the model directory holding it (src/templates/model-tokenizer.ts).
  TOKENIZER: optionalString,
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
  // OpenTelemetry traces (src/obs/tracing.ts): the standard OTEL_* variables (src/config/otel-env.ts).
  ...OTEL_VARIABLES,
  LOG_LEVEL: z
    .string()
    .optional()
    .transform((v) => (v?.trim() || 'info').toLowerCase())
    .pipe(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { message: 'expected a pino level' })),
});

/** The variables as the schema reads them. */
export type Variables = z.infer<typeof schema>;
