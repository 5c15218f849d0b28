// What every request shares inside one sidecar process: frozen config, the upstream client, recovery
// admission, the stream count, the logger, the metrics and the drain flag.
import type { GatewayConfig } from '../config/env';
import type { Logger } from '../obs/logger';
import type { Metrics } from '../obs/metrics';
import type { ChatRequest } from '../openai/chat';
import type { RecoveryAdmission } from '../recovery/admission';
import type { UpstreamClient } from '../upstream/client';

export interface GatewayContext {
  readonly config: GatewayConfig;
  readonly upstream: UpstreamClient;
  /** Re-prefill slots for recovery legs (this process's authority, or the cluster primary's). */
  readonly admission: RecoveryAdmission;
  /** Originated streams in progress in this process (derived: inFlight.size). */
  readonly streams: { readonly active: number };
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Set by Sidecar.drain(): new requests are passed through (native proxying). */
  readonly drain: { draining: boolean };
  /** Originated responses in flight, so a drain deadline can end them with the interruption event. */
  readonly inFlight: Set<{ shutdown(): void }>;
  /** ENVOY_ADMIN_URL's version check (src/extproc/envoy-version.ts): a reason = pass in-scope requests through. */
  readonly envoyVersion?: { passthroughReason(): string | undefined };
}

/** An in-scope request, as the scope decision accepted it (request-exchange.ts). */
export interface InScopeRequest {
  path: string;
  clientHeaders: Record<string, string>;
  rawBody: Buffer;
  payload: ChatRequest;
  multimodal: boolean;
  /** response_format json_*: held whole until finish (BUFFER_STRUCTURED_OUTPUT), re-run on failure. */
  structured: boolean;
}
