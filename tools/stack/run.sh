#!/bin/sh
# `npm run stack` / `npm run demo` (package.json) start the stack runner through this script.
#
# npm forwards SIGINT and SIGTERM to the script it runs, and a signal sent to npm's whole process group (Ctrl-C
# in a terminal, `kill -- -PGID`, a supervisor stopping the group) reaches that script as well: one stop would
# arrive twice, and the second copy would read as a deliberate second signal ("stop now"). So the stack runner
# leaves npm's process group (setsid, same pid: npm still waits for it and forwards to it): each stop then
# reaches it exactly once, from npm, whoever signalled npm's group or npm alone. STACK_PARENT_PID lets it stop
# when npm dies without forwarding (SIGKILL, the terminal closed: tools/stack/parent-watch.ts).
# Started as its group's leader already (not under npm), it runs as it is; so it does without setsid(1) (macOS),
# where a signal to npm's whole group then reaches it twice and the second copy steps on to a stop now (every
# open stream ends with the interruption event: never a cut, but no drain).
set -eu
root=$(CDPATH='' cd -- "$(dirname -- "$0")/../.." && pwd)
main="$root/dist/tools/stack/main.js"
# Our process group: /proc (Linux; the 5th field, after "pid (comm) state ppid"), else ps.
pgid=""
if [ -r /proc/$$/stat ]; then read -r _ _ _ _ pgid _ </proc/$$/stat || pgid=""; fi
[ -n "$pgid" ] || pgid=$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ' || true)
if [ -n "$pgid" ] && [ "$pgid" != "$$" ] && command -v setsid >/dev/null 2>&1; then
  STACK_PARENT_PID=$PPID exec setsid node "$main" "$@"
fi
exec node "$main" "$@"
