// The standard OpenTelemetry variables the sidecar reads, as the SDK environment specification names them
// (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/ and, for the OTLP exporter,
// https://opentelemetry.io/docs/specs/otel/protocol/exporter/): validated here, at start, like every other
// variable (a bad value names its variable), and handed to src/obs/tracing.ts as one TracingConfig. Nothing
// here loads an OpenTelemetry module: with tracing off, none is ever loaded.
import { z } from 'zod';
import { parseOtlpHeaders } from '../obs/otlp-headers';
import type { Propagator, ServerAddress, TracingConfig } from '../obs/tracing';
import { bool, MAX_TIMER_SECONDS, num, optionalHttpUrl, optionalString } from './values';

/** A variable that takes one of `values` (case-insensitive); unset or blank = undefined. */
const oneOf = <T extends string>(values: readonly T[], why = '') =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      const s = v?.trim().toLowerCase();
      if (!s) return undefined;
      if ((values as readonly string[]).includes(s)) return s as T;
      ctx.addIssue({ code: 'custom', message: `expected ${values.join(' or ')}${why}, got ${JSON.stringify(v)}` });
      return z.NEVER;
    });

/** A comma-separated list whose every item is one of `values`; unset or blank = undefined. */
const listOf = <T extends string>(values: readonly T[], why: string) =>
  z
    .string()
    .optional()
    .transform((v, ctx) => {
      const items = (v ?? '')
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      if (items.length === 0) return undefined;
      const bad = items.filter((s) => !(values as readonly string[]).includes(s));
      if (bad.length === 0) return [...new Set(items)] as T[];
      ctx.addIssue({ code: 'custom', message: `${bad.join(', ')} not supported: expected a list of ${values.join(', ')}${why}` });
      return z.NEVER;
    });

// http/json is a protocol the spec defines but no exporter the sidecar ships speaks.
const protocol = oneOf(['http/protobuf', 'grpc'] as const, ' (http/json is not supported)');
const compression = oneOf(['gzip', 'none'] as const);
/** OTEL_EXPORTER_OTLP_TIMEOUT: milliseconds, per export (retries included: the exporter's deadline). */
const timeoutMs = z
  .string()
  .optional()
  .transform((v, ctx) => {
    if (!v?.trim()) return undefined;
    const n = Number(v);
    if (Number.isInteger(n) && n > 0 && n <= MAX_TIMER_SECONDS * 1000) return n;
    ctx.addIssue({ code: 'custom', message: `expected a positive integer (milliseconds), got ${JSON.stringify(v)}` });
    return z.NEVER;
  });

const PROPAGATORS = ['tracecontext', 'baggage', 'b3', 'b3multi', 'none'] as const;

