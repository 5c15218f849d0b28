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
{{- include "cg.validateExtraEnv" . -}}
{{- include "cg.validateModelFiles" . -}}
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

{{/* extraEnv may not repeat a variable the chart sets (two entries of one name in a container: the last wins,
     and a later patch may drop both); the message names the value that sets it, "" = fixed by the chart. */}}
{{- define "cg.validateExtraEnv" -}}
{{- $fixed := "" -}}
{{- $router := "router.service and router.port" -}}
{{- $owned := dict "DOWNSTREAM_URL" $router "TRACE_SERVER_ADDRESS" $router "CONTINUATION_MODEL" "model" "CONTINUATION_ENGINE" "engine" "CONTINUATION_ENABLED" "recovery.enabled" "CONTINUATION_UNVERIFIED" "recovery.unverified" "TOKEN_IDS_CONTINUATION" "recovery.tokenIds" "MAX_ATTEMPTS" "recovery.maxAttempts" "MAX_CONTINUATIONS" "recovery.maxContinuations" "STALL_IDLE_TIMEOUT_SECONDS" "recovery.stallIdleTimeoutSeconds" "MAX_STALL_SECONDS" "recovery.maxStallSeconds" "FIRST_DELTA_DEADLINE_SECONDS" "recovery.firstDeltaDeadlineSeconds" "TOKENIZE_URL" "recovery.tokenizeUrl" "INTERRUPTION_NEXT_REQUEST_MAX_BYTES" "recovery.interruptionNextRequestMaxBytes" "HOST" $fixed "PORT" $fixed "ADMIN_HOST" $fixed "ADMIN_PORT" $fixed "WORKERS" "workers" "DRAIN_TIMEOUT_SECONDS" "drainTimeoutSeconds" "LOG_LEVEL" "logLevel" "OTEL_EXPORTER_OTLP_ENDPOINT" "tracing.otlpEndpoint" "OTEL_SERVICE_NAME" "tracing.serviceName" "ENVOY_ADMIN_URL" "istio.envoyAdminUrl" "CHAT_TEMPLATE" "chatTemplate" "TOKENIZER" "tokenizer.path" -}}
{{- range $name, $_ := .Values.extraEnv -}}
{{- if hasKey $owned $name -}}
{{- with index $owned $name -}}
{{- fail (printf "extraEnv.%s: the chart sets %s; set %s instead" $name $name .) -}}
{{- end -}}
{{- fail (printf "extraEnv.%s: the chart sets %s, fixed (the probes, Envoy's bootstrap and the Service use it)" $name $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* chatTemplate, tokenizer and modelVolume: one template form, a path the pod holds, memory for the tokenizer. */}}
{{- define "cg.validateModelFiles" -}}
{{- $t := .Values.chatTemplate -}}
{{- $forms := list -}}
{{- if $t.auto -}}{{- $forms = append $forms "auto" -}}{{- end -}}
{{- if $t.configMap.name -}}{{- $forms = append $forms "configMap" -}}{{- end -}}
{{- if $t.path -}}{{- $forms = append $forms "path" -}}{{- end -}}
{{- if gt (len $forms) 1 -}}
{{- fail (printf "chatTemplate: set one of auto, configMap.name or path, not %s" (join " and " $forms)) -}}
{{- end -}}
{{- if and $forms (not .Values.model) -}}
{{- fail "chatTemplate needs model: CHAT_TEMPLATE needs CONTINUATION_MODEL (the name the model is served as)" -}}
{{- end -}}
{{- if and $t.auto (eq .Values.engine "sglang") -}}
{{- fail "chatTemplate.auto: SGLang cannot tell its template (no GET /props; its /tokenize reads text only): give it as chatTemplate.configMap or chatTemplate.path" -}}
{{- end -}}
{{- if and (eq (toString .Values.recovery.tokenIds) "true") (eq .Values.engine "sglang") -}}
{{- fail "recovery.tokenIds: SGLang's streamed chat gives no token ids (return_token_ids with stream is a 400): leave it auto or false" -}}
{{- end -}}
{{- range $what, $v := dict "chatTemplate" $t "tokenizer" .Values.tokenizer -}}
{{- include "cg.validateModelPath" (dict "what" $what "v" $v "mv" $.Values.modelVolume) -}}
{{- end -}}
{{- if .Values.tokenizer.path -}}
{{- include "cg.validateTokenizerMemory" . -}}
{{- end -}}
{{- end -}}

{{/* A chatTemplate.path or tokenizer.path is in the model volume, or in the image when inImage says so. */}}
{{- define "cg.validateModelPath" -}}
{{- $p := .v.path -}}
{{- $mount := trimSuffix "/" .mv.mountPath -}}
{{- if .v.inImage -}}
{{- if not (hasPrefix "/" $p) -}}
{{- fail (printf "%s.inImage needs an absolute %s.path (the file in the sidecar's image)" .what .what) -}}
{{- end -}}
{{- else if $p -}}
{{- if not .mv.volume -}}
{{- fail (printf "%s.path %s needs modelVolume.volume (the model's files, mounted at modelVolume.mountPath %s), or %s.inImage: true for an absolute path in the image" .what $p .mv.mountPath .what) -}}
{{- end -}}
{{- if and (hasPrefix "/" $p) (ne $p $mount) (not (hasPrefix (printf "%s/" $mount) $p)) -}}
{{- fail (printf "%s.path %s is outside modelVolume.mountPath %s: give it relative to the mount, or under it" .what $p .mv.mountPath) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Every worker loads the tokenizer: measured up to 196 MiB more per worker (and 50 MiB more in the primary) for
     Qwen3's 151k vocabulary (docs/deploy.md); 256 MiB a worker counted, beside the 128 MiB per process. */}}
{{- define "cg.validateTokenizerMemory" -}}
{{- $w := int .Values.workers -}}
{{- if eq $w 0 -}}
{{- fail "tokenizer.path with workers 0 (auto): the sidecar counts 128 MiB a process, not the tokenizer each worker loads; set workers" -}}
{{- end -}}
{{- $need := add (mul 128 (add $w 1)) (mul 256 $w) -}}
{{- $limit := .Values.resources.sidecar.limits.memory -}}
{{- if lt (include "cg.memoryBytes" $limit | float64) (mul $need 1048576 | float64) -}}
{{- fail (printf "resources.sidecar.limits.memory %v is below %dMi with tokenizer.path: 128 MiB for each of %d sidecar processes and 256 MiB for the tokenizer each of the %d workers loads (a 150k vocabulary; more for a larger one: docs/deploy.md)" $limit $need (add $w 1) $w) -}}
{{- end -}}
{{- end -}}

{{/* A Kubernetes memory quantity (512Mi, 1Gi, 800M, bytes) in bytes. */}}
{{- define "cg.memoryBytes" -}}
{{- if kindIs "string" . -}}
{{- $unit := regexReplaceAll "^[0-9]+(\\.[0-9]+)?" . "" -}}
{{- $per := dict "" 1 "k" 1000 "Ki" 1024 "M" 1000000 "Mi" 1048576 "G" 1000000000 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if not (hasKey $per $unit) -}}
{{- fail (printf "memory quantity %q: expected a number with one of the units Ki, Mi, Gi, Ti, k, M, G" .) -}}
{{- end -}}
{{- mulf (trimSuffix $unit .) (index $per $unit) -}}
{{- else -}}
{{- float64 . -}}
{{- end -}}
{{- end -}}
