// The project's rules for a shipped deployment, read from its manifests (the Kustomize files, deploy/istio/,
// and what `helm template` renders): test/unit/deploy/gates.test.ts and test/unit/deploy/helm-gates.test.ts.
//   - WORKERS explicit and <= the sidecar's CPU limit; its memory limit >= 128 MiB x processes
//   - Envoy's --concurrency (istio-proxy: concurrency) explicit and <= its CPU limit; the heap cap in the shipped
//     config is DEFAULT_MAX_HEAP_BYTES and <= 80 % of Envoy's memory limit
//   - Kubernetes pod: Envoy's preStop drain.sh, then the sidecar's drain: grace > drain.sh's max (DRAIN_MAX_SECONDS
//     on the Envoy container, else drain.sh's default) + DRAIN_TIMEOUT
//   - Istio pod: istio-proxy outlives the sidecar's drain whether it is a native sidecar (stopped after it) or a
//     plain container (SIGTERM at once): EXIT_ON_ZERO_ACTIVE_CONNECTIONS, terminationDrainDuration >
//     DRAIN_TIMEOUT, grace > terminationDrainDuration (docs/deploy.md "Drain")
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from '../../tools/stack/envoy-config';
import { DEFAULT_MAX_HEAP_BYTES } from '../../tools/stack/envoy-memory';

/* eslint-disable @typescript-eslint/no-explicit-any */

const MIB = 1024 * 1024;
/** About 80 MiB per Node process, measured idle (README, WORKERS), plus room for the streams in flight. */
export const SIDECAR_MIB_PER_PROCESS = 128;
/** Envoy's heap cap (overload manager fixed_heap) may use at most this share of its container's memory limit. */
export const ENVOY_HEAP_SHARE = 0.8;

/** "512Mi", "1Gi", "512M" (compose: binary units), bytes. */
export function memoryBytes(q: string | number): number {
  const m = /^(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|K|M|G|k|m|g|b)?$/.exec(String(q).trim());
  if (!m) throw new Error(`unparsable memory quantity ${q}`);
  const unit =
    { Ki: 1024, Mi: MIB, Gi: 1024 * MIB, K: 1024, k: 1024, M: MIB, m: MIB, G: 1024 * MIB, g: 1024 * MIB, b: 1 }[m[2] ?? 'b'] ?? 1;
  return Number(m[1]) * unit;
}

/** "2", "500m", 2 -> CPUs. */
export function cpus(q: string | number): number {
  const s = String(q);
  return s.endsWith('m') ? Number(s.slice(0, -1)) / 1000 : Number(s);
}

/** "105s" -> 105. */
const seconds = (d: string): number => Number(/^(\d+(?:\.\d+)?)s$/.exec(d)?.[1] ?? Number.NaN);

export interface SidecarSpec {
  where: string;
  env: Record<string, string>;
  cpuLimit: number;
  memoryLimit: number;
}
export interface EnvoySpec {
  where: string;
  concurrency: string | undefined;
  cpuLimit: number;
  memoryLimit: number;
  /** The overload manager's heap cap in the config this Envoy runs (undefined: not ours, e.g. istio-proxy). */
  heapCap: number | undefined;
  preStop: string[] | undefined;
}
export interface PodSpec {
  where: string;
  mode: 'kubernetes' | 'istio';
  grace: number;
  drainTimeout: number;
  /** istio-proxy's terminationDrainDuration, seconds (Istio pods). */
  proxyDrain?: number;
  /** istio-proxy's EXIT_ON_ZERO_ACTIVE_CONNECTIONS (Istio pods). */
  proxyExitOnZero?: boolean;
  /** Envoy's preStop wait, DRAIN_MAX_SECONDS on its container (Kubernetes pods; undefined: drain.sh's default). */
  envoyDrain?: number;
}

export function heapCapOf(cfg: any): number | undefined {
  return cfg.overload_manager?.resource_monitors?.find((m: any) => m.name === 'envoy.resource_monitors.fixed_heap')?.typed_config
    .max_heap_size_bytes;
}

export const argAfter = (args: string[], flag: string): string | undefined => {
  const i = args.indexOf(flag);
  return i >= 0 ? args[i + 1] : undefined;
};

const envOf = (c: any): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: any) => [e.name, e.value]));