export const OTEL_VARIABLES = {
  OTEL_TRACES_EXPORTER: listOf(['otlp', 'none'] as const, ' (the sidecar ships the OTLP exporter only)'),
  OTEL_EXPORTER_OTLP_ENDPOINT: optionalHttpUrl,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: optionalHttpUrl,
  OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol,
  OTEL_EXPORTER_OTLP_HEADERS: optionalString,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: optionalString,
  OTEL_EXPORTER_OTLP_TIMEOUT: timeoutMs,
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: timeoutMs,
  OTEL_EXPORTER_OTLP_COMPRESSION: compression,
  OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: compression,
  OTEL_PROPAGATORS: listOf(PROPAGATORS, ' (jaeger, xray and ottrace are not shipped)'),
  OTEL_SERVICE_NAME: optionalString,
  OTEL_SDK_DISABLED: bool(false),
  OTEL_BSP_MAX_QUEUE_SIZE: num(2048, { int: true, min: 1 }),
  OTEL_BSP_SCHEDULE_DELAY: num(5000, { int: true, min: 1, max: MAX_TIMER_SECONDS * 1000 }),
  // Not an OTEL_* variable: what the spans give as server.address / server.port (see serverAddress below).
  TRACE_SERVER_ADDRESS: z
    .string()
    .optional()
    .transform((v, ctx) => {
      if (!v?.trim()) return undefined;
      const a = parseHostPort(v);
      if (a) return a;
      ctx.addIssue({ code: 'custom', message: `expected host or host:port, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }),
};

type OtelEnv = { [K in keyof typeof OTEL_VARIABLES]: z.infer<(typeof OTEL_VARIABLES)[K]> };

/** The OTLP exporter's default timeout (the spec's OTEL_EXPORTER_OTLP_TIMEOUT default: 10 s). */
export const DEFAULT_EXPORT_TIMEOUT_MS = 10_000;

/**
 * gen_ai.provider.name for the engine the deployment runs. The GenAI conventions list well-known values for
 * hosted services only (openai, aws.bedrock, ...) and allow a custom value when none applies; `openai` is
 * the OpenAI service itself, with openai.* attributes. A self-hosted engine speaking the OpenAI API is
 * none of them, so the value names the engine (docs/tracing.md "Attributes" cites the conventions).
 */
export const PROVIDER_NAMES = { sglang: 'sglang', vllm: 'vllm', llamacpp: 'llama.cpp' } as const;

/** `host`, `host:port` or `[v6]:port` -> server.address / server.port; undefined when it is none of these. */
export function parseHostPort(v: string): ServerAddress | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/[\]]+))(?::(\d{1,5}))?$/.exec(v.trim());
  if (!m) return undefined;
  const port = m[3] === undefined ? undefined : Number(m[3]);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  return { address: m[1] ?? m[2], ...(port !== undefined ? { port } : {}) };
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)$/i;

/**
 * server.address / server.port of the spans, from configuration only (never from a request): the GenAI
 * conventions want the server behind any intermediary. TRACE_SERVER_ADDRESS names it (the router tier's
 * Service, say); unset, DOWNSTREAM_URL's host, unless that is a loopback address (Envoy's egress listener in
 * the pod, which names no server at all): then the attributes are left out.
 */
export function serverAddress(explicit: ServerAddress | undefined, downstreamUrl: string): ServerAddress | undefined {
  if (explicit) return explicit;
  const u = new URL(downstreamUrl);
  if (LOOPBACK.test(u.hostname)) return undefined;
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  return { address: u.hostname.replace(/^\[|\]$/g, ''), port };
}

/**
 * Tracing's configuration, or undefined when it is off: OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, or
 * no OTLP endpoint. The traces URL as the spec derives it: for http/protobuf the traces endpoint as is, else
 * <endpoint>/v1/traces; for grpc either endpoint as is (the path is the gRPC method's).
 */
export function tracingConfig(e: OtelEnv, engine: keyof typeof PROVIDER_NAMES, downstreamUrl: string): TracingConfig | undefined {
  if (e.OTEL_SDK_DISABLED || e.OTEL_TRACES_EXPORTER?.includes('none')) return undefined;
  const proto = e.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? e.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  const base = e.OTEL_EXPORTER_OTLP_ENDPOINT;
  const url = e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (base && proto === 'http/protobuf' ? `${base.replace(/\/+$/, '')}/v1/traces` : base);
  if (!url) return undefined;
  // `none` is the spec's value for no propagator; beside others it adds nothing.
  const propagators = (e.OTEL_PROPAGATORS ?? ['tracecontext', 'baggage']).filter((p): p is Propagator => p !== 'none');
  return {
    protocol: proto,
    tracesUrl: url,
    serviceName: e.OTEL_SERVICE_NAME ?? 'continuation-gateway',
    maxQueueSize: e.OTEL_BSP_MAX_QUEUE_SIZE,
    scheduleDelayMs: e.OTEL_BSP_SCHEDULE_DELAY,
    headers: { ...parseOtlpHeaders(e.OTEL_EXPORTER_OTLP_HEADERS), ...parseOtlpHeaders(e.OTEL_EXPORTER_OTLP_TRACES_HEADERS) },
    timeoutMs: e.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? e.OTEL_EXPORTER_OTLP_TIMEOUT ?? DEFAULT_EXPORT_TIMEOUT_MS,
    compression: e.OTEL_EXPORTER_OTLP_TRACES_COMPRESSION ?? e.OTEL_EXPORTER_OTLP_COMPRESSION ?? 'none',
    propagators,
    providerName: PROVIDER_NAMES[engine],
    serverAddress: serverAddress(e.TRACE_SERVER_ADDRESS, downstreamUrl),
  };
}
