// Envoy bootstrap generator for the continuation gateway.
//
// The bootstrap is a plain object written as JSON (Envoy reads JSON bootstraps as YAML's subset). Every
// setting that is not Envoy's default, or whose default we rely on, carries a comment saying WHY. The
// checked-in example envoy/envoy.demo.json is this function's output for DEMO_ENVOY_OPTIONS; a unit test
// fails when the two drift apart (regenerate with `node dist/tools/stack/envoy-config.js`).
//
// Layout (see envoy/README.md):
//   front listener    (listenPort)               clients -> chat, completions, responses: front_chat; other paths: router tier
//   front_chat        (internal listener)        ext_proc filter -> router tier (see envoy-memory.ts)
//   egress listener   (127.0.0.1:egressPort)     sidecar legs -> router tier (no ext_proc: no loop)
//   continuation egress (127.0.0.1:continuationEgressPort, optional) sidecar leg2 -> continuation tier
//   clusters: router_tier, continuation_tier (optional), ext_proc (the sidecar, gRPC over HTTP/2), front_chat
//   admin             (127.0.0.1:adminPort)
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import {
  CHAT_CLUSTER,
  CHAT_LISTENER,
  chatCluster,
  DEFAULT_MAX_HEAP_BYTES,
  FRONT_CONNECTION_BUFFER_BYTES,
  internalListenerExtension,
  overloadManager,
} from './envoy-memory';

export interface UpstreamHost {
  host: string;
  port: number;
  /**
   * The model revision this replica serves (a rolling update): a continuation that asks for leg 1's revision
   * (the sidecar's MODEL_REVISION_HEADER) is routed to a replica of that revision. All replicas or none.
   */
  revision?: string;
}

export interface EnvoyConfigOptions {
  /**
   * Port of the client-facing (front) listener. For this and the other listener and admin ports, 0 means an
   * ephemeral port that Envoy binds itself (read back from its admin interface: tools/stack/envoy-process.ts).
   */
  listenPort: number;
  /** Admin interface port, always bound to 127.0.0.1 (0: ephemeral, Envoy writes it to --admin-address-path). */
  adminPort: number;
  /** Port of the egress listener (127.0.0.1 only) through which the sidecar fetches its legs. */
  egressPort: number;
  /** Optional second egress listener (127.0.0.1 only) that routes to `continuationTier`. */
  continuationEgressPort?: number;
  /** Where the sidecar's ext_proc gRPC server listens (unused with extProcEndpointsFile). */
  extProcHost: string;
  extProcPort: number;
  /**
   * The ext_proc cluster's endpoint from this file (EDS over the filesystem; Envoy reloads it when a new
   * version is moved in) instead of extProcHost:extProcPort. For a sidecar that starts after Envoy: it needs the
   * egress listener's port, which Envoy only knows once it has bound port 0 (`npm run stack`). See
   * extProcEndpointsJson for the file's content.
   */
  extProcEndpointsFile?: string;
  /** The router tier (one or more replicas); hostnames are resolved with STRICT_DNS (IPv4). */
  routerTier: UpstreamHost[];
  /** A separate router for leg2 (only used together with continuationEgressPort). */
  continuationTier?: UpstreamHost[];
  /** The sidecar's idle timer for a leg (STALL_IDLE_TIMEOUT_SECONDS). */
  stallTimeoutSeconds: number;
  /** The longest a client stream may stay silent while the sidecar waits out stalls (MAX_STALL_SECONDS). */
  maxStallSeconds: number;
  /**
   * The sidecar's own timeout for a leg's response headers. It is NOT implemented in Envoy (a route `timeout`
   * would also kill streams that are already flowing); it only widens the idle budgets below, because the
   * client can stay silent for a stall plus the next leg's time to first byte.
   */
  upstreamHeadersTimeoutSeconds?: number;
  /** connect_timeout of the router-tier clusters (default 5 s). */
  routerConnectTimeoutSeconds?: number;
  /**
   * How long an idle pooled connection to a router-tier host is kept (default ROUTER_IDLE_TIMEOUT_SECONDS, 1 s):
   * below the engines' own keep-alive timeouts, so that Envoy, not the engine, closes an idle connection.
   */
  routerIdleTimeoutSeconds?: number;
  /** The sidecar's MODEL_REVISION_HEADER, for replicas with revisions (default x-model-revision). */
  modelRevisionHeader?: string;
  /** Address of the front listener (default 127.0.0.1; use 0.0.0.0 in a pod). */
  listenAddress?: string;
  /** Extra seconds added on top of the stall budget for Envoy's idle timers (default 60). */
  idleMarginSeconds?: number;
  /** Request bodies up to this size stay retryable on the egress routes (default 16 MiB). */
  retryBufferLimitBytes?: number;
  /**
   * The longest `Retry-After` of a replica's 429 that the egress route waits out before it sends the leg to another
   * replica (the sidecar's RETRY_AFTER_MAX_SECONDS; default 10). A longer one is not waited for: the retry goes
   * after Envoy's ordinary back-off (25 ms base), to another replica.
   */
  retryAfterMaxSeconds?: number;
  /**
   * How Envoy health-checks the sidecar (default 'tcp'). 'grpc' uses grpc.health.v1 (service ""), which proves
   * the gRPC server answers; switch to it once the sidecar serves the health service.
   */
  extProcHealthCheck?: 'tcp' | 'grpc';
  /**
   * Heap size the overload manager keeps Envoy under by resetting the streams of clients that do not read
   * (default DEFAULT_MAX_HEAP_BYTES, 384 MiB; see envoy-memory.ts).
   */
  maxHeapBytes?: number;
  /**
   * false: no internal chat hop; ext_proc runs on the front listener's chat route itself. Only for measuring
   * what the hop costs (the bench's configuration h): without it a client that does not read is not capped
   * (docs/envoy.md (g)). Default true.
   */
  chatHop?: boolean;
  /** Envoy's OpenTelemetry tracer on every HTTP connection manager, exporting to this collector (default off). */
  tracing?: EnvoyTracingOptions;
}

