#!/usr/bin/env bash
# Vendors the JSON schemas of the Istio resources deploy/istio/ uses (EnvoyFilter, DestinationRule,
# VirtualService) into deploy/schemas/istio/, for the offline check-jsonschema gate of
# test/unit/deploy/gates.test.ts. Source: the CRDs' openAPIV3Schema in istio.io/api's
# kubernetes/customresourcedefinitions.gen.yaml, the Go module istio.io/api at ISTIO_API_VERSION, downloaded
# with `go mod download` (the Go module proxy) into a temporary GOPATH. Each output file holds the served
# version's openAPIV3Schema unchanged, plus $schema, $id and a $comment naming the module, its version and
# its go.sum hash. Not run by the tests (they read the vendored files); rerun by hand to move to another release.
#
# Usage: scripts/vendor-istio-schemas.sh        needs go and node (with the repo's node_modules: yaml)
# Env:   ISTIO_API_VERSION   default v1.32.0
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${ISTIO_API_VERSION:-v1.32.0}"
TMP="$(mktemp -d)"
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
command -v go >/dev/null || { echo "vendor-istio-schemas: go not found" >&2; exit 1; }
json="$(cd "$TMP" && GOPATH="$TMP/gopath" GOMODCACHE="$TMP/gopath/pkg/mod" GOFLAGS=-mod=mod go mod download -json "istio.io/api@$VERSION")"
export ISTIO_API_DOWNLOAD="$json" ISTIO_API_VERSION="$VERSION" OUT_DIR="$ROOT/deploy/schemas/istio"
node - <<'JS'
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const YAML = require(path.join(process.env.OUT_DIR, '..', '..', '..', 'node_modules', 'yaml'));
const dl = JSON.parse(process.env.ISTIO_API_DOWNLOAD);
const crdFile = path.join(dl.Dir, 'kubernetes', 'customresourcedefinitions.gen.yaml');
const crds = YAML.parseAllDocuments(fs.readFileSync(crdFile, 'utf8')).map((d) => d.toJS()).filter(Boolean);
// kind -> the API version deploy/istio/ uses.
const WANTED = { EnvoyFilter: 'v1alpha3', DestinationRule: 'v1', VirtualService: 'v1' };
fs.mkdirSync(process.env.OUT_DIR, { recursive: true });
for (const [kind, version] of Object.entries(WANTED)) {
  const crd = crds.find((c) => c.kind === 'CustomResourceDefinition' && c.spec.names.kind === kind);
  if (!crd) throw new Error(`no CRD for ${kind} in ${crdFile}`);
  const v = crd.spec.versions.find((x) => x.name === version);
  if (!v || !v.served) throw new Error(`${kind} ${version} is not served by istio.io/api ${dl.Version}`);
  const schema = {
    $schema: 'http://json-schema.org/draft-04/schema#',
    $id: `${crd.spec.group}/${version}/${kind}`,
    $comment: `openAPIV3Schema of ${kind} ${crd.spec.group}/${version}, extracted unchanged from kubernetes/customresourcedefinitions.gen.yaml of the Go module istio.io/api ${dl.Version} (go.sum ${dl.Sum}) by scripts/vendor-istio-schemas.sh. Do not edit.`,
    ...v.schema.openAPIV3Schema,
  };
  const file = path.join(process.env.OUT_DIR, `${kind.toLowerCase()}-${version}.json`);
  fs.writeFileSync(file, `${JSON.stringify(schema, null, 2)}\n`);
  process.stdout.write(`${file}\n`);
}
JS
