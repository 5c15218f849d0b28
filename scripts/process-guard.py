#!/usr/bin/env python3
"""Runs a command and fails when a process it started outlives it (Linux).

Usage: process-guard.py <command> [args...]   (exit status: the command's, or 1 when something is left over)

This process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER): a descendant whose parent dies is
re-parented here instead of to pid 1, whatever session or process group it moved to (the stack's children
are detached) and whatever environment it was given. So once the command has exited, every process it
started that is still alive is in this process's subtree. Those get 5 s to finish going away; what is still
there is listed, SIGKILLed, and the run fails.
"""
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 5.0


def children_of(pid):
    """Live (not zombie) processes whose parent is pid, from /proc."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat') as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        state, ppid = stat[stat.rindex(')') + 2:].split()[:2]
        if int(ppid) == pid and state not in ('Z', 'X'):
            found.append(int(name))
    return found


def subtree(pid):
    out, todo = [], children_of(pid)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children_of(p))
    return out


def cmdline(pid):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            return f.read().replace(b'\0', b' ').decode(errors='replace').strip()[:200]
    except OSError:
        return '(gone)'


def reap():
    """Collects exited orphans (they would stay zombies: we are their parent now)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f'process-guard: prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}', file=sys.stderr)
        return 2
    child = subprocess.Popen(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    # Every exit is collected here, the command's own and the orphans' (os.wait would otherwise race Popen).
    while True:
        pid, status = os.wait()
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
            child.returncode = code  # reaped here: Popen must not signal or wait for that pid again
            break
    deadline = time.monotonic() + GRACE_S
    while True:
        reap()
        left = subtree(os.getpid())
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    if not left:
        return code
    print(f'process-guard: {len(left)} process(es) started by `{" ".join(argv)}` still running {GRACE_S:.0f} s after it exited:', file=sys.stderr)
    for p in left:
        print(f'  {p} {cmdline(p)}', file=sys.stderr)
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.2)
    reap()
    return code or 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