/** The options the checked-in example envoy/envoy.demo.json is rendered from (documented in envoy/README.md). */
export const DEMO_ENVOY_OPTIONS: EnvoyConfigOptions = Object.freeze({
  listenPort: 8080,
  adminPort: 9901,
  egressPort: 10001,
  extProcHost: '127.0.0.1',
  extProcPort: 50051,
  routerTier: [{ host: '127.0.0.1', port: 8000 }],
  stallTimeoutSeconds: 20,
  maxStallSeconds: 300,
  extProcHealthCheck: 'grpc',
  // The sidecar's UPSTREAM_HEADERS_TIMEOUT_SECONDS default, as `npm run stack` passes it.
  upstreamHeadersTimeoutSeconds: 60,
}) as EnvoyConfigOptions;

/** DEMO_ENVOY_OPTIONS plus a separate continuation router (rendered into envoy/envoy.demo-continuation.json). */
export const DEMO_CONTINUATION_ENVOY_OPTIONS: EnvoyConfigOptions = Object.freeze({
  ...DEMO_ENVOY_OPTIONS,
  continuationEgressPort: 10002,
  continuationTier: [{ host: '127.0.0.1', port: 8001 }],
}) as EnvoyConfigOptions;

export const ROUTER_CLUSTER = 'router_tier';
export const CONTINUATION_CLUSTER = 'continuation_tier';
export const EXT_PROC_CLUSTER = 'ext_proc';

// The headers between the sidecar and its egress listeners are named once, where the sidecar reads and
// writes them: Envoy's %RESPONSE_FLAGS%, the replica that served a leg, the replica a recovery leg avoids.
import { AVOID_HOST_HEADER, UPSTREAM_FLAGS_HEADER, UPSTREAM_HOST_HEADER } from '../../src/request/forward-headers';

/** Request header the front listener sets to the client's own x-request-id (absent when Envoy generated it). */
export { CLIENT_REQUEST_ID_HEADER } from '../../src/openai/tool-call-ids';
export { AVOID_HOST_HEADER, UPSTREAM_FLAGS_HEADER, UPSTREAM_HOST_HEADER };

import { CLIENT_REQUEST_ID_HEADER } from '../../src/openai/tool-call-ids';
import { ENDPOINT_PATHS, type Endpoint } from '../../src/request/endpoint';
import { collectorCluster, type EnvoyTracingOptions, withHcmTracing } from './envoy-tracing';

/** The `envoy.lb` metadata key listing, on each replica, the names it stands in for. */
const AVOID_KEY = 'serves_when_avoiding';
/** The `envoy.lb` metadata key of a replica's model revision (UpstreamHost.revision). */
const REVISION_KEY = 'model_revision';
/** The request header a continuation names leg 1's revision with (the sidecar's MODEL_REVISION_HEADER default). */
export const DEFAULT_MODEL_REVISION_HEADER = 'x-model-revision';
export const CHAT_PATH = ENDPOINT_PATHS.chat;
export { CHAT_CLUSTER, CHAT_LISTENER } from './envoy-memory';

const T = {
  hcm: 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  extProc: 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor',
  extProcPerRoute: 'type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute',
  router: 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
  httpOptions: 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
  stdoutLog: 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
  previousHosts: 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate',
  reqWithoutQuery: 'type.googleapis.com/envoy.extensions.formatter.req_without_query.v3.ReqWithoutQuery',
  headerToMetadata: 'type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config',
  earlyHeaderMutation: 'type.googleapis.com/envoy.extensions.http.early_header_mutation.header_mutation.v3.HeaderMutation',
  httpInspector: 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector',
} as const;

const HTTP_OPTIONS_KEY = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

const secs = (n: number): string => {
  if (!Number.isFinite(n) || n < 0) throw new Error(`invalid duration: ${n}`);
  // Envoy durations are strings like "12s" / "0.5s"; keep millisecond precision.
  return `${Math.round(n * 1000) / 1000}s`;
};

function checkPort(name: string, p: number | undefined, ephemeralAllowed = false): void {
  if (p === undefined || !Number.isInteger(p) || p < (ephemeralAllowed ? 0 : 1) || p > 65535) {
    throw new Error(`renderEnvoyConfig: ${name} must be a TCP port (${ephemeralAllowed ? 0 : 1}-65535), got ${String(p)}`);
  }
}

function checkTier(name: string, tier: UpstreamHost[] | undefined): asserts tier is UpstreamHost[] {
  if (!Array.isArray(tier) || tier.length === 0) {
    throw new Error(`renderEnvoyConfig: ${name} needs at least one {host, port}`);
  }
  tier.forEach((h, i) => {
    if (typeof h.host !== 'string' || h.host.trim() === '') throw new Error(`renderEnvoyConfig: ${name}[${i}].host is empty`);
    checkPort(`${name}[${i}].port`, h.port);
  });
  const withRevision = tier.filter((h) => h.revision !== undefined).length;
  if (withRevision !== 0 && withRevision !== tier.length)
    throw new Error(`renderEnvoyConfig: ${name}: give every replica a revision, or none`);
}

/**
 * Access log line: no header values but the request id, and no bodies (prompts and answers never reach a log),
 * only what tells a failure apart: which listener/route, the request id the sidecar's records carry, status, %RESPONSE_FLAGS% (UF, URX, UH, UC, DC, ...), code details,
 * upstream host, attempts, timing and byte counts. The path is logged without its query string.
 */