/** The gateway pod of a set of manifests: the Kubernetes variant (Envoy + native sidecar) or the Istio one. */
export function podSpecs(docs: any[], where: string): { sidecar: SidecarSpec; envoy: EnvoySpec; pod: PodSpec } {
  const dep = docs.find((d) => d.kind === 'Deployment');
  const pod = dep.spec.template.spec;
  const native = (pod.initContainers ?? []).find((c: any) => c.name === 'continuation-sidecar');
  const side = native ?? pod.containers.find((c: any) => c.name === 'continuation-sidecar');
  const sidecar = {
    where: `${where} sidecar`,
    env: envOf(side),
    cpuLimit: cpus(side.resources.limits.cpu),
    memoryLimit: memoryBytes(side.resources.limits.memory),
  };
  const drainTimeout = Number(envOf(side).DRAIN_TIMEOUT_SECONDS);
  if (native) {
    const envoy = pod.containers.find((c: any) => c.name === 'envoy');
    const cmName = pod.volumes.find((v: any) => v.configMap)?.configMap.name;
    const cm = docs.find((d) => d.kind === 'ConfigMap' && d.metadata.name === cmName);
    return {
      sidecar,
      envoy: {
        where: `${where} envoy`,
        concurrency: argAfter([...(envoy.command ?? []), ...(envoy.args ?? [])], '--concurrency'),
        cpuLimit: cpus(envoy.resources.limits.cpu),
        memoryLimit: memoryBytes(envoy.resources.limits.memory),
        heapCap: heapCapOf(JSON.parse(cm.data['envoy.json'])),
        preStop: envoy.lifecycle?.preStop?.exec?.command,
      },
      pod: {
        where,
        mode: 'kubernetes',
        grace: pod.terminationGracePeriodSeconds,
        drainTimeout,
        envoyDrain: envOf(envoy).DRAIN_MAX_SECONDS === undefined ? undefined : Number(envOf(envoy).DRAIN_MAX_SECONDS),
      },
    };
  }
  const ann = dep.spec.template.metadata.annotations ?? {};
  const proxyConfig = JSON.parse(ann['proxy.istio.io/config'] ?? '{}');
  return {
    sidecar,
    envoy: {
      where: `${where} istio-proxy`,
      concurrency: proxyConfig.concurrency === undefined ? undefined : String(proxyConfig.concurrency),
      cpuLimit: cpus(ann['sidecar.istio.io/proxyCPULimit']),
      memoryLimit: memoryBytes(ann['sidecar.istio.io/proxyMemoryLimit']),
      heapCap: undefined, // Istio owns istio-proxy's bootstrap (docs/deploy.md: the bootstrapOverride for the cap)
      preStop: proxyConfig.terminationDrainDuration ? [`terminationDrainDuration ${proxyConfig.terminationDrainDuration}`] : undefined,
    },
    pod: {
      where,
      mode: 'istio',
      grace: pod.terminationGracePeriodSeconds,
      drainTimeout,
      proxyDrain: proxyConfig.terminationDrainDuration ? seconds(proxyConfig.terminationDrainDuration) : undefined,
      proxyExitOnZero: proxyConfig.proxyMetadata?.EXIT_ON_ZERO_ACTIVE_CONNECTIONS === 'true',
    },
  };
}

/** Every rule broken by these specs, as sentences (empty: all hold). */
export function ruleViolations(s: { sidecars: SidecarSpec[]; envoys: EnvoySpec[]; pods: PodSpec[] }): string[] {
  const out: string[] = [];
  for (const c of s.sidecars) {
    if (!/^[1-9]\d*$/.test(c.env.WORKERS ?? '')) {
      out.push(`${c.where}: WORKERS not set explicitly`);
      continue;
    }
    const workers = Number(c.env.WORKERS);
    if (workers > c.cpuLimit) out.push(`${c.where}: WORKERS ${workers} > CPU limit ${c.cpuLimit}`);
    const processes = workers > 1 ? workers + 1 : 1;
    if (c.memoryLimit < SIDECAR_MIB_PER_PROCESS * MIB * processes)
      out.push(`${c.where}: memory limit below ${SIDECAR_MIB_PER_PROCESS} MiB x ${processes} processes`);
  }
  for (const e of s.envoys) {
    if (!/^[1-9]\d*$/.test(e.concurrency ?? '')) out.push(`${e.where}: --concurrency not set explicitly`);
    else if (Number(e.concurrency) > e.cpuLimit) out.push(`${e.where}: --concurrency ${e.concurrency} > CPU limit ${e.cpuLimit}`);
    if (!(e.memoryLimit > 0)) out.push(`${e.where}: no memory limit`);
    if (!e.where.endsWith('istio-proxy')) {
      if (e.heapCap !== DEFAULT_MAX_HEAP_BYTES) out.push(`${e.where}: heap cap ${e.heapCap} is not DEFAULT_MAX_HEAP_BYTES`);
      if ((e.heapCap ?? 0) > ENVOY_HEAP_SHARE * e.memoryLimit)
        out.push(`${e.where}: heap cap over ${ENVOY_HEAP_SHARE} of the memory limit`);
    }
  }
  const drainMax = Number(
    /DRAIN_MAX_SECONDS:-(\d+)/.exec(fs.readFileSync(path.join(repoRoot(), 'deploy', 'envoy', 'drain.sh'), 'utf8'))![1],
  );
  for (const p of s.pods) {
    if (p.mode === 'kubernetes') {
      const envoyDrain = p.envoyDrain ?? drainMax;
      if (!(p.grace > envoyDrain + p.drainTimeout))
        out.push(`${p.where}: grace ${p.grace} s <= drain.sh's ${envoyDrain} s + DRAIN_TIMEOUT_SECONDS ${p.drainTimeout} s`);
    } else {
      if (!p.proxyExitOnZero) out.push(`${p.where}: istio-proxy without EXIT_ON_ZERO_ACTIVE_CONNECTIONS`);
      if (p.proxyDrain === undefined) out.push(`${p.where}: no terminationDrainDuration for istio-proxy`);
      else if (!(p.proxyDrain > p.drainTimeout))
        out.push(`${p.where}: terminationDrainDuration ${p.proxyDrain} s <= DRAIN_TIMEOUT_SECONDS ${p.drainTimeout} s`);
      if (!(p.grace > (p.proxyDrain ?? 0))) out.push(`${p.where}: grace ${p.grace} s <= terminationDrainDuration ${p.proxyDrain} s`);
    }
  }
  return out;
}
