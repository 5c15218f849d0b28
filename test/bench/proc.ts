// CPU and memory of a process tree from /proc (Linux only): utime+stime in clock ticks from /proc/<pid>/stat,
// VmRSS from /proc/<pid>/status. "A process and all its processes" = the pid plus its descendants (found by
// scanning /proc for parent pids), so a sidecar that forks workers is measured as a whole.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';

let ticks: number | undefined;
export function clockTicks(): number {
  if (ticks === undefined) {
    try {
      ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticks = 100;
    }
  }
  return ticks;
}

interface Stat {
  ppid: number;
  cpuTicks: number;
}

function readStat(pid: number): Stat | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // rest[0] = state (field 3), so field k is rest[k - 3]: ppid = 4, utime = 14, stime = 15.
    return { ppid: Number(rest[1]), cpuTicks: Number(rest[11]) + Number(rest[12]) };
  } catch {
    return undefined;
  }
}

/** The pid and all its live descendants. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = readStat(Number(name));
    if (!st) continue;
    const list = children.get(st.ppid) ?? [];
    list.push(Number(name));
    children.set(st.ppid, list);
  }
  const out: number[] = [];
  const stack = [root];
  while (stack.length) {
    const p = stack.pop() as number;
    out.push(p);
    for (const c of children.get(p) ?? []) stack.push(c);
  }
  return out;
}

/** CPU milliseconds (user + system) used so far by the given pids. Exited pids count 0. */
export function cpuMs(pids: number[]): number {
  let t = 0;
  for (const p of pids) t += readStat(p)?.cpuTicks ?? 0;
  return (t * 1000) / clockTicks();
}

/** Resident set size in bytes, summed over the given pids. */
export function rssBytes(pids: number[]): number {
  let total = 0;
  for (const p of pids) {
    try {
      const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'));
      if (m) total += Number(m[1]) * 1024;
    } catch {
      // gone
    }
  }
  return total;
}

function cpuTicksByPid(pids: number[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const p of pids) {
    const st = readStat(p);
    if (st) m.set(p, st.cpuTicks);
  }
  return m;
}

/**
 * A group of process trees whose CPU and peak RSS are followed during one load level. The trees are re-read
 * at every sample, so processes started during the level (a restarted worker) count; CPU is summed per pid
 * (now - at start, or all of it for a new pid). A process that exits during the level loses its share.
 */
export class TreeMeter {
  private cpu0 = new Map<number, number>();
  private last = new Map<number, number>();
  private peak = 0;
  private timer: NodeJS.Timeout | undefined;
  idleRss = 0;
  processes = 0;

  constructor(private readonly roots: () => number[]) {}

  private pids(): number[] {
    return this.roots().flatMap((r) => processTree(r));
  }

  start(sampleMs = 200): void {
    const pids = this.pids();
    this.cpu0 = cpuTicksByPid(pids);
    this.last = new Map(this.cpu0);
    this.idleRss = rssBytes(pids);
    this.peak = this.idleRss;
    this.processes = pids.length;
    this.timer = setInterval(() => this.sample(), sampleMs);
  }

  private sample(): void {
    const pids = this.pids();
    this.processes = Math.max(this.processes, pids.length);
    for (const [p, t] of cpuTicksByPid(pids)) this.last.set(p, t);
    this.peak = Math.max(this.peak, rssBytes(pids));
  }

  /** CPU ms used since start(), read now (the level goes on being followed). */
  cpuSoFar(): number {
    this.sample();
    let ticks = 0;
    for (const [p, t] of this.last) ticks += t - (this.cpu0.get(p) ?? 0);
    return (ticks * 1000) / clockTicks();
  }

  stop(): { cpuMs: number; idleRss: number; peakRss: number; processes: number } {
    if (this.timer) clearInterval(this.timer);
    this.sample();
    let ticks = 0;
    for (const [p, t] of this.last) ticks += t - (this.cpu0.get(p) ?? 0);
    return { cpuMs: (ticks * 1000) / clockTicks(), idleRss: this.idleRss, peakRss: this.peak, processes: this.processes };
  }
}