function accessLog(listener: string): object[] {
  return [
    {
      name: 'envoy.access_loggers.stdout',
      typed_config: {
        '@type': T.stdoutLog,
        log_format: {
          text_format_source: {
            inline_string:
              `[%START_TIME%] ${listener} %REQ(:METHOD)% %REQ_WITHOUT_QUERY(:PATH)% %PROTOCOL% rid=%REQ(X-REQUEST-ID)% ` +
              'code=%RESPONSE_CODE% flags=%RESPONSE_FLAGS% details=%RESPONSE_CODE_DETAILS% ' +
              'route=%ROUTE_NAME% upstream=%UPSTREAM_HOST% attempts=%UPSTREAM_REQUEST_ATTEMPT_COUNT% ' +
              'ttfb_ms=%RESPONSE_DURATION% dur_ms=%DURATION% rx=%BYTES_RECEIVED% tx=%BYTES_SENT%\n',
          },
          // %REQ_WITHOUT_QUERY% is an extension formatter: it keeps API keys passed as ?key= out of logs.
          formatters: [{ name: 'envoy.formatter.req_without_query', typed_config: { '@type': T.reqWithoutQuery } }],
        },
      },
    },
  ];
}

function socketAddress(address: string, port: number): object {
  return { socket_address: { address, port_value: port } };
}

function isIp(host: string): boolean {
  return net.isIP(host) !== 0;
}

/**
 * Idle timeout of the pooled connections to the router tier. Engines close idle keep-alive connections
 * themselves: uvicorn (SGLang, vLLM) after 5 s, llama.cpp's server (cpp-httplib) after 5 s, Node's http
 * server after 5 s, gunicorn after 2 s. When the engine closes first, a leg sent at that moment on the
 * connection it is closing gets Envoy's 503 UC (connection_termination) before any response byte; Envoy's
 * default idle timeout (1 h) makes that the usual way an idle connection ends. 1 s is below all of these, so
 * Envoy closes first; the cost is a new TCP connection for a leg after 1 s without traffic to that host
 * (negligible next to a prefill). The race that remains (an engine that closes sooner, a restart, a
 * per-connection request limit) is covered by the sidecar's one re-run of a UC (src/upstream/client.ts).
 */
export const ROUTER_IDLE_TIMEOUT_SECONDS = 1;

/** retryAfterMaxSeconds' default: the sidecar's RETRY_AFTER_MAX_SECONDS default. */
export const DEFAULT_RETRY_AFTER_MAX_SECONDS = 10;

/** A cluster for one router tier (the "router_tier" or the "continuation_tier"). */
function routerCluster(name: string, tier: UpstreamHost[], connectTimeoutSeconds: number, idleTimeoutSeconds: number): object {
  const allIps = tier.every((h) => isIp(h.host));
  return {
    name,
    // STATIC when every replica is an IP literal; STRICT_DNS otherwise so that Kubernetes Service names and
    // docker-compose hostnames work, re-resolved periodically (each A record becomes one host).
    type: allIps ? 'STATIC' : 'STRICT_DNS',
    // IPv4 only: the default (AUTO, i.e. v6 first) picks ::1 for "localhost" and many pods have no IPv6.
    ...(allIps ? {} : { dns_lookup_family: 'V4_ONLY' }),
    // A dead router replica must fail fast so that the before-headers retry can try the next one.
    connect_timeout: secs(connectTimeoutSeconds),
    lb_policy: 'ROUND_ROBIN',
    // The router tier speaks HTTP/1.1 (OpenAI-compatible servers, SGLang/vLLM routers). Explicit so that a
    // change of Envoy's default cannot switch legs to HTTP/2.
    typed_extension_protocol_options: {
      [HTTP_OPTIONS_KEY]: {
        '@type': T.httpOptions,
        // Envoy closes an idle connection before the engine does (ROUTER_IDLE_TIMEOUT_SECONDS).
        common_http_protocol_options: { idle_timeout: secs(idleTimeoutSeconds) },
        explicit_http_config: { http_protocol_options: {} },
      },
    },
    // Envoy's defaults (1024 connections / pending / requests) would cap the gateway at ~1k concurrent streams:
    // every client stream holds one upstream HTTP/1.1 connection for its whole life. max_retries: the egress
    // route retries only where no replica did any work (connect failure, refused stream, reset before the
    // request was sent), and a replica crash makes every leg that was headed for it such a retry AT ONCE. Past
    // the limit Envoy answers 503 UO although a live replica is free; a limit of 3 would bite as soon as
    // connects take their timeout (docs/envoy.md (h)). Attempts against a failing pool are bounded by the
    // sidecar instead (its admission and brake, and num_retries per leg).
    circuit_breakers: {
      thresholds: [{ priority: 'DEFAULT', max_connections: 10000, max_pending_requests: 10000, max_requests: 10000, max_retries: 10000 }],
    },
    ...avoidHostSubsets(tier),
    // Passive health: a replica that keeps answering 5xx (or refusing connections, which counts as a gateway
    // failure) is ejected for a while. enforcing_consecutive_gateway_failure defaults to 0 (count only), so it
    // is set to 100 to actually eject. max_ejection_percent 50 keeps half the tier in rotation; with a single
    // replica the default healthy_panic_threshold (50 %) makes Envoy keep routing to it even when ejected,
    // which is what we want: the sidecar, not Envoy, decides when to give up.
    outlier_detection: {
      consecutive_5xx: 5,
      consecutive_gateway_failure: 3,
      enforcing_consecutive_gateway_failure: 100,
      interval: '5s',
      base_ejection_time: '15s',
      max_ejection_percent: 50,
    },
    load_assignment: {
      cluster_name: name,
      endpoints: [
        {
          lb_endpoints: tier.map((h) => ({
            endpoint: { address: socketAddress(h.host, h.port) },
            ...(tier.length > 1 ? { metadata: { filter_metadata: { 'envoy.lb': replicaMetadata(tier, h) } } } : {}),
          })),
        },
      ],
    },
  };
}

