#!/usr/bin/env bash
# Builds the Helm CLI from its Go module (helm.sh/helm/v3, through the Go module proxy) and caches it outside
# the clone, like scripts/build-llama-server.sh caches llama-server:
#
#   ~/.cache/continuation-gateway/helm/<version>/helm
#
# The build is skipped when the cached binary answers `version`. The last line printed on stdout is the
# absolute path of the binary (test/unit/deploy/helm-gates.test.ts reads it).
#
# Exit codes: 0 built or cached; 3 no Go toolchain, or the module proxy is unreachable (the gate then skips
# with this script's message); anything else is a real failure.
# Env:
#   HELM_VERSION      (default v3.22.0, served by the Go module proxy)
#   HELM_FORCE_BUILD=1 rebuild even if cached
set -euo pipefail

VERSION="${HELM_VERSION:-v3.22.0}"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DEST="$CACHE_BASE/helm/$VERSION"
mkdir -p "$DEST"

log() { echo "[build-helm] $*" >&2; }

if [ "${HELM_FORCE_BUILD:-0}" != "1" ] && [ -x "$DEST/helm" ] && "$DEST/helm" version --short >/dev/null 2>&1; then
  log "cached: $DEST/helm"
  echo "$DEST/helm"
  exit 0
fi

if ! command -v go >/dev/null; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH" && break; done
fi
command -v go >/dev/null || { log "no Go toolchain on PATH: cannot build helm $VERSION"; exit 3; }

# One build at a time per cache: wait for one in progress, then use what it built.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.build.lock"
  flock 9
  if [ -x "$DEST/helm" ] && "$DEST/helm" version --short >/dev/null 2>&1; then echo "$DEST/helm"; exit 0; fi
fi

# Is the module served at all? A proxy that cannot be reached is a skip, not a failure.
if ! go list -m -json "helm.sh/helm/v3@$VERSION" >/dev/null 2>"$DEST/.probe.log"; then
  log "the Go module proxy does not answer for helm.sh/helm/v3@$VERSION: $(tail -n 1 "$DEST/.probe.log")"
  exit 3
fi

log "building helm $VERSION from helm.sh/helm/v3 (a few minutes the first time)"
GOBIN="$DEST" GOFLAGS=-mod=mod CGO_ENABLED=0 go install -trimpath "helm.sh/helm/v3/cmd/helm@$VERSION" >&2
"$DEST/helm" version --short >&2
echo "$DEST/helm"
