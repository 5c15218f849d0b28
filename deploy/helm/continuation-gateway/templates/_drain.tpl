{{/*
Pod deletion, computed from values (docs/deploy.md "Drain"). Seconds throughout.
  kubernetes mode: Envoy's preStop (drain.sh) waits up to envoyDrainSeconds for the client streams; Envoy stops;
    then the sidecar, a native sidecar, gets SIGTERM and drains up to DRAIN_TIMEOUT_SECONDS. One after the
    other: grace = envoyDrainSeconds + DRAIN_TIMEOUT_SECONDS + 10.
  istio mode: the sidecar's drain is what waits for the streams. istio-proxy as a native sidecar (Istio >= 1.27's
    default) drains its inbound listeners at once (its preStop) and is stopped after the sidecar, exiting at once;
    as a plain container it gets SIGTERM with the sidecar and exits when no connection is left
    (EXIT_ON_ZERO_ACTIVE_CONNECTIONS), bounded by terminationDrainDuration. Either way the two overlap:
    grace = max(DRAIN_TIMEOUT_SECONDS + 10, terminationDrainDuration + 5).
*/}}

{{/* DRAIN_TIMEOUT_SECONDS: the value, else the mode's default (kubernetes 30: Envoy's preStop has waited for
     the streams already; istio 100: the sidecar's drain is what waits). */}}
{{- define "cg.drainTimeout" -}}
{{- if ne (toString .Values.drainTimeoutSeconds) "" -}}
{{- int .Values.drainTimeoutSeconds -}}
{{- else if eq .Values.mode "istio" -}}
100
{{- else -}}
30
{{- end -}}
{{- end -}}

{{/* istio-proxy's terminationDrainDuration: the value ("105s"), else DRAIN_TIMEOUT_SECONDS + 5. */}}
{{- define "cg.proxyDrainSeconds" -}}
{{- if ne (toString .Values.istio.terminationDrainDuration) "" -}}
{{- trimSuffix "s" (toString .Values.istio.terminationDrainDuration) | int -}}
{{- else -}}
{{- add (include "cg.drainTimeout" . | int) 5 -}}
{{- end -}}
{{- end -}}

{{/* The shortest grace period the drain fits in. */}}
{{- define "cg.minGrace" -}}
{{- $drain := include "cg.drainTimeout" . | int -}}
{{- if eq .Values.mode "istio" -}}
{{- max (add $drain 10) (add (include "cg.proxyDrainSeconds" . | int) 5) -}}
{{- else -}}
{{- add (int .Values.envoyDrainSeconds) $drain 10 -}}
{{- end -}}
{{- end -}}

{{/* terminationGracePeriodSeconds: the value, if the drain fits in it (else the chart refuses), else the minimum. */}}
{{- define "cg.grace" -}}
{{- $min := include "cg.minGrace" . | int -}}
{{- if ne (toString .Values.terminationGracePeriodSeconds) "" -}}
{{- $grace := int .Values.terminationGracePeriodSeconds -}}
{{- if lt $grace $min -}}
{{- fail (printf "terminationGracePeriodSeconds %d is shorter than the drain (%d s in mode %s: docs/deploy.md \"Drain\"); raise it or leave it empty" $grace $min .Values.mode) -}}
{{- end -}}
{{- $grace -}}
{{- else -}}
{{- $min -}}
{{- end -}}
{{- end -}}

{{/* proxy.istio.io/config (istio mode): istio-proxy's concurrency, its drain, and the ext_proc stats it exports
     (SidecarBypassed reads envoy_http_ext_proc_failure_mode_allowed; Istio exports a few stats unless asked). */}}
{{- define "cg.istioProxyConfig" -}}
{{- $metadata := dict "EXIT_ON_ZERO_ACTIVE_CONNECTIONS" "true" -}}
{{- $stats := dict "inclusionRegexps" (list ".*ext_proc.*") -}}
{{- dict "concurrency" (int .Values.envoyConcurrency) "holdApplicationUntilProxyStarts" true "terminationDrainDuration" (printf "%ds" (include "cg.proxyDrainSeconds" . | int)) "proxyMetadata" $metadata "proxyStatsMatcher" $stats | toJson -}}
{{- end -}}