/** A replica's name in the avoid-host protocol: host:port as configured (one name for all IPs of a DNS name). */
export const replicaName = (h: UpstreamHost): string => `${h.host}:${h.port}`;

/**
 * Avoiding the replica a recovery leg must not land on (docs/envoy.md (h)). Each replica carries, under
 * `envoy.lb`, its own name (`replica`, which the egress route reports in UPSTREAM_HOST_HEADER) and the list
 * of the OTHER replicas' names (AVOID_KEY). The egress listener copies a recovery leg's AVOID_HOST_HEADER
 * into the dynamic metadata `envoy.lb.AVOID_KEY`, and the subset load balancer, with list_as_any, then picks
 * among the replicas whose list contains that name: every replica but the avoided one. Without the header,
 * or with a name it does not know, the fallback is any replica (ANY_ENDPOINT), exactly as without subsets.
 * Measured on Envoy 1.40: 100 requests avoiding A: 0 on A, 50/50 on B and C; retries stay in the subset.
 */
function replicaMetadata(tier: UpstreamHost[], h: UpstreamHost): object {
  const me = replicaName(h);
  const md: Record<string, unknown> = { replica: me, [AVOID_KEY]: [...new Set(tier.map(replicaName))].filter((n) => n !== me) };
  if (h.revision !== undefined) md[REVISION_KEY] = h.revision;
  return md;
}

/**
 * The subsets a recovery leg can ask for. Envoy picks the selector whose keys are exactly the request's
 * `envoy.lb` keys, so with revisions every combination is listed: avoid + revision (the usual continuation),
 * revision alone, avoid alone. A request whose keys match no selector falls back to any replica.
 */
function avoidHostSubsets(tier: UpstreamHost[]): object {
  if (tier.length < 2) return {};
  const selectors = hasRevisions(tier)
    ? [{ keys: [AVOID_KEY, REVISION_KEY] }, { keys: [REVISION_KEY] }, { keys: [AVOID_KEY] }]
    : [{ keys: [AVOID_KEY] }];
  return { lb_subset_config: { fallback_policy: 'ANY_ENDPOINT', list_as_any: true, subset_selectors: selectors } };
}

function hasRevisions(tier: UpstreamHost[] | undefined): boolean {
  return !!tier && tier.length > 1 && tier.some((h) => h.revision !== undefined);
}

/** Streams per HTTP/2 connection to the sidecar: below nghttp2's reset burst of 1000 (see extProcCluster). */
export const EXT_PROC_STREAMS_PER_CONNECTION = 500;

/** How long Envoy waits for the sidecar's health answer (see extProcCluster's health_checks). */
export const EXT_PROC_HEALTH_CHECK_TIMEOUT_SECONDS = 5;

