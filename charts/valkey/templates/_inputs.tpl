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

{{/*
A LoadBalancer Service without loadBalancerSourceRanges (or with 0.0.0.0/0 or ::/0) takes connections from
anywhere its load balancer is reachable; without TLS the passwords and the data cross that network in the clear.
Appends its refusal to .r.msgs. Call with (dict "r" r "field" f "svc" <service values> "tls" bool).
*/}}
{{- define "valkey.checkOpenLoadBalancer" -}}
{{- if and (eq (toString .svc.type) "LoadBalancer") (not .tls) -}}
{{- $ranges := .svc.loadBalancerSourceRanges | default list -}}
{{- if or (not $ranges) (has "0.0.0.0/0" $ranges) (has "::/0" $ranges) -}}
{{- $_ := set .r "msgs" (append .r.msgs (printf "%s.loadBalancerSourceRanges: %s, so the LoadBalancer takes connections from any address, and without tls.enabled passwords and data cross that network in plaintext; list your clients' CIDRs, or set tls.enabled: true" .field (ternary "empty" "0.0.0.0/0 or ::/0" (not $ranges)))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Annotation keys other tools act on: helm.sh/hook* turns an object into a Helm hook (created out of order, deleted
by its policy), argocd.argoproj.io/hook* into an Argo CD hook (not synced as part of the release); in
podAnnotations, valkey.io/ keys are the chart's own (config-hash rolls the pods). Appends its refusals to .r.msgs. Call with (dict "r" r "maps" {field: map}).
*/}}
{{- define "valkey.checkToolAnnotations" -}}
{{- range $field, $m := .maps -}}
{{- range $k, $_ := $m -}}
{{- if or (hasPrefix "helm.sh/hook" $k) (hasPrefix "argocd.argoproj.io/hook" $k) -}}
{{- $_ := set $.r "msgs" (append $.r.msgs (printf "%s.%s: makes the object %s hook, so it is created outside the release's normal apply (and may be deleted by the hook policy); remove it" $field $k (ternary "a Helm" "an Argo CD" (hasPrefix "helm.sh/" $k)))) -}}
{{- end -}}
{{- if and (eq $field "podAnnotations") (or (hasPrefix "valkey.io/" $k) (hasPrefix "helm.sh/" $k)) -}}
{{- $_ := set $.r "msgs" (append $.r.msgs (printf "podAnnotations.%s: the prefixes valkey.io/ and helm.sh/ are the chart's (valkey.io/config-hash decides when the pods restart); choose another annotation key (e.g. example.com/owner)" $k)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Required node affinity with no term, or a term with neither matchExpressions nor matchFields: the API server
refuses the first (mid-install), the second matches no node (pods stay Pending). Appends its refusals to .r.msgs. Call with (dict "r" r "field" f "affinity" a).
*/}}
{{- define "valkey.checkNodeSelectorTerms" -}}
{{- $na := (.affinity | default dict).nodeAffinity | default dict -}}
{{- with get $na "requiredDuringSchedulingIgnoredDuringExecution" -}}
{{- $terms := .nodeSelectorTerms | default list -}}
{{- if not $terms -}}
{{- $_ := set $.r "msgs" (append $.r.msgs (printf "%s.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: empty, which the API server refuses (at least one term); list a term such as {matchExpressions: [{key: pool, operator: In, values: [cache]}]}, or remove requiredDuringSchedulingIgnoredDuringExecution" $.field)) -}}
{{- end -}}
{{- range $i, $t := $terms -}}
{{- if not (or (get ($t | default dict) "matchExpressions") (get ($t | default dict) "matchFields")) -}}
{{- $_ := set $.r "msgs" (append $.r.msgs (printf "%s.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d]: empty, and an empty term matches no node, so the pods would stay Pending; give it matchExpressions or matchFields, or remove it" $.field $i)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A memory size written as a bare number is bytes: "128" is 128 bytes, never what was meant. A bare number of at
least 1 MiB (1048576) is taken as a deliberate byte count. Appends its refusal to .r.msgs. Call with (dict "r" r "field" f "value" q).
*/}}
{{- define "valkey.checkSizeUnit" -}}
{{- if and .value (regexMatch "^[0-9]+(\\.[0-9]+)?$" (toString .value)) (lt (float64 (toString .value)) 1048576.0) -}}
{{- $_ := set .r "msgs" (append .r.msgs (printf "%s: %v has no unit, so it means %v bytes; write the unit, such as %vMi" .field .value .value .value)) -}}
{{- end -}}
{{- end -}}

{{/*
A selector given with matchLabels: {} and no matchExpressions is not "none": Kubernetes reads an empty label
selector as every pod (or namespace), so a NetworkPolicy peer built from it admits them all. {} (no field at all)
keeps the chart's meaning of the field. Not for a selector whose empty form the controller reads as none
("flag": valkeySelector). Called from valkey.checkSelector.
*/}}
{{- define "valkey.checkSelectorSelectsSome" -}}
{{- $sel := .selector | default dict -}}
{{- if and (not .flag) $sel (not (get $sel "matchLabels")) (not (get $sel "matchExpressions")) -}}
{{- fail (printf "%s: matchLabels and matchExpressions are both empty, and Kubernetes reads an empty selector as every pod and namespace; list at least one label, or set %s: {} (nothing given)" .field .field) -}}
{{- end -}}
{{- end -}}
