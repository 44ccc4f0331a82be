{{/* Names and labels. */}}
{{- define "paceline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "paceline.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "paceline.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "paceline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one role: (dict "ctx" $ "role" "api"). */}}
{{- define "paceline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "paceline.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "paceline.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "paceline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "paceline.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The API's public URL: given, or from the Ingress. */}}
{{- define "paceline.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl -}}
{{- else if .Values.ingress.enabled -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) .Values.ingress.host -}}
{{- end -}}
{{- end -}}

{{/* A secret's name and key for a backend or the admin token: (dict "ctx" $ "v" .Values.database "key" "database-url"). */}}
{{- define "paceline.secretRef" -}}
name: {{ .v.existingSecret | default (include "paceline.fullname" .ctx) }}
key: {{ ternary .v.existingSecretKey .key (not (empty .v.existingSecret)) }}
{{- end -}}

{{/* A configuration value as an environment string (lists comma-separated). */}}
{{- define "paceline.envValue" -}}
{{- if kindIs "slice" . -}}
{{- join "," . -}}
{{- else if kindIs "float64" . -}}
{{- if eq (floor .) . -}}{{- printf "%.0f" . -}}{{- else -}}{{- . -}}{{- end -}}
{{- else -}}
{{- . -}}
{{- end -}}
{{- end -}}

{{/*
Seconds of a duration key: `config.<section>.<key>` (milliseconds), else its former flat
name under `config`, else the code's default.
*/}}
{{- define "paceline.seconds" -}}
{{- $ms := dig .section .key (index .ctx.Values.config .former | default .default) .ctx.Values.config -}}
{{- div (int64 $ms) 1000 -}}
{{- end -}}

{{/*
Termination grace per role, from the code's shutdown (README, "Install on Kubernetes"):
- api: preStop pause, then `api.drain_ms` answering 503 while endpoints drop it, then
  `api.shutdown_timeout_ms` for in-flight requests (SSE streams and wait=true calls end at
  once), plus 5 s of margin (the process's own deadline is drain + timeout + 5 s);
- worker: at most 10 s to stop its sessions (STOP_GRACE), then it releases its leases and
  wakes the others: 10 s of margin;
- dispatcher: in-flight attempts get min(api.shutdown_timeout_ms / 3, webhooks.timeout_ms),
  then unfinished deliveries are handed back: 5 s of margin;
- attendant: answers in flight get 5 s, the rest are redelivered to another pod: 5 s of
  margin;
- chatwoot: jobs in flight get 5 s, then the rest are handed back for another pod: 5 s of
  margin.
*/}}
{{- define "paceline.grace.api" -}}
{{- $drain := include "paceline.seconds" (dict "ctx" . "section" "api" "key" "drain_ms" "former" "drain_ms" "default" 5000) | int -}}
{{- $timeout := include "paceline.seconds" (dict "ctx" . "section" "api" "key" "shutdown_timeout_ms" "former" "shutdown_timeout_ms" "default" 25000) | int -}}
{{- add (int .Values.api.preStopSeconds) $drain $timeout 5 -}}
{{- end -}}
{{- define "paceline.grace.worker" -}}20{{- end -}}
{{- define "paceline.grace.attendant" -}}10{{- end -}}
{{- define "paceline.grace.chatwoot" -}}10{{- end -}}
{{- define "paceline.grace.dispatcher" -}}
{{- $timeout := include "paceline.seconds" (dict "ctx" . "section" "api" "key" "shutdown_timeout_ms" "former" "shutdown_timeout_ms" "default" 25000) | int -}}
{{- $attempt := include "paceline.seconds" (dict "ctx" . "section" "webhooks" "key" "timeout_ms" "former" "webhook_timeout_ms" "default" 10000) | int -}}
{{- add (min (div $timeout 3) $attempt) 5 -}}
{{- end -}}
