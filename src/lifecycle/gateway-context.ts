// What every request of one sidecar process shares (src/stream/context.ts GatewayContext), built once at start:
// metrics, recovery admission, the Envoy version check, the family detection, the chat template, the model's
// tokenizer and the upstream client. The checks that run in the background are stopped by the sidecar's close
// (src/lifecycle/close.ts) through `stopChecks`.
import { ConfigError, type GatewayConfig } from '../config/env';
import { EnvoyVersionCheck } from '../extproc/envoy-version';
import { AUTO, FamilyDetection } from '../families/detect';
import { AdmissionMetrics } from '../obs/admission-metrics';
import type { Logger } from '../obs/logger';
import { Metrics } from '../obs/metrics';
import { createTracing } from '../obs/tracing';
import { AdmissionAuthority, admissionSettings, type RecoveryAdmission } from '../recovery/admission';
import type { GatewayContext } from '../stream/context';
import { loadModelTokenizer, ModelTokenizerError, type TextTokenizer } from '../templates/model-tokenizer';
import { templateProvider } from '../templates/provider';
import { UpstreamClient } from '../upstream/client';

/** The originated streams in flight, counted: what admission, the metrics and the drain read. */
export type StreamCount = { readonly active: number };

/** Recovery admission from elsewhere (a cluster worker asks the primary: src/cluster/worker.ts). */
export type AdmissionSource = (streams: StreamCount) => RecoveryAdmission;

export interface SharedContext {
  readonly ctx: GatewayContext;
  /** Stops the background checks (Envoy version, family detection, template refresh), in that order. */
  stopChecks(): void;
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

/** `from`'s admission, or by default this process's own authority, with its metrics in this registry. */
function recoveryAdmission(
  config: GatewayConfig,
  log: Logger,
  metrics: Metrics,
  streams: StreamCount,
  from: AdmissionSource | undefined,
): RecoveryAdmission {
  if (from) return from(streams);
  let authority: AdmissionAuthority | undefined;
  authority = new AdmissionAuthority(
    admissionSettings(config),
    () => streams.active,
    new AdmissionMetrics(metrics.registry, log, () => authority),
  );
  return authority;
}

function upstreamClient(config: GatewayConfig): UpstreamClient {
  return new UpstreamClient({
    connectTimeoutMs: config.connectTimeoutMs,
    headersTimeoutMs: config.upstreamHeadersTimeoutMs,
    http2: config.upstreamHttp2,
    http2StreamsPerConnection: config.upstreamHttp2StreamsPerConnection,
  });
}

export async function buildGatewayContext(config: GatewayConfig, log: Logger, admissionFrom?: AdmissionSource): Promise<SharedContext> {
  const inFlight = new Set<{ shutdown(): void }>();
  const streams: StreamCount = {
    get active() {
      return inFlight.size;
    },
  };
  const drain = { draining: false };
  const metrics = new Metrics(
    () => ({ activeStreams: streams.active }),
    () => drain.draining,
  );
  const admission = recoveryAdmission(config, log, metrics, streams, admissionFrom);
  // ENVOY_ADMIN_URL: in-scope requests are passed through until that Envoy is known to be >= 1.37.
  const envoyVersion = new EnvoyVersionCheck({ adminUrl: config.envoyAdminUrl, log, registry: metrics.registry });
  await envoyVersion.start();
  // CONTINUATION_MODEL=auto: the family from what the engine says it serves (passthrough until known).
  const detectedModel =
    config.continuationModel?.trim().toLowerCase() === AUTO ? new FamilyDetection({ baseUrl: config.downstreamUrl, log }) : undefined;
  void detectedModel?.start();
  // CHAT_TEMPLATE: read once (or, `auto` on llama.cpp, asked of the engine until it answers); every continuation
  // renders and verifies with it.
  const chatTemplate = await templateProvider(config.chatTemplate, { engine: config.engine, baseUrl: config.downstreamUrl, log });
  // TOKENIZER: loaded once per process; a file the library cannot read stops the sidecar now (ConfigError).
  const tokenizer = modelTokenizer(config.tokenizer, log);
  const ctx: GatewayContext = {
    config,
    log,
    upstream: upstreamClient(config),
    admission,
    streams,
    metrics,
    drain,
    inFlight,
    envoyVersion,
    detectedModel,
    chatTemplate,
    tokenizer,
    tracing: createTracing(config.tracing),
  };
  const stopChecks = () => {
    envoyVersion.stop();
    detectedModel?.stop();
    chatTemplate.stop();
  };
  return { ctx, stopChecks };
}
