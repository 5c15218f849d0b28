#!/usr/bin/env node
// Renders the GENERATED deployment files from the Envoy bootstrap generator (tools/stack/envoy-config.ts), so the
// Envoy config in compose, in the Kubernetes ConfigMap and in the Istio EnvoyFilter is always exactly the one the
// unit tests validate. Never edit the generated files by hand; regenerate them with
//
//   npm run build && node deploy/render.js
//
// test/unit/deploy/artefacts.test.ts fails when a file on disk differs from this script's output, and runs
// `envoy --mode validate` on every complete bootstrap. Plain CommonJS (not TypeScript) so it can live under
// deploy/ and run from the compiled generator in dist/.

const fs = require('node:fs');
const path = require('node:path');
const YAML = require('yaml');

const ROOT = path.resolve(__dirname, '..');
const gen = require(path.join(ROOT, 'dist', 'tools', 'stack', 'envoy-config.js'));

/** Shared by every target: the sidecar's defaults (STALL_IDLE_TIMEOUT_SECONDS 20, MAX_STALL_SECONDS 300, ...). */
const BASE = Object.freeze({
  listenAddress: '0.0.0.0',
  listenPort: 8080,
  adminPort: 9901,
  egressPort: 10001,
  // The sidecar shares Envoy's network namespace (compose network_mode "service:envoy", a Kubernetes pod), so
  // ext_proc is on loopback exactly as in envoy/envoy.demo.json.
  extProcHost: '127.0.0.1',
  extProcPort: 50051,
  stallTimeoutSeconds: 20,
  maxStallSeconds: 300,
  upstreamHeadersTimeoutSeconds: 60,
  // The sidecar serves grpc.health.v1: Envoy then also sees a draining (NOT_SERVING) or wedged sidecar.
  extProcHealthCheck: 'grpc',
});

/** docker compose: two fake SGLang replicas, resolved by Docker's DNS (hostnames -> STRICT_DNS). */
const COMPOSE_ENVOY_OPTIONS = Object.freeze({
  ...BASE,
  routerTier: [
    { host: 'replica-a', port: 8000 },
    { host: 'replica-b', port: 8000 },
  ],
});

/** The router tier's Service in Kubernetes (one DNS name; kube-proxy / the Service spreads the load). */
const ROUTER_SERVICE_HOST = 'inference-router.default.svc.cluster.local';
const ROUTER_SERVICE_PORT = 8000;

/**
 * Kubernetes: Envoy's router cluster names a fixed, namespace-relative Service, `inference-gateway-router`
 * (deploy/kubernetes/router.yaml), an ExternalName Service whose `externalName` is the router's real Service
 * (ROUTER_SERVICE_HOST by default). The router's name and namespace then live in one plain YAML field that
 * kubectl, kustomize (deploy/overlays/example) or any tool can set, not inside the generated Envoy
 * JSON: no TypeScript build and no regeneration to point the gateway at another router. Envoy resolves the short
 * name through the pod's resolv.conf search path (<namespace>.svc.cluster.local) and follows the CNAME.
 */
const K8S_ROUTER_SERVICE = 'inference-gateway-router';

const K8S_ENVOY_OPTIONS = Object.freeze({
  ...BASE,
  routerTier: [{ host: K8S_ROUTER_SERVICE, port: ROUTER_SERVICE_PORT }],
});

/**
 * Envoy's admin interface stays on 127.0.0.1 (it can stop Envoy and dump config), but the kubelet probes the
 * pod IP. The usual answer: a tiny listener on 0.0.0.0 that forwards exactly GET /ready and GET
 * /stats/prometheus (for Prometheus) to the admin cluster and answers 404 to anything else.
 */
const READY_PORT = 9902;
const ADMIN_CLUSTER = 'envoy_admin';
const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

function withReadyListener(cfg, adminPort) {
  const c = JSON.parse(JSON.stringify(cfg));
  c.static_resources.listeners.push({
    name: 'ready',
    address: { socket_address: { address: '0.0.0.0', port_value: READY_PORT } },
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.http_connection_manager',
            typed_config: {
              '@type': HCM,
              stat_prefix: 'ready',
              route_config: {
                name: 'ready',
                virtual_hosts: [
                  {
                    name: 'ready',
                    domains: ['*'],
                    routes: [
                      { match: { path: '/ready' }, route: { cluster: ADMIN_CLUSTER, timeout: '2s' } },
                      // Envoy's own metrics for Prometheus (PodMonitor / ServiceMonitor on port envoy-ready), GET
                      // only: nothing else of the admin interface (quitquitquit, config_dump, ...) is reachable.
                      {
                        match: { path: '/stats/prometheus', headers: [{ name: ':method', string_match: { exact: 'GET' } }] },
                        route: { cluster: ADMIN_CLUSTER, timeout: '5s' },
                      },
                      { match: { prefix: '/' }, direct_response: { status: 404 } },
                    ],
                  },
                ],
              },
              http_filters: [
                {
                  // GET /ready answers 200, and 503 once the preStop drain has called POST /healthcheck/fail
                  // (the admin interface's own /ready stays 200 then), so readiness fails while Envoy drains.
                  name: 'envoy.filters.http.health_check',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck',
                    pass_through_mode: false,
                    headers: [{ name: ':path', string_match: { exact: '/ready' } }],
                  },
                },
                { name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } },
              ],
            },
          },
        ],
      },
    ],
  });
  c.static_resources.clusters.push({
    name: ADMIN_CLUSTER,
    type: 'STATIC',
    connect_timeout: '1s',
    load_assignment: {
      cluster_name: ADMIN_CLUSTER,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: adminPort } } } }] }],
    },
  });
  return c;
}

