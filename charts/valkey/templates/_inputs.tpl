{{/*
Checks on values Kubernetes or the server would take and then misread (issue 27: accepted-and-broken inputs):
values silently ignored, values that undo a protection, annotations that hand an object to another tool,
scheduling no node meets, sizes without a unit, ACL users that can do nothing. Run from templates/validate/values.yaml after valkey.validate. Each message names the field,
what goes wrong and the fix.
*/}}
{{- define "valkey.validateInputs" -}}
{{- $v := .Values -}}
{{- $r := dict "msgs" list -}}
{{- /* silently ignored */ -}}
{{- if and $v.tls.existingSecret (not $v.tls.enabled) -}}
{{- $_ := set $r "msgs" (append $r.msgs (printf "tls.existingSecret: %q is set but tls.enabled is false, so the Secret is never mounted and clients, replicas and Sentinels speak plaintext; set tls.enabled: true, or remove tls.existingSecret" $v.tls.existingSecret)) -}}
{{- end -}}
{{- $defaults := include "valkey.inputDefaults" . | fromJson -}}
{{- if not $v.backup.enabled -}}
{{- include "valkey.checkUnused" (dict "r" $r "field" "backup" "values" (omit $v.backup "enabled") "defaults" $defaults.backup "why" "while backup.enabled is false, so no CronJob takes a backup and the chart ignores %[1]s; set backup.enabled: true, or remove %[1]s") -}}
{{- end -}}
{{- if not (include "valkey.sizing" . | fromJson).persistence -}}
{{- include "valkey.checkUnused" (dict "r" $r "field" "persistence" "values" (omit $v.persistence "enabled" "size" "storageClass" "existingClaims") "defaults" $defaults.persistence "why" (printf "while persistence is off (plan %s), so no volume claim is created and the chart ignores %%[1]s; set persistence.enabled: true, or remove %%[1]s" $v.plan)) -}}
{{- end -}}
{{- if not $v.migrateFrom.host -}}
{{- include "valkey.checkUnused" (dict "r" $r "field" "migrateFrom" "values" (omit $v.migrateFrom "host" "switch") "defaults" $defaults.migrateFrom "why" "while migrateFrom.host is empty, so nothing is migrated and the chart ignores %[1]s; set migrateFrom.host to the source primary (e.g. old-redis-master.apps.svc.cluster.local), or remove %[1]s") -}}
{{- end -}}
{{- /* a limit that undoes a protection */ -}}
{{- if hasKey $v.config "maxmemory-clients" -}}
{{- if regexMatch "^0+(\\.0*)?(b|k|kb|m|mb|g|gb|%)?$" (lower (toString (get $v.config "maxmemory-clients"))) -}}
{{- $_ := set $r "msgs" (append $r.msgs "config.maxmemory-clients: 0 turns off the limit on client buffers, so one connection that pipelines and never reads its replies grows the server until the kubelet OOM-kills it; remove it (the chart sets half the room between maxmemory and resources.limits.memory) or set a size such as 64mb") -}}
{{- end -}}
{{- end -}}
{{- range $name, $svc := dict "service.primary" $v.service.primary "service.replicas" $v.service.replicas -}}
{{- include "valkey.checkOpenLoadBalancer" (dict "r" $r "field" $name "svc" $svc "tls" $v.tls.enabled) -}}
{{- end -}}
{{- /* annotations other tools act on */ -}}
{{- include "valkey.checkToolAnnotations" (dict "r" $r "maps" (dict "commonAnnotations" $v.commonAnnotations "podAnnotations" $v.podAnnotations "service.primary.annotations" $v.service.primary.annotations "service.replicas.annotations" $v.service.replicas.annotations "service.headless.annotations" $v.service.headless.annotations "serviceAccount.annotations" $v.serviceAccount.annotations)) -}}
{{- /* scheduling that can never be met */ -}}
{{- range $field, $a := dict "affinity" $v.affinity "controller.affinity" $v.controller.affinity -}}
{{- include "valkey.checkNodeSelectorTerms" (dict "r" $r "field" $field "affinity" $a) -}}
{{- end -}}
{{- /* sizes without a unit */ -}}
{{- range $field, $q := dict "resources.limits.memory" $v.resources.limits.memory "maxmemory" $v.maxmemory "persistence.size" $v.persistence.size "metrics.resources.memory" $v.metrics.resources.memory "controller.resources.memory" $v.controller.resources.memory "controller.resources.requests.memory" $v.controller.resources.requests.memory "dnsCache.resources.memory" $v.dnsCache.resources.memory -}}
{{- include "valkey.checkSizeUnit" (dict "r" $r "field" $field "value" $q) -}}
{{- end -}}
{{- /* users that can do nothing with what they were given */ -}}
{{- range $i, $u := $v.users -}}
{{- $access := $u.access | default "readonly" -}}
{{- if and (has $access (list "readwrite" "full")) (not $u.keys) (not $u.channels) -}}
{{- $_ := set $r "msgs" (append $r.msgs (printf "users[%d].keys: empty and no channels, so user %s (access %s) may write no key and use no channel; list its key patterns (e.g. %s:*), or [\"*\"] for every key" $i $u.name $access $u.name)) -}}
{{- end -}}
{{- if and $u.channels (eq $access "readonly") -}}
{{- $_ := set $r "msgs" (append $r.msgs (printf "users[%d].channels: access readonly has no Pub/Sub commands (SUBSCRIBE, PUBLISH), so user %s could use none of its channels; set access: readwrite or full, or remove channels" $i $u.name)) -}}
{{- end -}}
{{- end -}}
{{- if $r.msgs -}}
{{- fail (join "\n" $r.msgs) -}}
{{- end -}}
{{- end -}}

{{/*
The chart's defaults of the sections whose other keys only matter when one key turns them on (persistence.enabled,
backup.enabled, migrateFrom.host): a value that differs from these while the section is off is ignored, so it is
refused (valkey.checkUnused). persistence.size, storageClass and existingClaims have their own refusals.
The same as values.yaml (templates-tests TestInputDefaultsMatchValues).
*/}}
{{- define "valkey.inputDefaults" -}}
{"persistence": {"accessModes": ["ReadWriteOnce"], "whenDeleted": "Retain", "whenScaled": "Retain", "labels": {}, "annotations": {}},
 "backup": {"schedule": "0 3 * * *", "retention": 7, "persistentVolumeClaim": "", "s3": {"endpoint": "", "bucket": "", "prefix": "", "region": "", "forcePathStyle": false, "existingSecret": "", "caSecret": ""}, "overdueSeconds": 129600, "activeDeadlineSeconds": 3600, "resources": {"limits": {"cpu": "250m", "memory": "128Mi"}}},
 "migrateFrom": {"port": 6379, "username": "", "existingSecret": "", "secretKey": "", "egressTo": []}}
{{- end -}}

