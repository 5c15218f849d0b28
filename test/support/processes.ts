// Which processes are still alive, read from /proc. A process started for a test carries a unique tag in its
// environment, and so does everything it starts in turn: the environment is inherited, and, unlike a parent
// pid, it survives the process being orphaned (re-parented to pid 1). Linux only, like the stack.
import * as fs from 'node:fs';

export const PROC_TAG_VAR = 'TEST_PROCESS_TAG';

export interface Proc {
  pid: number;
  ppid: number;
  pgid: number;
  cmd: string;
}

/** Live (not zombie) processes whose environment holds PROC_TAG_VAR=tag. */
export function taggedProcesses(tag: string): Proc[] {
  const needle = Buffer.from(`\0${PROC_TAG_VAR}=${tag}\0`);
  const found: Proc[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const env = Buffer.concat([Buffer.from('\0'), fs.readFileSync(`/proc/${name}/environ`), Buffer.from('\0')]);
      if (!env.includes(needle)) continue;
      // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so split after the last ')'.
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z' || state === 'X') continue;
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
      found.push({ pid: Number(name), ppid: Number(ppid), pgid: Number(pgid), cmd });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** Waits until no tagged process is alive; returns those still alive after timeoutMs (empty = all gone). */
export async function waitUntilGone(tag: string, timeoutMs: number): Promise<Proc[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = taggedProcesses(tag);
    if (left.length === 0 || Date.now() >= deadline) return left;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** SIGKILLs whatever is left (a failed test must not leave processes behind for the next one). */
export function killTagged(tag: string): void {
  for (const p of taggedProcesses(tag)) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
}
