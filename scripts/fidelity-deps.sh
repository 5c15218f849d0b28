#!/usr/bin/env bash
# The fidelity suite's Python environment (test/fidelity/requirements.txt) in <repo>/.venv-fidelity: transformers'
# chat-template renderer and SGLang's own reasoning parsers, without torch. A venv of its own because SGLang pins
# versions (transformers, openai) that differ from the project's .venv. Idempotent: a venv whose marker file holds
# the requirements' hash is reused without touching the network.
#
# Usage: scripts/fidelity-deps.sh      prints the venv's python path on stdout when ready
# Env:   PYTHON     interpreter that creates the venv (default python3; SGLang 0.5.23 needs >= 3.11)
#        VENV_DIR   default <repo>/.venv-fidelity
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV_DIR="${VENV_DIR:-$ROOT/.venv-fidelity}"
REQUIREMENTS="$ROOT/test/fidelity/requirements.txt"
VPY="$VENV_DIR/bin/python"
MARKER="$VENV_DIR/.requirements.sha256"

say() { echo "[fidelity-deps] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [ -x "$VPY" ] && [ "$(cat "$MARKER" 2>/dev/null)" = "$want" ]; then
  echo "$VPY"
  exit 0
fi

# One installer at a time (jest workers may start together): mkdir is atomic; a lock whose holder died is broken.
LOCK="$VENV_DIR.install-lock"
until mkdir "$LOCK" 2>/dev/null; do
  holder="$(cat "$LOCK/pid" 2>/dev/null || true)"
  if [[ "$holder" =~ ^[0-9]+$ ]] && ! kill -0 "$holder" 2>/dev/null; then rm -rf "$LOCK"; continue; fi
  sleep 0.5
  if [ -x "$VPY" ] && [ "$(cat "$MARKER" 2>/dev/null)" = "$want" ]; then echo "$VPY"; exit 0; fi
done
echo $$ >"$LOCK/pid"
trap 'rm -rf "$LOCK"' EXIT

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (Python >= 3.11 with the venv module is needed)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
  die "$PYTHON is $("$PYTHON" --version 2>&1); SGLang 0.5.23 needs Python >= 3.11 (set PYTHON)"
rm -rf "$VENV_DIR"
say "creating $VENV_DIR"
"$PYTHON" -m venv "$VENV_DIR" >&2 || die "\`$PYTHON -m venv\` failed (on Debian/Ubuntu: apt-get install python3-venv)"
say "pip install --no-deps -r ${REQUIREMENTS#"$ROOT"/}"
"$VPY" -m pip install --disable-pip-version-check --no-input -q --no-deps -r "$REQUIREMENTS" >&2 ||
  die "pip install failed (no access to PyPI?)"
"$VPY" "$ROOT/test/fidelity/harness.py" --self-check >&2 || die "the harness does not import in $VENV_DIR"
echo "$want" >"$MARKER"
echo "$VPY"
