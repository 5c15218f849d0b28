// Which headers travel from the client to an upstream leg, and from the upstream back to the client.

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'trailers',
  'transfer-encoding',
  'upgrade',
  'host',
  // The leg body may differ from the client's (leg2 is rebuilt), so the length is recomputed.
  'content-length',
  'expect',
]);

/**
 * Trace context headers of the propagators OTEL_PROPAGATORS may name (W3C trace context, B3 single and multi):
 * a leg that carries its own span's context carries none of the client's, which would name another parent.
 */
const TRACE_CONTEXT = /^(traceparent|tracestate|b3|x-b3-[a-z]+)$/;

/** Client request headers -> leg request headers. Pseudo-headers and Envoy-internal ones stay behind. */
/** `recovery`: what a recovery leg asks of the egress listener (avoid a replica, a model revision). */
export function legRequestHeaders(
  client: Record<string, string>,
  requestId: string | undefined,
  recovery: { avoidHost?: string; revision?: { header: string; value: string }; traceHeaders?: Record<string, string> } = {},
): Record<string, string> {
  const out: Record<string, string> = {};
  const ownContext = recovery.traceHeaders !== undefined && Object.keys(recovery.traceHeaders).length > 0;
  for (const [k, v] of Object.entries(client)) {
    if (ownContext && TRACE_CONTEXT.test(k)) continue;
    // x-gateway-*: the gateway's own signals to its egress listener (AVOID_HOST_HEADER); a client must not set them.
    if (k.startsWith(':') || HOP_BY_HOP.has(k) || k.startsWith('x-envoy-') || k.startsWith('x-gateway-') || k === 'x-request-id') continue;
    out[k] = v;
  }
  if (requestId) out['x-request-id'] = requestId;
  if (recovery.avoidHost) out[AVOID_HOST_HEADER] = recovery.avoidHost;
  if (recovery.revision) out[recovery.revision.header] = recovery.revision.value;
  // With tracing on, the leg carries its own span's context (traceparent, tracestate, b3, ...) instead of the client's.
  if (recovery.traceHeaders) Object.assign(out, recovery.traceHeaders);
  // The gateway parses the leg's bytes as SSE and undici's request() never decompresses: a client's
  // `accept-encoding: gzip` forwarded as is would let a compressing engine or router tier hand us gzip
  // bytes that no event boundary can be found in. Ask for the identity coding explicitly (an absent
  // header would mean "any coding is acceptable").
  out['accept-encoding'] = 'identity';
  out['content-type'] = client['content-type']?.includes('json') ? client['content-type'] : 'application/json';
  return out;
}

/** The header our egress route adds with Envoy's %RESPONSE_FLAGS% (see envoy/README.md). */
export const UPSTREAM_FLAGS_HEADER = 'x-gateway-upstream-flags';
/** The header our egress route adds with Envoy's %UPSTREAM_HOST%: the replica (or router) that served a leg. */
export const UPSTREAM_HOST_HEADER = 'x-gateway-upstream-host';
/** Sent on a recovery leg: the host the failed leg was on, which the egress listener's load balancer avoids. */
export const AVOID_HOST_HEADER = 'x-gateway-avoid-host';

/** The upstream host a leg reported (UPSTREAM_HOST_HEADER), if any. */
export function upstreamHost(upstream: Record<string, string | string[] | undefined>): string | undefined {
  const raw = upstream[UPSTREAM_HOST_HEADER];
  const v = (Array.isArray(raw) ? raw[0] : raw)?.trim();
  return v && v !== '-' ? v : undefined;
}

/** Leg response headers -> client response headers. */
export function clientResponseHeaders(upstream: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(upstream)) {
    const key = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(key) || key.startsWith('x-gateway-') || key.startsWith(':')) continue;
    if (key === 'date' || key === 'server') continue; // Envoy sets its own
    if (key.startsWith('x-envoy-')) continue; // the egress hop's internals, not the client's business
    out[key] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

/**
 * True when the status came from Envoy itself because no router-tier host could be reached (after its
 * before-headers retries), as opposed to a 503 that the router sent. Flags: UF upstream connection failure,
 * (URX retry limit exceeded comes with UF then), UH no healthy upstream, UO overflow (circuit breaker), NC no cluster.
 */
export function isRouterTierUnreachable(upstream: Record<string, string | string[] | undefined>): boolean {
  const raw = upstream[UPSTREAM_FLAGS_HEADER];
  const flags = (Array.isArray(raw) ? raw.join(',') : (raw ?? '')).split(/[,\s]+/);
  // URX alone (retry limit exceeded) also marks a router that answered 503 on every try: that 503 is the
  // router's own answer and passes through; only a failure to reach any host counts as unreachable.
  return flags.some((f) => ['UF', 'UH', 'UO', 'NC'].includes(f));
}

/**
 * True when Envoy's egress answered for a replica that reset or closed the connection before sending
 * response headers (UC upstream connection termination, UR upstream remote reset, LR local reset): the
 * request may be re-run, nothing was produced.
 */
export function isResetBeforeHeaders(upstream: Record<string, string | string[] | undefined>): boolean {
  const raw = upstream[UPSTREAM_FLAGS_HEADER];
  const flags = (Array.isArray(raw) ? raw.join(',') : (raw ?? '')).split(/[,\s]+/);
  return flags.some((f) => ['UC', 'UR', 'LR'].includes(f));
}
