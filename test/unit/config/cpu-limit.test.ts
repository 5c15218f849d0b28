// WORKERS=0 resolved from the cgroup files (src/config/cpu-limit.ts), on made-up cgroup trees.
import { type CpuEnvironment, defaultWorkers } from '../../../src/config/cpu-limit';

const MiB = 1024 * 1024;
function host(files: Record<string, string>, o: { cpus: number; container?: boolean }): CpuEnvironment {
  return {
    readFile: (p) => files[p],
    exists: (p) => (o.container ?? false) && p === '/.dockerenv',
    env: {},
    availableCpus: o.cpus,
  };
}

describe('the default WORKERS', () => {
  it('follows a cgroup v2 CPU limit, rounded down, at least 1', () => {
    expect(defaultWorkers(host({ '/sys/fs/cgroup/cpu.max': '250000 100000' }, { cpus: 16, container: true }))).toEqual({
      workers: 2,
      source: 'cgroup-cpu-limit',
      cpuLimit: 2.5,
    });
    expect(defaultWorkers(host({ '/sys/fs/cgroup/cpu.max': '50000 100000' }, { cpus: 16 })).workers).toBe(1);
  });

  it('follows a cgroup v1 CPU limit', () => {
    const files = { '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '300000', '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000' };
    expect(defaultWorkers(host(files, { cpus: 8 })).workers).toBe(3);
  });

  it('uses half the CPUs of a container without a CPU limit, within its memory limit', () => {
    const unlimitedCpu = { '/sys/fs/cgroup/cpu.max': 'max 100000' };
    // 8 CPUs, 2 GiB: half the CPUs (4) fit in 2048/128 - 1 = 15.
    expect(
      defaultWorkers(host({ ...unlimitedCpu, '/sys/fs/cgroup/memory.max': String(2048 * MiB) }, { cpus: 8, container: true })),
    ).toEqual({
      workers: 4,
      source: 'container-without-cpu-limit',
    });
    // 32 CPUs, 512 MiB: the memory allows 3.
    expect(
      defaultWorkers(host({ ...unlimitedCpu, '/sys/fs/cgroup/memory.max': String(512 * MiB) }, { cpus: 32, container: true })).workers,
    ).toBe(3);
    // No memory limit either: at most 4.
    expect(defaultWorkers(host({ ...unlimitedCpu, '/sys/fs/cgroup/memory.max': 'max' }, { cpus: 64, container: true })).workers).toBe(4);
    // cgroup v1's "no limit" is a huge number.
    expect(
      defaultWorkers(host({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712' }, { cpus: 64, container: true })).workers,
    ).toBe(4);
    // A tiny pod: still one process.
    expect(defaultWorkers(host({ '/sys/fs/cgroup/memory.max': String(128 * MiB) }, { cpus: 1, container: true })).workers).toBe(1);
  });

  it('uses every CPU outside a container', () => {
    expect(defaultWorkers(host({}, { cpus: 6 }))).toEqual({ workers: 6, source: 'available-cpus' });
  });
});
