// Assembles the sidecar: the ext_proc gRPC server (with grpc.health.v1), the HTTP admin server (/healthz,
// /readyz, /metrics) and what every request shares. Used by src/main.ts (the process) and by the end-to-end
// tests (in-process, so they can read its log records).
//
// Drain (SIGTERM): health NOT_SERVING and /readyz 503 so Envoy's health check takes the host out; requests
// that still arrive are passed through (CONTINUE + echo: native proxying), streams in flight finish (up to a
// deadline), then everything closes.
import * as grpc from '@grpc/grpc-js';
import { ConfigError, type GatewayConfig } from './config/env';
import { EnvoyVersionCheck } from './extproc/envoy-version';
import { HealthStatus } from './extproc/health';
import { ProcessorStream } from './extproc/processor-stream';
import { extProcServiceDefinition, type ProcessingRequest, type ProcessingResponse } from './extproc/proto';
import { AUTO, FamilyDetection } from './families/detect';
import { logFamily } from './families/startup-log';
import { startAdminServer } from './obs/admin-server';
import { AdmissionMetrics } from './obs/admission-metrics';
import type { Logger } from './obs/logger';
import { Metrics } from './obs/metrics';
import { createTracing } from './obs/tracing';
import { AdmissionAuthority, admissionSettings, type RecoveryAdmission } from './recovery/admission';
import type { GatewayContext } from './stream/context';
import { RequestExchange } from './stream/request-exchange';
import { loadModelTokenizer, ModelTokenizerError, type TextTokenizer } from './templates/model-tokenizer';
import { templateProvider } from './templates/provider';
import { UpstreamClient } from './upstream/client';

export interface Sidecar {
  readonly port: number;
  /** The admin server's port (ADMIN_PORT, or the ephemeral one it got). */
  readonly adminPort: number;
  readonly ctx: GatewayContext;
  readonly health: HealthStatus;
  readonly draining: boolean;
  /**
   * Stops taking new streams (health NOT_SERVING, /readyz 503, new requests passed through), waits up to
   * timeoutMs for the originated streams in flight to end, then closes. Idempotent.
   */
  drain(timeoutMs: number): Promise<void>;
  /** Closes now: gRPC calls get graceMs to end (0 = as long as they take), then are cancelled. */
  close(graceMs?: number): Promise<void>;
}

/**
 * After the drain deadline, how long the streams still in flight get to end with the interruption event (or a
 * 503) before the server closes and Envoy resets whatever is left.
 */
export const SHUTDOWN_GRACE_MS = 2000;

/** Request bodies up to MAX_REQUEST_BODY_MB arrive as ext_proc messages; grpc-js defaults to 4 MiB. */
const GRPC_MESSAGE_SLACK = 1024 * 1024;

export interface SidecarOptions {
  /** Serve the admin HTTP server (default true). Cluster workers leave it to the primary. */
  admin?: boolean;
  /**
   * Recovery admission from elsewhere (a cluster worker asks the primary); by default this process is its
   * own authority, with its metrics in its registry.
   */
  admission?: (streams: { readonly active: number }) => RecoveryAdmission;
}

/** TOKENIZER, loaded (logged with its file and load time); a file the library cannot load is a ConfigError. */
function modelTokenizer(setting: string | undefined, log: Logger): TextTokenizer | undefined {
  if (setting === undefined) return undefined;
  const started = performance.now();
  try {
    const t = loadModelTokenizer(setting);
    log.info({ decision: 'TOKENIZER_LOADED', file: t.origin, load_ms: Math.round(performance.now() - started) }, 'counting in process');
    return t;
  } catch (e) {
    if (e instanceof ModelTokenizerError) throw new ConfigError([`config error: TOKENIZER ${e.message}`]);
    throw e;
  }
}

