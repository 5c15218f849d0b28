#!/usr/bin/env bash
# Vendors the JSON schemas of the Prometheus Operator resources the Helm chart renders (PodMonitor,
# ServiceMonitor, PrometheusRule) into deploy/schemas/prometheus-operator/, for the offline check-jsonschema gate
# of test/unit/deploy/helm-chart.test.ts. Source: the CRDs' openAPIV3Schema in example/prometheus-operator-crd/ of the Go
# module github.com/prometheus-operator/prometheus-operator at PROMETHEUS_OPERATOR_VERSION, downloaded with `go mod
# download` (the Go module proxy) into a temporary GOPATH. Each output file holds the served version's
# openAPIV3Schema unchanged, plus $schema, $id and a $comment naming the module, its version and its go.sum hash
# (the same layout as scripts/vendor-istio-schemas.sh). Not run by the tests; rerun by hand to move to another release.
#
# Usage: scripts/vendor-prometheus-operator-schemas.sh     needs go and node (with the repo's node_modules: yaml)
# Env:   PROMETHEUS_OPERATOR_VERSION   default v0.85.0
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
TMP="$(mktemp -d)"
trap 'chmod -R u+w "$TMP" 2>/dev/null; rm -rf "$TMP"' EXIT
command -v go >/dev/null || { echo "vendor-prometheus-operator-schemas: go not found" >&2; exit 1; }
json="$(cd "$TMP" && GOPATH="$TMP/gopath" GOMODCACHE="$TMP/gopath/pkg/mod" GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@$VERSION")"
export PO_DOWNLOAD="$json" OUT_DIR="$ROOT/deploy/schemas/prometheus-operator"
node - <<'JS'
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const YAML = require(path.join(process.env.OUT_DIR, '..', '..', '..', 'node_modules', 'yaml'));
const dl = JSON.parse(process.env.PO_DOWNLOAD);
fs.mkdirSync(process.env.OUT_DIR, { recursive: true });
for (const plural of ['podmonitors', 'servicemonitors', 'prometheusrules']) {
  const crdFile = path.join(dl.Dir, 'example', 'prometheus-operator-crd', `monitoring.coreos.com_${plural}.yaml`);
  const crd = YAML.parse(fs.readFileSync(crdFile, 'utf8'));
  const v = crd.spec.versions.find((x) => x.name === 'v1');
  if (!v || !v.served) throw new Error(`${crd.spec.names.kind} v1 is not served by ${dl.Path} ${dl.Version}`);
  const kind = crd.spec.names.kind;
  const schema = {
    $schema: 'http://json-schema.org/draft-04/schema#',
    $id: `${crd.spec.group}/v1/${kind}`,
    $comment: `openAPIV3Schema of ${kind} ${crd.spec.group}/v1, extracted unchanged from example/prometheus-operator-crd/monitoring.coreos.com_${plural}.yaml of the Go module ${dl.Path} ${dl.Version} (go.sum ${dl.Sum}) by scripts/vendor-prometheus-operator-schemas.sh. Do not edit.`,
    ...v.schema.openAPIV3Schema,
  };
  const file = path.join(process.env.OUT_DIR, `${kind.toLowerCase()}-v1.json`);
  fs.writeFileSync(file, `${JSON.stringify(schema, null, 2)}\n`);
  process.stdout.write(`${file}\n`);
}
JS
