// Static deployment gates, offline (issue 14 item 3), and the project's own rules for every shipped deployment.
//
// Tools (pinned in test/python/requirements.txt, installed into <repo>/.venv by `bash scripts/python-deps.sh`;
// none of them reaches the network here: the schemas are inside the wheels or vendored under deploy/schemas/):
//   - kubernetes-validate --strict: the Kubernetes manifests against the API schemas of the oldest and newest
//     Kubernetes the manifests claim (K8S_MIN: native sidecars; K8S_MAX: the newest kubernetes-validate ships)
//   - check-jsonschema: deploy/docker-compose.yaml against the compose-spec schema vendored in check-jsonschema
//     (--builtin-schema vendor.compose-spec), and the Istio resources against the CRDs' openAPIV3Schema vendored
//     from istio.io/api (deploy/schemas/istio/, scripts/vendor-istio-schemas.sh), made strict like the API
//     server's field validation (an unknown field fails)
//   - hadolint: the Dockerfile
//   - kustomize (kubectl's built-in `kubectl kustomize`, or a standalone `kustomize`): the base deploy/kubernetes/
//     and the example overlay deploy/overlays/example/ build, and what they build passes kubernetes-validate
// Each gate also runs once on a broken input, so a gate that checks nothing fails too.
// A missing tool fails its test with the install command.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../../../tools/stack/envoy-config';
import { strictCrdSchemaFile } from '../../support/crd-schema';
import {
  argAfter,
  cpus,
  type EnvoySpec,
  heapCapOf,
  memoryBytes,
  type PodSpec,
  podSpecs,
  ruleViolations,
  type SidecarSpec,
} from '../../support/deploy-rules';

/* eslint-disable @typescript-eslint/no-explicit-any */

const ROOT = repoRoot();
const DEPLOY = path.join(ROOT, 'deploy');
/** Native sidecars (initContainers with restartPolicy: Always) need 1.29; kubernetes-validate 1.37.0 ships up to 1.37. */
const K8S_MIN = '1.29.0';
const K8S_MAX = '1.37.0';
const ISTIO_KINDS = ['EnvoyFilter', 'DestinationRule', 'VirtualService'];

const INSTALL_HINT = 'install the pinned gate tools with `bash scripts/python-deps.sh` (test/python/requirements.txt, into <repo>/.venv)';

/** A gate tool: <repo>/.venv/bin/<name>, else on PATH; a clear failure with the install command otherwise. */
function tool(name: string): string {
  const venv = path.join(process.env.VENV_DIR ?? path.join(ROOT, '.venv'), 'bin', name);
  if (fs.existsSync(venv)) return venv;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  throw new Error(`${name} not found (neither in ${path.dirname(venv)} nor on PATH): ${INSTALL_HINT}`);
}

interface Run {
  code: number;
  out: string;
}

function run(bin: string, args: string[], cwd = ROOT): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { cwd, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') return reject(err);
      resolve({ code: err ? Number(err.code) : 0, out: `${stdout}${stderr}` });
    });
  });
}

