#!/usr/bin/env bash
# Builds Prometheus's promtool from its Go module (github.com/prometheus/prometheus, through the Go module proxy)
# and caches it outside the clone, like scripts/build-helm.sh caches helm:
#
#   ~/.cache/continuation-gateway/promtool/<version>/promtool
#
# For test/unit/deploy/monitoring-rules.test.ts: `promtool check rules` and `promtool test rules` on
# deploy/monitoring/alerts.yaml and the chart's PrometheusRule. The build is skipped when the cached binary
# answers `--version`. The last line printed on stdout is the absolute path of the binary.
#
# Exit codes: 0 built or cached; 3 no Go toolchain, or the module proxy is unreachable (the test then skips with
# this script's message); anything else is a real failure.
# Env:
#   PROMTOOL_MODULE_VERSION  (default v0.316.0: the Go module version of Prometheus 3.16's promtool)
#   PROMTOOL_FORCE_BUILD=1   rebuild even if cached
set -euo pipefail

VERSION="${PROMTOOL_MODULE_VERSION:-v0.316.0}"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DEST="$CACHE_BASE/promtool/$VERSION"
mkdir -p "$DEST"

log() { echo "[build-promtool] $*" >&2; }
works() { [ -x "$DEST/promtool" ] && "$DEST/promtool" --version >/dev/null 2>&1; }

if [ "${PROMTOOL_FORCE_BUILD:-0}" != "1" ] && works; then
  log "cached: $DEST/promtool"
  echo "$DEST/promtool"
  exit 0
fi

if ! command -v go >/dev/null; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH" && break; done
fi
command -v go >/dev/null || { log "no Go toolchain on PATH: cannot build promtool $VERSION"; exit 3; }

# One build at a time per cache: wait for one in progress, then use what it built.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.build.lock"
  flock 9
  if works; then echo "$DEST/promtool"; exit 0; fi
fi

if ! go list -m -json "github.com/prometheus/prometheus@$VERSION" >/dev/null 2>"$DEST/.probe.log"; then
  log "the Go module proxy does not answer for github.com/prometheus/prometheus@$VERSION: $(tail -n 1 "$DEST/.probe.log")"
  exit 3
fi

log "building promtool from github.com/prometheus/prometheus@$VERSION (several minutes the first time)"
GOBIN="$DEST" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath "github.com/prometheus/prometheus/cmd/promtool@$VERSION" >&2
"$DEST/promtool" --version >&2
echo "$DEST/promtool"
