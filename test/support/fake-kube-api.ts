// The few read-only Kubernetes API answers `helm install --dry-run` needs, for test/unit/deploy/helm-gates.test.ts: no
// cluster can run on the project's machines (no container engine; kube-apiserver and etcd are not served by the
// registries the suite may use), and without one Helm renders neither NOTES.txt nor the chart's "a cluster is
// there" branch. It answers the server version, API discovery for the kinds the chart renders, and GET of the
// namespace's kube-root-ca.crt ConfigMap (what templates/_validate.tpl looks up); 404 to everything else.
// Nothing is ever created: --dry-run. Served on 127.0.0.1:0; a kubeconfig file points Helm at it.
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';

/** group/version -> [plural, Kind, namespaced] of what the chart renders (and what Helm's client asks for). */
const RESOURCES: Record<string, [string, string, boolean][]> = {
  v1: [
    ['configmaps', 'ConfigMap', true],
    ['services', 'Service', true],
    ['serviceaccounts', 'ServiceAccount', true],
    ['pods', 'Pod', true],
    ['secrets', 'Secret', true],
    ['namespaces', 'Namespace', false],
  ],
  'apps/v1': [['deployments', 'Deployment', true]],
  'policy/v1': [['poddisruptionbudgets', 'PodDisruptionBudget', true]],
  'networking.k8s.io/v1': [['networkpolicies', 'NetworkPolicy', true]],
  'autoscaling/v2': [['horizontalpodautoscalers', 'HorizontalPodAutoscaler', true]],
  'monitoring.coreos.com/v1': [
    ['podmonitors', 'PodMonitor', true],
    ['servicemonitors', 'ServiceMonitor', true],
    ['prometheusrules', 'PrometheusRule', true],
  ],
  'networking.istio.io/v1': [
    ['destinationrules', 'DestinationRule', true],
    ['virtualservices', 'VirtualService', true],
  ],
  'networking.istio.io/v1alpha3': [['envoyfilters', 'EnvoyFilter', true]],
};

export interface FakeKubeApi {
  /** A kubeconfig file for KUBECONFIG. */
  readonly kubeconfig: string;
  /** Every request line seen ("GET /version"). */
  readonly requests: string[];
  stop(): Promise<void>;
}

/** version: the server's gitVersion ("v1.28.3"); rootCaIn: namespaces whose kube-root-ca.crt exists. */
export async function startFakeKubeApi(dir: string, opts: { version: string; rootCaIn: string[] }): Promise<FakeKubeApi> {
  const requests: string[] = [];
  const [major, minor] = opts.version.replace(/^v/, '').split('.');
  const json = (res: http.ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push(`${req.method} ${url.pathname}`);
    const p = url.pathname;
    if (req.method !== 'GET') return json(res, 405, { kind: 'Status', status: 'Failure', code: 405 });
    if (p === '/version') return json(res, 200, { major, minor, gitVersion: opts.version });
    if (p === '/api') return json(res, 200, { kind: 'APIVersions', versions: ['v1'] });
    if (p === '/apis') {
      const groups = new Map<string, string[]>();
      for (const gv of Object.keys(RESOURCES).filter((k) => k.includes('/'))) {
        const [g, v] = gv.split('/');
        groups.set(g, [...(groups.get(g) ?? []), v]);
      }
      return json(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [...groups].map(([name, vs]) => ({
          name,
          versions: vs.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
          preferredVersion: { groupVersion: `${name}/${vs[0]}`, version: vs[0] },
        })),
      });
    }
    const gv = p === '/api/v1' ? 'v1' : /^\/apis\/([^/]+\/[^/]+)$/.exec(p)?.[1];
    if (gv && RESOURCES[gv])
      return json(res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: gv,
        resources: RESOURCES[gv].map(([name, kind, namespaced]) => ({ name, singularName: '', namespaced, kind, verbs: ['get', 'list'] })),
      });
    const cm = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/kube-root-ca\.crt$/.exec(p);
    if (cm && opts.rootCaIn.includes(cm[1]))
      return json(res, 200, { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'kube-root-ca.crt', namespace: cm[1] } });
    json(res, 404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const kubeconfig = path.join(dir, `kubeconfig-${port}.yaml`);
  fs.writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: fake, cluster: {server: "http://127.0.0.1:${port}"}}]`,
      'contexts: [{name: fake, context: {cluster: fake, user: fake}}]',
      'current-context: fake',
      'users: [{name: fake, user: {}}]',
      '',
    ].join('\n'),
  );
  return {
    kubeconfig,
    requests,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
