#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` OFFLINE from the llama.cpp source that the
# npm package node-llama-cpp ships (package/llama/gitRelease.bundle, a git
# bundle of one squashed commit). Only the npm registry is contacted (npm pack).
#
# Result (static binary, no shared libs of its own):
#   ~/.cache/continuation-gateway/llama-server/<node-llama-cpp-version>-<commit12>/llama-server
# The build is skipped when a cached binary for that node-llama-cpp version
# exists and answers `--version`. The last line printed on stdout is the
# absolute path of the binary (scripts and tests read it).
#
# Usage: build-llama-server.sh [--cached-only]
#   --cached-only  never build: print the cached binary, or exit 3 when there is none.
# Env:
#   NODE_LLAMA_CPP_VERSION  (default 3.21.1)
#   LLAMA_BUILD_JOBS        (default 2)
#   LLAMA_KEEP_BUILD=1      keep the source/build tree (~/.cache/continuation-gateway/llama-server/work-*)
#   LLAMA_FORCE_BUILD=1     rebuild even if cached
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${NODE_LLAMA_CPP_VERSION:-3.21.1}"
JOBS="${LLAMA_BUILD_JOBS:-2}"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"  # outside the clone: CI reuses it
CACHE_ROOT="$CACHE_BASE/llama-server"
mkdir -p "$CACHE_ROOT"

log() { echo "[build-llama-server] $*" >&2; }

CACHED_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --cached-only) CACHED_ONLY=1 ;;
    *) log "unknown argument: $arg"; exit 2 ;;
  esac
done

# A cached build is complete with llama-tokenize beside llama-server (the real-engine suite's vocabulary-only
# tokenizer, test/real-engine/token-boundary.test.ts).
binary_works() { [ -x "$1" ] && [ -x "$(dirname "$1")/llama-tokenize" ] && "$1" --version >/dev/null 2>&1; }

if [ "${LLAMA_FORCE_BUILD:-0}" != "1" ]; then
  for candidate in "$CACHE_ROOT/$VERSION"-*/llama-server; do
    if binary_works "$candidate"; then
      log "cached: $candidate"
      echo "$candidate"
      exit 0
    fi
  done
fi

if [ "$CACHED_ONLY" = "1" ]; then
  log "no cached llama-server for node-llama-cpp@$VERSION under $CACHE_ROOT (--cached-only: not building)"
  exit 3
fi

# One build at a time per cache (two would share, and delete, the same work directory): wait for one in
# progress, then use what it built.
if command -v flock >/dev/null; then
  exec 9>"$CACHE_ROOT/.build-$VERSION.lock"
  if ! flock -n 9; then
    log "another build of node-llama-cpp@$VERSION is running: waiting for it"
    flock 9
    for candidate in "$CACHE_ROOT/$VERSION"-*/llama-server; do
      if [ "${LLAMA_FORCE_BUILD:-0}" != "1" ] && binary_works "$candidate"; then
        log "built meanwhile: $candidate"
        echo "$candidate"
        exit 0
      fi
    done
  fi
fi

for tool in npm git cmake tar; do
  command -v "$tool" >/dev/null || { log "missing tool: $tool"; exit 1; }
done
command -v c++ >/dev/null || command -v g++ >/dev/null || { log "missing C++ compiler"; exit 1; }

WORK="$CACHE_ROOT/work-$VERSION"
rm -rf "$WORK"
mkdir -p "$WORK"
cleanup() {
  if [ "${LLAMA_KEEP_BUILD:-0}" != "1" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

START=$(date +%s)
log "npm pack node-llama-cpp@$VERSION"
(cd "$WORK" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null)
TARBALL="$(ls "$WORK"/node-llama-cpp-*.tgz | head -n1)"
tar -xzf "$TARBALL" -C "$WORK" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
log "llama.cpp.info.json: $(tr -d '\n ' < "$WORK/package/llama/llama.cpp.info.json")"

log "git clone bundle"
git -c advice.detachedHead=false clone --quiet "$WORK/package/llama/gitRelease.bundle" "$WORK/src" 2>"$WORK/clone.log" \
  || { cat "$WORK/clone.log" >&2; exit 1; }
COMMIT="$(git -C "$WORK/src" rev-parse HEAD)"
SHORT="${COMMIT:0:12}"
log "bundle HEAD: $COMMIT ($(git -C "$WORK/src" log -1 --format=%s))"

DEST="$CACHE_ROOT/$VERSION-$SHORT"

# Option names checked against this source's CMakeLists.txt:
#  - LLAMA_BUILD_UI / LLAMA_USE_PREBUILT_UI: no npm build, no HF download of the web UI
#  - LLAMA_OPENSSL: no HTTPS (model download) support
#  - LLAMA_CURL is deprecated in this source (llama_option_depr WARNING), not passed
#  - GGML_NATIVE=OFF: with it OFF, ggml enables SSE4.2/AVX/AVX2/BMI2/FMA/F16C (x86-64-v3)
#  - GGML_OPENMP=OFF: no libgomp dependency (ggml's own thread pool is used)
#  - BUILD_SHARED_LIBS=OFF: one static binary
log "cmake configure"
cmake -S "$WORK/src" -B "$WORK/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF \
  -DGGML_OPENMP=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  >"$WORK/configure.log" 2>&1 || { tail -n 40 "$WORK/configure.log" >&2; exit 1; }

log "cmake build --target llama-server llama-tokenize -j$JOBS (several minutes)"
cmake --build "$WORK/build" --config Release --target llama-server llama-tokenize -j "$JOBS" \
  >"$WORK/build.log" 2>&1 || { tail -n 60 "$WORK/build.log" >&2; exit 1; }

BUILT="$WORK/build/bin/llama-server"
[ -x "$BUILT" ] || BUILT="$(find "$WORK/build" -type f -name llama-server -perm -u+x | head -n1)"
[ -n "$BUILT" ] && [ -x "$BUILT" ] || { log "llama-server not found after build"; exit 1; }

mkdir -p "$DEST"
cp "$BUILT" "$DEST/llama-server.tmp"
mv "$DEST/llama-server.tmp" "$DEST/llama-server"
cp "$(dirname "$BUILT")/llama-tokenize" "$DEST/llama-tokenize.tmp"
mv "$DEST/llama-tokenize.tmp" "$DEST/llama-tokenize"
END=$(date +%s)
{
  echo "node-llama-cpp: $VERSION"
  echo "llama.cpp bundle commit: $COMMIT"
  echo "build seconds: $((END - START))"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "version: $("$DEST/llama-server" --version 2>&1 | tr '\n' ' ')"
} > "$DEST/BUILD-INFO.txt"

if ! binary_works "$DEST/llama-server"; then
  log "built binary does not run --version:"
  "$DEST/llama-server" --version >&2 || true
  exit 1
fi
log "built in $((END - START)) s: $DEST/llama-server"
echo "$DEST/llama-server"