/** The ext_proc cluster: the sidecar's gRPC server. */
function extProcCluster(o: EnvoyConfigOptions): object {
  const allIp = o.extProcEndpointsFile !== undefined || isIp(o.extProcHost);
  return {
    name: EXT_PROC_CLUSTER,
    type: o.extProcEndpointsFile ? 'EDS' : allIp ? 'STATIC' : 'STRICT_DNS',
    ...(allIp ? {} : { dns_lookup_family: 'V4_ONLY' }),
    connect_timeout: '1s',
    // gRPC needs HTTP/2 to the sidecar.
    typed_extension_protocol_options: {
      [HTTP_OPTIONS_KEY]: {
        '@type': T.httpOptions,
        // Envoy ends every ext_proc stream with a RST_STREAM (ext_proc's close() half-closes, then resets; the
        // graceful-close runtime flag that avoids it crashed Envoy, see the bootstrap's comment). The
        // sidecar's HTTP/2 server (nghttp2 in Node) rate-limits received resets as a "rapid reset" defence: 1000
        // at once, then 33 a second; past that it sends GOAWAY and ends the connection, and the streams Envoy
        // was opening on it fail with a 500 (seen at ~300 requests/s: docs/envoy.md (f)). A connection that
        // carries fewer streams than that burst can never trip it: Envoy drains it after 500 streams (the
        // streams on it finish normally) and opens a new one.
        common_http_protocol_options: { max_requests_per_connection: EXT_PROC_STREAMS_PER_CONNECTION },
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
    // THE fail-open mechanism (docs/envoy.md (d)). In FULL_DUPLEX_STREAMED, failure_mode_allow is refused once
    // the body was handed to the gRPC stream, so a connect error that arrives asynchronously gives the client
    // a 500. With active health checking and a panic threshold of 0, a dead sidecar's host is marked unhealthy,
    // opening the gRPC stream fails synchronously ("no healthy upstream") before any body is sent, and
    // failure_mode_allow lets Envoy proxy natively. Panic threshold 0: never route to an unhealthy sidecar
    // "because all hosts are unhealthy" (the default 50 % would do exactly that with a single host).
    common_lb_config: {
      healthy_panic_threshold: { value: 0 },
      // A host's health change (and, from an endpoints file, its arrival) reaches the worker threads at once:
      // by default Envoy merges such updates for 1 s, and measured on Envoy 1.40 an endpoint added through
      // extProcEndpointsFile and seen healthy at the admin interface got "no healthy upstream" on the workers
      // (chat requests bypassing the sidecar) until about a second later. Only health and endpoint changes
      // of this one-host cluster are affected: a handful per sidecar restart.
      update_merge_window: '0s',
    },
    health_checks: [
      {
        // Long against a pause, short against death. A check that times out marks the sidecar unhealthy, and
        // the chat requests of the next second then bypass it silently (no crash protection): a sidecar frozen
        // for 2.2 s (a long GC pause, CPU throttling) lost 10 of them with a 1 s timeout
        // (test/e2e/sidecar-pause.e2e.test.ts, docs/envoy.md (d)). A dead sidecar refuses the connection at
        // once, so the timeout does not delay that case; only a sidecar wedged for good is bypassed later.
        timeout: `${EXT_PROC_HEALTH_CHECK_TIMEOUT_SECONDS}s`,
        // 1 s and thresholds of 1: the window in which a dead sidecar still costs chat requests a 500 is at
        // most ~1 s, and a restarted sidecar is used again after one successful check.
        interval: '1s',
        unhealthy_threshold: 1,
        healthy_threshold: 1,
        // The default no_traffic_interval is 60 s: before the first request Envoy would check only once a
        // minute, so a sidecar that starts after Envoy would be bypassed for up to a minute.
        no_traffic_interval: '1s',
        // A TCP check only proves that the port accepts connections; `grpc_health_check` asks grpc.health.v1
        // and needs the sidecar to serve it (option extProcHealthCheck: 'grpc').
        ...(o.extProcHealthCheck === 'grpc' ? { grpc_health_check: {} } : { tcp_health_check: {} }),
      },
    ],
    // Every client chat stream is one gRPC stream to the sidecar; Envoy's default of 1024 concurrent requests
    // would turn stream 1025 into an ext_proc failure.
    circuit_breakers: {
      thresholds: [{ priority: 'DEFAULT', max_connections: 10000, max_pending_requests: 10000, max_requests: 10000, max_retries: 3 }],
    },
    ...(o.extProcEndpointsFile
      ? {
          // The endpoint comes from a file the stack writes once the sidecar has bound its port (EDS over the
          // filesystem, watched through its directory: a file moved in is a new version).
          eds_cluster_config: {
            eds_config: {
              resource_api_version: 'V3',
              path_config_source: { path: o.extProcEndpointsFile, watched_directory: { path: path.dirname(o.extProcEndpointsFile) } },
            },
          },
        }
      : {
          load_assignment: {
            cluster_name: EXT_PROC_CLUSTER,
            endpoints: [{ lb_endpoints: [{ endpoint: { address: socketAddress(o.extProcHost, o.extProcPort) } }] }],
          },
        }),
  };
}

/**
 * The content of extProcEndpointsFile: an EDS DiscoveryResponse with the sidecar's address, or no endpoint yet
 * (Envoy then bypasses ext_proc: fail-open, as with an unhealthy sidecar). `version` must change per write.
 */
export function extProcEndpointsJson(version: number, endpoint?: { host: string; port: number }): string {
  const cla = {
    '@type': 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
    cluster_name: EXT_PROC_CLUSTER,
    endpoints: endpoint ? [{ lb_endpoints: [{ endpoint: { address: socketAddress(endpoint.host, endpoint.port) } }] }] : [],
  };
  return `${JSON.stringify({ version_info: String(version), resources: [cla] })}\n`;
}

/**
 * The client-facing listener. Chat requests go on to the internal listener `front_chat` (where ext_proc runs)
 * through this listener's router, which honours the client connection's watermark: that extra hop is what
 * lets the overload manager cap the memory of clients that do not read (see envoy-memory.ts).
 */
function frontListener(o: EnvoyConfigOptions, idleTimeout: string): object {
  const hop = o.chatHop !== false;
  return {
    name: 'front',
    address: socketAddress(o.listenAddress ?? '127.0.0.1', o.listenPort),
    // Above this much unsent data on a client connection the router stops reading the chat hop (see
    // FRONT_CONNECTION_BUFFER_BYTES). Also the read chunk for request bodies; 32 KiB is Envoy's edge advice.
    per_connection_buffer_limit_bytes: FRONT_CONNECTION_BUFFER_BYTES,
    // A connection that never sends a byte is closed after 10 s: the HCM's timers (request_headers_timeout
    // below) start at the first byte, and its connection idle timeout is 1 h. A listener filter that waits for
    // the first bytes is what bounds it (measured: docs/envoy.md (k)); keep-alive connections are not affected.
    listener_filters: [{ name: 'envoy.filters.listener.http_inspector', typed_config: { '@type': T.httpInspector } }],
    listener_filters_timeout: '10s',
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type': T.hcm,
              stat_prefix: 'front',
              // Before Envoy generates an x-request-id for a request that has none, copy the client's own (if
              // any) to CLIENT_REQUEST_ID_HEADER: the sidecar derives idempotent tool-call ids from it, and must
              // not from an id Envoy made up (a client retry would get another). Measured on Envoy 1.40: early
              // header mutations run before the id is generated; without a client id the header is absent.
              early_header_mutation_extensions: [
                {
                  name: 'client-request-id',
                  typed_config: {
                    '@type': T.earlyHeaderMutation,
                    mutations: [
                      {
                        append: {
                          header: { key: CLIENT_REQUEST_ID_HEADER, value: '%REQ(x-request-id)%' },
                          append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
                        },
                      },
                    ],
                  },
                },
              ],
              // A chat stream can be silent for a whole stall budget while the sidecar waits out a stall and
              // fetches leg2; Envoy's default 5 min idle timer, or a shorter one, would cut it first.
              stream_idle_timeout: idleTimeout,
              // Whole-request timer (0 = off): an LLM answer has no upper bound on duration.
              request_timeout: '0s',
              // From its first byte, a request has this long to complete its headers; then Envoy answers 408 and
              // closes (10 s: Envoy's edge best-practice value; a real client sends them at once). docs/envoy.md (k).
              request_headers_timeout: '10s',
              access_log: accessLog('front'),
              route_config: {
                name: 'front',
                virtual_hosts: [
                  {
                    name: 'all',
                    domains: ['*'],
                    routes: [
                      // In-scope candidates go to the chat hop (ext_proc): one route per endpoint the sidecar
                      // can continue (src/request/endpoint.ts), named as the endpoint. `path` matches without the
                      // query string. The default route timeout is 15 s and would kill streams; the route
                      // idle_timeout overrides the HCM's stream_idle_timeout: same budget.
                      ...(Object.keys(ENDPOINT_PATHS) as Endpoint[]).map((endpoint) => ({
                        name: endpoint,
                        match: { path: ENDPOINT_PATHS[endpoint] },
                        route: { cluster: hop ? CHAT_CLUSTER : ROUTER_CLUSTER, timeout: '0s', idle_timeout: idleTimeout },
                      })),
                      {
                        // Everything else (/v1/models, /health, /v1/embeddings, ...): plain proxying, no gRPC
                        // stream at all, so these paths work even while the sidecar is down.
                        name: 'passthrough',
                        match: { prefix: '/' },
                        route: { cluster: ROUTER_CLUSTER, timeout: '0s', idle_timeout: idleTimeout },
                        ...(hop ? {} : { typed_per_filter_config: { [EXT_PROC_FILTER]: { '@type': T.extProcPerRoute, disabled: true } } }),
                      },
                    ],
                  },
                ],
              },
              http_filters: [...(hop ? [] : [extProcFilter()]), { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
            },
          },
        ],
      },
    ],
  };
}

