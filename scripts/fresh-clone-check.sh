#!/usr/bin/env bash
# The README's two commands in a fresh clone, as a new user runs them (issue 18 item 1). The clone lives under a
# directory that only its owner may enter (mode 0700, as a home directory or `mktemp -d` is), with a space in
# its path, and nothing is installed beforehand: no .venv (Envoy and the test tools come from the commands
# themselves), no dist/, no ENVOY_BIN. Then, in order:
#   npm ci
#   npm run demo     until READY; one stream whose replica is killed at token 30 must arrive complete; Ctrl-C
#                    (SIGINT to its process group); every process it started must be gone
#   npm test
# It clones the commit checked out in this repository (committed state only; .ci/run runs it on CI's clone).
#
# Usage: bash scripts/fresh-clone-check.sh      Exit: 0 all passed; non-zero the first step that failed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "[fresh-clone] $*" >&2; }

base="$(mktemp -d)"
demo_pgid=""
# Every process the demo starts inherits this variable: the stack runner leaves npm's process group
# (tools/stack/run.sh) and its children run in groups of their own, so the group alone does not name them all.
demo_tag="FRESH_CLONE_DEMO=$$-$RANDOM"
demo_pids() { grep -l -a -s -F "$demo_tag" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true; }
cleanup() {
  if [ -n "$demo_pgid" ]; then
    kill -KILL -- "-$demo_pgid" 2>/dev/null || true
    for p in $(demo_pids); do kill -KILL "$p" 2>/dev/null || true; done
  fi
  rm -rf "$base"
}
trap cleanup EXIT
chmod 700 "$base"
dest="$base/a fresh clone/continuation-gateway"
mkdir -p "$(dirname "$dest")"
commit="$(git -C "$ROOT" rev-parse HEAD)"
say "cloning $commit into $dest (mode of $base: $(stat -c %a "$base"))"
git clone --quiet --no-hardlinks "$ROOT" "$dest"
git -C "$dest" checkout --quiet --detach "$commit"
cd "$dest"
unset ENVOY_BIN

say "npm ci"
npm ci --no-audit --no-fund

say "npm run demo"
# Its own process group (setsid), as a terminal gives it: Ctrl-C is SIGINT to that group.
env "$demo_tag" setsid npm run demo >demo.out 2>demo.err &
demo_pgid=$!
url=""
# The first start installs Envoy into .venv (about a minute).
for _ in $(seq 1 1200); do
  url="$(sed -n 's/^READY //p' demo.out)"
  [ -n "$url" ] && break
  kill -0 "$demo_pgid" 2>/dev/null || { cat demo.err >&2; say "npm run demo exited before READY"; exit 1; }
  sleep 0.25
done
[ -n "$url" ] || { tail -50 demo.err >&2; say "no READY within 300 s"; exit 1; }
say "demo READY at $url; the README's crash@30 request"
node -e '
  const url = process.argv[1];
  fetch(url + "/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", "x-fake-fault": "crash@30" },
    body: JSON.stringify({ model: "demo", stream: true, messages: [{ role: "user", content: "hello" }] }),
  }).then(async (r) => {
    const t = await r.text();
    const finishes = (t.match(/"finish_reason":"(stop|length)"/g) || []).length;
    if (r.status !== 200 || !t.endsWith("data: [DONE]\n\n") || finishes !== 1 || t.includes("\"error\"")) {
      console.error("stream not complete:", r.status, t.slice(-500));
      process.exit(1);
    }
  }, (e) => { console.error(e); process.exit(1); });
' "$url"
grep -q '"decision":"SUCCEEDED"' demo.err || { tail -50 demo.err >&2; say "the demo logged no SUCCEEDED (no continuation)"; exit 1; }
kill -INT -- "-$demo_pgid"
for _ in $(seq 1 100); do
  [ -z "$(demo_pids)" ] && ! pgrep -g "$demo_pgid" >/dev/null && break
  sleep 0.1
done
left="$(demo_pids)"
if [ -n "$left" ] || pgrep -g "$demo_pgid" >/dev/null; then
  ps -o pid,args -g "$demo_pgid" >&2 || true
  for p in $left; do ps -o pid,args -p "$p" >&2 || true; done
  say "processes of the demo still running 10 s after Ctrl-C"
  exit 1
fi
demo_pgid=""
say "demo stopped by Ctrl-C, nothing left running"

say "npm test"
npm test
