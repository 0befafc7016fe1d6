{{- define "samsa-operator.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "samsa-operator.labels" -}}
app.kubernetes.io/name: samsa-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "samsa-operator.selector" -}}
app.kubernetes.io/name: samsa-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "samsa-operator.serviceAccount" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "samsa-operator.name" .) .Values.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* Rules for the namespaced resources the operator manages: exactly the verbs it uses. */}}
{{- define "samsa-operator.namespacedRules" -}}
- apiGroups: [kafka.samsa.dev]
  resources: [kafkaclusters, topics, kafkausers]
  verbs: [get, list, watch, patch]
- apiGroups: [kafka.samsa.dev]
  resources: [kafkaclusters/status, topics/status, kafkausers/status]
  verbs: [patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, create, patch, delete]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [get, list, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, create, patch, delete]
# The clusters' CAs and certificates and the KafkaUsers' credentials: read and written by
# name, never listed or watched (Secrets it did not make stay out of its sight).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch, delete]
{{- if .Values.networkPolicy.enabled }}
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, create, patch, delete]
{{- end }}
# Day-2 operations restart broker and ZooKeeper pods one at a time (their StatefulSets use
# OnDelete) and record on each broker pod the configuration it runs.
- apiGroups: [""]
  resources: [pods]
  verbs: [list, patch, delete]
# Why a cluster is stuck: its StatefulSets' and claims' events, and the claims themselves,
# which it grows when storage.size grows, where their StorageClass allows it.
- apiGroups: [""]
  resources: [events]
  verbs: [create, list]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, patch]
{{- if .Values.peering.enabled }}
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [list, watch, patch]
{{- end }}
{{- end -}}