const GENERATED =
  '# GENERATED by deploy/render.js from tools/stack/envoy-config.ts: do not edit; `npm run build && node deploy/render.js`.\n';

function composeEnvoyJson() {
  return gen.renderEnvoyConfigJson(COMPOSE_ENVOY_OPTIONS);
}

/**
 * The pod's preStop drain (deploy/envoy/drain.sh) runs `drain_listeners?graceful&inboundonly`: the listeners the
 * clients reach are INBOUND, and the loopback egress listener that carries the sidecar's legs (recoveries
 * included) is OUTBOUND, so it keeps serving while the client streams finish.
 */
const TRAFFIC_DIRECTION = Object.freeze({ front: 'INBOUND', ready: 'INBOUND', egress: 'OUTBOUND' });

function withTrafficDirections(cfg) {
  for (const l of cfg.static_resources.listeners) {
    if (TRAFFIC_DIRECTION[l.name]) l.traffic_direction = TRAFFIC_DIRECTION[l.name];
  }
  return cfg;
}

/** The collector the chart's envoy-tracing.json is rendered for (configmap-envoy.yaml replaces host and port). */
const HELM_TRACING = Object.freeze({ collectorHost: 'otel-collector', collectorPort: 4318 });

function k8sEnvoyConfig(tracing) {
  const opts = tracing ? { ...K8S_ENVOY_OPTIONS, tracing } : K8S_ENVOY_OPTIONS;
  return withTrafficDirections(withReadyListener(gen.renderEnvoyConfig(opts), K8S_ENVOY_OPTIONS.adminPort));
}

/** The preStop drain script, shipped next to envoy.json in the ConfigMap (mounted at /etc/envoy). */
const DRAIN_SCRIPT = path.join(__dirname, 'envoy', 'drain.sh');

function k8sConfigMapYaml() {
  const doc = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'continuation-gateway-envoy', labels: { 'app.kubernetes.io/name': 'continuation-gateway' } },
    data: { 'drain.sh': fs.readFileSync(DRAIN_SCRIPT, 'utf8'), 'envoy.json': `${JSON.stringify(k8sEnvoyConfig(), null, 2)}\n` },
  };
  return GENERATED + YAML.stringify(doc, { lineWidth: 0 });
}

/** Istio: the same ext_proc filter and ext_proc cluster as the standalone bootstrap, patched into istio-proxy. */
const ISTIO_WORKLOAD_LABELS = Object.freeze({ app: 'inference-gateway' });
const ISTIO_INBOUND_PORT = 8080;

