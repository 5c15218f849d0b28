// The bootstrap generator: structure, validation by the real Envoy binary, and the checked-in examples.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ensureEnvoy } from '../../../../tools/stack/envoy-binary';
import {
  DEMO_CONFIG_FILES,
  DEMO_ENVOY_OPTIONS,
  type EnvoyConfigOptions,
  EXT_PROC_STREAMS_PER_CONNECTION,
  extProcEndpointsJson,
  renderEnvoyConfig,
  renderEnvoyConfigJson,
  repoRoot,
  writeEnvoyConfig,
} from '../../../../tools/stack/envoy-config';

/* eslint-disable @typescript-eslint/no-explicit-any */

const base: EnvoyConfigOptions = {
  listenPort: 18080,
  adminPort: 19901,
  egressPort: 18001,
  extProcHost: '127.0.0.1',
  extProcPort: 18051,
  routerTier: [{ host: '127.0.0.1', port: 18090 }],
  stallTimeoutSeconds: 20,
  maxStallSeconds: 300,
};

let envoyBin: string;
let tmp: string;

beforeAll(async () => {
  envoyBin = process.env.ENVOY_BIN ?? (await ensureEnvoy());
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-config-test-'));
});

afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

function validate(o: EnvoyConfigOptions, name: string): Promise<{ ok: boolean; out: string }> {
  const file = path.join(tmp, `${name}.json`);
  writeEnvoyConfig(o, file);
  return new Promise((resolve) => {
    execFile(envoyBin, ['--mode', 'validate', '-c', file, '-l', 'warning'], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ ok: !err, out: `${stdout}${stderr}` });
    });
  });
}

const listener = (cfg: any, name: string): any => cfg.static_resources.listeners.find((l: any) => l.name === name);
const cluster = (cfg: any, name: string): any => cfg.static_resources.clusters.find((c: any) => c.name === name);
const hcm = (l: any): any => l.filter_chains[0].filters[0].typed_config;
const seconds = (d: string): number => {
  expect(d).toMatch(/^\d+(\.\d+)?s$/);
  return Number(d.slice(0, -1));
};

/** Envoy checks at load that an endpoints file exists: one with no endpoint yet, as `npm run stack` starts. */
const EDS_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'envoy-config-eds-'));
const EDS_FILE = path.join(EDS_DIR, 'ext_proc.json');
fs.writeFileSync(EDS_FILE, extProcEndpointsJson(1));
afterAll(() => fs.rmSync(EDS_DIR, { recursive: true, force: true }));

describe('renderEnvoyConfig passes `envoy --mode validate`', () => {
  const cases: Array<[string, EnvoyConfigOptions]> = [
    ['single router endpoint', base],
    [
      'two router endpoints',
      {
        ...base,
        routerTier: [
          { host: '127.0.0.1', port: 18090 },
          { host: '127.0.0.2', port: 18091 },
        ],
      },
    ],
    [
      'continuation split',
      {
        ...base,
        continuationEgressPort: 18002,
        continuationTier: [
          { host: '127.0.0.1', port: 18095 },
          { host: '127.0.0.1', port: 18096 },
        ],
      },
    ],
    [
      'hostnames',
      {
        ...base,
        extProcHost: 'localhost',
        routerTier: [
          { host: 'localhost', port: 18090 },
          { host: 'router.example.internal', port: 8000 },
        ],
        continuationEgressPort: 18002,
        continuationTier: [{ host: 'localhost', port: 18095 }],
        upstreamHeadersTimeoutSeconds: 60,
        routerConnectTimeoutSeconds: 2.5,
        listenAddress: '0.0.0.0',
      },
    ],
    ['gRPC health check on the sidecar', { ...base, extProcHealthCheck: 'grpc' }],
    // The bench's configuration (h): ext_proc on the front listener itself (measuring only, docs/envoy.md (g)).
    ['without the memory-cap chat hop', { ...base, chatHop: false }],
    [
      // `npm run stack`: every port ephemeral, the sidecar's endpoint from a file written later.
      'ephemeral ports, ext_proc endpoint from a file',
      {
        ...base,
        listenPort: 0,
        adminPort: 0,
        egressPort: 0,
        continuationEgressPort: 0,
        continuationTier: [{ host: '127.0.0.1', port: 18095 }],
        extProcEndpointsFile: EDS_FILE,
        extProcHealthCheck: 'grpc',
      },
    ],
  ];
  it.each(cases)('%s', async (name, o) => {
    const r = await validate(o, name.replace(/\W+/g, '-'));
    if (!r.ok) throw new Error(`envoy --mode validate failed for ${name}:\n${r.out}`);
    expect(r.out).toContain('OK');
  });
});