/** The ext_proc filter: the sidecar sees the chat request and originates the answer. */
const EXT_PROC_FILTER = 'envoy.filters.http.ext_proc';
function extProcFilter(): object {
  return {
    name: EXT_PROC_FILTER,
    typed_config: {
      '@type': T.extProc,
      grpc_service: { envoy_grpc: { cluster_name: EXT_PROC_CLUSTER } },
      // Sidecar unreachable at request start => proxy natively (together with the health check on the
      // ext_proc cluster, see there): the gateway is never worse than no gateway.
      failure_mode_allow: true,
      // Not applied while the headers answer is pending in FULL_DUPLEX_STREAMED (docs/envoy.md (a)), so the
      // sidecar may wait for leg1's first bytes; it bounds the per-chunk answers of the CONTINUE + echo path.
      message_timeout: '30s',
      processing_mode: {
        // The sidecar decides scope from the headers and the whole JSON body ...
        request_header_mode: 'SEND',
        // ... and originates in-scope responses itself (StreamedImmediateResponse), so the upstream
        // response is never filtered.
        response_header_mode: 'SKIP',
        // FULL_DUPLEX_STREAMED: Envoy sends the body without waiting for the headers answer (required by
        // StreamedImmediateResponse; BUFFERED would 413 large bodies).
        request_body_mode: 'FULL_DUPLEX_STREAMED',
        response_body_mode: 'NONE',
        // Trailers end the request stream in FULL_DUPLEX mode when the client sends them.
        request_trailer_mode: 'SEND',
        response_trailer_mode: 'SKIP',
      },
    },
  };
}

/**
 * The chat hop: an internal listener (no socket) reached only from the front listener's chat route. The sidecar
 * answers in-scope requests itself; out-of-scope ones (non-streaming, other methods) it answers with CONTINUE
 * and Envoy proxies them natively through this route to the router tier.
 */
function chatListener(idleTimeout: string): object {
  return {
    name: CHAT_LISTENER,
    internal_listener: {},
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type': T.hcm,
              stat_prefix: CHAT_LISTENER,
              // The front hop speaks HTTP/2 to it (chatCluster): the answer waits in an HTTP/2 stream's send
              // buffer, which the overload manager's memory accounts cover.
              codec_type: 'HTTP2',
              stream_idle_timeout: idleTimeout,
              request_timeout: '0s',
              access_log: accessLog(CHAT_LISTENER),
              route_config: {
                name: CHAT_LISTENER,
                virtual_hosts: [
                  {
                    name: 'all',
                    domains: ['*'],
                    routes: [
                      {
                        name: 'chat',
                        match: { prefix: '/' },
                        route: { cluster: ROUTER_CLUSTER, timeout: '0s', idle_timeout: idleTimeout },
                      },
                    ],
                  },
                ],
              },
              http_filters: [extProcFilter(), { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
            },
          },
        ],
      },
    ],
  };
}