function istioEnvoyFilterYaml() {
  const cfg = gen.renderEnvoyConfig(K8S_ENVOY_OPTIONS);
  const front = cfg.static_resources.listeners.find((l) => l.name === 'front');
  // ext_proc runs on the internal chat hop of the standalone bootstrap (docs/envoy.md (g)); Istio gets it on
  // its inbound listener directly (no memory cap for HTTP/1.1 clients there: docs/deploy.md).
  const chat = cfg.static_resources.listeners.find((l) => l.name === gen.CHAT_LISTENER);
  const filters = chat.filter_chains[0].filters[0].typed_config.http_filters;
  const extProcFilter = filters.find((f) => f.name === 'envoy.filters.http.ext_proc');
  const extProcCluster = cfg.static_resources.clusters.find((c) => c.name === gen.EXT_PROC_CLUSTER);
  const routerCluster = `outbound|${ROUTER_SERVICE_PORT}||${ROUTER_SERVICE_HOST}`;
  const doc = {
    apiVersion: 'networking.istio.io/v1alpha3',
    kind: 'EnvoyFilter',
    metadata: { name: 'continuation-gateway-ext-proc', namespace: 'default' },
    spec: {
      workloadSelector: { labels: { ...ISTIO_WORKLOAD_LABELS } },
      configPatches: [
        {
          // The sidecar's gRPC server, with the health-check fail-open trick of docs/envoy.md (d): active TCP
          // health check + healthy_panic_threshold 0, so a dead sidecar is bypassed instead of costing a 500.
          applyTo: 'CLUSTER',
          match: { context: 'SIDECAR_INBOUND' },
          patch: { operation: 'ADD', value: extProcCluster },
        },
        {
          // ext_proc right before the router in the inbound HCM of the gateway port.
          applyTo: 'HTTP_FILTER',
          match: {
            context: 'SIDECAR_INBOUND',
            listener: {
              portNumber: ISTIO_INBOUND_PORT,
              filterChain: {
                filter: {
                  name: 'envoy.filters.network.http_connection_manager',
                  subFilter: { name: 'envoy.filters.http.router' },
                },
              },
            },
          },
          patch: { operation: 'INSERT_BEFORE', value: extProcFilter },
        },
        {
          // The gateway pod has no application on :8080: what the sidecar passes through (CONTINUE: non-streaming,
          // other paths) goes to the router Service through the mesh, with the route timeouts the streaming path
          // needs (0s = none; the 15 s default would cut streams).
          applyTo: 'HTTP_ROUTE',
          match: { context: 'SIDECAR_INBOUND', routeConfiguration: { portNumber: ISTIO_INBOUND_PORT } },
          patch: {
            operation: 'MERGE',
            value: {
              route: {
                cluster: routerCluster,
                timeout: '0s',
                idle_timeout: front.filter_chains[0].filters[0].typed_config.stream_idle_timeout,
              },
            },
          },
        },
      ],
    },
  };
  return GENERATED + YAML.stringify(doc, { lineWidth: 0 });
}

/**
 * The Helm chart (deploy/helm/continuation-gateway) ships the same generated Envoy pieces as files/ and templates
 * only the names around them: the pod's bootstrap and drain script, and the Istio EnvoyFilter's cluster and
 * filter (its route's router host and the namespace come from values); and copies of deploy/monitoring/.
 */
const HELM_FILES = 'deploy/helm/continuation-gateway/files';
const MONITORING_FILES = ['alerts.yaml', 'continuation-gateway.dashboard.json'];

function istioPatchValues() {
  const doc = YAML.parse(istioEnvoyFilterYaml().slice(GENERATED.length));
  const [cluster, filter, route] = doc.spec.configPatches.map((p) => p.patch.value);
  return { cluster, filter, routeIdleTimeout: route.route.idle_timeout };
}

function helmFiles() {
  const p = istioPatchValues();
  const json = (v) => `${JSON.stringify(v, null, 2)}\n`;
  return [
    [`${HELM_FILES}/envoy.json`, `${JSON.stringify(k8sEnvoyConfig(), null, 2)}\n`],
    // tracing.envoy.enabled: the same bootstrap with Envoy's OpenTelemetry tracer; the chart sets the collector.
    [`${HELM_FILES}/envoy-tracing.json`, `${JSON.stringify(k8sEnvoyConfig(HELM_TRACING), null, 2)}\n`],
    [`${HELM_FILES}/drain.sh`, fs.readFileSync(DRAIN_SCRIPT, 'utf8')],
    [`${HELM_FILES}/istio-ext-proc-cluster.json`, json(p.cluster)],
    [`${HELM_FILES}/istio-ext-proc-filter.json`, json(p.filter)],
    [`${HELM_FILES}/istio-route.json`, json({ timeout: '0s', idle_timeout: p.routeIdleTimeout })],
    // deploy/monitoring/ as they are: the chart's PrometheusRule and dashboard ConfigMap (a chart reads only its
    // own directory).
    ...MONITORING_FILES.map((f) => [`${HELM_FILES}/monitoring/${f}`, fs.readFileSync(path.join(ROOT, 'deploy', 'monitoring', f), 'utf8')]),
  ];
}

/** Every generated file: path relative to the repository root -> exact content. */
function renderAll() {
  return [
    ['deploy/envoy/envoy.compose.json', composeEnvoyJson()],
    ['deploy/kubernetes/envoy-configmap.yaml', k8sConfigMapYaml()],
    ['deploy/istio/envoyfilter.yaml', istioEnvoyFilterYaml()],
    ...helmFiles(),
  ];
}

module.exports = {
  BASE,
  COMPOSE_ENVOY_OPTIONS,
  K8S_ENVOY_OPTIONS,
  ROUTER_SERVICE_HOST,
  ROUTER_SERVICE_PORT,
  K8S_ROUTER_SERVICE,
  READY_PORT,
  TRAFFIC_DIRECTION,
  ISTIO_INBOUND_PORT,
  ISTIO_WORKLOAD_LABELS,
  composeEnvoyJson,
  k8sEnvoyConfig,
  k8sConfigMapYaml,
  istioEnvoyFilterYaml,
  renderAll,
};

if (require.main === module) {
  for (const [rel, text] of renderAll()) {
    const file = path.join(ROOT, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
    process.stdout.write(`${file}\n`);
  }
}
