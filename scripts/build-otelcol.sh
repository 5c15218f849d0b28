#!/usr/bin/env bash
# Builds an OpenTelemetry Collector (OTLP receiver + debug exporter) from its Go modules with the Collector
# Builder (go.opentelemetry.io/collector/cmd/builder, through the Go module proxy) and caches it outside the
# clone, like scripts/build-helm.sh:
#
#   ~/.cache/continuation-gateway/otelcol/<version>/otelcol-test
#
# Skipped when the cached binary answers `components`. The last line printed on stdout is the binary's absolute
# path (test/support/otelcol.ts reads it). Measured here: about 7.5 minutes the first time on 2 shared cores
# (module downloads included), nothing after.
#
# Exit codes: 0 built or cached; 3 no Go toolchain, or the module proxy does not serve the modules (the trace
# test through the Collector then skips with this script's message); anything else is a real failure.
# Env: OTELCOL_FORCE_BUILD=1 rebuilds.
set -euo pipefail

VERSION=v0.165.0
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DEST="$CACHE_BASE/otelcol/$VERSION"
BIN="$DEST/otelcol-test"
mkdir -p "$DEST"

log() { echo "[build-otelcol] $*" >&2; }

if [ "${OTELCOL_FORCE_BUILD:-0}" != "1" ] && [ -x "$BIN" ] && "$BIN" components >/dev/null 2>&1; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH" && break; done
fi
command -v go >/dev/null || { log "no Go toolchain on PATH: cannot build the OpenTelemetry Collector"; exit 3; }

# One build at a time per cache: wait for one in progress, then use what it built.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.build.lock"
  flock 9
  if [ -x "$BIN" ] && "$BIN" components >/dev/null 2>&1; then echo "$BIN"; exit 0; fi
fi

if ! go list -m -json "go.opentelemetry.io/collector/cmd/builder@$VERSION" >/dev/null 2>"$DEST/.probe.log"; then
  log "the Go module proxy does not answer for go.opentelemetry.io/collector/cmd/builder@$VERSION: $(tail -n 1 "$DEST/.probe.log")"
  exit 3
fi

log "building the OpenTelemetry Collector $VERSION (builder, then the collector: several minutes the first time)"
GOBIN="$DEST" CGO_ENABLED=0 go install -trimpath "go.opentelemetry.io/collector/cmd/builder@$VERSION" >&2
WORK="$DEST/build"
rm -rf "$WORK" && mkdir -p "$WORK"
sed "s#OUTPUT_PATH#$WORK#" "$ROOT/test/support/otelcol/builder.yaml" > "$WORK/builder.yaml"
if ! CGO_ENABLED=0 "$DEST/builder" --config "$WORK/builder.yaml" >&2; then
  log "the Collector build failed (see above)"
  exit 1
fi
mv "$WORK/otelcol-test" "$BIN"
rm -rf "$WORK"
"$BIN" components >/dev/null
echo "$BIN"
