{{/* The chart's name, and the objects' base name: the release name when
it holds the chart's name, else release-chart. */}}
{{- define "devlet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "devlet.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "devlet.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "devlet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "devlet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "devlet.labels" -}}
{{ include "devlet.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "devlet.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The ConfigMap the DaemonSets mount: an existing one (config.name) or
the chart's. */}}
{{- define "devlet.configMapName" -}}
{{- .Values.config.name | default (printf "%s-config" (include "devlet.fullname" .)) -}}
{{- end -}}

{{/* The key of the config nodes without the label run (config.default or
the fallback strategies); "config.yaml" is the file the chart writes; ""
when no config applies. */}}
{{- define "devlet.defaultConfigKey" -}}
{{- $map := .Values.config.map | default dict -}}
{{- if .Values.config.name -}}
{{- .Values.config.default | default "config.yaml" -}}
{{- else if not $map -}}
config.yaml
{{- else if .Values.config.default -}}
{{- if not (hasKey $map .Values.config.default) -}}
{{- fail (printf "config.default %q is not a key of config.map" .Values.config.default) -}}
{{- end -}}
{{- .Values.config.default -}}
{{- else -}}
{{- $found := "" -}}
{{- range .Values.config.fallbackStrategies -}}
{{- if not $found -}}
{{- if and (eq . "named") (hasKey $map "default") -}}
{{- $found = "default" -}}
{{- else if and (eq . "single") (eq (len $map) 1) -}}
{{- $found = keys $map | first -}}
{{- else if eq . "empty" -}}
{{- $found = "config.yaml" -}}
{{- else if not (has . (list "named" "single" "empty")) -}}
{{- fail (printf "config.fallbackStrategies: unknown strategy %q (named, single, empty)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}
{{- end -}}

{{/* The config file the chart writes: version v1, hostDevices, extraConfig. */}}
{{- define "devlet.configFile" -}}
{{- $cfg := dict "version" "v1" -}}
{{- if and .Values.hostDevices.enabled .Values.hostDevices.devices -}}
{{- $_ := set $cfg "hostDevices" (dict "domain" .Values.hostDevices.domain "devices" .Values.hostDevices.devices) -}}
{{- end -}}
{{- $cfg = mergeOverwrite $cfg (deepCopy (.Values.extraConfig | default dict)) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "devlet.webConfigEnabled" -}}
{{- if or .Values.tlsServerConfig.enabled .Values.basicAuth.users -}}true{{- end -}}
{{- end -}}

{{- define "devlet.tlsSecretName" -}}
{{- .Values.tlsServerConfig.existingSecret | default (printf "%s-tls" (include "devlet.fullname" .)) -}}
{{- end -}}

{{/* Whether the driver root is mounted at /driver-root: NVIDIA with CDI
specs (the driver files they list). */}}
{{- define "devlet.driverRootMounted" -}}
{{- if and .Values.nvidia.enabled .Values.cdi.enabled -}}true{{- end -}}
{{- end -}}

{{- define "devlet.podAttribution" -}}
{{- if and .Values.metrics.enabled .Values.metrics.podAttribution -}}true{{- end -}}
{{- end -}}

{{/* Node affinity: the value, or the enabled GPU families' terms (none
with host devices, which every node may have). */}}
{{- define "devlet.affinity" -}}
{{- if .Values.affinity -}}
{{- toYaml .Values.affinity -}}
{{- else if and .Values.familyAffinity (not .Values.hostDevices.enabled) (or .Values.nvidia.enabled .Values.amd.enabled) -}}
{{- $terms := list -}}
{{- if .Values.nvidia.enabled -}}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" "feature.node.kubernetes.io/pci-10de.present" "operator" "In" "values" (list "true")))) -}}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" "feature.node.kubernetes.io/cpu-model.vendor_id" "operator" "In" "values" (list "NVIDIA")))) -}}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" "nvidia.com/gpu.present" "operator" "In" "values" (list "true")))) -}}
{{- end -}}
{{- if .Values.amd.enabled -}}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" "feature.node.kubernetes.io/pci-1002.present" "operator" "In" "values" (list "true")))) -}}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" "feature.node.kubernetes.io/amd-gpu" "operator" "In" "values" (list "true")))) -}}
{{- $terms = append $terms (dict "matchExpressions" (list (dict "key" "amd.com/gpu.present" "operator" "In" "values" (list "true")))) -}}
{{- end -}}
{{- toYaml (dict "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" $terms))) -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}
