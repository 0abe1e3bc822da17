{{/* The chart's name, and the release's full name (the name of every object, truncated to a DNS label). */}}
{{- define "kubeflux.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubeflux.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubeflux.serviceAccountName" -}}
{{- default (include "kubeflux.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "kubeflux.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubeflux.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubeflux.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubeflux.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The ServeConfig: .Values.config with what the chart owns laid over it (the operations endpoint the probes reach,
and leader election on a Lease in the release's namespace, which the Role below grants and nothing else).
*/}}
{{- define "kubeflux.config" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled=true: without it every replica schedules the same pods" }}
{{- end }}
{{- $config := deepCopy .Values.config }}
{{- $_ := set $config "apiVersion" "kubeflux.io/v1alpha1" }}
{{- $_ = set $config "kind" "ServeConfig" }}
{{- $_ = set $config "operations" (dict "address" "0.0.0.0" "port" (int .Values.operationsPort)) }}
{{- if .Values.leaderElection.enabled }}
{{- $_ = set $config "leaderElection" (dict
      "enabled" true
      "resourceNamespace" .Release.Namespace
      "resourceName" (include "kubeflux.fullname" .)
      "leaseDurationSeconds" .Values.leaderElection.leaseDurationSeconds
      "renewDeadlineSeconds" .Values.leaderElection.renewDeadlineSeconds
      "retryPeriodSeconds" .Values.leaderElection.retryPeriodSeconds) }}
{{- end }}
{{- toYaml $config }}
{{- end }}