describe('checked-in examples under envoy/', () => {
  it.each(DEMO_CONFIG_FILES.map(([f, o]) => [f, o] as const))('%s equals the generator output (no drift)', (file, o) => {
    const onDisk = fs.readFileSync(path.join(repoRoot(), 'envoy', file), 'utf8');
    // Regenerate with `node dist/tools/stack/envoy-config.js` after changing the generator.
    expect(onDisk).toBe(renderEnvoyConfigJson(o));
  });

  it('the README documents the default options', () => {
    const readme = fs.readFileSync(path.join(repoRoot(), 'envoy', 'README.md'), 'utf8');
    for (const p of [
      DEMO_ENVOY_OPTIONS.listenPort,
      DEMO_ENVOY_OPTIONS.adminPort,
      DEMO_ENVOY_OPTIONS.egressPort,
      DEMO_ENVOY_OPTIONS.extProcPort,
    ]) {
      expect(readme).toContain(String(p));
    }
  });
});

describe('renderEnvoyConfig content', () => {
  const cfg: any = renderEnvoyConfig({ ...base, upstreamHeadersTimeoutSeconds: 60 });
  const front = listener(cfg, 'front');
  const chatHop = listener(cfg, 'front_chat');
  const egress = listener(cfg, 'egress');

  it('front listener: router only, the endpoints the sidecar continues to the internal chat hop, other paths to the router tier', () => {
    const h = hcm(front);
    expect(h.http_filters.map((f: any) => f.name)).toEqual(['envoy.filters.http.router']);
    expect(front.per_connection_buffer_limit_bytes).toBe(32 * 1024);
    const routes = h.route_config.virtual_hosts[0].routes;
    const other = routes.at(-1);
    expect(routes.slice(0, -1).map((r: any) => [r.name, r.match])).toEqual([
      ['chat', { path: '/v1/chat/completions' }],
      ['completions', { path: '/v1/completions' }],
      ['responses', { path: '/v1/responses' }],
    ]);
    for (const r of routes.slice(0, -1)) expect(r.route).toMatchObject({ cluster: 'front_chat', timeout: '0s' });
    expect(other.match).toEqual({ prefix: '/' });
    expect(other.route).toMatchObject({ cluster: 'router_tier', timeout: '0s' });
    expect(h.request_timeout).toBe('0s');
  });

  it('chat hop: internal HTTP/2 listener with ext_proc then router; its cluster has a small stream window', () => {
    expect(chatHop.internal_listener).toEqual({});
    expect(chatHop.address).toBeUndefined();
    const h = hcm(chatHop);
    expect(h.codec_type).toBe('HTTP2');
    expect(h.http_filters.map((f: any) => f.name)).toEqual(['envoy.filters.http.ext_proc', 'envoy.filters.http.router']);
    const ep = h.http_filters[0].typed_config;
    expect(ep.failure_mode_allow).toBe(true);
    expect(ep.grpc_service.envoy_grpc.cluster_name).toBe('ext_proc');
    expect(ep.processing_mode).toEqual({
      request_header_mode: 'SEND',
      response_header_mode: 'SKIP',
      request_body_mode: 'FULL_DUPLEX_STREAMED',
      response_body_mode: 'NONE',
      request_trailer_mode: 'SEND',
      response_trailer_mode: 'SKIP',
    });
    expect(h.route_config.virtual_hosts[0].routes[0].route).toMatchObject({ cluster: 'router_tier', timeout: '0s' });
    const c = cluster(cfg, 'front_chat');
    const h2 =
      c.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config
        .http2_protocol_options;
    // Streams a connection carries times the stream window fit in the connection window (see envoy-memory.ts).
    expect(h2.max_concurrent_streams * h2.initial_stream_window_size).toBeLessThan(h2.initial_connection_window_size);
    expect(c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.envoy_internal_address.server_listener_name).toBe('front_chat');
    expect(cfg.bootstrap_extensions.map((e: any) => e.name)).toEqual(['envoy.bootstrap.internal_listener']);
  });

  it('overload manager: connection cap, heap cap, resets of the largest streams only', () => {
    const om = cfg.overload_manager;
    expect(om.buffer_factory_config.minimum_account_to_track_power_of_two).toBe(20);
    expect(om.resource_monitors.map((m: any) => m.name)).toEqual([
      'envoy.resource_monitors.global_downstream_max_connections',
      'envoy.resource_monitors.fixed_heap',
    ]);
    expect(om.resource_monitors[1].typed_config.max_heap_size_bytes).toBe(384 * 1024 * 1024);
    expect(om.actions.map((a: any) => a.name)).toEqual(['envoy.overload_actions.reset_high_memory_stream']);
    expect(om.actions[0].triggers[0].scaled).toEqual({ scaling_threshold: 0.5, saturation_threshold: 0.8 });
    const small: any = renderEnvoyConfig({ ...base, maxHeapBytes: 64 * 1024 * 1024 });
    expect(small.overload_manager.resource_monitors[1].typed_config.max_heap_size_bytes).toBe(64 * 1024 * 1024);
    expect(() => renderEnvoyConfig({ ...base, maxHeapBytes: 1000 })).toThrow(/maxHeapBytes/);
  });

  it("idle timers sit above the stall budget plus the next leg's headers wait", () => {
    for (const l of [front, chatHop, egress]) {
      const h = hcm(l);
      expect(seconds(h.stream_idle_timeout)).toBeGreaterThan(300 + 60);
      for (const r of h.route_config.virtual_hosts[0].routes) expect(seconds(r.route.idle_timeout)).toBeGreaterThan(300 + 60);
    }
    const tiny: any = renderEnvoyConfig({ ...base, stallTimeoutSeconds: 900, maxStallSeconds: 10 });
    expect(seconds(hcm(listener(tiny, 'egress')).stream_idle_timeout)).toBeGreaterThan(900);
  });

  it('egress: loopback only, no ext_proc, before-headers retries to another host, flags header, no stream killers', () => {
    expect(egress.address.socket_address.address).toBe('127.0.0.1');
    const h = hcm(egress);
    expect(h.http_filters.map((f: any) => f.name)).toEqual(['envoy.filters.http.header_to_metadata', 'envoy.filters.http.router']);
    expect(h.http_filters[0].typed_config.request_rules).toEqual([
      {
        header: 'x-gateway-avoid-host',
        remove: true,
        on_header_present: { metadata_namespace: 'envoy.lb', key: 'serves_when_avoiding', type: 'STRING' },
      },
    ]);
    const r = h.route_config.virtual_hosts[0].routes[0];
    expect(r.route.cluster).toBe('router_tier');
    expect(r.route.timeout).toBe('0s');
    expect(r.route.max_stream_duration).toBeUndefined();
    expect(r.route.retry_policy).toMatchObject({
      // No 503: the sidecar re-runs those under its admission (one engine request per leg). A 429 (a replica
      // refusing before any work) goes to another replica after its Retry-After, up to RETRY_AFTER_MAX_SECONDS.
      retry_on: 'connect-failure,refused-stream,reset-before-request,retriable-status-codes',
      retriable_status_codes: [429],
      rate_limited_retry_back_off: { reset_headers: [{ name: 'retry-after', format: 'SECONDS' }], max_interval: '10s' },
      num_retries: 2,
      host_selection_retry_max_attempts: 3,
    });
    expect(r.route.retry_policy.retry_host_predicate[0].name).toBe('envoy.retry_host_predicates.previous_hosts');
    expect(r.route.retry_policy.per_try_idle_timeout).toBeUndefined();
    expect(r.route.retry_policy.per_try_timeout).toBeUndefined();
    expect(r.request_body_buffer_limit).toBe(16 * 1024 * 1024);
    expect(h.delayed_close_timeout).toBe('0s');
    const shorter = renderEnvoyConfig({ ...base, retryAfterMaxSeconds: 2.5 }) as any;
    const shorterEgress = shorter.static_resources.listeners.find((l: any) => l.name === 'egress');
    const policy = shorterEgress.filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0].route.retry_policy;
    expect(policy.rate_limited_retry_back_off.max_interval).toBe('2.5s');
    expect(() => renderEnvoyConfig({ ...base, retryAfterMaxSeconds: 0 })).toThrow(/retryAfterMaxSeconds/);
    expect(r.response_headers_to_add[0].header).toEqual({ key: 'x-gateway-upstream-flags', value: '%RESPONSE_FLAGS%' });
    expect(r.response_headers_to_add[1].header).toEqual({ key: 'x-gateway-upstream-host', value: '%UPSTREAM_METADATA(envoy.lb:replica)%' });
    expect(JSON.stringify(cfg)).not.toContain('per_try_idle_timeout');
  });

  it('ext_proc cluster: HTTP/2, active health check, panic threshold 0, big circuit breakers', () => {
    const c = cluster(cfg, 'ext_proc');
    expect(c.type).toBe('STATIC');
    expect(c.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config).toEqual({
      http2_protocol_options: {},
    });
    expect(c.common_lb_config.healthy_panic_threshold).toEqual({ value: 0 });
    expect(c.health_checks[0]).toMatchObject({
      timeout: '5s',
      interval: '1s',
      unhealthy_threshold: 1,
      healthy_threshold: 1,
      no_traffic_interval: '1s',
    });
    expect(c.health_checks[0].tcp_health_check).toEqual({});
    const g: any = renderEnvoyConfig({ ...base, extProcHealthCheck: 'grpc' });
    expect(cluster(g, 'ext_proc').health_checks[0].grpc_health_check).toEqual({});
    expect(cluster(g, 'ext_proc').health_checks[0].tcp_health_check).toBeUndefined();
    expect(c.circuit_breakers.thresholds[0].max_requests).toBeGreaterThanOrEqual(10000);
    expect(c.circuit_breakers.thresholds[0].max_pending_requests).toBeGreaterThanOrEqual(10000);
  });

  it('router tier: STATIC for IPs, STRICT_DNS V4_ONLY for hostnames, HTTP/1.1, outlier detection', () => {
    const c = cluster(cfg, 'router_tier');
    expect(c.type).toBe('STATIC');
    expect(c.connect_timeout).toBe('5s');
    expect(c.lb_policy).toBe('ROUND_ROBIN');
    expect(c.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'].explicit_http_config).toEqual({
      http_protocol_options: {},
    });
    expect(c.outlier_detection).toMatchObject({
      consecutive_5xx: 5,
      consecutive_gateway_failure: 3,
      interval: '5s',
      base_ejection_time: '15s',
      max_ejection_percent: 50,
    });
    // Connection-level failovers off a crashed replica all happen at once: no small cap on them.
    expect(c.circuit_breakers.thresholds[0]).toMatchObject({
      max_connections: 10000,
      max_pending_requests: 10000,
      max_requests: 10000,
      max_retries: 10000,
    });
    // One replica: nothing to avoid, no subsets.
    expect(c.lb_subset_config).toBeUndefined();
    expect(c.load_assignment.endpoints[0].lb_endpoints[0].metadata).toBeUndefined();
    const dns: any = renderEnvoyConfig({
      ...base,
      routerTier: [
        { host: 'localhost', port: 1 },
        { host: '10.0.0.1', port: 2 },
      ],
      routerConnectTimeoutSeconds: 2,
    });
    const d = cluster(dns, 'router_tier');
    expect(d.type).toBe('STRICT_DNS');
    expect(d.dns_lookup_family).toBe('V4_ONLY');
    expect(d.connect_timeout).toBe('2s');
    expect(d.load_assignment.endpoints[0].lb_endpoints).toHaveLength(2);
    // Several replicas: each lists the others under envoy.lb, and the subset LB avoids the one a leg names.
    expect(d.lb_subset_config).toEqual({
      fallback_policy: 'ANY_ENDPOINT',
      list_as_any: true,
      subset_selectors: [{ keys: ['serves_when_avoiding'] }],
    });
    expect(d.load_assignment.endpoints[0].lb_endpoints.map((e: any) => e.metadata.filter_metadata['envoy.lb'])).toEqual([
      { replica: 'localhost:1', serves_when_avoiding: ['10.0.0.1:2'] },
      { replica: '10.0.0.1:2', serves_when_avoiding: ['localhost:1'] },
    ]);
  });

  it('replicas with model revisions: revision metadata, a selector per key combination, the revision header to envoy.lb', () => {
    const tier = [
      { host: '10.0.0.1', port: 1, revision: 'r1' },
      { host: '10.0.0.2', port: 1, revision: 'r2' },
    ];
    const c: any = renderEnvoyConfig({ ...base, routerTier: tier });
    const rc = cluster(c, 'router_tier');
    expect(rc.lb_subset_config.subset_selectors).toEqual([
      { keys: ['serves_when_avoiding', 'model_revision'] },
      { keys: ['model_revision'] },
      { keys: ['serves_when_avoiding'] },
    ]);
    expect(rc.load_assignment.endpoints[0].lb_endpoints[1].metadata.filter_metadata['envoy.lb']).toEqual({
      replica: '10.0.0.2:1',
      serves_when_avoiding: ['10.0.0.1:1'],
      model_revision: 'r2',
    });
    const rules = hcm(listener(c, 'egress')).http_filters[0].typed_config.request_rules;
    expect(rules[1]).toEqual({
      header: 'x-model-revision',
      on_header_present: { metadata_namespace: 'envoy.lb', key: 'model_revision', type: 'STRING' },
    });
    expect(hcm(listener(cfg, 'egress')).http_filters[0].typed_config.request_rules).toHaveLength(1);
    expect(() => renderEnvoyConfig({ ...base, routerTier: [tier[0], { host: '10.0.0.3', port: 1 }] })).toThrow(
      /every replica a revision, or none/,
    );
  });

  it('continuation split adds a second egress listener and cluster; admin is loopback', () => {
    const c: any = renderEnvoyConfig({ ...base, continuationEgressPort: 18002, continuationTier: [{ host: '127.0.0.1', port: 18095 }] });
    const l = listener(c, 'continuation_egress');
    expect(l.address.socket_address).toEqual({ address: '127.0.0.1', port_value: 18002 });
    expect(hcm(l).route_config.virtual_hosts[0].routes[0].route.cluster).toBe('continuation_tier');
    expect(cluster(c, 'continuation_tier').load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value).toBe(
      18095,
    );
    expect(listener(cfg, 'continuation_egress')).toBeUndefined();
    expect(cfg.admin.address.socket_address.address).toBe('127.0.0.1');
  });

  it('the access log carries flags, codes and the request id but no other header values or bodies', () => {
    const fmt: string = hcm(front).access_log[0].typed_config.log_format.text_format_source.inline_string;
    expect(fmt).toContain('%RESPONSE_FLAGS%');
    expect(fmt).toContain('%RESPONSE_CODE%');
    expect(fmt).toContain('rid=%REQ(X-REQUEST-ID)%');
    expect(fmt).not.toMatch(/%(REQ|RESP)\((?!:METHOD\)|X-REQUEST-ID\))/);
    expect(fmt).not.toMatch(/BODY/);
  });

  it('rejects bad options with a clear message', () => {
    expect(() => renderEnvoyConfig({ ...base, routerTier: [] })).toThrow(/routerTier/);
    expect(() => renderEnvoyConfig({ ...base, listenPort: -1 })).toThrow(/listenPort/);
    expect(() => renderEnvoyConfig({ ...base, extProcPort: 0 })).toThrow(/extProcPort/);
    expect(() => renderEnvoyConfig({ ...base, extProcEndpointsFile: 'relative/eds.json' })).toThrow(/absolute/);
    expect(() => renderEnvoyConfig({ ...base, egressPort: base.listenPort })).toThrow(/distinct/);
    expect(() => renderEnvoyConfig({ ...base, continuationEgressPort: 18002 })).toThrow(/continuationTier/);
    expect(() => renderEnvoyConfig({ ...base, maxStallSeconds: 0 })).toThrow(/maxStallSeconds/);
  });
});

