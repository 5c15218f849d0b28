#!/usr/bin/env bash
# The vLLM suite: the family table's and the template sweep's vLLM cells through vLLM 0.33.0's own code on CPU
# (test/vllm/). A venv elsewhere: VENV_DIR=/path/.venv-vllm (vllm-deps.sh's alone, see test/fidelity/harness-client.ts).
#  1. builds the TypeScript (tests run from dist/, like `npm test`);
#  2. makes the venv (scripts/vllm-deps.sh: vllm, torch and the CUDA libraries torch's PyPI wheel links, about
#     3 GB of wheels cached in ~/.cache/continuation-gateway/vllm-wheels; a few minutes the first time);
#  3. runs jest with test/vllm/jest.config.js. Arguments go to jest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
echo "[test-vllm] building TypeScript" >&2
npx tsc -p tsconfig.json
bash scripts/vllm-deps.sh >/dev/null
exec npx jest -c test/vllm/jest.config.js "$@"
