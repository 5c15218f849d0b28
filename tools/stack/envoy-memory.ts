// The cap on Envoy's memory for clients that do not read (docs/envoy.md (g)).
//
// The sidecar originates every chat answer through ext_proc (StreamedImmediateResponse), and Envoy's ext_proc
// side stream ignores the client connection's watermarks: a client that stops reading makes Envoy hold the
// whole answer (docs/envoy.md (e)). Measured on Envoy 1.40, the overload manager's
// `reset_high_memory_stream` only sees bytes held in an HTTP/2 stream's own send buffer; an HTTP/1.1 client's
// unread answer sits in the connection's write buffer, which no memory account covers (0 resets with the
// action saturated). So chat requests take one more hop inside Envoy:
//
//   front (client, HTTP/1.1 or 2) -router-> internal listener `front_chat` over HTTP/2 -ext_proc-> sidecar
//
// The front hop's router does honour the client connection's watermark: it stops reading the internal
// stream, whose small window stops the inner HTTP/2 codec, so the unread answer piles up in that inner
// stream's send buffer, a buffer with a memory account. The overload manager resets the inner streams with the
// largest accounts when the heap gets close to the cap; the reset reaches the client (its connection is
// reset) and the sidecar (the ext_proc stream ends, the leg is cancelled). The extra hop costs ~5 % of
// Envoy's CPU per token (measured, docs/envoy.md (g)).
export const CHAT_LISTENER = 'front_chat';
export const CHAT_CLUSTER = 'front_chat';

/** Default heap cap: under the 512 MiB memory limit of the Envoy container in deploy/kubernetes/gateway.yaml. */
export const DEFAULT_MAX_HEAP_BYTES = 384 * 1024 * 1024;
/**
 * Streams holding at least 2^20 bytes (1 MiB) in buffers are tracked, in 8 power-of-two buckets up to
 * >= 128 MiB. A client that reads holds a few KiB there (the inner window below plus what its socket has not
 * taken yet), so it is never a candidate for a reset, whatever the pressure.
 */
export const TRACK_ACCOUNTS_POWER_OF_TWO = 20;
/** Pressure (heap / cap) at which the largest streams (>= 128 MiB) start being reset ... */
export const RESET_SCALING_THRESHOLD = 0.5;
/** ... and at which every tracked stream (>= 1 MiB) is reset, 50 per worker per refresh, largest first. */
export const RESET_SATURATION_THRESHOLD = 0.8;
/**
 * Client connection write-buffer watermark (Envoy's edge recommendation; the default is 1 MiB). Above it the
 * front router stops reading the inner stream: this much per client is held outside any memory account.
 */
export const FRONT_CONNECTION_BUFFER_BYTES = 32 * 1024;
/** Inner HTTP/2 stream window: what the front hop may hold per stream on top of the connection buffer. */
export const CHAT_STREAM_WINDOW_BYTES = 64 * 1024;
/**
 * Streams per inner HTTP/2 connection. A stream the front stops reading keeps its window's worth of the
 * connection window; 1000 x 64 KiB stays well inside the connection window (256 MiB), so clients that do not
 * read can never block the connection that healthy streams share with them.
 */
export const CHAT_STREAMS_PER_CONNECTION = 1000;
const CHAT_CONNECTION_WINDOW_BYTES = 256 * 1024 * 1024;

const T = {
  httpOptions: 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
  internalListener: 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener',
  downstreamConnections: 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
  fixedHeap: 'type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig',
} as const;

/** Internal listeners need this bootstrap extension. */
export function internalListenerExtension(): object {
  return { name: 'envoy.bootstrap.internal_listener', typed_config: { '@type': T.internalListener } };
}

/** The front hop's cluster: the internal listener, over HTTP/2 with a small stream window. */
export function chatCluster(): object {
  return {
    name: CHAT_CLUSTER,
    connect_timeout: '1s',
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': T.httpOptions,
        explicit_http_config: {
          http2_protocol_options: {
            // The window bounds what the front hop takes from a stream whose client does not read; the rest
            // waits in the inner stream's send buffer, where the overload manager can see it. In-process, a
            // 64 KiB window costs a reading client no throughput.
            initial_stream_window_size: CHAT_STREAM_WINDOW_BYTES,
            initial_connection_window_size: CHAT_CONNECTION_WINDOW_BYTES,
            max_concurrent_streams: CHAT_STREAMS_PER_CONNECTION,
          },
        },
      },
    },
    // Every client chat stream is one stream here (Envoy's default of 1024 would cap the gateway).
    circuit_breakers: {
      thresholds: [{ priority: 'DEFAULT', max_connections: 10000, max_pending_requests: 10000, max_requests: 10000, max_retries: 3 }],
    },
    load_assignment: {
      cluster_name: CHAT_CLUSTER,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { envoy_internal_address: { server_listener_name: CHAT_LISTENER } } } }] }],
    },
  };
}

/**
 * The overload manager: the connection cap (file descriptors; it also silences Envoy's startup warning) and
 * the memory cap. `fixed_heap` measures tcmalloc's heap in use (free pages excluded) against maxHeapBytes.
 */
export function overloadManager(maxHeapBytes: number): object {
  if (!Number.isInteger(maxHeapBytes) || maxHeapBytes < 32 * 1024 * 1024) {
    throw new Error(`renderEnvoyConfig: maxHeapBytes must be an integer >= 32 MiB, got ${maxHeapBytes}`);
  }
  return {
    // Default 1 s; a client that does not read can add tens of MB a second (the engine's speed).
    refresh_interval: '0.25s',
    buffer_factory_config: { minimum_account_to_track_power_of_two: TRACK_ACCOUNTS_POWER_OF_TWO },
    resource_monitors: [
      {
        name: 'envoy.resource_monitors.global_downstream_max_connections',
        // Generous: each client stream is one connection at most, plus one upstream connection per leg.
        typed_config: { '@type': T.downstreamConnections, max_active_downstream_connections: 50000 },
      },
      { name: 'envoy.resource_monitors.fixed_heap', typed_config: { '@type': T.fixedHeap, max_heap_size_bytes: maxHeapBytes } },
    ],
    actions: [
      {
        // Largest accounts first: between the thresholds the size that is reset falls from >= 128 MiB to
        // >= 1 MiB. Nothing else is shed: new requests and reading streams go on.
        name: 'envoy.overload_actions.reset_high_memory_stream',
        triggers: [
          {
            name: 'envoy.resource_monitors.fixed_heap',
            scaled: { scaling_threshold: RESET_SCALING_THRESHOLD, saturation_threshold: RESET_SATURATION_THRESHOLD },
          },
        ],
      },
    ],
  };
}
