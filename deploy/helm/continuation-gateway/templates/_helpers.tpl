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

{{/* "true" when image.repository starts with a registry host (a first part with "." or ":", or localhost), as
     container runtimes read image names; without one the nodes pull from Docker Hub. */}}
{{- define "cg.imageHasRegistry" -}}
{{- $parts := splitList "/" .Values.image.repository -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}true{{- end -}}
{{- end -}}

{{/* The rendered Envoy ConfigMap's data (kubernetes mode): its hash is the pod's checksum/envoy, so any change
     to the bootstrap (router port, tracing, a new files/envoy.json) rolls the pods. */}}
{{- define "cg.envoyConfigData" -}}
drain.sh: |
  {{- .Files.Get "files/drain.sh" | nindent 2 }}
{{- $t := .Values.tracing.envoy }}
{{- $bootstrap := .Files.Get "files/envoy.json" }}
{{- if $t.enabled }}
{{- /* files/envoy-tracing.json: the same bootstrap with Envoy's tracer, rendered for otel-collector:4318. */}}
{{- $bootstrap = .Files.Get "files/envoy-tracing.json" | replace "\"address\": \"otel-collector\"" (printf "\"address\": %q" $t.collectorHost) | replace "\"port_value\": 4318" (printf "\"port_value\": %d" (int $t.collectorPort)) | replace "http://otel-collector:4318/v1/traces" (printf "http://%s:%d/v1/traces" $t.collectorHost (int $t.collectorPort)) | replace "\"service_name\": \"continuation-gateway-envoy\"" (printf "\"service_name\": %q" $t.serviceName) }}
{{- end }}
{{- /* The front listener's request timeout: rendered as DEFAULT_REQUEST_BODY_TIMEOUT_SECONDS (the only "60s" one). */}}
{{- $bootstrap = $bootstrap | replace "\"request_timeout\": \"60s\"" (printf "\"request_timeout\": \"%ds\"" (int .Values.envoyRequestBodyTimeoutSeconds)) }}
envoy.json: |
  {{- $bootstrap | replace "\"address\": \"inference-gateway-router\"" (printf "\"address\": %q" (include "cg.routerAlias" .)) | replace "\"port_value\": 8000" (printf "\"port_value\": %d" (int .Values.router.port)) | nindent 2 }}
{{- end -}}

{{/* The ExternalName Service Envoy's router cluster names (kubernetes mode). */}}
{{- define "cg.routerAlias" -}}
{{- printf "%s-router" (include "cg.fullname" .) | trunc 63 | trimSuffix "-" -}}
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
- name: TOKEN_IDS_CONTINUATION
  value: {{ .Values.recovery.tokenIds | toString | quote }}
- name: CONTINUATION_UNVERIFIED
  value: {{ .Values.recovery.unverified | quote }}
{{- range $name, $key := dict "MAX_ATTEMPTS" "maxAttempts" "MAX_CONTINUATIONS" "maxContinuations" "STALL_IDLE_TIMEOUT_SECONDS" "stallIdleTimeoutSeconds" "MAX_STALL_SECONDS" "maxStallSeconds" "FIRST_DELTA_DEADLINE_SECONDS" "firstDeltaDeadlineSeconds" "TOKENIZE_URL" "tokenizeUrl" "INTERRUPTION_NEXT_REQUEST_MAX_BYTES" "interruptionNextRequestMaxBytes" }}
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
  value: {{ include "cg.drainTimeout" . | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- with include "cg.chatTemplate" . }}
- name: CHAT_TEMPLATE
  value: {{ . | quote }}
{{- end }}
{{- with .Values.tokenizer.path }}
- name: TOKENIZER
  value: {{ include "cg.modelPath" (dict "path" . "root" $) | quote }}
{{- end }}
{{- if .Values.tracing.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.tracing.otlpEndpoint | quote }}
{{- end }}
{{- if include "cg.tracingOn" . }}
- name: OTEL_SERVICE_NAME
  value: {{ .Values.tracing.serviceName | quote }}
{{- /* The spans' server.address: the router tier (kubernetes mode: DOWNSTREAM_URL is Envoy's loopback listener). */}}
- name: TRACE_SERVER_ADDRESS
  value: {{ printf "%s:%v" .Values.router.service .Values.router.port | quote }}
{{- end }}
{{- if eq .Values.mode "istio" }}
- name: ENVOY_ADMIN_URL
  value: {{ .Values.istio.envoyAdminUrl | quote }}
{{- end }}
{{- /* extraEnv: name: value (any scalar), or name: {value: ...} / {valueFrom: ...} (a Secret, a ConfigMap). */}}
{{- range $name, $v := .Values.extraEnv }}
- name: {{ $name }}
{{- if and (kindIs "map" $v) (hasKey $v "valueFrom") }}
  valueFrom:
    {{- toYaml $v.valueFrom | nindent 4 }}
{{- else if kindIs "map" $v }}
  value: {{ $v.value | toString | quote }}
{{- else }}
  value: {{ $v | toString | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The sidecar exports spans: tracing.otlpEndpoint, or a traces endpoint of its own in extraEnv. */}}
{{- define "cg.tracingOn" -}}
{{- if or .Values.tracing.otlpEndpoint (hasKey .Values.extraEnv "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") -}}true{{- end -}}
{{- end -}}

{{/* Where chatTemplate.configMap is mounted in the sidecar. */}}
{{- define "cg.templateDir" -}}/etc/continuation-gateway/chat-template{{- end -}}

{{/* chatTemplate.path or tokenizer.path as the sidecar sees it: a relative one is inside modelVolume.mountPath. */}}
{{- define "cg.modelPath" -}}
{{- if hasPrefix "/" .path -}}
{{- .path -}}
{{- else -}}
{{- printf "%s/%s" (trimSuffix "/" .root.Values.modelVolume.mountPath) .path -}}
{{- end -}}
{{- end -}}

{{/* CHAT_TEMPLATE from chatTemplate: auto, the ConfigMap's key or the path; "" = none. */}}
{{- define "cg.chatTemplate" -}}
{{- $t := .Values.chatTemplate -}}
{{- if $t.auto -}}
auto
{{- else if $t.configMap.name -}}
{{- printf "%s/%s" (include "cg.templateDir" .) $t.configMap.key -}}
{{- else if $t.path -}}
{{- include "cg.modelPath" (dict "path" $t.path "root" .) -}}
{{- end -}}
{{- end -}}

{{/* The sidecar's read-only mounts (chatTemplate.configMap, modelVolume), the same in both modes. */}}
{{- define "cg.sidecarMounts" -}}
{{- if .Values.chatTemplate.configMap.name }}
- name: chat-template
  mountPath: {{ include "cg.templateDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.modelVolume.volume }}
- name: model
  mountPath: {{ .Values.modelVolume.mountPath }}
  {{- with .Values.modelVolume.subPath }}
  subPath: {{ . }}
  {{- end }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* The volumes behind cg.sidecarMounts. */}}
{{- define "cg.sidecarVolumes" -}}
{{- with .Values.chatTemplate.configMap.name }}
- name: chat-template
  configMap:
    name: {{ . }}
{{- end }}
{{- with .Values.modelVolume.volume }}
- name: model
  {{- toYaml . | nindent 2 }}
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

{{/* `helm test`'s pod: not the gateway's selector labels (its ReplicaSet would adopt the pod). */}}
{{- define "cg.testSelectorLabels" -}}
app.kubernetes.io/name: {{ include "cg.name" . }}-test
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
