// The stack runner's parent, watched when tools/stack/run.sh took it out of npm's process group (setsid): from
// then on a signal sent to npm's group reaches npm alone, which forwards SIGINT and SIGTERM once; but npm's
// death without forwarding anything (SIGKILL, SIGHUP: the terminal closed) would no longer reach us. So: when
// the parent run.sh named (STACK_PARENT_PID) is no longer our parent, we were orphaned and stop.

/** How often the parent pid is read (a syscall, nothing more). */
const PARENT_POLL_MS = 250;

/** Calls `gone` once when the process whose pid `setting` names stops being our parent; no-op without it. */
export function watchParent(setting: string | undefined, gone: () => void): void {
  const parent = Number(setting);
  if (!setting?.trim() || !Number.isInteger(parent) || parent <= 1 || process.ppid !== parent) return;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    gone();
  }, PARENT_POLL_MS);
  timer.unref();
}
