// What every request shares inside one sidecar process: frozen config, the upstream client, recovery
// admission, the stream count, the logger, the metrics and the drain flag.
import type { GatewayConfig } from '../config/env';
import type { ResponsesStream } from '../endpoints/responses/stream';
import type { Logger } from '../obs/logger';
import type { Metrics } from '../obs/metrics';
import type { Tracing } from '../obs/tracing';
import type { RecoveryAdmission } from '../recovery/admission';
import type { InScopeBody } from '../request/scope';
import type { TextTokenizer } from '../templates/model-tokenizer';
import type { TemplateProvider } from '../templates/provider';
import type { UpstreamClient } from '../upstream/client';

/** What a request needs of the upstream client: open a leg, and close at the end (tests pass their own). */
export type Upstream = Pick<UpstreamClient, 'open' | 'close'>;

export interface GatewayContext {
  readonly config: GatewayConfig;
  readonly upstream: Upstream;
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
  /** CONTINUATION_MODEL=auto: the name detected from the engine (src/families/detect.ts); undefined until then. */
  readonly detectedModel?: { model(): string | undefined };
  /** CHAT_TEMPLATE: the template the engine serves (src/templates/provider.ts); unset or undefined = none. */
  readonly chatTemplate?: TemplateProvider;
  /** TOKENIZER: the model's tokenizer, counting in process (src/templates/model-tokenizer.ts); unset = none. */
  readonly tokenizer?: TextTokenizer;
  /** OpenTelemetry traces (src/obs/tracing.ts); unset = off. */
  readonly tracing?: Tracing;
}

/** The CONTINUATION_MODEL in effect: the configured one, or with `auto` the detected one (undefined until known). */
export function continuationModelOf(ctx: Pick<GatewayContext, 'config' | 'detectedModel'>): string | undefined {
  const m = ctx.config.continuationModel;
  return m?.trim().toLowerCase() === 'auto' ? ctx.detectedModel?.model() : m;
}

/** An in-scope request, as the scope decision accepted it (request-exchange.ts): its endpoint and typed payload. */
export type InScopeRequest = InScopeBody & {
  path: string;
  clientHeaders: Record<string, string>;
  rawBody: Buffer;
  multimodal: boolean;
  /** response_format json_*: held whole until finish (BUFFER_STRUCTURED_OUTPUT), re-run on failure. */
  structured: boolean;
  /** POST /v1/responses: leg 1's reader, its continuation's writer, its failure event (src/endpoints/responses). */
  responses?: ResponsesStream;
  /** Where continuation legs are sent when not to `path` (a Responses stream continues through the chat path). */
  continuationPath?: string;
};
