#!/usr/bin/env bash
# Builds the `docker compose` v2 CLI plugin from its Go module (github.com/docker/compose/v2, through the Go
# module proxy) and caches it outside the clone, like scripts/build-helm.sh caches helm:
#
#   ~/.cache/continuation-gateway/docker-compose/<version>/cli-plugins/docker-compose
#
# testcontainers' DockerComposeEnvironment runs `docker compose` (v2); Debian bookworm packages only
# docker-compose 1.29 (the Python v1) and no docker-compose-plugin, so the plugin is built here rather than
# downloaded. The container tests point DOCKER_CONFIG at a directory whose cli-plugins/ holds it (the user's
# own ~/.docker is never touched); a user runs it with `docker compose` by linking it into
# ~/.docker/cli-plugins/ (docs/deploy.md).
#
# The build is skipped when the cached binary answers `version`. The last line printed on stdout is the
# absolute path of the binary.
#
# Exit codes: 0 built or cached; 3 no Go toolchain, or the module proxy is unreachable (the container tests
# then skip with this script's message); anything else is a real failure.
# Env:
#   COMPOSE_VERSION      (default v2.40.3, served by the Go module proxy)
#   COMPOSE_FORCE_BUILD=1 rebuild even if cached
set -euo pipefail

VERSION="${COMPOSE_VERSION:-v2.40.3}"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DEST="$CACHE_BASE/docker-compose/$VERSION/cli-plugins"
BIN="$DEST/docker-compose"
mkdir -p "$DEST"

log() { echo "[build-compose] $*" >&2; }
works() { [ -x "$BIN" ] && "$BIN" version --short >/dev/null 2>&1; }

if [ "${COMPOSE_FORCE_BUILD:-0}" != "1" ] && works; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH" && break; done
fi
command -v go >/dev/null || { log "no Go toolchain on PATH: cannot build docker compose $VERSION"; exit 3; }

# One build at a time per cache: wait for one in progress, then use what it built.
if command -v flock >/dev/null; then
  exec 9>"$DEST/.build.lock"
  flock 9
  if works; then echo "$BIN"; exit 0; fi
fi

if ! go list -m -json "github.com/docker/compose/v2@$VERSION" >/dev/null 2>"$DEST/.probe.log"; then
  log "the Go module proxy does not answer for github.com/docker/compose/v2@$VERSION: $(tail -n 1 "$DEST/.probe.log")"
  exit 3
fi

log "building docker compose $VERSION from github.com/docker/compose/v2 (several minutes the first time)"
# Built inside the module's own source (go install pkg@version refuses a go.mod with replace/exclude
# directives, which compose's has): download it to the module cache, build there, output to the cache.
SRC="$(go mod download -json "github.com/docker/compose/v2@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -d "$SRC" ] || { log "go mod download gave no source directory for compose $VERSION"; exit 1; }
# The version string the CLI reports (compose's Makefile sets it the same way).
(cd "$SRC" && CGO_ENABLED=0 go build -trimpath -o "$BIN.tmp" \
  -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$VERSION" ./cmd) >&2
mv -f "$BIN.tmp" "$BIN"
"$BIN" version --short >&2
echo "$BIN"