describe("ext_proc connections stay below the sidecar's reset burst", () => {
  it("caps streams per connection to the sidecar below nghttp2's 1000 received resets", () => {
    const cluster = (renderEnvoyConfig(DEMO_ENVOY_OPTIONS) as any).static_resources.clusters.find((c: any) => c.name === 'ext_proc');
    const opts = cluster.typed_extension_protocol_options['envoy.extensions.upstreams.http.v3.HttpProtocolOptions'];
    expect(opts.common_http_protocol_options.max_requests_per_connection).toBe(EXT_PROC_STREAMS_PER_CONNECTION);
    expect(EXT_PROC_STREAMS_PER_CONNECTION).toBeLessThan(1000);
  });
});

describe('ext_proc side stream close', () => {
  it('leaves the graceful-close runtime flag off (with it, Envoy 1.40 crashed: docs/envoy.md (f))', () => {
    const cfg = renderEnvoyConfig(DEMO_ENVOY_OPTIONS) as any;
    expect(JSON.stringify(cfg)).not.toContain('ext_proc_graceful_grpc_close');
  });
});

test('chatHop: false puts ext_proc on the front listener and keeps it off the passthrough route', () => {
  const cfg = renderEnvoyConfig({ ...base, chatHop: false }) as any;
  const names = cfg.static_resources.listeners.map((l: any) => l.name);
  expect(names).not.toContain('front_chat');
  expect(cfg.static_resources.clusters.map((c: any) => c.name)).not.toContain('front_chat');
  const front = cfg.static_resources.listeners.find((l: any) => l.name === 'front');
  const hcm = front.filter_chains[0].filters[0].typed_config;
  expect(hcm.http_filters.map((f: any) => f.name)).toEqual(['envoy.filters.http.ext_proc', 'envoy.filters.http.router']);
  const routes = hcm.route_config.virtual_hosts[0].routes;
  const passthrough = routes.at(-1);
  for (const r of routes.slice(0, -1)) {
    expect(r.route.cluster).toBe('router_tier');
    expect(r.typed_per_filter_config).toBeUndefined();
  }
  expect(passthrough.typed_per_filter_config['envoy.filters.http.ext_proc'].disabled).toBe(true);
  // The default is the hop.
  const dflt = renderEnvoyConfig(base) as any;
  expect(dflt.static_resources.listeners.map((l: any) => l.name)).toContain('front_chat');
});
