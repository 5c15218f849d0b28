// A vendored CRD schema (deploy/schemas/<source>/<kind>-<version>.json) made strict for check-jsonschema: every
// object schema with `properties` and no x-kubernetes-preserve-unknown-fields rejects other fields, as the API
// server's strict field validation does (kubectl's default since 1.27); apiVersion, kind and metadata as the API
// server adds them. The CEL rules (x-kubernetes-validations) and Go-only regex patterns are not checked. Used by test/unit/deploy/gates.test.ts
// (Istio) and test/unit/deploy/helm-chart.test.ts (Prometheus Operator).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from '../../tools/stack/envoy-config';

/* eslint-disable @typescript-eslint/no-explicit-any */

/** Writes the strict schema into dir; returns its path. */
export function strictCrdSchemaFile(source: string, kind: string, version: string, dir: string): string {
  const file = path.join(repoRoot(), 'deploy', 'schemas', source, `${kind.toLowerCase()}-${version}.json`);
  const schema = JSON.parse(fs.readFileSync(file, 'utf8'));
  const strict = (s: any): void => {
    if (Array.isArray(s)) return s.forEach(strict);
    if (!s || typeof s !== 'object') return;
    if (s.properties && s['x-kubernetes-preserve-unknown-fields'] !== true && s.additionalProperties === undefined)
      s.additionalProperties = false;
    // A Go (RE2) inline flag, `(?i)`, is no ECMA-262 regex: check-jsonschema refuses the whole schema for it.
    if (typeof s.pattern === 'string' && s.pattern.includes('(?i)')) delete s.pattern;
    for (const v of Object.values(s)) strict(v);
  };
  // Kubernetes adds apiVersion, kind and metadata to every custom resource's schema.
  const [group] = String(schema.$id).split('/');
  schema.properties = {
    apiVersion: { enum: [`${group}/${version}`] },
    kind: { enum: [kind] },
    metadata: { type: 'object' },
    ...schema.properties,
  };
  schema.required = ['apiVersion', 'kind', 'metadata', ...(schema.required ?? [])];
  strict(schema);
  delete schema.$id;
  const out = path.join(dir, `${source}-${kind}-${version}.schema.json`);
  fs.writeFileSync(out, JSON.stringify(schema));
  return out;
}
