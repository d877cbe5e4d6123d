{{- define "stormwatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "stormwatch.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "stormwatch.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "stormwatch.secretName" -}}
{{- .Values.existingSecret | default (include "stormwatch.fullname" .) -}}
{{- end -}}

{{- define "stormwatch.backendImage" -}}
{{ .Values.image.backend.repository }}:{{ .Values.image.backend.tag }}
{{- end -}}

{{/* The backend's environment, the same settings as docker-compose.yml's. */}}
{{- define "stormwatch.backendEnv" -}}
{{- $secret := include "stormwatch.secretName" . -}}
{{- $full := include "stormwatch.fullname" . -}}
- name: SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: SECRET_KEY}}
{{- if .Values.postgresql.bundled }}
- name: POSTGRES_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: POSTGRES_PASSWORD}}
- name: DATABASE_URL
  value: "postgresql+asyncpg://stormwatch:$(POSTGRES_PASSWORD)@{{ $full }}-postgresql:5432/stormwatch"
{{- else }}
- name: DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: DATABASE_URL}}
{{- end }}
{{- if .Values.redis.bundled }}
- name: REDIS_URL
  value: "redis://{{ $full }}-redis:6379/0"
{{- else }}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: REDIS_URL}}
{{- end }}
- name: COOKIE_SECURE
  value: {{ .Values.config.cookieSecure | quote }}
- name: LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: PUBLIC_BASE_URL
  value: {{ .Values.config.publicBaseUrl | quote }}
- name: EGRESS_ALLOW
  value: {{ .Values.config.egressAllow | quote }}
- name: MESH_ADDRESS_ALLOW
  value: {{ .Values.config.meshAddressAllow | quote }}
{{- end -}}

{{- define "stormwatch.podSpecCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations: {{ toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity: {{ toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
