#!/bin/bash
# preStop hook of the Envoy container (deploy/kubernetes/gateway.yaml; shipped in the ConfigMap by
# deploy/render.js, mounted at /etc/envoy/drain.sh). Plain bash with /dev/tcp: the Envoy image has no curl.
#
#   1. POST /healthcheck/fail           /ready answers 503: the readiness probe fails, the Service stops
#                                       sending new connections to this pod
#   2. POST /drain_listeners?graceful&inboundonly
#                                       inbound listeners start draining (Connection: close / GOAWAY on
#                                       keep-alive connections); the loopback egress listener the sidecar's
#                                       recovery legs use is OUTBOUND and keeps serving
#   3. wait until http.front.downstream_rq_active is 0 (every client stream has ended, continuations included),
#      at most DRAIN_MAX_SECONDS
#
# Then the hook returns, the kubelet sends Envoy SIGTERM, and only after Envoy has exited is the native sidecar
# (the ext_proc server) stopped: its own SIGTERM drain (DRAIN_TIMEOUT_SECONDS) then finds nothing in flight.
# Budget: DRAIN_MAX_SECONDS + the sidecar's DRAIN_TIMEOUT_SECONDS < terminationGracePeriodSeconds.
set -u
ADMIN="${ENVOY_ADMIN_ADDRESS:-127.0.0.1:9901}"
MAX="${DRAIN_MAX_SECONDS:-80}"
STAT="${DRAIN_ACTIVE_STAT:-http.front.downstream_rq_active}"

# admin METHOD PATH: prints the response body; fails when the admin interface does not answer.
admin() {
  local host="${ADMIN%:*}" port="${ADMIN##*:}" line
  exec 3<>"/dev/tcp/$host/$port" || return 1
  # HTTP/1.1 (Envoy's admin answers HTTP/1.0 with 426), one request per connection.
  printf '%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' "$1" "$2" "$ADMIN" >&3
  # Skip the status line and the headers.
  while IFS= read -r line <&3; do [ "${line%$'\r'}" = "" ] && break; done
  cat <&3
  exec 3<&-
}

log() { echo "drain: $*"; }

admin POST /healthcheck/fail >/dev/null || { log "admin interface $ADMIN does not answer; nothing to drain"; exit 0; }
admin POST '/drain_listeners?graceful&inboundonly' >/dev/null
log "health check failing, inbound listeners draining; waiting for $STAT to reach 0 (at most ${MAX}s)"
start=$SECONDS
while :; do
  active="$(admin GET "/stats?filter=downstream_rq_active" | sed -n "s/^${STAT//./\\.}: *\([0-9]*\)\$/\1/p" | head -n 1)"
  if [ -z "$active" ]; then
    admin GET /ready >/dev/null || { log "admin interface gone; done"; exit 0; }
    log "no $STAT in /stats yet"
  elif [ "$active" = "0" ]; then
    log "no active streams after $((SECONDS - start))s"
    exit 0
  fi
  if [ $((SECONDS - start)) -ge "$MAX" ]; then
    log "still $active active streams after ${MAX}s; giving up"
    exit 0
  fi
  sleep 1
done