function docsOf(file: string): any[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8'), { merge: true })
    .map((d) => d.toJS())
    .filter((d) => d != null);
}

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-gates-'));
});
afterAll(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The Kubernetes manifests: deploy/kubernetes/ (what its kustomization lists) and deploy/istio/. */
const K8S_FILES: string[] = docsOf(path.join(DEPLOY, 'kubernetes', 'kustomization.yaml'))[0].resources.map((f: string) =>
  path.join('deploy', 'kubernetes', f),
);
const ISTIO_FILES = fs
  .readdirSync(path.join(DEPLOY, 'istio'))
  .filter((f) => /\.ya?ml$/.test(f))
  .map((f) => path.join('deploy', 'istio', f));

/**
 * Runs kubernetes-validate --strict; passes when it exits 0 and warns only about the Istio kinds (no schema for
 * custom resources in it: those are checked by check-jsonschema below).
 */
async function kubernetesValidate(version: string, files: string[]): Promise<string> {
  const r = await run(tool('kubernetes-validate'), ['--strict', '-k', version, ...files]);
  const lines = r.out.split('\n').filter(Boolean);
  const unexpected = lines.filter(
    (l) =>
      !/^INFO .* passed for resource /.test(l) && !new RegExp(`^WARN .*Couldn't find schema for kind (${ISTIO_KINDS.join('|')}) `).test(l),
  );
  if (r.code !== 0 || unexpected.length) throw new Error(`kubernetes-validate -k ${version} (exit ${r.code}):\n${r.out}`);
  return r.out;
}

describe('gate: kubernetes-validate --strict', () => {
  test.each([K8S_MIN, K8S_MAX])('deploy/kubernetes and deploy/istio against the Kubernetes %s API', async (version) => {
    const out = await kubernetesValidate(version, [...K8S_FILES, ...ISTIO_FILES]);
    // Every core object was checked, not skipped.
    expect(out).toMatch(/passed for resource deployment\/inference-gateway/);
    expect(out).toMatch(/passed for resource configmap\/continuation-gateway-envoy/);
    expect(out.match(/passed for resource service\//g)?.length).toBeGreaterThanOrEqual(2);
  });

  test('the manifests state the versions the gate checks', () => {
    const header = fs.readFileSync(path.join(DEPLOY, 'kubernetes', 'gateway.yaml'), 'utf8').split('\n')[0];
    expect(header).toContain(`Kubernetes >= ${K8S_MIN.replace(/\.0$/, '')}`);
    expect(header).toContain(`the ${K8S_MIN.replace(/\.0$/, '')} and ${K8S_MAX.replace(/\.0$/, '')} API schemas`);
  });

  test('fails on an unknown field', async () => {
    const bad = docsOf(path.join(DEPLOY, 'kubernetes', 'gateway.yaml')).find((d) => d.kind === 'Deployment');
    bad.spec.template.spec.containers[0].restartPolicyy = 'Always';
    const file = path.join(tmp, 'bad-deployment.json');
    fs.writeFileSync(file, JSON.stringify(bad));
    await expect(kubernetesValidate(K8S_MIN, [file])).rejects.toThrow(/restartPolicyy/);
  });
});

describe('gate: check-jsonschema', () => {
  test('deploy/docker-compose.yaml against the vendored compose-spec schema', async () => {
    const r = await run(tool('check-jsonschema'), ['--builtin-schema', 'vendor.compose-spec', 'deploy/docker-compose.yaml']);
    expect([r.code, r.out.trim()]).toEqual([0, 'ok -- validation done']);
  });

  test('compose: fails on an unknown service key', async () => {
    const file = path.join(tmp, 'bad-compose.yaml');
    fs.writeFileSync(
      file,
      fs.readFileSync(path.join(DEPLOY, 'docker-compose.yaml'), 'utf8').replace('  sidecar:\n', '  sidecar:\n    network_modee: host\n'),
    );
    const r = await run(tool('check-jsonschema'), ['--builtin-schema', 'vendor.compose-spec', file]);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('network_modee');
  });

  const strictSchemaFile = (kind: string, version: string): string => strictCrdSchemaFile('istio', kind, version, tmp);

  const istioDocs = () => ISTIO_FILES.flatMap((f) => docsOf(path.join(ROOT, f))).filter((d) => String(d.apiVersion).includes('istio.io'));

  test('the Istio resources against the CRD schemas vendored from istio.io/api', async () => {
    const docs = istioDocs();
    expect(docs.map((d) => d.kind).sort()).toEqual([...ISTIO_KINDS].sort());
    for (const d of docs) {
      const version = d.apiVersion.split('/')[1];
      const file = path.join(tmp, `${d.kind}.json`);
      fs.writeFileSync(file, JSON.stringify(d));
      const r = await run(tool('check-jsonschema'), ['--schemafile', strictSchemaFile(d.kind, version), file]);
      expect([d.kind, r.code, r.out.trim()]).toEqual([d.kind, 0, 'ok -- validation done']);
    }
  });

  test('Istio: fails on an unknown field and on a wrong type', async () => {
    const vs = istioDocs().find((d) => d.kind === 'VirtualService');
    vs.spec.http[0].retries.retryOnn = vs.spec.http[0].retries.retryOn;
    const file = path.join(tmp, 'bad-vs.json');
    fs.writeFileSync(file, JSON.stringify(vs));
    const r = await run(tool('check-jsonschema'), ['--schemafile', strictSchemaFile('VirtualService', 'v1'), file]);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('retryOnn');
    const ef = istioDocs().find((d) => d.kind === 'EnvoyFilter');
    ef.spec.configPatches[0].applyTo = 'CLUSTERS';
    fs.writeFileSync(file, JSON.stringify(ef));
    const r2 = await run(tool('check-jsonschema'), ['--schemafile', strictSchemaFile('EnvoyFilter', 'v1alpha3'), file]);
    expect(r2.code).not.toBe(0);
    expect(r2.out).toContain('CLUSTERS');
  });

  test('the vendored schemas say where they come from', () => {
    for (const f of fs.readdirSync(path.join(DEPLOY, 'schemas', 'istio'))) {
      const s = JSON.parse(fs.readFileSync(path.join(DEPLOY, 'schemas', 'istio', f), 'utf8'));
      expect(s.$comment).toMatch(/Go module istio\.io\/api v\d+\.\d+\.\d+ \(go\.sum h1:/);
    }
  });
});

/** `kustomize build DIR` (standalone) or `kubectl kustomize DIR` (built in since kubectl 1.14; v5 since 1.27). */
function kustomizeCommand(): [string, string[]] {
  try {
    return [tool('kustomize'), ['build']];
  } catch {
    try {
      return [tool('kubectl'), ['kustomize']];
    } catch {
      throw new Error(
        'neither kustomize nor kubectl found on PATH: install kubectl (>= 1.27, kustomize v5 built in; Debian: the `kubectl` package where your apt sources have it) or kustomize (`go install sigs.k8s.io/kustomize/kustomize/v5@latest`, from the Go module proxy)',
      );
    }
  }
}

async function kustomizeBuild(dir: string): Promise<{ file: string; docs: any[] }> {
  const [bin, args] = kustomizeCommand();
  const r = await run(bin, [...args, dir]);
  if (r.code !== 0) throw new Error(`${path.basename(bin)} ${args.join(' ')} ${dir} (exit ${r.code}):\n${r.out}`);
  const file = path.join(tmp, `${dir.replace(/\W+/g, '_')}.yaml`);
  fs.writeFileSync(file, r.out);
  return { file, docs: docsOf(file) };
}

const ids = (docs: any[]) => docs.map((d) => `${d.kind}/${d.metadata.namespace ?? ''}/${d.metadata.name}`).sort();

describe('gate: kustomize (base deploy/kubernetes, overlay deploy/overlays/example)', () => {
  test('the base builds to exactly the objects of deploy/kubernetes/*.yaml, unchanged', async () => {
    const { docs } = await kustomizeBuild('deploy/kubernetes');
    const files = K8S_FILES.flatMap((f) => docsOf(path.join(ROOT, f)));
    expect(ids(docs)).toEqual(ids(files));
    for (const d of docs) expect(d).toEqual(files.find((f) => f.kind === d.kind && f.metadata.name === d.metadata.name));
  });

  test('the overlay sets the namespace, the image, the router Service and the model family', async () => {
    const { docs } = await kustomizeBuild('deploy/overlays/example');
    const overlay = docsOf(path.join(DEPLOY, 'overlays', 'example', 'kustomization.yaml'))[0];
    const settings = Object.fromEntries(overlay.configMapGenerator[0].literals.map((l: string) => l.split(/=(.*)/s).slice(0, 2)));
    // The settings ConfigMap is local-config: read by the replacements, not applied.
    expect(ids(docs)).toEqual(
      ids(K8S_FILES.flatMap((f) => docsOf(path.join(ROOT, f))))
        .map((id) => id.replace(/\/\//, `/${overlay.namespace}/`))
        .sort(),
    );
    for (const d of docs) expect([d.kind, d.metadata.namespace]).toEqual([d.kind, overlay.namespace]);
    const router = docs.find((d) => d.kind === 'Service' && d.spec.type === 'ExternalName');
    expect(router.spec.externalName).toBe(settings.ROUTER_SERVICE);
    const pod = docs.find((d) => d.kind === 'Deployment').spec.template.spec;
    const sidecar = pod.initContainers.find((c: any) => c.name === 'continuation-sidecar');
    expect(sidecar.env.find((e: any) => e.name === 'CONTINUATION_MODEL').value).toBe(settings.CONTINUATION_MODEL);
    expect(sidecar.image).toBe(`${overlay.images[0].newName}:${overlay.images[0].newTag}`);
    // Envoy's router cluster names the ExternalName Service, whatever the router is called.
    const cm = docs.find((d) => d.kind === 'ConfigMap');
    const cluster = JSON.parse(cm.data['envoy.json']).static_resources.clusters.find((c: any) => c.name === 'router_tier');
    expect(cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address.address).toBe(router.metadata.name);
    // The Envoy volume still finds its ConfigMap (no name suffix on resources).
    expect(pod.volumes.find((v: any) => v.configMap).configMap.name).toBe(cm.metadata.name);
  });

  test.each([K8S_MIN, K8S_MAX])("the overlay's output passes kubernetes-validate --strict at %s", async (version) => {
    const { file } = await kustomizeBuild('deploy/overlays/example');
    const out = await kubernetesValidate(version, [file]);
    expect(out.match(/ passed for resource /g)?.length).toBe(4);
  });
});

describe('gate: kustomize, the vLLM overlay deploy/overlays/vllm', () => {
  test.each([K8S_MIN, K8S_MAX])(
    'sets CONTINUATION_ENGINE=vllm, the model, the router and the image; passes kubernetes-validate at %s',
    async (version) => {
      const { file, docs } = await kustomizeBuild('deploy/overlays/vllm');
      const pod = docs.find((d) => d.kind === 'Deployment').spec.template.spec;
      const env = Object.fromEntries(pod.initContainers[0].env.map((e: any) => [e.name, e.value]));
      expect(env).toMatchObject({ CONTINUATION_ENGINE: 'vllm', CONTINUATION_MODEL: 'Qwen/Qwen3-32B', WORKERS: '2' });
      expect(pod.initContainers[0].image).toBe('registry.example.com/ml/continuation-gateway:0.1.0');
      expect(docs.find((d) => d.spec?.type === 'ExternalName').spec.externalName).toBe('vllm-router.llm-serving.svc.cluster.local');
      const out = await kubernetesValidate(version, [file]);
      expect(out.match(/ passed for resource /g)?.length).toBe(4);
    },
  );
});

describe('gate: hadolint', () => {
  test('the Dockerfile is clean', async () => {
    const r = await run(tool('hadolint'), ['--no-color', 'Dockerfile']);
    expect([r.code, r.out]).toEqual([0, '']);
  });

  test('fails on an unpinned base image', async () => {
    const file = path.join(tmp, 'Dockerfile');
    fs.writeFileSync(file, 'FROM node\nRUN cd /app && npm ci\n');
    const r = await run(tool('hadolint'), ['--no-color', file]);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/DL3006/);
  });
});

// ---- The project's rules for every shipped deployment (test/support/deploy-rules.ts) -----------------------

/** Every shipped deployment's sidecar and Envoy, read from the files as they are. */
function shipped(): { sidecars: SidecarSpec[]; envoys: EnvoySpec[]; pods: PodSpec[] } {
  const compose = docsOf(path.join(DEPLOY, 'docker-compose.yaml'))[0];
  const sc = compose.services.sidecar;
  const ce = compose.services.envoy;
  const k8s = podSpecs(
    K8S_FILES.flatMap((f) => docsOf(path.join(ROOT, f))),
    'kubernetes',
  );
  const istio = podSpecs(docsOf(path.join(DEPLOY, 'istio', 'gateway.yaml')), 'istio');
  return {
    sidecars: [
      {
        where: 'compose sidecar',
        env: sc.environment,
        cpuLimit: cpus(sc.deploy.resources.limits.cpus),
        memoryLimit: memoryBytes(sc.deploy.resources.limits.memory),
      },
      k8s.sidecar,
      istio.sidecar,
    ],
    envoys: [
      {
        where: 'compose envoy',
        concurrency: argAfter(ce.command, '--concurrency'),
        cpuLimit: cpus(ce.deploy.resources.limits.cpus),
        memoryLimit: memoryBytes(ce.deploy.resources.limits.memory),
        heapCap: heapCapOf(JSON.parse(fs.readFileSync(path.join(DEPLOY, 'envoy', 'envoy.compose.json'), 'utf8'))),
        preStop: undefined,
      },
      k8s.envoy,
      istio.envoy,
    ],
    pods: [k8s.pod, istio.pod],
  };
}

describe('project rules for every shipped deployment (compose, Kubernetes, Istio)', () => {
  const specs = shipped();

  test.each(specs.sidecars.map((s) => [s.where, s]))(
    '%s: WORKERS explicit, within the CPU limit, memory limit fits the processes',
    (_w, s) => {
      expect(ruleViolations({ sidecars: [s], envoys: [], pods: [] })).toEqual([]);
    },
  );

  test.each(specs.envoys.map((e) => [e.where, e]))(
    '%s: --concurrency explicit, within the CPU limit; heap cap under the memory limit',
    (_w, e) => {
      expect(ruleViolations({ sidecars: [], envoys: [e], pods: [] })).toEqual([]);
    },
  );

  test('Envoy in a pod drains before it stops: a preStop (Kubernetes), terminationDrainDuration (Istio)', () => {
    expect(specs.envoys.find((e) => e.where === 'kubernetes envoy')!.preStop).toEqual(['/bin/bash', '/etc/envoy/drain.sh']);
    expect(specs.envoys.find((e) => e.where === 'istio istio-proxy')!.preStop).toEqual(['terminationDrainDuration 105s']);
  });

  test("the grace period covers the drains: Envoy's then the sidecar's (Kubernetes); the sidecar's inside istio-proxy's (Istio)", () => {
    expect(ruleViolations({ sidecars: [], envoys: [], pods: specs.pods })).toEqual([]);
    // The rule can fail: Istio's old 80 s proxy drain with a 100 s sidecar drain, or a short grace period.
    const istio = specs.pods.find((p) => p.mode === 'istio')!;
    expect(ruleViolations({ sidecars: [], envoys: [], pods: [{ ...istio, proxyDrain: 80 }] })).toHaveLength(1);
    const k8s = specs.pods.find((p) => p.mode === 'kubernetes')!;
    expect(ruleViolations({ sidecars: [], envoys: [], pods: [{ ...k8s, grace: 100 }] })).toHaveLength(1);
  });
});

describe('the version is stated in one place, package.json', () => {
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version;
  test("the Dockerfile's VERSION default, the Helm chart and the manifests' image tags equal it", () => {
    expect(/^ARG VERSION=(\S+)$/m.exec(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))?.[1]).toBe(version);
    const chart = docsOf(path.join(DEPLOY, 'helm', 'continuation-gateway', 'Chart.yaml'))[0];
    expect([chart.version, chart.appVersion]).toEqual([version, version]);
    const images = [...K8S_FILES, ...ISTIO_FILES]
      .flatMap((f) => docsOf(path.join(ROOT, f)))
      .filter((d) => d.kind === 'Deployment')
      .flatMap((d) => [...(d.spec.template.spec.initContainers ?? []), ...d.spec.template.spec.containers])
      .map((c: any) => c.image)
      .filter((i: string) => i.startsWith('continuation-gateway:'));
    expect(images).toEqual([`continuation-gateway:${version}`, `continuation-gateway:${version}`]);
    expect(docsOf(path.join(DEPLOY, 'overlays', 'example', 'kustomization.yaml'))[0].images[0].newTag).toBe(version);
  });
});