export async function startSidecar(config: GatewayConfig, log: Logger, opts: SidecarOptions = {}): Promise<Sidecar> {
  // The originated streams in flight; their count is what admission and the drain read.
  const inFlight = new Set<{ shutdown(): void }>();
  const streams = {
    get active() {
      return inFlight.size;
    },
  };
  const drainState = { draining: false };
  const metrics = new Metrics(
    () => ({ activeStreams: streams.active }),
    () => drainState.draining,
  );
  let admission: RecoveryAdmission;
  if (opts.admission) admission = opts.admission(streams);
  else {
    let authority: AdmissionAuthority | undefined;
    authority = new AdmissionAuthority(
      admissionSettings(config),
      () => streams.active,
      new AdmissionMetrics(metrics.registry, log, () => authority),
    );
    admission = authority;
  }
  // ENVOY_ADMIN_URL: in-scope requests are passed through until that Envoy is known to be >= 1.37.
  const envoyVersion = new EnvoyVersionCheck({ adminUrl: config.envoyAdminUrl, log, registry: metrics.registry });
  await envoyVersion.start();
  // CONTINUATION_MODEL=auto: the family from what the engine says it serves (passthrough until known).
  const detection =
    config.continuationModel?.trim().toLowerCase() === AUTO ? new FamilyDetection({ baseUrl: config.downstreamUrl, log }) : undefined;
  void detection?.start();
  // CHAT_TEMPLATE: read (or, `auto`, asked of the engine) once; every continuation renders and verifies with it.
  const chatTemplate = await templateProvider(config.chatTemplate, { baseUrl: config.downstreamUrl, log });
  // TOKENIZER: loaded once per process; a file the library cannot read stops the sidecar now (ConfigError).
  const tokenizer = modelTokenizer(config.tokenizer, log);
  const ctx: GatewayContext = {
    config,
    log,
    upstream: new UpstreamClient({
      connectTimeoutMs: config.connectTimeoutMs,
      headersTimeoutMs: config.upstreamHeadersTimeoutMs,
      http2: config.upstreamHttp2,
      http2StreamsPerConnection: config.upstreamHttp2StreamsPerConnection,
    }),
    admission,
    streams,
    metrics,
    drain: drainState,
    inFlight,
    envoyVersion,
    detectedModel: detection,
    chatTemplate,
    tokenizer,
    tracing: createTracing(config.tracing),
  };
  const health = new HealthStatus('NOT_SERVING');
  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxRequestBodyBytes + GRPC_MESSAGE_SLACK,
    'grpc.max_send_message_length': config.maxRequestBodyBytes + GRPC_MESSAGE_SLACK,
    // channelz bookkeeping wraps every call (one ext_proc stream per client request) and nothing here reads it.
    'grpc.enable_channelz': 0,
  });
  server.addService(extProcServiceDefinition(), {
    Process(call: grpc.ServerDuplexStream<ProcessingRequest, ProcessingResponse>) {
      // The exchange needs the stream and the stream its handler: the handler forwards to the exchange made next.
      let exchange: RequestExchange | null = null;
      const client = new ProcessorStream(call, {
        onRequestHeaders: (h, eos) => exchange?.onRequestHeaders(h, eos),
        onRequestBody: (b, eos) => exchange?.onRequestBody(b, eos),
        onRequestTrailers: () => exchange?.onRequestTrailers(),
        onGone: (reason) => exchange?.onGone(reason),
      });
      exchange = new RequestExchange(ctx, client);
    },
  });
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${config.host}:${config.port}`, grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  let listening = true;
  health.setAll('SERVING');
  let admin: { port: number; close(): Promise<void> };
  try {
    admin =
      opts.admin === false
        ? { port: -1, close: async () => undefined }
        : await startAdminServer({
            host: config.adminHost,
            port: config.adminPort,
            metrics: ctx.metrics,
            ready: () => listening && !drainState.draining,
          });
  } catch (e) {
    envoyVersion.stop();
    detection?.stop();
    chatTemplate.stop();
    server.forceShutdown();
    await ctx.upstream.close();
    await ctx.tracing?.shutdown();
    throw e;
  }
  logFamily(log, config);
  log.info(
    {
      port,
      admin_port: admin.port,
      downstream_url: config.downstreamUrl,
      continuation_url: config.continuationUrl,
      continuation_model: config.continuationModel ?? null,
      engine: config.engine,
      continuation_enabled: config.continuationEnabled,
      tracing: ctx.tracing?.enabled ?? false,
    },
    'sidecar listening',
  );
  let closing: Promise<void> | null = null;
  /** Graceful gRPC shutdown bounded by graceMs (0 = unbounded), then forced; the admin server last. */
  const close = (graceMs = 0): Promise<void> =>
    (closing ??= (async () => {
      listening = false;
      envoyVersion.stop();
      detection?.stop();
      chatTemplate.stop();
      health.setAll('NOT_SERVING');
      health.endWatches();
      await new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        if (graceMs > 0) setTimeout(resolve, graceMs).unref();
      });
      server.forceShutdown();
      await admin.close();
      await ctx.upstream.close();
      // The spans still queued are exported (bounded) before the process exits: drain() ends here too.
      await ctx.tracing?.shutdown();
    })());
  let draining: Promise<void> | null = null;
  return {
    port,
    adminPort: admin.port,
    ctx,
    health,
    get draining() {
      return drainState.draining;
    },
    drain(timeoutMs: number) {
      // biome-ignore lint/suspicious/noAssignInExpressions: the drain runs once; later calls share its promise
      return (draining ??= (async () => {
        drainState.draining = true;
        health.setAll('NOT_SERVING');
        const started = Date.now();
        log.info({ decision: 'DRAIN', active_streams: streams.active, timeout_ms: timeoutMs }, 'draining: new requests are passed through');
        while (streams.active > 0 && Date.now() - started < timeoutMs) await new Promise((r) => setTimeout(r, 25));
        const left = streams.active;
        if (left > 0) {
          log.warn(
            { decision: 'DRAIN_TIMEOUT', active_streams: left },
            'drain deadline reached with streams in flight: ending them with the interruption event',
          );
          // Never a silent cut: each stream ends with the interruption event (or, before its first delta,
          // an error answer), then the server closes.
          for (const r of ctx.inFlight) r.shutdown();
          const until = Date.now() + SHUTDOWN_GRACE_MS;
          while (streams.active > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 25));
        } else log.info({ decision: 'DRAINED', drain_ms: Date.now() - started }, 'drained: closing');
        // Whatever is left (pass-through ext_proc streams, or streams past the deadline) gets a short grace.
        await close(Math.max(1000, timeoutMs - (Date.now() - started)));
      })());
    },
    close: (graceMs?: number) => close(graceMs),
  };
}
