#!/usr/bin/env bash
# A Docker engine for the container tests (test/e2e/compose.testcontainers.test.ts, pod.docker.test.ts):
#
#   scripts/docker-engine.sh start [--owner PID]   prints DOCKER_HOST=<uri> on its last line, or SKIP: <reason>
#                                                  (and STARTED=1 before it when it started the engine)
#   scripts/docker-engine.sh stop                  stops the engine `start` started (nothing if it started none)
#
# `start` uses an engine that is already reachable (DOCKER_HOST, else /var/run/docker.sock) and starts nothing.
# Else, when dockerd is installed (Debian: apt-get install docker.io) and we are root, it starts a private
# dockerd for the run: its own process group, its own socket and exec root under a run directory, its data root
# under the cache (~/.cache/continuation-gateway/docker/data) so that the images built there (the base images of
# scripts/base-images.sh, the gateway's) stay cached between runs. A watchdog, in its own process group too,
# stops that dockerd when the owner process (--owner; jest's) is gone however it ended, SIGKILL included.
# `stop` removes every container and user-defined network left in the private engine, stops dockerd (SIGTERM,
# then SIGKILL of its process group and of any containerd shim of its exec root), and removes the docker0
# bridge it created. Anything else prints SKIP: <reason> (the container tests then skip with it).
#
# Env: GATEWAY_CACHE_DIR (default ~/.cache/continuation-gateway), GATEWAY_DOCKER_RUN_DIR (default
# /run/continuation-gateway-docker), GATEWAY_DOCKER=0 (never start an engine: SKIP).
set -euo pipefail

CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
DATA_ROOT="$CACHE_BASE/docker/data"
RUN_DIR="${GATEWAY_DOCKER_RUN_DIR:-/run/continuation-gateway-docker}"
SOCK="$RUN_DIR/docker.sock"
PIDFILE="$RUN_DIR/dockerd.pid"
STATE="$RUN_DIR/state" # what `start` did: the pgid of dockerd and of the watchdog, whether it made docker0

log() { echo "[docker-engine] $*" >&2; }

reachable() { # $1: DOCKER_HOST value ("" = the client's default)
  DOCKER_HOST="$1" timeout 20 docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# Stops the private engine described by $STATE; safe to run twice, and from the watchdog.
stop_private() {
  [ -f "$STATE" ] || return 0
  # shellcheck disable=SC1090
  . "$STATE"
  if [ -S "$SOCK" ] && reachable "unix://$SOCK"; then
    local ids
    ids="$(DOCKER_HOST="unix://$SOCK" docker ps -aq 2>/dev/null || true)"
    # shellcheck disable=SC2086
    [ -z "$ids" ] || DOCKER_HOST="unix://$SOCK" docker rm -f $ids >/dev/null 2>&1 || true
    DOCKER_HOST="unix://$SOCK" docker network prune -f >/dev/null 2>&1 || true
  fi
  if [ -n "${DOCKERD_PGID:-}" ] && kill -0 "-$DOCKERD_PGID" 2>/dev/null; then
    kill -TERM "-$DOCKERD_PGID" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "-$DOCKERD_PGID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "-$DOCKERD_PGID" 2>/dev/null || true
  fi
  # dockerd's managed containerd and its shims run in process groups of their own (on purpose: containers
  # outlive a dockerd restart); dockerd stops them on a clean shutdown, these are what a SIGKILL left.
  local pid
  for pid in $(pgrep -f "containerd.*$RUN_DIR/exec" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
  if [ "${MADE_DOCKER0:-0}" = "1" ] && ip link show docker0 >/dev/null 2>&1; then ip link delete docker0 2>/dev/null || true; fi
  if [ -n "${WATCHDOG_PGID:-}" ] && [ "${WATCHDOG_PGID}" != "${SELF_PGID:-}" ]; then
    kill -TERM "-$WATCHDOG_PGID" 2>/dev/null || true
  fi
  rm -f "$STATE" "$SOCK" "$PIDFILE"
}

start() {
  local owner="$PPID"
  while [ $# -gt 0 ]; do
    case "$1" in
      --owner) owner="$2"; shift 2 ;;
      *) log "unknown argument $1"; exit 2 ;;
    esac
  done
  if [ -n "${DOCKER_HOST:-}" ]; then
    if reachable "$DOCKER_HOST"; then echo "DOCKER_HOST=$DOCKER_HOST"; return 0; fi
    echo "SKIP: DOCKER_HOST=$DOCKER_HOST does not answer"; return 0
  fi
  if [ -S /var/run/docker.sock ] && reachable "unix:///var/run/docker.sock"; then
    echo "DOCKER_HOST=unix:///var/run/docker.sock"; return 0
  fi
  if [ "${GATEWAY_DOCKER:-1}" = "0" ]; then echo "SKIP: GATEWAY_DOCKER=0"; return 0; fi
  command -v dockerd >/dev/null || { echo "SKIP: no Docker engine reachable and no dockerd installed (Debian: apt-get install docker.io)"; return 0; }
  [ "$(id -u)" = "0" ] || { echo "SKIP: no Docker engine reachable, and dockerd can only be started by root"; return 0; }
  command -v docker >/dev/null || { echo "SKIP: no docker CLI on PATH"; return 0; }

  mkdir -p "$RUN_DIR" "$DATA_ROOT"
  chmod 0700 "$RUN_DIR"
  # A private engine of an earlier run that is still up (its owner still running): use it, start nothing.
  if [ -S "$SOCK" ] && reachable "unix://$SOCK"; then
    echo "DOCKER_HOST=unix://$SOCK"; return 0
  fi
  stop_private # the remains of a run that ended without its teardown and without its watchdog
  local made_docker0=0
  ip link show docker0 >/dev/null 2>&1 || made_docker0=1
  log "starting a private dockerd (socket $SOCK, data root $DATA_ROOT)"
  setsid dockerd -H "unix://$SOCK" --data-root "$DATA_ROOT" --exec-root "$RUN_DIR/exec" --pidfile "$PIDFILE" \
    >"$RUN_DIR/dockerd.log" 2>&1 </dev/null &
  local dockerd_pid=$!
  printf 'DOCKERD_PGID=%s\nMADE_DOCKER0=%s\n' "$dockerd_pid" "$made_docker0" >"$STATE"
  local ok=0
  for _ in $(seq 1 120); do
    if reachable "unix://$SOCK"; then ok=1; break; fi
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.5
  done
  if [ "$ok" != "1" ]; then
    local why
    why="$(tail -n 3 "$RUN_DIR/dockerd.log" | tr '\n' ' ')"
    stop_private
    echo "SKIP: dockerd did not start: $why"
    return 0
  fi
  # The watchdog: stops the engine when the owner is gone (jest killed with SIGKILL included).
  setsid bash "$0" watchdog "$owner" </dev/null >>"$RUN_DIR/dockerd.log" 2>&1 &
  printf 'WATCHDOG_PGID=%s\n' "$!" >>"$STATE"
  echo "STARTED=1" # this run owns the engine: its `stop` stops it
  echo "DOCKER_HOST=unix://$SOCK"
}

watchdog() {
  local owner="$1"
  while kill -0 "$owner" 2>/dev/null && [ -f "$STATE" ]; do sleep 2; done
  [ -f "$STATE" ] || exit 0
  log "owner $owner is gone: stopping the private dockerd"
  SELF_PGID="$$" stop_private
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop_private ;;
  watchdog) watchdog "$2" ;;
  *) echo "usage: $0 start [--owner PID] | stop" >&2; exit 2 ;;
esac
