{{/*
Checks on values Kubernetes or the server would take and then misread (issue 27: accepted-and-broken inputs):
values silently ignored, values that undo a protection, annotations that hand an object to another tool,
scheduling no node meets, sizes without a unit. Run from templates/validate/values.yaml after vs.validate. Each
message names the field, what goes wrong and the fix.
*/}}
{{- define "vs.validateInputs" -}}
{{- $v := .Values -}}
{{- $r := dict "msgs" list -}}
{{- /* silently ignored */ -}}
{{- if and $v.tls.existingSecret (not $v.tls.enabled) -}}
{{- $_ := set $r "msgs" (append $r.msgs (printf "tls.existingSecret: %q is set but tls.enabled is false, so the Secret is never mounted and clients and data nodes talk to the Sentinels in plaintext; set tls.enabled: true, or remove tls.existingSecret" $v.tls.existingSecret)) -}}
{{- end -}}
{{- if and $v.persistence.storageClass (not $v.persistence.enabled) -}}
{{- $_ := set $r "msgs" (append $r.msgs (printf "persistence.storageClass: %q is set but persistence.enabled is false, so no volume is created and it would be ignored; set persistence.enabled: true, or remove persistence.storageClass" $v.persistence.storageClass)) -}}
{{- end -}}
{{- if not $v.persistence.enabled -}}
{{- include "vs.checkUnused" (dict "r" $r "field" "persistence" "values" (omit $v.persistence "enabled" "storageClass") "defaults" (include "vs.inputDefaults" . | fromJson).persistence "why" "while persistence.enabled is false, so no volume claim is created and the chart ignores %[1]s; set persistence.enabled: true, or remove %[1]s") -}}
{{- end -}}
{{- /* a Service that undoes a protection */ -}}
{{- include "vs.checkOpenLoadBalancer" (dict "r" $r "field" "service" "svc" $v.service "tls" $v.tls.enabled) -}}
{{- /* annotations other tools act on */ -}}
{{- include "vs.checkToolAnnotations" (dict "r" $r "maps" (dict "commonAnnotations" $v.commonAnnotations "podAnnotations" $v.podAnnotations "service.annotations" $v.service.annotations "service.headless.annotations" $v.service.headless.annotations "serviceAccount.annotations" $v.serviceAccount.annotations)) -}}
{{- /* scheduling that can never be met */ -}}
{{- range $field, $a := dict "affinity" $v.affinity "controller.affinity" $v.controller.affinity -}}
{{- include "vs.checkNodeSelectorTerms" (dict "r" $r "field" $field "affinity" $a) -}}
{{- end -}}
{{- /* sizes without a unit */ -}}
{{- range $field, $q := dict "resources.memory" $v.resources.memory "persistence.size" $v.persistence.size "metrics.resources.memory" $v.metrics.resources.memory "controller.resources.memory" $v.controller.resources.memory "controller.resources.requests.memory" $v.controller.resources.requests.memory "instanceController.resources.memory" $v.instanceController.resources.memory "instanceController.resources.requests.memory" $v.instanceController.resources.requests.memory "dnsCache.resources.memory" $v.dnsCache.resources.memory -}}
{{- include "vs.checkSizeUnit" (dict "r" $r "field" $field "value" $q) -}}
{{- end -}}
{{- if $r.msgs -}}
{{- fail (join "\n" $r.msgs) -}}
{{- end -}}
{{- end -}}

{{/*
The chart's defaults of a section whose other keys only matter when one key turns it on (persistence.enabled): a
value that differs from these while the section is off is ignored, so it is refused (vs.checkUnused).
persistence.storageClass has its own refusal. The same as values.yaml (templates-tests TestInputDefaultsMatchValues).
*/}}
{{- define "vs.inputDefaults" -}}
{"persistence": {"size": "1Gi", "accessModes": ["ReadWriteOnce"], "labels": {}, "annotations": {}}}
{{- end -}}