/** An egress listener: the sidecar's legs go through it to a router-tier cluster. */
/** `revisionHeader`: when the cluster's replicas carry revisions, the request header that asks for one. */
function egressListener(
  name: string,
  port: number,
  cluster: string,
  idleTimeout: string,
  retry: { bufferLimitBytes: number; retryAfterMaxSeconds: number },
  revisionHeader?: string,
): object {
  return {
    name,
    // Loopback only: this listener has no ext_proc filter and trusts its caller (the sidecar).
    address: socketAddress('127.0.0.1', port),
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type': T.hcm,
              stat_prefix: name,
              // The sidecar owns stall detection (its idle timer is stallTimeoutSeconds); Envoy must never cut a
              // leg first, so Envoy's idle timers sit above the whole stall budget.
              stream_idle_timeout: idleTimeout,
              request_timeout: '0s',
              // When the router tier resets a leg mid-answer, Envoy resets our HTTP/1.1 stream by closing the
              // connection, but by default only after delayed_close_timeout (1 s) of waiting for the peer's
              // FIN. Observed: the sidecar saw the abort 1 s late, long enough to take a reset for a stall with
              // short stall timers. 0 closes at once (pending writes are still flushed); the only client
              // here is the sidecar, so the grace period protects nothing.
              delayed_close_timeout: '0s',
              access_log: accessLog(name),
              route_config: {
                name,
                virtual_hosts: [
                  {
                    name: 'all',
                    domains: ['*'],
                    routes: [
                      {
                        name,
                        match: { prefix: '/' },
                        route: {
                          cluster,
                          // No route timeout (default 15 s kills streams). The upstream-headers timeout is the
                          // sidecar's: a route timeout would also cut legs that are already streaming.
                          timeout: '0s',
                          idle_timeout: idleTimeout,
                          // Retries only where no replica saw the request: the connection failed, the stream
                          // was refused, or it was reset before the request was sent; that moves a leg off a
                          // dead replica onto another one. Not on a 503 (a router's or replica's answer): the
                          // sidecar re-runs those itself, under its admission and brake, so one leg is never
                          // 3 engine requests against a failing pool. Not on resets after headers (the
                          // sidecar's continuation handles those). No per_try_idle_timeout / per_try_timeout /
                          // max_stream_duration: they would cut long or slow streams.
                          // A 429 is a replica refusing the request before generating anything (it is full, or
                          // rate-limits): another replica may be idle, so Envoy sends it there, after the
                          // replica's Retry-After (delay-seconds; an HTTP-date or a value above
                          // retryAfterMaxSeconds is not read, and Envoy's ordinary back-off applies) and never
                          // back to it while another replica is left (previous_hosts). Here rather than in the
                          // sidecar: Envoy knows the replicas and which one refused; the sidecar sees one egress
                          // address. The sidecar's FIRST_DELTA_DEADLINE_SECONDS bounds the whole (it cancels the
                          // leg); when every attempt is refused, the last 429 reaches the sidecar, which passes
                          // it through with its Retry-After. Verified on Envoy 1.40 (docs/envoy.md (l)).
                          retry_policy: {
                            retry_on: 'connect-failure,refused-stream,reset-before-request,retriable-status-codes',
                            retriable_status_codes: [429],
                            rate_limited_retry_back_off: {
                              reset_headers: [{ name: 'retry-after', format: 'SECONDS' }],
                              max_interval: secs(retry.retryAfterMaxSeconds),
                            },
                            num_retries: 2,
                            // Send the retry to another replica than the one that just failed.
                            retry_host_predicate: [
                              { name: 'envoy.retry_host_predicates.previous_hosts', typed_config: { '@type': T.previousHosts } },
                            ],
                            host_selection_retry_max_attempts: 3,
                          },
                        },
                        // A retry re-sends the request body, so the router keeps a copy; past the buffer limit
                        // it silently disables retries for that request (observed: a 3 MiB body to a dead
                        // replica got 503 UF with the 1 MiB default). Chat bodies with long histories or
                        // images exceed 1 MiB; memory use is the actual body size, not the limit.
                        request_body_buffer_limit: retry.bufferLimitBytes,
                        // Lets the sidecar tell Envoy's own reply ("router tier unreachable": flags such as UF,
                        // URX, UH, UO) from the router's own 5xx ("-"). OVERWRITE so an upstream cannot forge it.
                        // Verified on Envoy 1.40: route response_headers_to_add also applies to the router's
                        // local replies (e.g. 503 UF,URX), see docs/envoy.md.
                        response_headers_to_add: [
                          {
                            header: { key: UPSTREAM_FLAGS_HEADER, value: '%RESPONSE_FLAGS%' },
                            append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
                          },
                          // Which replica served the leg, so that a recovery leg can avoid it (AVOID_HOST_HEADER).
                          // Its configured name when the cluster has several (replicaMetadata), else the address.
                          {
                            header: { key: UPSTREAM_HOST_HEADER, value: '%UPSTREAM_METADATA(envoy.lb:replica)%' },
                            append_action: 'OVERWRITE_IF_EXISTS_OR_ADD',
                          },
                        ],
                      },
                    ],
                  },
                ],
              },
              http_filters: [
                {
                  // A recovery leg's AVOID_HOST_HEADER becomes envoy.lb dynamic metadata, which the subset load
                  // balancer matches (replicaMetadata). Removed before the request goes upstream.
                  name: 'envoy.filters.http.header_to_metadata',
                  typed_config: {
                    '@type': T.headerToMetadata,
                    request_rules: [
                      {
                        header: AVOID_HOST_HEADER,
                        remove: true,
                        on_header_present: { metadata_namespace: 'envoy.lb', key: AVOID_KEY, type: 'STRING' },
                      },
                      // Kept on the request: a router tier behind may route by it too.
                      ...(revisionHeader
                        ? [
                            {
                              header: revisionHeader,
                              on_header_present: { metadata_namespace: 'envoy.lb', key: REVISION_KEY, type: 'STRING' },
                            },
                          ]
                        : []),
                    ],
                  },
                },
                { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } },
              ],
            },
          },
        ],
      },
    ],
  };
}

