// Envoy's own OpenTelemetry tracer, optional in the generated bootstrap (EnvoyConfigOptions.tracing): each HTTP
// connection manager (front, chat hop, egress) reports its spans over OTLP/HTTP to one collector, so a trace shows
// the Envoy hops around the sidecar's request and leg spans (src/obs/tracing.ts). Off unless configured.
// API: https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/trace/v3/opentelemetry.proto; what Envoy 1.40
// did with it is recorded in docs/envoy.md (m).

export interface EnvoyTracingOptions {
  /** The OTLP/HTTP collector (an OpenTelemetry Collector, Jaeger, Tempo, ...); a hostname is resolved (STRICT_DNS). */
  collectorHost: string;
  collectorPort: number;
  /** The resource's service.name on Envoy's spans (default continuation-gateway-envoy). */
  serviceName?: string;
  /** Of the requests that come without a sampling decision (no traceparent), the percentage traced (default 100). */
  samplingPercent?: number;
}

export const OTEL_COLLECTOR_CLUSTER = 'otel_collector';
export const DEFAULT_ENVOY_SERVICE_NAME = 'continuation-gateway-envoy';

/** The `tracing` block of one HTTP connection manager. */
export function hcmTracing(t: EnvoyTracingOptions): object {
  const sampling = t.samplingPercent ?? 100;
  if (!Number.isFinite(sampling) || sampling < 0 || sampling > 100)
    throw new Error(`renderEnvoyConfig: tracing.samplingPercent must be within 0..100, got ${sampling}`);
  return {
    random_sampling: { value: sampling },
    provider: {
      name: 'envoy.tracers.opentelemetry',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
        http_service: {
          http_uri: { uri: `http://${t.collectorHost}:${t.collectorPort}/v1/traces`, cluster: OTEL_COLLECTOR_CLUSTER, timeout: '2s' },
        },
        service_name: t.serviceName ?? DEFAULT_ENVOY_SERVICE_NAME,
      },
    },
  };
}

/** The collector's cluster (plain HTTP/1.1, as OTLP/HTTP is served). */
export function collectorCluster(t: EnvoyTracingOptions): object {
  if (!Number.isInteger(t.collectorPort) || t.collectorPort <= 0 || t.collectorPort > 65535)
    throw new Error(`renderEnvoyConfig: tracing.collectorPort must be a port, got ${t.collectorPort}`);
  if (!t.collectorHost) throw new Error('renderEnvoyConfig: tracing.collectorHost is empty');
  const ip = /^[\d.]+$/.test(t.collectorHost);
  return {
    name: OTEL_COLLECTOR_CLUSTER,
    type: ip ? 'STATIC' : 'STRICT_DNS',
    ...(ip ? {} : { dns_lookup_family: 'V4_ONLY' }),
    connect_timeout: '2s',
    load_assignment: {
      cluster_name: OTEL_COLLECTOR_CLUSTER,
      endpoints: [
        { lb_endpoints: [{ endpoint: { address: { socket_address: { address: t.collectorHost, port_value: t.collectorPort } } } }] },
      ],
    },
  };
}

/**
 * By default Envoy decides whether to trace from the x-request-id (a UUID whose bits carry the decision): a client's
 * own id that is no UUID (the tests' ids, many SDKs') made every request untraced on Envoy 1.40, and the
 * traceparent Envoy passed on was then unsampled, so the sidecar's parent-based sampler dropped its spans too.
 * With this, the decision is the client's traceparent (sampled flag) or random_sampling (docs/envoy.md (m)).
 */
const REQUEST_ID_NOT_FOR_SAMPLING = {
  typed_config: {
    '@type': 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig',
    use_request_id_for_trace_sampling: false,
  },
};

interface ListenerShape {
  filter_chains?: { filters?: { name: string; typed_config?: object }[] }[];
}

/** The listener with the tracing block added to each of its HTTP connection managers (a copy; the input is kept). */
export function withHcmTracing(listener: object, t: EnvoyTracingOptions): object {
  const l = listener as ListenerShape;
  if (!l.filter_chains) return listener;
  return {
    ...listener,
    filter_chains: l.filter_chains.map((chain) => ({
      ...chain,
      filters: chain.filters?.map((f) =>
        f.name === 'envoy.filters.network.http_connection_manager'
          ? { ...f, typed_config: { ...f.typed_config, tracing: hcmTracing(t), request_id_extension: REQUEST_ID_NOT_FOR_SAMPLING } }
          : f,
      ),
    })),
  };
}
