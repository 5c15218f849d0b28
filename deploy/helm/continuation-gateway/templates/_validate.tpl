{{/* Values the schema cannot judge alone, and the minimum Kubernetes. Included by deployment.yaml (always rendered). */}}
{{- define "cg.validate" -}}
{{- if .Values.tracing.envoy.enabled -}}
{{- if eq .Values.mode "istio" -}}
{{- fail "tracing.envoy applies to mode kubernetes: in Istio, istio-proxy's tracer is configured by the mesh (Telemetry API)" -}}
{{- end -}}
{{- if not .Values.tracing.envoy.collectorHost -}}
{{- fail "tracing.envoy.enabled needs tracing.envoy.collectorHost (the OTLP/HTTP collector's host)" -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.mode "istio") (le (include "cg.proxyDrainSeconds" . | int) (include "cg.drainTimeout" . | int)) -}}
{{- fail (printf "istio.terminationDrainDuration %ds must exceed drainTimeoutSeconds %s: istio-proxy would stop before the sidecar's streams end" (include "cg.proxyDrainSeconds" . | int) (include "cg.drainTimeout" .)) -}}
{{- end -}}
{{- $_ := include "cg.grace" . -}}
{{- include "cg.validateKubeVersion" . -}}
{{- end -}}

{{/* Kubernetes >= 1.29 (native sidecars: an initContainer with restartPolicy: Always; an older API server drops
     the field and the pod never leaves Init). Checked against .Capabilities only when Helm talks to a cluster
     (kubeVersionCheck auto): offline, `helm template` knows no cluster and its default version means nothing.
     A cluster is there when the namespace's kube-root-ca.crt ConfigMap (every namespace has one) can be read:
     lookup answers {} offline and for a namespace that does not exist yet (then the check is skipped). */}}
{{- define "cg.validateKubeVersion" -}}
{{- $check := .Values.kubeVersionCheck -}}
{{- $cluster := false -}}
{{- if eq $check "auto" -}}
{{- $cluster = not (empty (lookup "v1" "ConfigMap" (include "cg.namespace" .) "kube-root-ca.crt")) -}}
{{- end -}}
{{- if and (or (eq $check "always") $cluster) (semverCompare "<1.29.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "Kubernetes %s: this chart needs 1.29 or later (native sidecars); kubeVersionCheck=never skips the check" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- end -}}
