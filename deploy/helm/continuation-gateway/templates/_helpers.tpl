{{- define "cg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cg.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "cg.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "cg.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cg.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{- define "cg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cg.labels" -}}
{{ include "cg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: continuation-gateway
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "cg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cg.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "cg.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The ExternalName Service Envoy's router cluster names (kubernetes mode). */}}
{{- define "cg.routerAlias" -}}
{{- printf "%s-router" (include "cg.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cg.validate" -}}
{{- if not (has .Values.mode (list "kubernetes" "istio")) -}}
{{- fail (printf "mode must be kubernetes or istio, not %q" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.engine (list "sglang" "vllm" "llamacpp")) -}}
{{- fail (printf "engine must be sglang, vllm or llamacpp, not %q" .Values.engine) -}}
{{- end -}}
{{- if .Values.tracing.envoy.enabled -}}
{{- if eq .Values.mode "istio" -}}
{{- fail "tracing.envoy applies to mode kubernetes: in Istio, istio-proxy's tracer is configured by the mesh (Telemetry API)" -}}
{{- end -}}
{{- if not .Values.tracing.envoy.collectorHost -}}
{{- fail "tracing.envoy.enabled needs tracing.envoy.collectorHost (the OTLP/HTTP collector's host)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The sidecar's environment: the same variables as deploy/kubernetes/gateway.yaml and deploy/istio/gateway.yaml. */}}
{{- define "cg.sidecarEnv" -}}
- name: DOWNSTREAM_URL
{{- if eq .Values.mode "istio" }}
  value: {{ printf "http://%s:%v" .Values.router.service .Values.router.port | quote }}
{{- else }}
  value: http://127.0.0.1:10001
{{- end }}
{{- if .Values.model }}
- name: CONTINUATION_MODEL
  value: {{ .Values.model | quote }}
{{- end }}
- name: CONTINUATION_ENGINE
  value: {{ .Values.engine | quote }}
- name: CONTINUATION_ENABLED
  value: {{ .Values.recovery.enabled | toString | quote }}
{{- range $name, $key := dict "MAX_ATTEMPTS" "maxAttempts" "MAX_CONTINUATIONS" "maxContinuations" "STALL_IDLE_TIMEOUT_SECONDS" "stallIdleTimeoutSeconds" "MAX_STALL_SECONDS" "maxStallSeconds" "FIRST_DELTA_DEADLINE_SECONDS" "firstDeltaDeadlineSeconds" "TOKENIZE_URL" "tokenizeUrl" }}
{{- $v := index $.Values.recovery $key }}
{{- if ne (toString $v) "" }}
- name: {{ $name }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end }}
- name: HOST
  value: 127.0.0.1
- name: PORT
  value: "50051"
- name: ADMIN_HOST
  value: 0.0.0.0
- name: ADMIN_PORT
  value: "9090"
- name: WORKERS
  value: {{ .Values.workers | toString | quote }}
- name: DRAIN_TIMEOUT_SECONDS
  value: {{ .Values.drainTimeoutSeconds | toString | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- if .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.otlpEndpoint | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .Values.tracing.serviceName | quote }}
{{- end }}
{{- if eq .Values.mode "istio" }}
- name: ENVOY_ADMIN_URL
  value: {{ .Values.istio.envoyAdminUrl | quote }}
{{- end }}
{{- range $name, $value := .Values.extraEnv }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{- define "cg.sidecarProbes" -}}
livenessProbe:
  httpGet: { path: /healthz, port: admin }
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet: { path: /readyz, port: admin }
  periodSeconds: 5
{{- end -}}

{{- define "cg.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
