// The default number of sidecar processes (WORKERS unset or 0). os.availableParallelism() counts the CPUs the
// process may run on (its affinity mask, so a cpuset is respected), which in a container is usually the whole
// node's core count, not its CPU limit: with about 80 MiB per worker, a 16-core node would give a 1 GiB sidecar
// 16 workers and get it OOM-killed. So:
//
// 1. a cgroup CPU limit (v2 `cpu.max` "<quota> <period>", v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`):
//    floor(quota / period), at least 1, at most the CPUs available;
// 2. no CPU limit, inside a container (/.dockerenv, /run/.containerenv, KUBERNETES_SERVICE_HOST, $container),
//    common in Kubernetes where CPU requests are set without limits: half the CPUs available (Envoy, in the same
//    pod, gets the other half), bounded by the memory the container may use: the cgroup memory limit
//    (v2 `memory.max`, v1 `memory.limit_in_bytes`) allows floor(limit / 128 MiB) - 1 processes (the primary
//    takes a share too, README WORKERS), and without a memory limit at most 4 (~320 MiB);
// 3. otherwise (a VM or a developer's machine) the CPUs available.
import * as fs from 'node:fs';
import { availableParallelism } from 'node:os';

export type WorkersSource = 'WORKERS' | 'cgroup-cpu-limit' | 'container-without-cpu-limit' | 'available-cpus';

const MiB = 1024 * 1024;
/** Memory budgeted per sidecar process when sizing WORKERS from a memory limit (README: >= 128 MiB x (WORKERS + 1)). */
export const MEMORY_PER_WORKER_BYTES = 128 * MiB;
/** Processes in a container that has neither a CPU nor a memory limit. */
export const MAX_WORKERS_WITHOUT_LIMITS = 4;

export interface CpuEnvironment {
  /** Reads a file, or returns undefined when it does not exist / cannot be read. */
  readFile(path: string): string | undefined;
  exists(path: string): boolean;
  env: NodeJS.ProcessEnv;
  availableCpus: number;
}

const hostEnvironment = (env: NodeJS.ProcessEnv): CpuEnvironment => ({
  readFile: (p) => {
    try {
      return fs.readFileSync(p, 'utf8');
    } catch {
      return undefined;
    }
  },
  exists: (p) => fs.existsSync(p),
  env,
  availableCpus: availableParallelism(),
});

/** The cgroup CPU limit in CPUs (e.g. 1.5), or undefined when there is none (or no cgroup files to read). */
export function cgroupCpuLimit(e: Pick<CpuEnvironment, 'readFile'>): number | undefined {
  // cgroup v2: one file, "max 100000" when unlimited.
  const v2 = e.readFile('/sys/fs/cgroup/cpu.max')?.trim();
  if (v2) {
    const [quota, period] = v2.split(/\s+/);
    if (quota === 'max') return undefined;
    const q = Number(quota);
    const p = Number(period ?? 100000);
    return q > 0 && p > 0 ? q / p : undefined;
  }
  // cgroup v1: quota -1 when unlimited. The controller is mounted as cpu, or cpu,cpuacct on older hosts.
  for (const dir of ['/sys/fs/cgroup/cpu', '/sys/fs/cgroup/cpu,cpuacct']) {
    const quota = Number(e.readFile(`${dir}/cpu.cfs_quota_us`)?.trim());
    const period = Number(e.readFile(`${dir}/cpu.cfs_period_us`)?.trim());
    if (!Number.isFinite(quota) || !Number.isFinite(period)) continue;
    return quota > 0 && period > 0 ? quota / period : undefined;
  }
  return undefined;
}

/** The cgroup memory limit in bytes, or undefined when there is none. v1 reports "no limit" as a huge number. */
export function cgroupMemoryLimit(e: Pick<CpuEnvironment, 'readFile'>): number | undefined {
  const v2 = e.readFile('/sys/fs/cgroup/memory.max')?.trim();
  if (v2) return v2 === 'max' || !(Number(v2) > 0) ? undefined : Number(v2);
  const v1 = Number(e.readFile('/sys/fs/cgroup/memory/memory.limit_in_bytes')?.trim());
  return Number.isFinite(v1) && v1 > 0 && v1 < 2 ** 60 ? v1 : undefined;
}

export function inContainer(e: Pick<CpuEnvironment, 'exists' | 'env'>): boolean {
  return Boolean(e.env.KUBERNETES_SERVICE_HOST) || Boolean(e.env.container) || e.exists('/.dockerenv') || e.exists('/run/.containerenv');
}

/** WORKERS=0 (the default) resolved as described above. */
export function defaultWorkers(e: CpuEnvironment): { workers: number; source: WorkersSource; cpuLimit?: number } {
  const limit = cgroupCpuLimit(e);
  if (limit !== undefined) {
    return { workers: Math.max(1, Math.min(Math.floor(limit), e.availableCpus)), source: 'cgroup-cpu-limit', cpuLimit: limit };
  }
  if (inContainer(e)) {
    const memory = cgroupMemoryLimit(e);
    const byMemory = memory === undefined ? MAX_WORKERS_WITHOUT_LIMITS : Math.floor(memory / MEMORY_PER_WORKER_BYTES) - 1;
    return { workers: Math.max(1, Math.min(Math.floor(e.availableCpus / 2), byMemory)), source: 'container-without-cpu-limit' };
  }
  return { workers: Math.max(1, e.availableCpus), source: 'available-cpus' };
}

export function resolveWorkers(
  configured: number,
  env: NodeJS.ProcessEnv,
  probe: CpuEnvironment = hostEnvironment(env),
): { workers: number; source: WorkersSource; cpuLimit?: number } {
  if (configured > 0) return { workers: configured, source: 'WORKERS' };
  return defaultWorkers(probe);
}