/** Renders the Envoy bootstrap for the gateway as a plain object (write it as JSON). */
export function renderEnvoyConfig(o: EnvoyConfigOptions): object {
  checkPort('listenPort', o.listenPort, true);
  checkPort('adminPort', o.adminPort, true);
  checkPort('egressPort', o.egressPort, true);
  if (o.extProcEndpointsFile === undefined) {
    checkPort('extProcPort', o.extProcPort);
    if (typeof o.extProcHost !== 'string' || o.extProcHost === '') throw new Error('renderEnvoyConfig: extProcHost is empty');
  } else if (!path.isAbsolute(o.extProcEndpointsFile)) {
    throw new Error(`renderEnvoyConfig: extProcEndpointsFile must be an absolute path, got ${o.extProcEndpointsFile}`);
  }
  checkTier('routerTier', o.routerTier);
  const withContinuation = o.continuationEgressPort !== undefined || o.continuationTier !== undefined;
  if (withContinuation) {
    checkPort('continuationEgressPort', o.continuationEgressPort, true);
    checkTier('continuationTier', o.continuationTier);
  }
  // Port 0 (ephemeral) may repeat: Envoy binds a different port for each.
  const ports = [o.listenPort, o.adminPort, o.egressPort, o.continuationEgressPort].filter((p) => p !== undefined && p !== 0);
  if (new Set(ports).size !== ports.length) throw new Error(`renderEnvoyConfig: ports must be distinct: ${ports.join(', ')}`);
  for (const [k, v] of [
    ['stallTimeoutSeconds', o.stallTimeoutSeconds],
    ['maxStallSeconds', o.maxStallSeconds],
  ] as const) {
    if (!Number.isFinite(v) || v <= 0) throw new Error(`renderEnvoyConfig: ${k} must be a positive number, got ${v}`);
  }

  // Idle budget for every Envoy idle timer on a streaming path: the longest silence the sidecar may hold a
  // stream in (the stall budget, at least one stall timer), plus the next leg's time to its first byte, plus a
  // margin. Envoy's timers must be strictly above it so that only the sidecar ever decides a stall.
  const stallBudget = Math.max(o.maxStallSeconds, o.stallTimeoutSeconds);
  const idleSeconds = stallBudget + (o.upstreamHeadersTimeoutSeconds ?? 0) + (o.idleMarginSeconds ?? 60);
  const idleTimeout = secs(idleSeconds);

  const retryBuffer = o.retryBufferLimitBytes ?? 16 * 1024 * 1024;
  if (!Number.isInteger(retryBuffer) || retryBuffer <= 0)
    throw new Error(`renderEnvoyConfig: retryBufferLimitBytes must be a positive integer`);
  const retryAfterMax = o.retryAfterMaxSeconds ?? DEFAULT_RETRY_AFTER_MAX_SECONDS;
  if (!Number.isFinite(retryAfterMax) || retryAfterMax <= 0)
    throw new Error(`renderEnvoyConfig: retryAfterMaxSeconds must be a positive number, got ${retryAfterMax}`);
  const retry = { bufferLimitBytes: retryBuffer, retryAfterMaxSeconds: retryAfterMax };
  const listeners: object[] = [
    frontListener(o, idleTimeout),
    ...(o.chatHop === false ? [] : [chatListener(idleTimeout)]),
    egressListener(
      'egress',
      o.egressPort,
      ROUTER_CLUSTER,
      idleTimeout,
      retry,
      hasRevisions(o.routerTier) ? (o.modelRevisionHeader ?? DEFAULT_MODEL_REVISION_HEADER) : undefined,
    ),
  ];
  const routerIdle = o.routerIdleTimeoutSeconds ?? ROUTER_IDLE_TIMEOUT_SECONDS;
  if (!Number.isFinite(routerIdle) || routerIdle <= 0)
    throw new Error(`renderEnvoyConfig: routerIdleTimeoutSeconds must be a positive number, got ${routerIdle}`);
  const clusters: object[] = [routerCluster(ROUTER_CLUSTER, o.routerTier, o.routerConnectTimeoutSeconds ?? 5, routerIdle)];
  if (withContinuation) {
    listeners.push(
      egressListener(
        'continuation_egress',
        o.continuationEgressPort as number,
        CONTINUATION_CLUSTER,
        idleTimeout,
        retry,
        hasRevisions(o.continuationTier) ? (o.modelRevisionHeader ?? DEFAULT_MODEL_REVISION_HEADER) : undefined,
      ),
    );
    clusters.push(
      routerCluster(CONTINUATION_CLUSTER, o.continuationTier as UpstreamHost[], o.routerConnectTimeoutSeconds ?? 5, routerIdle),
    );
  }
  clusters.push(extProcCluster(o), ...(o.chatHop === false ? [] : [chatCluster()]));
  if (o.tracing) clusters.push(collectorCluster(o.tracing));
  const tracing = o.tracing;

  return {
    node: { id: 'continuation-gateway', cluster: 'continuation-gateway' },
    // Admin on loopback only: it can stop Envoy and dump config.
    admin: { address: socketAddress('127.0.0.1', o.adminPort) },
    static_resources: { listeners: tracing ? listeners.map((l) => withHcmTracing(l, tracing)) : listeners, clusters },
    // No layered_runtime: in particular NOT `envoy.reloadable_features.ext_proc_graceful_grpc_close` (off by
    // default in 1.40). With it, an HTTP stream reset before the sidecar closed its side stream (a client cut
    // by the memory cap) crashed Envoy with SIGSEGV when the sidecar's close arrived (docs/envoy.md (f)); the
    // per-connection stream cap alone keeps the reset-per-stream default safe (see extProcCluster).
    // The connection cap and the memory cap for clients that do not read: envoy-memory.ts, docs/envoy.md (g).
    overload_manager: overloadManager(o.maxHeapBytes ?? DEFAULT_MAX_HEAP_BYTES),
    // The chat hop (chatListener) is an internal listener.
    bootstrap_extensions: [internalListenerExtension()],
  };
}

/** Writes the bootstrap as pretty-printed JSON (with a trailing newline). */
export function writeEnvoyConfig(o: EnvoyConfigOptions, file: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, renderEnvoyConfigJson(o));
}

/** The exact text writeEnvoyConfig writes. */
export function renderEnvoyConfigJson(o: EnvoyConfigOptions): string {
  return `${JSON.stringify(renderEnvoyConfig(o), null, 2)}\n`;
}

/** The checked-in examples: file name under envoy/ -> options. */
export const DEMO_CONFIG_FILES: ReadonlyArray<readonly [string, EnvoyConfigOptions]> = [
  ['envoy.demo.json', DEMO_ENVOY_OPTIONS],
  ['envoy.demo-continuation.json', DEMO_CONTINUATION_ENVOY_OPTIONS],
];

/** Repository root (dist/tools/stack -> ../../..). */
export function repoRoot(): string {
  return path.resolve(__dirname, '..', '..', '..');
}

// `node dist/tools/stack/envoy-config.js` re-renders the checked-in examples.
if (require.main === module) {
  for (const [name, opts] of DEMO_CONFIG_FILES) {
    const file = path.join(repoRoot(), 'envoy', name);
    writeEnvoyConfig(opts, file);
    process.stdout.write(`${file}\n`);
  }
}
