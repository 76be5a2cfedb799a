{{/*
Names, labels, derived settings and validate* helpers of charts/valkey.
Numbers from values arrive as float64: always pass them through `int` before printing.
*/}}

{{/*
Full name F, truncated to 63 characters. validateNames refuses more than 40, because F-<i> must stay a
valid StatefulSet name (revision hash label) and F-replicas a valid Service name.
*/}}
{{- define "valkey.fullname" -}}
{{- include "valkey.validate" . -}}
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

{{/* Labels of data pod i (selector of StatefulSet F-<i>); call with (dict "ctx" $ "index" i). */}}
{{- define "valkey.nodeSelectorLabels" -}}
{{ include "valkey.selectorLabels" .ctx }}
app.kubernetes.io/component: data
valkey.io/instance: {{ include "valkey.fullname" .ctx }}
valkey.io/node-index: {{ .index | int | toString | quote }}
{{- end -}}

{{/*
Labels of the pod template of data node i: commonLabels and podLabels (podLabels win), the selector labels, and
the chart's version labels. helm.sh/chart and app.kubernetes.io/version change with a chart upgrade, so the
controller rolls the data pods after one (a planned roll: replicas first, then a failover). Call with
(dict "ctx" $ "index" i).
*/}}
{{- define "valkey.podLabels" -}}
{{- $ctx := .ctx -}}
{{- with merge (dict) ($ctx.Values.podLabels | default dict) ($ctx.Values.commonLabels | default dict) }}{{ toYaml . }}
{{ end -}}
{{ include "valkey.nodeSelectorLabels" . }}
helm.sh/chart: {{ include "valkey.chart" $ctx }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
app.kubernetes.io/part-of: valkey-ha
{{- end -}}

{{/* ServiceAccount of the data pods: serviceAccount.name, else F when the chart creates it, else default. */}}
{{- define "valkey.dataServiceAccount" -}}
{{- .Values.serviceAccount.name | default (ternary (include "valkey.fullname" .) "default" .Values.serviceAccount.create) -}}
{{- end -}}

{{- define "valkey.serverImage" -}}
{{- $repo := .Values.image.repository | default (ternary "redis" "valkey/valkey" (eq .Values.engine "redis")) -}}
{{- include "valkey.imageRef" (dict "ctx" . "image" .Values.image "repository" $repo "tag" (include "valkey.serverTag" .)) -}}
{{- end -}}

{{- define "valkey.serverTag" -}}
{{- .Values.image.tag | default (ternary "7.0" "9.1" (eq .Values.engine "redis")) | toString -}}
{{- end -}}

{{- define "valkey.serverBin" -}}
{{- ternary "redis-server" "valkey-server" (eq .Values.engine "redis") -}}
{{- end -}}

{{- define "valkey.cliBin" -}}
{{- ternary "redis-cli" "valkey-cli" (eq .Values.engine "redis") -}}
{{- end -}}

{{- define "valkey.monitorName" -}}
{{- .Values.sentinel.monitorName | default (include "valkey.fullname" .) -}}
{{- end -}}

{{/* Number of data nodes: the primary plus the replicas. */}}
{{- define "valkey.nodeCount" -}}
{{- add1 (int .Values.replicas) -}}
{{- end -}}

{{/* FQDN of node i; call with (dict "ctx" $ "index" i). */}}
{{- define "valkey.nodeFQDN" -}}
{{- $F := include "valkey.fullname" .ctx -}}
{{- printf "%s-%d-0.%s-%d.%s.svc.%s" $F (int .index) $F (int .index) .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{/* Namespace of the Sentinel release named by sentinel.controllerServiceAccount (the grant's namespace). */}}
{{- define "valkey.sentinelNamespace" -}}
{{- .Values.sentinel.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* Namespace of the shared instance controller (controller.mode shared): controller.shared.namespace, else the
quorum's (sentinel.namespace, else this release's), where the valkey-sentinel release that runs it lives. */}}
{{- define "valkey.sharedNamespace" -}}
{{- .Values.controller.shared.namespace | default (include "valkey.sentinelNamespace" .) -}}
{{- end -}}

{{/* ServiceAccount of the shared instance controller: controller.shared.serviceAccount, else
S-instance-controller of the quorum this instance names (sentinel.release). */}}
{{- define "valkey.sharedServiceAccount" -}}
{{- .Values.controller.shared.serviceAccount | default (printf "%s-instance-controller" (include "valkey.sentinelRelease" .)) -}}
{{- end -}}

{{/* true when a shared instance controller serves this instance (controller.enabled and mode shared). */}}
{{- define "valkey.shared" -}}
{{- and .Values.controller.enabled (eq .Values.controller.mode "shared") -}}
{{- end -}}

{{/*
The instance controller's rules for this instance (issue 19: writes and Secret reads bound to this instance's
objects by name; list/watch cannot be, so the informers read every pod and ConfigMap of the namespace). The
same rules go to the dedicated controller (Role F-controller, plus its Lease) and to the shared one (Role
F-shared-controller), so both modes hold exactly the same rights over the instance.
*/}}
{{- define "valkey.controllerRules" -}}
{{- $F := include "valkey.fullname" . -}}
# observe data pods
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
# patch valkey.io/role labels, delete a pod in a planned roll: this instance's data pods only
- apiGroups: [""]
  resources: ["pods"]
  resourceNames:
    {{- range $i := until (int (include "valkey.nodeCount" .)) }}
    - {{ printf "%s-%d-0" $F $i | quote }}
    {{- end }}
  verbs: ["patch", "delete"]
# read the descriptor and F-sentinels
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
# write F-status (create cannot be bound to a name)
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: [{{ printf "%s-status" $F | quote }}]
  verbs: ["update", "patch"]
# compare pod revisions with the StatefulSets (planned rolls)
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch"]
# the Secrets it reads: system passwords (_operator), the ACL desired state and, when monitored, the
# _instance password of the quorum sentinel.release names (valkey.quorumSecret) and, for a quorum of this
# namespace, its _controller password (valkey.quorumControllerSecret: SENTINEL RESET; granted to nobody else
# in this chart)
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ include "valkey.systemSecretName" . | quote }}, {{ printf "%s-acl" $F | quote }}{{ if eq .Values.failover.mode "Sentinel" }}, {{ include "valkey.quorumSecret" . | quote }}{{ if ne (include "valkey.crossNamespaceQuorum" .) "true" }}, {{ include "valkey.quorumControllerSecret" . | quote }}{{ end }}{{ end }}]
  verbs: ["get"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/* Secret holding the system passwords (mounted at /etc/valkey-ha/system). */}}
{{- define "valkey.systemSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-system" (include "valkey.fullname" .)) -}}
{{- end -}}

{{/*
Quantity (Kubernetes style: 256Mi, 1Gi, 768M, 1.5Gi, 1000000) to bytes, printed as an integer.
The schema restricts the input to this grammar.
*/}}
{{- define "valkey.bytes" -}}
{{- $q := toString . -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $suffix := trimPrefix $num $q -}}
{{- $mult := dict "" 1.0 "k" 1e3 "K" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 -}}
{{- printf "%.0f" (mulf (float64 $num) (get $mult $suffix)) -}}
{{- end -}}

{{/*
valkey.given renders a value the user set as a string ("" when unset: null or missing), so a number 0 counts as
set ("0", refused by the checks) where `default` and `with` would take it for unset and use the plan's.
*/}}
{{- define "valkey.given" -}}
{{- if not (kindIs "invalid" .) -}}{{- toString . -}}{{- end -}}
{{- end -}}

{{/*
Effective sizing: the plan preset (seed 003's table), overridden by explicit values. Returns JSON.
maxmemory about 70% of the memory limit: the fork of an RDB/AOF rewrite needs copy-on-write headroom.
*/}}
{{- define "valkey.sizing" -}}
{{- include "valkey.validate" . -}}
{{- $presets := dict
  "starter" (dict "cpu" "100m" "memory" "256Mi" "maxmemory" "192M" "maxclients" 100 "persistence" false "size" "1Gi")
  "casual" (dict "cpu" "250m" "memory" "1Gi" "maxmemory" "768M" "maxclients" 500 "persistence" true "size" "10Gi")
  "pro" (dict "cpu" "1000m" "memory" "4Gi" "maxmemory" "3000M" "maxclients" 2000 "persistence" true "size" "20Gi")
  "custom" (dict "cpu" "" "memory" "" "maxmemory" "" "maxclients" 10000 "persistence" false "size" "")
-}}
{{- $p := get $presets .Values.plan -}}
{{- $persistence := $p.persistence -}}
{{- if not (kindIs "invalid" .Values.persistence.enabled) -}}
{{- $persistence = .Values.persistence.enabled -}}
{{- end -}}
{{- $s := dict
  "cpu" (include "valkey.given" .Values.resources.limits.cpu | default $p.cpu)
  "memory" (toString (.Values.resources.limits.memory | default $p.memory))
  "maxmemory" (toString (.Values.maxmemory | default $p.maxmemory))
  "maxclients" (int (.Values.maxclients | default $p.maxclients))
  "persistence" $persistence
  "size" (toString (.Values.persistence.size | default $p.size | default "1Gi"))
-}}
{{- toJson $s -}}
{{- end -}}

{{/*
Server maxclients: the customers' connections (maxclients, or the plan's) plus headroom for the system users,
32 + 2 per replica (replication links, two links per Sentinel, the controller, the probes, the exporter, the
helm test), so customers using their whole allowance never lock the readiness probe out (issue 19).
*/}}
{{- define "valkey.maxclients" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- add (int $s.maxclients) 32 (mul 2 (int .Values.replicas)) -}}
{{- end -}}

{{/*
maxmemory-clients in bytes: half the room between maxmemory and resources.limits.memory (the other half is for
the replication backlog, the process and the fork of a rewrite). Unread replies and queries of every client
count; without it one connection that pipelines and never reads grows the server until the kubelet kills it.
*/}}
{{- define "valkey.maxmemoryClients" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- printf "%.0f" (divf (subf (float64 (include "valkey.bytes" $s.memory)) (float64 (include "valkey.bytes" $s.maxmemory))) 2) -}}
{{- end -}}

{{/*
proto-max-bulk-len in bytes: an eighth of the room between maxmemory and resources.limits.memory (issue 25). The
server checks maxmemory before a command, so one command may grow one value past it: SETBIT k 4294967295 1 made a
node allocate 512 MB (the default), past the starter plan's 256Mi. SETRANGE, SETBIT, BITFIELD and APPEND refuse a
result longer than this on valkey 9.1, 8.0 and redis 7.0, and no bulk argument may be longer. With every client
buffer full (maxmemory-clients, half the room) one such value (rounded up by the allocator, by at most a quarter)
and the process still fit in the rest. config.proto-max-bulk-len may raise it to a quarter of the room, which holds
while client buffers are not full at the same time.
*/}}
{{- define "valkey.protoMaxBulkLen" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- printf "%.0f" (floor (divf (subf (float64 (include "valkey.bytes" $s.memory)) (float64 (include "valkey.bytes" $s.maxmemory))) 8)) -}}
{{- end -}}

{{/*
valkey.conf: server settings only (hashed into valkey.io/config-hash). No users, no passwords, no announce
settings: the bootstrap appends replica-announce-ip, masteruser, masterauth and replicaof to a writable copy.
*/}}
{{- define "valkey.serverConfig" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
# Rendered by charts/valkey. Server settings only; ACL users live in /etc/valkey-ha/acl/users.acl.
# The bootstrap copies this file to /etc/valkey-ha/runtime/valkey.conf and appends replica-announce-ip,
# masteruser, masterauth and (on a replica) replicaof.
{{- if .Values.tls.enabled }}
port 0
tls-port {{ int .Values.port }}
tls-cert-file /etc/valkey-ha/tls/tls.crt
tls-key-file /etc/valkey-ha/tls/tls.key
tls-ca-cert-file /etc/valkey-ha/tls/ca.crt
tls-replication yes
tls-auth-clients {{ .Values.tls.authClients }}
{{- else }}
port {{ int .Values.port }}
{{- end }}
bind * -::*
protected-mode no
dir /data
aclfile /etc/valkey-ha/acl/users.acl
maxmemory {{ include "valkey.bytes" $s.maxmemory }}
maxmemory-policy {{ .Values.maxmemoryPolicy }}
maxclients {{ include "valkey.maxclients" . }}
# all clients' buffers together (queries and unread replies), half the room between maxmemory and the memory
# limit: above it the server closes the largest client, so connections that pipeline and never read cannot grow
# the server past its memory limit (config.maxmemory-clients, set after this line, wins)
maxmemory-clients {{ include "valkey.maxmemoryClients" . }}
# the largest single value (a string, or what SETRANGE, SETBIT, BITFIELD and APPEND may grow one to): an eighth of
# the same room, since maxmemory is checked before a command and one SETBIT could otherwise add 512 MB at once
# (issue 25; config.proto-max-bulk-len, set after this line, wins and may take at most a quarter of the room)
proto-max-bulk-len {{ include "valkey.protoMaxBulkLen" . }}
{{- if $s.persistence }}
appendonly yes
appendfsync everysec
{{- else }}
appendonly no
save ""
{{- end }}
repl-diskless-sync yes
# a full resync starts at once (Valkey's default waits 5 s for more replicas to share it): after a failover, a
# replica that took writes the new primary never had resyncs in full, and when writes need a replica (minReplicasToWrite) the new
# primary refuses writes (NOREPLICAS) until one has (issue 30: 5.3 s after a plain SENTINEL FAILOVER with the
# default, 0.1 s with 0; config.repl-diskless-sync-delay, set after this line, wins)
repl-diskless-sync-delay 0
{{- $minReplicas := int (include "valkey.minReplicasToWrite" .) }}
{{- if gt $minReplicas 0 }}
min-replicas-to-write {{ $minReplicas }}
min-replicas-max-lag {{ int .Values.minReplicasMaxLag }}
{{- end }}
{{- include "valkey.loadDirectives" . -}}
{{- $directives := get . "_valkeyHADirectives" -}}
{{- if hasKey $directives.server "sanitize-dump-payload" }}
# deep-check RESTORE payloads of clients (not the primary's stream or the AOF): a corrupt listpack crashed valkey 8.0
# and redis 7.0 on its first read, and AOF and replication carried it on (issue 25); valkey 9 always checks
sanitize-dump-payload clients
{{- end }}
{{- range $k := keys .Values.config | sortAlpha }}
{{ include "valkey.confLine" (dict "name" $k "value" (get $.Values.config $k) "d" (get $directives.server $k)) }}
{{- end }}
{{- end -}}

{{/*
System users: one table, user -> rules (valkey 9.1 and 8.0, redis 7.0). internal/valkeyapi/acl holds the same table; a test compares them.
  _operator     controller: observe (INFO, ROLE, CLIENT LIST), repair (REPLICAOF), CONFIG REWRITE after it,
                live ACL sync (ACL SETUSER/DELUSER/USERS/GETUSER/WHOAMI/LOG, CLIENT KILL USER to close the
                sessions of a revoked password), `test` writes a marker key under
                __valkey-ha:*, WAIT, and subscribes to Sentinel hello channels.
  _replication  replicas authenticate to the primary with it (masteruser): PSYNC, REPLCONF, PING only.
  _sentinel     exactly what Sentinel sends (Sentinel docs, "ACL"), plus FAILOVER for Valkey 9.
  _probe        readiness probe (valkey-cli with REDISCLI_AUTH): PING and INFO only.
  _exporter     metrics: stats only, no key access (no ~pattern), no CONFIG at all (GET would read masterauth;
                the exporter runs with --config-command=-).
  _backup       backup CronJob: INFO to find a replica, then `valkey-cli --rdb` (REPLCONF, SYNC) against it;
                its password lives in F-backup-auth, mounted only into the backup Job.
*/}}
{{- define "valkey.systemUserRules" -}}
{{- toJson (list
  (list "_operator" "~__valkey-ha:* +hello +client|setname +client|list +ping +info +role +replicaof +failover +client|pause +client|unpause +config|get +config|rewrite +acl|setuser +acl|deluser +acl|users +acl|getuser +client|kill +acl|whoami +acl|log +get +set +del +wait +dbsize")
  (list "_replication" "+psync +replconf +ping")
  (list "_sentinel" "&__sentinel__:hello +multi +exec +ping +info +role +replicaof +slaveof +config|rewrite +client|setname +client|kill +script|kill +publish +subscribe +failover")
  (list "_probe" "+ping +info")
  (list "_exporter" "+hello +ping +info +client|list +slowlog|get +slowlog|len +latency|latest")
  (list "_backup" "+ping +info +replconf +sync")
) -}}
{{- end -}}

{{/*
Customer access presets: rules after `nocommands` (internal/valkeyapi/acl.Presets; a test compares them). `full` is
+@all without @admin: no ACL, CONFIG (GET would read masterauth), CLIENT KILL/PAUSE/LIST, replication,
SHUTDOWN, DEBUG, MODULE, MONITOR, SAVE, SLOWLOG or LATENCY; and no RESTORE (an LZF-compressed payload of 3.4 MB
inflated to a 300 MB value in one command, issue 25).
*/}}
{{- define "valkey.accessPreset" -}}
{{- if eq . "readonly" -}}
-@all +@read +@connection -@admin +info +role
{{- else if eq . "readwrite" -}}
-@all +@read +@write +@connection +@transaction +@pubsub -@admin -@dangerous +info +role {{ include "valkey.noFunctionRules" . }}
{{- else -}}
+@all -@admin +role -restore -restore-asking {{ include "valkey.noFunctionRules" . }}
{{- end -}}
{{- end -}}

{{/*
Subtracted from readwrite and full (internal/valkeyapi/acl.NoFunctionRules, issue 25): libraries are server-wide and FCALL
runs a library's code with the caller's key rights, so whoever may FUNCTION LOAD REPLACE runs code as everyone who
FCALLs it. Only users[].functions: true (a trust grant, internal/valkeyapi/acl.FunctionRules: +function) manages libraries.
*/}}
{{- define "valkey.noFunctionRules" -}}
-function|load -function|delete -function|flush -function|restore -function|dump -function|list
{{- end -}}

{{/*
Subtracted from a customer whose keys are not exactly ["*"] (internal/valkeyapi/acl.RestrictedKeyRules): commands that
list, pick or drop keys whatever the patterns, and that drop the script and function libraries of everyone.
*/}}
{{- define "valkey.restrictedKeyRules" -}}
-keys -randomkey -flushall -flushdb -swapdb -script|flush -function|flush -function|delete -function|restore
{{- end -}}

{{/*
The credentials spec (JSON; internal/chartjobs/credentials.Spec, docs/contract.md): every ACL user with its rules after
the password hashes, and where its password lives; no password and no hash. The credentials Job
(`valkey-sentinel-ctl credentials`) creates the generated Secrets once, rotates, and writes F-acl from it at run
time, so nothing rendered depends on what the cluster holds (issue 15: no render-time lookup, two offline renders
are identical).
*/}}
{{- define "valkey.aclSpec" -}}
{{- include "valkey.validate" . -}}
{{- $F := include "valkey.fullname" . -}}
{{- $users := list -}}
{{- range $row := include "valkey.systemUserRules" . | fromJsonArray -}}
{{- $users = append $users (dict "name" (index $row 0) "system" true "rules" (printf "resetkeys resetchannels nocommands %s" (index $row 1))) -}}
{{- end -}}
{{- range $i, $u := .Values.users -}}
{{- $keys := list -}}
{{- range $u.keys | default list -}}{{- $keys = append $keys (printf "~%s" .) -}}{{- end -}}
{{- $chans := list -}}
{{- range $u.channels | default list -}}{{- $chans = append $chans (printf "&%s" .) -}}{{- end -}}
{{- $rules := list "resetkeys" -}}
{{- $rules = concat $rules $keys (list "resetchannels") $chans (list "nocommands" (include "valkey.accessPreset" ($u.access | default "readonly"))) -}}
{{- if not (and (eq (len ($u.keys | default list)) 1) (eq (index $u.keys 0) "*")) -}}
{{- $rules = append $rules (include "valkey.restrictedKeyRules" .) -}}
{{- end -}}
{{- if $u.functions -}}
{{- $rules = append $rules "+function" -}}
{{- end -}}
{{- $e := dict "name" $u.name "system" false "rules" (join " " $rules) "field" (printf "users[%d]" $i) -}}
{{- if $u.passwordSecret -}}
{{- $_ := set $e "secret" $u.passwordSecret.name -}}
{{- $_ := set $e "key" $u.passwordSecret.key -}}
{{- else -}}
{{- $rot := $u.rotation | default dict -}}
{{- $_ := set $e "secret" (printf "%s-user-%s" $F $u.name) -}}
{{- $_ := set $e "key" "password" -}}
{{- $_ := set $e "generate" true -}}
{{- $_ := set $e "generation" (int ($rot.generation | default 0)) -}}
{{- $_ := set $e "previousValidUntil" (toString ($rot.previousValidUntil | default "")) -}}
{{- end -}}
{{- $users = append $users $e -}}
{{- end -}}
{{- $spec := dict "version" "1" "instance" $F "owner" (printf "%s-instance" $F)
  "systemSecret" (dict "name" (include "valkey.systemSecretName" .) "generate" (not .Values.auth.existingSecret))
  "sentinelSecret" (printf "%s-sentinel-auth" $F) "backupSecret" (printf "%s-backup-auth" $F) "aclSecret" (printf "%s-acl" $F) "users" $users -}}
{{- if and (eq .Values.failover.mode "Sentinel") (eq (include "valkey.crossNamespaceQuorum" .) "true") -}}
{{- $_ := set $spec "quorumSecret" (include "valkey.quorumSecret" .) -}}
{{- end -}}
{{- toJson $spec -}}
{{- end -}}

{{/* Secrets the credentials Job reads: the system, Sentinel and ACL Secrets and every customer's (JSON list). */}}
{{- define "valkey.credentialSecrets" -}}
{{- $F := include "valkey.fullname" . -}}
{{- $out := list (include "valkey.systemSecretName" .) (printf "%s-sentinel-auth" $F) (printf "%s-backup-auth" $F) (printf "%s-acl" $F) -}}
{{- if and (eq .Values.failover.mode "Sentinel") (eq (include "valkey.crossNamespaceQuorum" .) "true") -}}
{{- $out = append $out (include "valkey.quorumSecret" .) -}}
{{- end -}}
{{- range $u := .Values.users -}}
{{- $name := printf "%s-user-%s" $F $u.name -}}
{{- with $u.passwordSecret -}}{{- $name = .name -}}{{- end -}}
{{- $out = append $out $name -}}
{{- end -}}
{{- toJson (uniq $out) -}}
{{- end -}}

{{/* ---------------------------------------------------------------- validation */}}

{{/*
Values whose default is not null, as dotted paths: every leaf of values.yaml (a map or list default counts as
one leaf), except dnsConfig (null keeps the cluster's resolver settings, by design) and the keys inside the
pass-through maps sentinel.config and metrics.grafanaDashboard.labels (null drops one). checkNulls refuses a
null on any of them; TestNullRefusedWhereTheChartHasADefault keeps this list equal to values.yaml.
*/}}
{{- define "valkey.defaultedValues" -}}
dnsCache.enabled dnsCache.resources.cpu dnsCache.resources.memory nameOverride fullnameOverride engine engineVersion global.imageRegistry image.registry image.repository
image.tag image.digest image.pullPolicy commonLabels commonAnnotations imagePullSecrets replicas port
clusterDomain updateStrategy plan resources.limits.cpu resources.limits.memory maxmemory maxmemoryPolicy
maxclients minReplicasMaxLag config persistence.size persistence.storageClass
persistence.accessModes persistence.whenDeleted persistence.whenScaled persistence.existingClaims
failover.mode sentinel.monitorName sentinel.config sentinel.release sentinel.controllerServiceAccount
instanceLabels auth.existingSecret users tls.enabled tls.existingSecret tls.authClients
tls.certManager.enabled tls.certManager.issuerRef.name tls.certManager.issuerRef.kind
tls.certManager.issuerRef.group tls.certManager.duration tls.certManager.renewBefore
tls.certManager.extraDnsNames service.primary.type service.primary.annotations
service.primary.loadBalancerSourceRanges service.primary.extraPorts service.replicas.type
service.replicas.annotations service.replicas.loadBalancerSourceRanges service.replicas.extraPorts
service.headless.annotations service.headless.extraPorts allowedSources networkPolicy.enabled
networkPolicy.allowSameNamespace networkPolicy.clientPodSelector networkPolicy.metricsNamespaceSelector
networkPolicy.dns.namespaceSelector networkPolicy.dns.podSelector
backup.enabled backup.schedule backup.retention backup.persistentVolumeClaim backup.overdueSeconds
backup.s3.endpoint backup.s3.bucket backup.s3.prefix backup.s3.region backup.s3.forcePathStyle
backup.s3.existingSecret backup.s3.caSecret
backup.activeDeadlineSeconds backup.resources.limits.cpu backup.resources.limits.memory
restoreFrom.persistentVolumeClaim restoreFrom.file restoreFrom.s3.endpoint restoreFrom.s3.bucket restoreFrom.s3.prefix
restoreFrom.s3.region restoreFrom.s3.forcePathStyle restoreFrom.s3.existingSecret restoreFrom.s3.caSecret
migrateFrom.host migrateFrom.port migrateFrom.username migrateFrom.existingSecret migrateFrom.secretKey
migrateFrom.switch migrateFrom.egressTo
pdb.enabled probes.startupFailureThreshold probes.livenessPeriodSeconds probes.livenessFailureThreshold
probes.readinessPeriodSeconds probes.readinessTimeoutSeconds metrics.enabled metrics.image.registry
metrics.image.repository metrics.image.tag metrics.image.digest metrics.image.pullPolicy metrics.port
metrics.resources.cpu metrics.resources.memory metrics.podMonitor.enabled metrics.podMonitor.interval
metrics.podMonitor.labels metrics.serviceMonitor.enabled metrics.serviceMonitor.interval
metrics.serviceMonitor.labels metrics.prometheusRule.enabled metrics.prometheusRule.labels
metrics.prometheusRule.alertLabels metrics.prometheusRule.maxLagBytes metrics.prometheusRule.memoryRatio
metrics.prometheusRule.memoryFullRatio
metrics.prometheusRule.rollHeldSeconds metrics.prometheusRule.notReconcilingSeconds
metrics.grafanaDashboard.enabled metrics.grafanaDashboard.labels metrics.grafanaDashboard.annotations
controller.closeDemotedClients controller.enabled controller.image.registry controller.image.repository controller.image.tag
controller.image.digest controller.image.pullPolicy controller.replicas controller.resources.cpu
controller.resources.memory controller.resources.requests.cpu controller.resources.requests.memory
controller.nodeSelector controller.tolerations controller.affinity controller.topologySpreadConstraints
controller.priorityClassName controller.serviceMonitor.enabled controller.serviceMonitor.interval
controller.serviceMonitor.labels podLabels podAnnotations affinity topologySpreadConstraints tolerations
nodeSelector priorityClassName terminationGracePeriodSeconds preStop.enabled extraEnvVars initContainers
sidecars extraVolumes extraVolumeMounts serviceAccount.create serviceAccount.name serviceAccount.annotations
controller.mode controller.shared.namespace controller.shared.serviceAccount sentinel.namespace
podSecurityContext.enabled podSecurityContext.runAsUser podSecurityContext.runAsGroup podSecurityContext.fsGroup
resources.requests.cpu resources.requests.memory service.primary.externalTrafficPolicy service.primary.loadBalancerIP
service.primary.loadBalancerClass service.primary.sessionAffinity service.primary.clusterIP
service.replicas.externalTrafficPolicy service.replicas.loadBalancerIP service.replicas.loadBalancerClass
service.replicas.sessionAffinity service.replicas.clusterIP service.primary.nodePort service.replicas.nodePort
metrics.prometheusRule.additionalRules
metrics.podMonitor.scrapeTimeout metrics.podMonitor.honorLabels metrics.podMonitor.relabelings metrics.podMonitor.metricRelabelings metrics.serviceMonitor.scrapeTimeout metrics.serviceMonitor.honorLabels metrics.serviceMonitor.relabelings metrics.serviceMonitor.metricRelabelings controller.serviceMonitor.scrapeTimeout controller.serviceMonitor.honorLabels controller.serviceMonitor.relabelings controller.serviceMonitor.metricRelabelings
networkPolicy.clientNamespaceSelector networkPolicy.extraIngress
persistence.labels persistence.annotations hostAliases schedulerName runtimeClassName
diagnosticMode.enabled diagnosticMode.command
externalAccess.enabled externalAccess.type externalAccess.host externalAccess.nodePorts externalAccess.loadBalancerIPs
externalAccess.loadBalancerSourceRanges externalAccess.loadBalancerClass externalAccess.externalTrafficPolicy externalAccess.annotations
{{- end -}}

{{/*
Every check, once per render and before any template reads a value: valkey.fullname, valkey.sizing and
valkey.credentials start with it (each template calls one of them first), so a refusal is always the message
written here rather than a failure further down. Each message names the field, the value and the fix.
templates/validate/values.yaml includes it (and then valkey.validateInputs, _inputs.tpl) before any other
template renders, so Helm reports every refusal there.
*/}}
{{- define "valkey.validate" -}}
{{- if not (hasKey . "_valkeyHAValidated") -}}
{{- $_ := set . "_valkeyHAValidated" true -}}
{{- include "valkey.checkKeys" (dict "v" .Values "n" (include "valkey.knownKeys" . | fromJson) "p" "") -}}
{{- include "valkey.checkNulls" (dict "values" .Values "paths" (regexSplit "\\s+" (trim (include "valkey.defaultedValues" .)) -1)) -}}
{{- include "valkey.validateFormats" . -}}
{{- include "valkey.validateNames" . -}}
{{- include "valkey.validateSizing" . -}}
{{- include "valkey.validateConfig" . -}}
{{- include "valkey.validateSentinel" . -}}
{{- include "valkey.validateStop" . -}}
{{- include "valkey.validateUsers" . -}}
{{- include "valkey.validateMigrate" . -}}
{{- include "valkey.validateTLS" . -}}
{{- include "valkey.validateLabels" . -}}
{{- include "valkey.validateCommon" . -}}
{{- include "valkey.validatePodExtras" . -}}
{{- include "valkey.validateController" . -}}
{{- include "valkey.validateKnobs" . -}}
{{- include "valkey.validateObservabilityKnobs" . -}}
{{- include "valkey.validateNetworkPolicyKnobs" . -}}
{{- include "valkey.validatePodKnobs" . -}}
{{- include "valkey.validateDiagnosticMode" . -}}
{{- include "valkey.validateImmutable" . -}}
{{- include "valkey.validateBackup" . -}}
{{- end -}}
{{- end -}}

{{/* backup and restoreFrom (README "Backups and restore"): what the CronJob and node 0's restore step need. */}}
{{- define "valkey.validateBackup" -}}
{{- $b := .Values.backup -}}
{{- if $b.enabled -}}
{{- if not (or $b.persistentVolumeClaim $b.s3.endpoint) -}}
{{- fail "backup.persistentVolumeClaim: required with backup.enabled unless backup.s3.endpoint is set; name an existing PVC of this namespace that the backups are written to, or an S3-compatible target (backup.s3)" -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "backup.enabled: needs replicas >= 1: a backup is taken from a replica, never from the primary" -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- fail "backup.enabled: not supported with tls.enabled yet (the snapshot client does not speak TLS); disable one of them" -}}
{{- end -}}
{{- with include "valkey.cronProblem" (toString $b.schedule) -}}
{{- fail (printf "backup.schedule: %q %s; write five fields, minute (0-59) hour (0-23) day of month (1-31) month (1-12 or jan-dec) day of week (0-6 or sun-sat), e.g. \"0 3 * * *\", or @daily" $b.schedule .) -}}
{{- end -}}
{{- end -}}
{{- include "valkey.validateS3" (dict "path" "backup.s3" "s3" $b.s3) -}}
{{- $r := .Values.restoreFrom -}}
{{- include "valkey.validateS3" (dict "path" "restoreFrom.s3" "s3" $r.s3) -}}
{{- if and $r.file (not $r.persistentVolumeClaim) (not $r.s3.endpoint) -}}
{{- fail "restoreFrom.persistentVolumeClaim: required with restoreFrom.file unless restoreFrom.s3.endpoint is set; name the PVC of this namespace that holds the backup, or the S3-compatible target (restoreFrom.s3)" -}}
{{- end -}}
{{- if and $r.persistentVolumeClaim $r.s3.endpoint -}}
{{- fail "restoreFrom: persistentVolumeClaim and s3.endpoint are both set; the backup comes from one of them, remove the other" -}}
{{- end -}}
{{- if and (or $r.persistentVolumeClaim $r.s3.endpoint) (not $r.file) -}}
{{- fail "restoreFrom.file: required with restoreFrom.persistentVolumeClaim or restoreFrom.s3; name the backup file (<fullname>-<timestamp>.rdb)" -}}
{{- end -}}
{{- if $r.file -}}
{{- if not (regexMatch "^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$" $r.file) -}}
{{- fail (printf "restoreFrom.file: %q is not a file name on the volume (letters, digits, '.', '_' and '-', no directories); for example cache-valkey-20261203T030000Z.rdb" $r.file) -}}
{{- end -}}
{{- if hasSuffix ".rdb.json" $r.file -}}
{{- fail (printf "restoreFrom.file: %q is the backup's metadata file; name the snapshot beside it, %s" $r.file (trimSuffix ".json" $r.file)) -}}
{{- end -}}
{{- if not (hasSuffix ".rdb" $r.file) -}}
{{- fail (printf "restoreFrom.file: %q names no RDB snapshot (a directory or another file cannot be restored); name the .rdb file itself, for example cache-valkey-20261203T030000Z.rdb" $r.file) -}}
{{- end -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- if not $s.persistence -}}
{{- fail "restoreFrom: needs persistence.enabled: without a volume, node 0 would lose the restored data on its next restart and load the backup again" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
valkey.cronProblem: what Kubernetes would refuse in a CronJob schedule (the string given), as a phrase such as
"has minute 61, above 59", or "" when it is valid. It mirrors the API server's check (robfig/cron v3
ParseStandard, and no TZ= or CRON_TZ= in the schedule): five fields of comma-separated items, each "*" or "?",
N, N-M or a name (months jan-dec, days sun-sat), with an optional /step; or @yearly, @annually, @monthly,
@weekly, @daily, @midnight, @hourly, "@every <duration>". templates-tests TestBackupScheduleAsKubernetes
compares the two on a table.
*/}}
{{- define "valkey.cronProblem" -}}
{{- $s := . -}}
{{- if contains "TZ" $s -}}
has a time zone (TZ= or CRON_TZ=), which a CronJob's schedule may not carry
{{- else if hasPrefix "@" $s -}}
{{- if not (or (has $s (list "@yearly" "@annually" "@monthly" "@weekly" "@daily" "@midnight" "@hourly")) (regexMatch "^@every ([0-9]*[.]?[0-9]+(ns|us|µs|ms|s|m|h))+$" $s)) -}}
is not one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly, @every <duration such as 6h>
{{- end -}}
{{- else if not (trim $s) -}}
is empty
{{- else if hasPrefix "@" (trim $s) -}}
has spaces before the @, so it is read as fields, not as a name such as @daily; remove them
{{- else -}}
{{- $fields := regexSplit "\\s+" (trim $s) -1 -}}
{{- if ne (len $fields) 5 -}}
has {{ len $fields }} field{{ if ne (len $fields) 1 }}s{{ end }}, not five{{ if eq (len $fields) 6 }} (a CronJob has no seconds field){{ end }}
{{- else -}}
{{- $spec := list (list "minute" 0 59 list) (list "hour" 0 23 list) (list "day of month" 1 31 list) (list "month" 1 12 (list "jan" "feb" "mar" "apr" "may" "jun" "jul" "aug" "sep" "oct" "nov" "dec")) (list "day of week" 0 6 (list "sun" "mon" "tue" "wed" "thu" "fri" "sat")) -}}
{{- $out := dict "p" "" -}}
{{- range $i, $f := $fields -}}
{{- $name := index $spec $i 0 -}}
{{- $min := index $spec $i 1 -}}
{{- $max := index $spec $i 2 -}}
{{- $names := index $spec $i 3 -}}
{{- range $item := splitList "," $f -}}
{{- if and $item (not $out.p) -}}
{{- $rs := splitList "/" $item -}}
{{- $lh := splitList "-" (first $rs) -}}
{{- $n := dict -}}
{{- if gt (len $rs) 2 -}}
{{- $_ := set $out "p" (printf "has %s %q with more than one /" $name $item) -}}
{{- else if has (first $lh) (list "*" "?") -}}
{{- $_ := set $n "start" $min -}}{{- $_ := set $n "end" $max -}}
{{- else if gt (len $lh) 2 -}}
{{- $_ := set $out "p" (printf "has %s %q with more than one -" $name $item) -}}
{{- else -}}
{{- range $j, $tok := $lh -}}
{{- $v := -1 -}}
{{- range $k, $nm := $names -}}{{- if eq (lower $tok) $nm -}}{{- $v = add $k $min -}}{{- end -}}{{- end -}}
{{- if and (lt (int $v) 0) (regexMatch "^[+]?[0-9]+$" $tok) -}}
{{- $v = ternary 1000000000 (atoi $tok) (gt (len (regexReplaceAll "^[+]?0*" $tok "")) 9) -}}
{{- end -}}
{{- if lt (int $v) 0 -}}
{{- $_ := set $out "p" (printf "has %s %q, which is not a number%s" $name $tok (ternary (printf " or a name (%s-%s)" (first $names) (last $names)) "" (gt (len $names) 0))) -}}
{{- end -}}
{{- $_ := set $n (ternary "start" "end" (eq $j 0)) $v -}}
{{- end -}}
{{- if not (hasKey $n "end") -}}{{- $_ := set $n "end" $n.start -}}{{- end -}}
{{- if and (eq (len $rs) 2) (eq (len $lh) 1) -}}{{- $_ := set $n "end" $max -}}{{- end -}}
{{- end -}}
{{- if and (not $out.p) (eq (len $rs) 2) -}}
{{- $step := last $rs -}}
{{- if not (regexMatch "^[+]?[0-9]+$" $step) -}}
{{- $_ := set $out "p" (printf "has %s step %q, which is not a number" $name $step) -}}
{{- else if or (eq (atoi $step) 0) (gt (len (regexReplaceAll "^[+]?0*" $step "")) 9) -}}
{{- $_ := set $out "p" (printf "has %s step %q; a step is 1 or more" $name $step) -}}
{{- end -}}
{{- end -}}
{{- if not $out.p -}}
{{- if lt (int $n.start) (int $min) -}}
{{- $_ := set $out "p" (printf "has %s %d, below %d" $name (int $n.start) (int $min)) -}}
{{- else if gt (int $n.end) (int $max) -}}
{{- $_ := set $out "p" (printf "has %s %d, above %d%s" $name (int $n.end) (int $max) (ternary " (Sunday is 0)" "" (eq $name "day of week"))) -}}
{{- else if gt (int $n.start) (int $n.end) -}}
{{- $_ := set $out "p" (printf "has %s range %q, whose start is after its end" $name (first $rs)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out.p -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* migrateFrom (README "Migration"): what node 0's boot step and the controller need to follow and switch. */}}
{{- define "valkey.validateMigrate" -}}
{{- $m := .Values.migrateFrom -}}
{{- if $m.host -}}
{{- if not (regexMatch "^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$" $m.host) -}}
{{- fail (printf "migrateFrom.host: %q is not a host name or IPv4 address (e.g. old-redis-master.apps.svc.cluster.local)%s" $m.host (ternary "; give the host alone: no scheme, the port goes into migrateFrom.port" "" (contains ":" $m.host))) -}}
{{- end -}}
{{- $F := include "valkey.fullname" . -}}
{{- if regexMatch (printf "^%[1]s(-primary|-replicas|-[0-9]+|-[0-9]+-0\\.%[1]s-[0-9]+)?(\\.%[2]s(\\..*)?)?$" $F .Release.Namespace) $m.host -}}
{{- fail (printf "migrateFrom.host: %q is this release's own Service or node (%s...); name the primary of the release you migrate from (e.g. old-redis-master.%s.svc.cluster.local)" $m.host $F .Release.Namespace) -}}
{{- end -}}
{{- if not $m.existingSecret -}}
{{- fail "migrateFrom.existingSecret: required with migrateFrom.host; name the Secret of this namespace with the source's password (Bitnami: <release>-redis)" -}}
{{- end -}}
{{- if not $m.secretKey -}}
{{- fail "migrateFrom.secretKey: required with migrateFrom.host; name the password's key in migrateFrom.existingSecret (Bitnami: redis-password)" -}}
{{- end -}}
{{- if not (and .Values.controller.enabled (eq .Values.controller.mode "dedicated")) -}}
{{- fail "migrateFrom: needs controller.enabled with controller.mode dedicated: the instance's own controller holds the topology while migrating and runs the switch" -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- fail "migrateFrom: not supported with tls.enabled yet (node 0 replicates from the source without TLS); migrate first, then enable TLS" -}}
{{- end -}}
{{- if .Values.restoreFrom.file -}}
{{- fail "migrateFrom: not with restoreFrom: node 0 takes its data from the source; drop one of them" -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not $m.egressTo) -}}
{{- fail "migrateFrom.egressTo: required with networkPolicy.enabled: name the source's pods (e.g. [{podSelector: {matchLabels: {app.kubernetes.io/instance: old}}}], the old release's name) so the NetworkPolicy lets node 0 reach them" -}}
{{- end -}}
{{- else if $m.switch -}}
{{- fail "migrateFrom.switch: needs migrateFrom.host (switch over from which source?)" -}}
{{- end -}}
{{- end -}}

{{/* An S3-compatible target (backup.s3, restoreFrom.s3): dict "path" (the values path, for the messages) "s3". */}}
{{- define "valkey.validateS3" -}}
{{- $p := .path -}}
{{- $s3 := .s3 -}}
{{- if $s3.endpoint -}}
{{- if not (regexMatch "^https?://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?/?$" $s3.endpoint) -}}
{{- fail (printf "%[1]s.endpoint: %[2]q is not a server URL: http:// or https://, a host name and an optional port, no path (the bucket goes in %[1]s.bucket); for example https://minio.storage.svc:9000" $p $s3.endpoint) -}}
{{- end -}}
{{- if not $s3.bucket -}}
{{- fail (printf "%[1]s.bucket: required with %[1]s.endpoint; name an existing bucket (the backup never creates one)" $p) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$" $s3.bucket) -}}
{{- fail (printf "%[1]s.bucket: %[2]q is not a bucket name (3 to 63 lowercase letters, digits, '.' and '-'); for example valkey-backups" $p $s3.bucket) -}}
{{- end -}}
{{- if not $s3.existingSecret -}}
{{- fail (printf "%[1]s.existingSecret: required with %[1]s.endpoint; name a Secret of this namespace with keys accessKeyId and secretAccessKey" $p) -}}
{{- end -}}
{{- if and $s3.prefix (not (regexMatch "^[A-Za-z0-9!_.*'()-][A-Za-z0-9!_.*'()/-]*$" $s3.prefix)) -}}
{{- fail (printf "%[1]s.prefix: %[2]q is not an object name prefix (letters, digits, '/', '!', '-', '_', '.', '*', quotes and parentheses; no leading '/'); for example valkey/cache" $p $s3.prefix) -}}
{{- end -}}
{{- if and $s3.caSecret (hasPrefix "http://" $s3.endpoint) -}}
{{- fail (printf "%[1]s.caSecret: set, but %[1]s.endpoint %[2]q is plain http, so the CA would be ignored; use https:// or remove %[1]s.caSecret" $p $s3.endpoint) -}}
{{- end -}}
{{- else if or $s3.bucket $s3.existingSecret $s3.prefix $s3.caSecret -}}
{{- fail (printf "%[1]s.endpoint: required with the other %[1]s values; set the server URL (https://host:port) or remove them" $p) -}}
{{- end -}}
{{- end -}}

{{/* Names, quantities and labels (the schema checks types; the words are here). */}}
{{- define "valkey.validateFormats" -}}
{{- $checks := list
  (list "nameOverride" .Values.nameOverride "dnsLabel" "valkey")
  (list "fullnameOverride" .Values.fullnameOverride "dnsLabel" "cache")
  (list "image.repository" .Values.image.repository "imageRepository" "valkey/valkey")
  (list "image.tag" .Values.image.tag "imageTag" "8.0")
  (list "clusterDomain" .Values.clusterDomain "dnsName" "cluster.local")
  (list "resources.limits.cpu" .Values.resources.limits.cpu "cpu" "250m")
  (list "resources.limits.memory" .Values.resources.limits.memory "quantity" "1Gi")
  (list "maxmemory" .Values.maxmemory "quantity" "768M")
  (list "persistence.size" .Values.persistence.size "quantity" "10Gi")
  (list "persistence.storageClass" .Values.persistence.storageClass "dnsName" "fast-ssd")
  (list "sentinel.release" .Values.sentinel.release "dnsLabel" "sentinel")
  (list "sentinel.controllerServiceAccount" .Values.sentinel.controllerServiceAccount "dnsName" "valkey-sentinel-controller")
  (list "sentinel.namespace" .Values.sentinel.namespace "dnsLabel" "platform")
  (list "controller.shared.serviceAccount" .Values.controller.shared.serviceAccount "dnsName" "sentinel-instance-controller")
  (list "controller.shared.namespace" .Values.controller.shared.namespace "dnsLabel" "platform")
  (list "auth.existingSecret" .Values.auth.existingSecret "dnsName" "cache-system-passwords")
  (list "tls.existingSecret" .Values.tls.existingSecret "dnsName" "cache-tls")
  (list "priorityClassName" .Values.priorityClassName "dnsName" "high-priority")
  (list "metrics.image.repository" .Values.metrics.image.repository "imageRepository" "oliver006/redis_exporter")
  (list "metrics.image.tag" .Values.metrics.image.tag "imageTag" "v1.67.0")
  (list "metrics.resources.cpu" .Values.metrics.resources.cpu "cpu" "50m")
  (list "metrics.resources.memory" .Values.metrics.resources.memory "quantity" "32Mi")
  (list "metrics.podMonitor.interval" .Values.metrics.podMonitor.interval "interval" "30s")
  (list "metrics.serviceMonitor.interval" .Values.metrics.serviceMonitor.interval "interval" "30s")
  (list "controller.serviceMonitor.interval" .Values.controller.serviceMonitor.interval "interval" "30s")
  (list "controller.image.repository" .Values.controller.image.repository "imageRepository" "valkey-ha/valkey-sentinel-ctl")
  (list "controller.image.tag" .Values.controller.image.tag "imageTag" "0.1.0")
  (list "global.imageRegistry" .Values.global.imageRegistry "imageRegistry" "registry.example.com:5000/mirror")
  (list "image.registry" .Values.image.registry "imageRegistry" "registry.example.com")
  (list "image.digest" .Values.image.digest "imageDigest" "sha256:<64 hex digits>")
  (list "metrics.image.registry" .Values.metrics.image.registry "imageRegistry" "registry.example.com")
  (list "metrics.image.digest" .Values.metrics.image.digest "imageDigest" "sha256:<64 hex digits>")
  (list "controller.image.registry" .Values.controller.image.registry "imageRegistry" "registry.example.com")
  (list "controller.image.digest" .Values.controller.image.digest "imageDigest" "sha256:<64 hex digits>")
  (list "controller.resources.cpu" .Values.controller.resources.cpu "cpu" "100m")
  (list "controller.resources.memory" .Values.controller.resources.memory "quantity" "128Mi")
  (list "backup.persistentVolumeClaim" .Values.backup.persistentVolumeClaim "dnsName" "valkey-backups")
  (list "backup.s3.existingSecret" .Values.backup.s3.existingSecret "dnsName" "valkey-backup-s3")
  (list "backup.s3.caSecret" .Values.backup.s3.caSecret "dnsName" "storage-ca")
  (list "backup.resources.limits.cpu" .Values.backup.resources.limits.cpu "cpu" "250m")
  (list "backup.resources.limits.memory" .Values.backup.resources.limits.memory "quantity" "128Mi")
  (list "restoreFrom.persistentVolumeClaim" .Values.restoreFrom.persistentVolumeClaim "dnsName" "valkey-backups")
  (list "restoreFrom.s3.existingSecret" .Values.restoreFrom.s3.existingSecret "dnsName" "valkey-backup-s3")
  (list "restoreFrom.s3.caSecret" .Values.restoreFrom.s3.caSecret "dnsName" "storage-ca")
-}}
{{- if not (kindIs "string" .Values.engineVersion) -}}
{{- /* engineVersion: 8.0 unquoted is the number 8: checkFormat names that YAML trap */ -}}
{{- include "valkey.checkFormat" (dict "field" "engineVersion" "value" .Values.engineVersion "format" "imageTag") -}}
{{- end -}}
{{- range $c := $checks -}}
{{- if not (empty (index $c 1)) -}}
{{- include "valkey.checkFormat" (dict "field" (index $c 0) "value" (index $c 1) "format" (index $c 2) "example" (index $c 3)) -}}
{{- end -}}
{{- end -}}
{{- include "valkey.checkImageHosts" (dict "values" .Values "images" (list (list "image" .Values.image) (list "metrics.image" .Values.metrics.image) (list "controller.image" .Values.controller.image))) -}}
{{- with .Values.sentinel.monitorName -}}
{{- if not (regexMatch "^[A-Za-z0-9._-]{1,64}$" .) -}}
{{- fail (printf "sentinel.monitorName: %q is not a Sentinel master name: at most 64 letters, digits, '.', '_' and '-'; for example orders-cache" .) -}}
{{- end -}}
{{- end -}}
{{- range $i, $s := .Values.allowedSources -}}
{{- include "valkey.checkCIDR" (dict "field" (printf "allowedSources[%d]" $i) "value" $s) -}}
{{- end -}}
{{- range $i, $s := .Values.imagePullSecrets -}}
{{- include "valkey.checkFormat" (dict "field" (printf "imagePullSecrets[%d].name" $i) "value" ($s.name | default "") "format" "dnsName" "example" "regcred") -}}
{{- end -}}
{{- range $f, $img := dict "image" .Values.image "metrics.image" .Values.metrics.image "controller.image" .Values.controller.image -}}
{{- if and $img.digest (contains "@" (toString $img.tag)) -}}
{{- fail (printf "%s.digest: %s.tag %q pins a digest already; keep one of them (a tag without @sha256:..., or no digest)" $f $f (toString $img.tag)) -}}
{{- end -}}
{{- end -}}
{{- range $field, $m := dict "nodeSelector" .Values.nodeSelector "controller.nodeSelector" .Values.controller.nodeSelector "metrics.podMonitor.labels" .Values.metrics.podMonitor.labels "metrics.serviceMonitor.labels" .Values.metrics.serviceMonitor.labels "metrics.prometheusRule.labels" .Values.metrics.prometheusRule.labels "metrics.grafanaDashboard.labels" .Values.metrics.grafanaDashboard.labels "controller.serviceMonitor.labels" .Values.controller.serviceMonitor.labels -}}
{{- include "valkey.checkLabels" (dict "field" $field "labels" $m) -}}
{{- end -}}
{{- range $k, $_ := .Values.metrics.grafanaDashboard.annotations -}}
{{- include "valkey.checkFormat" (dict "field" (printf "metrics.grafanaDashboard.annotations key %q" $k) "value" $k "format" "labelKey") -}}
{{- end -}}
{{- range $k, $_ := .Values.metrics.prometheusRule.alertLabels -}}
{{- if not (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" $k) -}}
{{- fail (printf "metrics.prometheusRule.alertLabels key %q: not a Prometheus label name (letters, digits and '_', not starting with a digit): Prometheus 2 refuses the whole rule group over it (promtool: invalid label name); for example team_name" $k) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.clusterDomain -}}
{{- fail "clusterDomain: empty, so the node FQDNs would end in \"svc.\"; set the cluster's DNS domain (cluster.local on most clusters)" -}}
{{- end -}}
{{- include "valkey.checkSelector" (dict "field" "networkPolicy.clientPodSelector" "selector" .Values.networkPolicy.clientPodSelector) -}}
{{- include "valkey.checkSelector" (dict "field" "networkPolicy.metricsNamespaceSelector" "selector" .Values.networkPolicy.metricsNamespaceSelector) -}}
{{- include "valkey.checkSelector" (dict "field" "networkPolicy.dns.namespaceSelector" "selector" .Values.networkPolicy.dns.namespaceSelector) -}}
{{- include "valkey.checkSelector" (dict "field" "networkPolicy.dns.podSelector" "selector" .Values.networkPolicy.dns.podSelector) -}}
{{- if and .Values.networkPolicy.dns.podSelector (not .Values.networkPolicy.dns.namespaceSelector) -}}
{{- fail "networkPolicy.dns.namespaceSelector: empty selects every namespace, so a pod of any namespace wearing the podSelector's labels would be reachable on port 53 (the exporter's /scrape or a customer's MIGRATE could dial it); name the namespace of your cluster DNS, for example {matchLabels: {kubernetes.io/metadata.name: kube-system}}" -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateNames" -}}
{{- $F := include "valkey.fullname" . -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $F) -}}
{{- $from := ternary "" (printf " (from the release name %q)" .Release.Name) (not (empty .Values.fullnameOverride)) -}}
{{- fail (printf "fullnameOverride: the full name %q%s cannot name the Services F, F-primary and F-<i>: a Service name starts with a letter and holds only lowercase letters, digits and '-'. Set fullnameOverride (e.g. cache)%s" $F $from (ternary "" ", or choose another release name" (not (empty .Values.fullnameOverride)))) -}}
{{- end -}}
{{- if gt (len $F) 40 -}}
{{- fail (printf "fullnameOverride: the full name %q%s is %d characters; at most 40 fit the per-node names (StatefulSet F-<i>, Service F-replicas). Set fullnameOverride to a shorter name%s" $F (ternary "" " (from the release name)" (not (empty .Values.fullnameOverride))) (len $F) (ternary "" ", or choose a shorter release name" (not (empty .Values.fullnameOverride)))) -}}
{{- end -}}
{{- if gt (int .Values.replicas) 99 -}}
{{- fail "replicas: at most 99 replicas (node names F-<i> must stay short); lower replicas" -}}
{{- end -}}
{{- if hasPrefix "system-" .Values.priorityClassName -}}
{{- fail (printf "priorityClassName: %q is reserved for pods in kube-system, so the data pods would never be created here; use a PriorityClass of your own" .Values.priorityClassName) -}}
{{- end -}}
{{- if eq (include "valkey.sentinelControllerSA" .) "default" -}}
{{- fail "sentinel.controllerServiceAccount: \"default\" is the ServiceAccount of every pod that names none, so each of them could read the Sentinel password; set the valkey-sentinel release's controller.serviceAccountName (valkey-sentinel-controller by default)" -}}
{{- end -}}
{{- with .Values.sentinel.release -}}
{{- if eq . $F -}}
{{- fail (printf "sentinel.release: %q is this instance's own full name, not a valkey-sentinel release: the quorum's controller ServiceAccount would be this instance's own controller (%s-controller), which must never read the _sentinel password, and no quorum could share this release's object names; set the full name of the valkey-sentinel release that monitors it (sentinel by default)" . $F) -}}
{{- end -}}
{{- if gt (len .) 42 -}}
{{- fail (printf "sentinel.release: %q is %d characters, but a valkey-sentinel release's full name has at most 42 (its credentials Job S-credentials-<hash> must fit 63), so no quorum can have it; set the full name of the valkey-sentinel release that monitors it" . (len .)) -}}
{{- end -}}
{{- $S := . -}}
{{- $sa := include "valkey.sentinelControllerSA" $ -}}
{{- $others := dict (printf "%s-controller" $F) "this instance's controller" (printf "%s-credentials" $F) "this instance's credentials Job" (printf "%s-test" $F) "this instance's helm test" (printf "%s-credentials" $S) "the quorum's credentials Job" (printf "%s-test" $S) "the quorum's helm test" $S "the quorum's Sentinel pods" -}}
{{- if not $.Values.serviceAccount.name -}}{{- $_ := set $others $F "this instance's data pods" -}}{{- end -}}
{{- if hasKey $others $sa -}}
{{- fail (printf "sentinel.controllerServiceAccount: %q is the ServiceAccount of %s, not of the quorum's controller: it would get this instance's _sentinel password (Secret %s-sentinel-auth) and the quorum's controller would not, so no monitor is registered; set the valkey-sentinel release's controller.serviceAccountName (%s-controller by default)" $sa (get $others $sa) $F $S) -}}
{{- end -}}
{{- end -}}
{{- $repo := last (splitList "/" (.Values.image.repository | default "")) -}}
{{- if and (eq .Values.engine "redis") (contains "valkey" $repo) -}}
{{- fail (printf "image.repository: %q is a Valkey image, but engine is redis, so the pod would run redis-server, which it does not ship; set engine: valkey, or use a redis image" .Values.image.repository) -}}
{{- end -}}
{{- if and (eq .Values.engine "valkey") (contains "redis" $repo) (not (contains "valkey" $repo)) -}}
{{- fail (printf "image.repository: %q is a Redis image, but engine is valkey, so the pod would run valkey-server, which it does not ship; set engine: redis, or use a valkey image" .Values.image.repository) -}}
{{- end -}}
{{- if lt (int .Values.probes.startupFailureThreshold) 12 -}}
{{- fail (printf "probes.startupFailureThreshold: %d gives the bootstrap %d s to start the server, but it waits for the primary or for Sentinel's failover first (up to 10 min), so the kubelet would restart pods mid-boot (1 restarted 2 of 3 replicas of a fresh install); set at least 12 (1 min), default 120" (int .Values.probes.startupFailureThreshold) (mul 5 (int .Values.probes.startupFailureThreshold))) -}}
{{- end -}}
{{- range $field, $port := dict "port" .Values.port "metrics.port" .Values.metrics.port -}}
{{- if and (lt (int $port) 1024) (or (eq $field "port") $.Values.metrics.enabled) -}}
{{- fail (printf "%s: %d is below 1024, and the %s runs as a non-root user without capabilities, so it could not listen (bind: Permission denied) and would restart forever; use a port from 1024 up, such as %s" $field (int $port) (ternary "server" "exporter" (eq $field "port")) (ternary "6379" "9121" (eq $field "port"))) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) (int .Values.port)) -}}
{{- fail (printf "metrics.port: %d is also the server port; the exporter sidecar could not listen. Set metrics.port to another port, such as 9121" (int .Values.metrics.port)) -}}
{{- end -}}
{{- end -}}

{{/* Memory floors: what an idle pod needs (bootstrap ~30 MB before it execs the server, server ~13 MB, probes ~7 MB). */}}
{{- define "valkey.memoryFloors" -}}
{{- toJson (dict "limit" "64Mi" "headroom" "32Mi" "maxmemory" "8M" "controller" "64Mi" "exporter" "16Mi") -}}
{{- end -}}

{{- define "valkey.validateSizing" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- $floor := include "valkey.memoryFloors" . | fromJson -}}
{{- if not $s.memory -}}
{{- fail (printf "resources.limits.memory: plan %q sets no memory limit; set resources.limits.memory (e.g. 1Gi) or choose plan starter, casual or pro" .Values.plan) -}}
{{- end -}}
{{- if not $s.cpu -}}
{{- fail (printf "resources.limits.cpu: plan %q sets no CPU limit; set resources.limits.cpu (e.g. 250m) or choose plan starter, casual or pro" .Values.plan) -}}
{{- end -}}
{{- if not $s.maxmemory -}}
{{- fail (printf "maxmemory: plan %q sets no maxmemory; set maxmemory to about 70%% of resources.limits.memory (%s)" .Values.plan $s.memory) -}}
{{- end -}}
{{- range $field, $q := dict "resources.limits.cpu" $s.cpu "controller.resources.cpu" .Values.controller.resources.cpu "metrics.resources.cpu" .Values.metrics.resources.cpu -}}
{{- if eq (float64 (trimSuffix "m" (toString $q))) 0.0 -}}
{{- fail (printf "%s: %q is no CPU at all; the container could not run. Set at least 1m, such as 100m" $field (toString $q)) -}}
{{- end -}}
{{- end -}}
{{- $mem := float64 (include "valkey.bytes" $s.memory) -}}
{{- $max := float64 (include "valkey.bytes" $s.maxmemory) -}}
{{- if lt $mem (float64 (include "valkey.bytes" $floor.limit)) -}}
{{- fail (printf "resources.limits.memory: %s is too small for an idle data pod (the bootstrap alone needs about 30 MB before it starts the server); set at least %s" $s.memory $floor.limit) -}}
{{- end -}}
{{- if eq $max 0.0 -}}
{{- fail (printf "maxmemory: %q means no limit: the server would grow until the pod is OOM-killed instead of refusing writes or evicting (maxmemoryPolicy); set maxmemory to about 70%% of resources.limits.memory (%.0fM)" $s.maxmemory (divf (mulf $mem 0.7) 1e6)) -}}
{{- end -}}
{{- if lt $max (float64 (include "valkey.bytes" $floor.maxmemory)) -}}
{{- fail (printf "maxmemory: %s is below the %s a server with replicas uses before it holds any key, so every write would fail with OOM; set maxmemory to about 70%% of resources.limits.memory (%.0fM)" $s.maxmemory $floor.maxmemory (divf (mulf $mem 0.7) 1e6)) -}}
{{- end -}}
{{- if gt (mulf $max 100.0) (mulf $mem 80.0) -}}
{{- fail (printf "maxmemory: %s is above 80%% of resources.limits.memory (%s); an RDB/AOF rewrite forks and needs headroom. Lower maxmemory to about 70%% of the limit (%.0fM) or raise resources.limits.memory" $s.maxmemory $s.memory (divf (mulf $mem 0.7) 1e6)) -}}
{{- end -}}
{{- if lt (subf $mem $max) (float64 (include "valkey.bytes" $floor.headroom)) -}}
{{- fail (printf "maxmemory: %s leaves less than %s of resources.limits.memory (%s) for the server process, replication buffers and probes; lower maxmemory to %.0fM or raise resources.limits.memory" $s.maxmemory $floor.headroom $s.memory (divf (subf $mem (float64 (include "valkey.bytes" $floor.headroom))) 1e6)) -}}
{{- end -}}
{{- range $field, $q := dict "controller.resources.memory" (list .Values.controller.resources.memory $floor.controller "the controller (a Go process watching the namespace)") "metrics.resources.memory" (list .Values.metrics.resources.memory $floor.exporter "the exporter sidecar") -}}
{{- if lt (float64 (include "valkey.bytes" (index $q 0))) (float64 (include "valkey.bytes" (index $q 1))) -}}
{{- fail (printf "%s: %s is too small for %s; set at least %s" $field (index $q 0) (index $q 2) (index $q 1)) -}}
{{- end -}}
{{- end -}}
{{- if $s.persistence -}}
{{- $size := float64 (include "valkey.bytes" $s.size) -}}
{{- if lt $size (mulf $max 5.0) -}}
{{- fail (printf "persistence.size: %s is under 5x maxmemory (%s); set persistence.size to at least %.0fM or lower maxmemory" $s.size $s.maxmemory (divf (mulf $max 5.0) 1e6)) -}}
{{- end -}}
{{- with .Values.persistence.existingClaims -}}
{{- if ne (len .) (int (include "valkey.nodeCount" $)) -}}
{{- fail (printf "persistence.existingClaims: %d claims for %d nodes (the primary and %d replicas); list exactly one per node, node 0 first" (len .) (int (include "valkey.nodeCount" $)) (int $.Values.replicas)) -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $i, $c := . -}}
{{- include "valkey.checkFormat" (dict "field" (printf "persistence.existingClaims[%d]" $i) "value" $c "format" "dnsName" "example" "cache-data-0") -}}
{{- if hasKey $seen $c -}}
{{- fail (printf "persistence.existingClaims[%d]: %q is already node %v's claim; every node needs a volume of its own" $i $c (get $seen $c)) -}}
{{- end -}}
{{- $_ := set $seen $c $i -}}
{{- end -}}
{{- range $field, $v := dict "persistence.size" $.Values.persistence.size "persistence.storageClass" $.Values.persistence.storageClass -}}
{{- if $v -}}
{{- fail (printf "%s: %q is set but persistence.existingClaims names the volumes, which keep their own size and class, so it would be ignored; remove %s (grow or move the claims themselves)" $field $v $field) -}}
{{- end -}}
{{- end -}}
{{- $set := dict "paths" list -}}
{{- include "valkey.changedPaths" (dict "out" $set "p" "persistence" "v" (pick $.Values.persistence "accessModes" "whenDeleted" "whenScaled" "labels" "annotations") "d" (include "valkey.inputDefaults" $ | fromJson).persistence) -}}
{{- with $set.paths -}}
{{- $also := ternary "" (printf " (also %s)" (join ", " (rest .))) (eq (len .) 1) -}}
{{- fail (printf "%s: set%s but persistence.existingClaims names the volumes, which keep their own labels, annotations, access modes and retention, so the chart ignores %s; remove %s (change the claims themselves)" (first .) $also (ternary "it" "them" (eq (len .) 1)) (ternary "it" "them" (eq (len .) 1))) -}}
{{- end -}}
{{- range $field, $pvc := dict "backup.persistentVolumeClaim" (ternary $.Values.backup.persistentVolumeClaim "" $.Values.backup.enabled) "restoreFrom.persistentVolumeClaim" $.Values.restoreFrom.persistentVolumeClaim -}}
{{- if and $pvc (hasKey $seen $pvc) -}}
{{- fail (printf "%s: %q is node %v's data claim (persistence.existingClaims[%v]), so that node's data volume would also be mounted as the %s volume; name a claim of its own for the %s" $field $pvc (get $seen $pvc) (get $seen $pvc) (ternary "backup" "restore" (eq $field "backup.persistentVolumeClaim")) (ternary "backups" "backup to restore" (eq $field "backup.persistentVolumeClaim"))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- with .Values.persistence.existingClaims -}}
{{- fail (printf "persistence.existingClaims: set but persistence is off (plan %s), so no volume is mounted; set persistence.enabled: true, or remove persistence.existingClaims" $.Values.plan) -}}
{{- end -}}
{{- range $field, $v := dict "persistence.size" .Values.persistence.size "persistence.storageClass" .Values.persistence.storageClass -}}
{{- if $v -}}
{{- fail (printf "%s: %q is set but persistence is off (plan %s), so no volume is created and it would be ignored; set persistence.enabled: true, or remove %s" $field $v $.Values.plan $field) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The engine version whose directive list checks config and sentinel.config: engineVersion, else the leading
major.minor of the image tag.
*/}}
{{- define "valkey.engineVersion" -}}
{{- .Values.engineVersion | default (regexFind "^[0-9]+\\.[0-9]+" (include "valkey.serverTag" .)) -}}
{{- end -}}

{{/* Loads the directive list of the engine version into the render context (key _valkeyHADirectives). */}}
{{- define "valkey.loadDirectives" -}}
{{- if not (hasKey . "_valkeyHADirectives") -}}
{{- $v := include "valkey.engineVersion" . -}}
{{- $raw := include "valkey.engineData" (dict "ctx" . "engine" .Values.engine "version" $v) -}}
{{- if not $raw -}}
{{- $known := include "valkey.engineVersions" (dict "ctx" . "engine" .Values.engine) | fromJsonArray -}}
{{- if .Values.engineVersion -}}
{{- fail (printf "engineVersion: %q is not a %s version this chart knows (%s); set engineVersion to one of them, matching the image" .Values.engineVersion .Values.engine (join ", " $known)) -}}
{{- else if $v -}}
{{- fail (printf "image.tag: %q runs %s %s, a version this chart has no directive list for (it knows %s); use an image of one of those versions, or set engineVersion to the known version your image matches" (include "valkey.serverTag" .) .Values.engine $v (join ", " $known)) -}}
{{- else -}}
{{- fail (printf "image.tag: %q does not start with a version (major.minor), so the chart cannot tell which %s directives it accepts; set engineVersion to the version the image runs (%s)" (include "valkey.serverTag" .) .Values.engine (join ", " $known)) -}}
{{- end -}}
{{- end -}}
{{- $_ := set . "_valkeyHADirectives" ($raw | fromJson) -}}
{{- end -}}
{{- end -}}

{{/*
Directives the chart or the bootstrap owns, or that break the instance, with the reason; config must not set
them. Aliases (slave*, master*, primary*) are listed with their names.
*/}}
{{- define "valkey.ownedDirectives" -}}
{{- $bootstrap := "the bootstrap writes it for each pod (announce address, role and replication credentials are decided per pod); remove it" -}}
{{- $path := "a path inside the pod; the chart owns the pod's files (data in /data, logs on stdout, TLS files from tls.existingSecret); remove it" -}}
{{- $users := "the chart writes the ACL file; define users in users instead" -}}
{{- $socket := "nothing in the pod uses a unix socket; remove it" -}}
{{- $fg := "the server must stay in the foreground under the bootstrap; remove it" -}}
{{- $tls := "the chart sets it from tls.enabled and tls.existingSecret; set those instead" -}}
{{- $noRepl := "no lets clients write to replicas, and those writes vanish at the next resync; remove it" -}}
{{- $prio := "every node gets the same value: 0 makes every replica unpromotable so Sentinel can never fail over, any other value changes nothing; remove it" -}}
{{- $ciphers := "the chart cannot check cipher names against the image's OpenSSL, and one it does not know stops the server at start; the image's OpenSSL defaults apply (TLS 1.2 and 1.3 with strong ciphers), remove it" -}}
{{- $announced := "no hides the replicas from Sentinel, so it can never promote one; remove it" -}}
{{- toJson (dict
  "port" "the chart renders it from the value port; set port instead"
  "tls-port" "the chart renders it from port and tls.enabled; set those instead"
  "bind" "the chart listens on every pod address so peers, Sentinels and Services reach it; remove it"
  "bind-source-addr" "pod addresses change with every restart; remove it"
  "protected-mode" "the chart turns it off (the default user is off and every user has a password); remove it"
  "dir" $path "dbfilename" $path "appendfilename" $path "appenddirname" $path "pidfile" $path "logfile" $path
  "aclfile" $path "include" $path "cluster-config-file" $path
  "tls-cert-file" $path "tls-key-file" $path "tls-ca-cert-file" $path "tls-ca-cert-dir" $path
  "tls-client-cert-file" $path "tls-client-key-file" $path "tls-dh-params-file" $path
  "tls-key-file-pass" $path "tls-client-key-file-pass" $path
  "unixsocket" $socket "unixsocketperm" $socket "unixsocketgroup" $socket
  "user" $users "requirepass" $users
  "rename-command" "restrict customer users with users[].access instead (the controller needs REPLICAOF and CONFIG REWRITE under their names); remove it"
  "loadmodule" "the server images ship no modules, and a module runs native code outside ACL control; remove it"
  "enable-module-command" "MODULE LOAD would run native code outside ACL control; remove it"
  "enable-debug-command" "DEBUG can crash or stall the server; remove it"
  "enable-protected-configs" "it lets CONFIG SET change paths and other protected settings at run time; remove it"
  "replicaof" $bootstrap "slaveof" $bootstrap "masterauth" $bootstrap "masteruser" $bootstrap
  "primaryauth" $bootstrap "primaryuser" $bootstrap
  "replica-announce-ip" $bootstrap "slave-announce-ip" $bootstrap
  "replica-announce-port" $bootstrap "slave-announce-port" $bootstrap
  "replica-announced" $announced "slave-announced" $announced
  "replica-priority" $prio "slave-priority" $prio
  "replica-read-only" $noRepl "slave-read-only" $noRepl
  "maxmemory" "set maxmemory instead (it is checked against the memory limit)"
  "maxmemory-policy" "set maxmemoryPolicy instead"
  "sanitize-dump-payload" "the chart sets it to clients where the engine has it (a corrupt RESTORE payload crashed valkey 8.0 and redis 7.0 nodes); remove it"
  "maxclients" "set maxclients instead"
  "appendonly" "set persistence.enabled instead (it also creates the volumes)"
  "daemonize" $fg "supervised" $fg
  "repl-diskless-sync" "the chart turns it on (a full resync never waits for a disk); remove it"
  "dual-channel-replication-enabled" "dual-channel replication is not supported: the replica's RDB channel sends commands the chart's _replication user is not granted, so no replica ever completes a sync; remove it"
  "tls-replication" $tls "tls-auth-clients" "set tls.authClients instead" "tls-cluster" $tls
  "tls-ciphers" $ciphers "tls-ciphersuites" $ciphers
  "min-replicas-to-write" "set minReplicasToWrite instead" "min-slaves-to-write" "set minReplicasToWrite instead"
  "min-replicas-max-lag" "set minReplicasMaxLag instead" "min-slaves-max-lag" "set minReplicasMaxLag instead"
  "tls-auth-clients-user" "it logs a client in as the ACL user its certificate names, so any certificate from the CA could act as a system user; remove it"
) -}}
{{- end -}}

{{/* Effective integer value of a directive: config (or its alias), else the engine default. Call with (dict "ctx" $ "names" (list ...)). */}}
{{- define "valkey.effective" -}}
{{- $d := get .ctx "_valkeyHADirectives" -}}
{{- $out := "" -}}
{{- range $n := .names -}}
{{- if and (not $out) (hasKey $.ctx.Values.config $n) -}}{{- $out = include "valkey.confValue" (get $.ctx.Values.config $n) -}}{{- end -}}
{{- end -}}
{{- if not $out -}}{{- $out = (get $d.server (first .names) | default dict).default | default "" -}}{{- end -}}
{{- $out -}}
{{- end -}}

{{/* The effective min-replicas-to-write: minReplicasToWrite, or when it is null 1 with 2 or more replicas
(a primary cut off from its replicas stops acknowledging writes within minReplicasMaxLag), else 0. */}}
{{- define "valkey.minReplicasToWrite" -}}
{{- if kindIs "invalid" .Values.minReplicasToWrite -}}
{{- if ge (int .Values.replicas) 2 }}1{{ else }}0{{ end -}}
{{- else -}}
{{- int .Values.minReplicasToWrite -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateConfig" -}}
{{- if gt (int (include "valkey.minReplicasToWrite" .)) (int .Values.replicas) -}}
{{- fail (printf "minReplicasToWrite: %d is more than replicas (%d): the primary would refuse every write; set it to at most %d (0 turns it off)" (int .Values.minReplicasToWrite) (int .Values.replicas) (int .Values.replicas)) -}}
{{- end -}}
{{- $owned := include "valkey.ownedDirectives" . | fromJson -}}
{{- include "valkey.loadDirectives" . -}}
{{- $data := get . "_valkeyHADirectives" -}}
{{- $engine := printf "%s %s" .Values.engine $data.version -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- range $k, $v := .Values.config -}}
{{- $field := printf "config.%s" $k -}}
{{- if not (regexMatch "^[a-z][a-z0-9_-]{0,63}$" $k) -}}
{{- fail (printf "config key %q: not a directive name; directive names are lowercase letters, digits and '-' (for example tcp-keepalive)" $k) -}}
{{- end -}}
{{- if hasKey $owned $k -}}
{{- fail (printf "%s: %s" $field (get $owned $k)) -}}
{{- end -}}
{{- if hasPrefix "cluster-" $k -}}
{{- fail (printf "%s: cluster mode is not supported (one primary with replicas under Sentinel); remove it" $field) -}}
{{- end -}}
{{- if hasPrefix "rdma-" $k -}}
{{- fail (printf "%s: the server images are built without RDMA (the server stops with \"Missing implement of connection type rdma\"); remove it" $field) -}}
{{- end -}}
{{- if hasPrefix "sentinel" $k -}}
{{- fail (printf "%s: Sentinel settings belong in sentinel.config (per master) or the valkey-sentinel chart" $field) -}}
{{- end -}}
{{- $d := get $data.server $k -}}
{{- if not $d -}}
{{- fail (printf "%s: %s has no directive %q; check the name against the %s configuration reference, or remove it" $field $engine $k $.Values.engine) -}}
{{- end -}}
{{- include "valkey.checkValue" (dict "field" $field "value" $v "d" $d "engine" $engine) -}}
{{- $val := include "valkey.confValue" $v -}}
{{- if and (eq $k "save") $val (not $s.persistence) -}}
{{- fail (printf "config.save: %q turns on RDB snapshots, but persistence is off (plan %s): they would be written to an emptyDir, lost with the pod, and each one forks the server; set persistence.enabled: true, or remove config.save" $val $.Values.plan) -}}
{{- end -}}
{{- if and (eq $k "databases") (gt (int64 $val) 10000) -}}
{{- fail (printf "config.databases: %s databases cost memory at start (one million took 700 MB); set at most 10000" $val) -}}
{{- end -}}
{{- if and (eq $k "repl-diskless-load") (eq (lower $val) "swapdb") -}}
{{- fail "config.repl-diskless-load: swapdb keeps two copies of the data set during a full resync, more than the memory limit allows above maxmemory; use on-empty-db or disabled" -}}
{{- end -}}
{{- if eq $k "proto-max-bulk-len" -}}
{{- $room := divf (subf (float64 (include "valkey.bytes" $s.memory)) (float64 (include "valkey.bytes" $s.maxmemory))) 4.0 -}}
{{- if gt (float64 (include "valkey.memBytes" $val)) $room -}}
{{- fail (printf "config.proto-max-bulk-len: %s does not fit: one command may grow one value by that much above maxmemory (%s), in the room before resources.limits.memory (%s), and may take at most a quarter of it (%.0fmb); lower it or raise resources.limits.memory" $val $s.maxmemory $s.memory (divf $room 1048576.0)) -}}
{{- end -}}
{{- end -}}
{{- if eq $k "repl-backlog-size" -}}
{{- $room := divf (subf (float64 (include "valkey.bytes" $s.memory)) (float64 (include "valkey.bytes" $s.maxmemory))) 2.0 -}}
{{- if gt (float64 (include "valkey.memBytes" $val)) $room -}}
{{- fail (printf "config.repl-backlog-size: %s does not fit: the backlog lives outside maxmemory, in the room between maxmemory (%s) and resources.limits.memory (%s), and may take at most half of it (%.0fmb); lower it or raise resources.limits.memory" $val $s.maxmemory $s.memory (divf $room 1048576.0)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $timeout := include "valkey.effective" (dict "ctx" . "names" (list "repl-timeout")) -}}
{{- $ping := include "valkey.effective" (dict "ctx" . "names" (list "repl-ping-replica-period" "repl-ping-slave-period")) -}}
{{- if and $timeout $ping (le (int64 $timeout) (int64 $ping)) -}}
{{- fail (printf "config.repl-timeout: %s seconds is not more than repl-ping-replica-period (%s), so replicas would drop their link between two pings; set repl-timeout above it (the default is 60)" $timeout $ping) -}}
{{- end -}}
{{- if and (eq .Values.updateStrategy "RollingUpdate") .Values.controller.enabled -}}
{{- fail "updateStrategy: RollingUpdate lets the StatefulSet controller restart the primary without a failover; keep OnDelete while controller.enabled is true" -}}
{{- end -}}
{{- end -}}

{{/*
How a data pod stops (issue 14), JSON {"enabled", "grace", "shutdown", "downAfterMs", "bound", "timeout"}, all in
seconds but downAfterMs. terminationGracePeriodSeconds (grace) is shared by the preStop hook and the server's own
stop: SIGTERM makes valkey-server wait up to shutdown-timeout (engine default 10 s) for lagging replicas, and it
needs about 2 s more to exit. The hook gets the rest (timeout). It needs at most bound to hand off a primary
(prestop.Bound in internal/podsteps/prestop, which a render test compares with this): 2 s to reach a Sentinel that
answers, half of down-after-milliseconds with writes paused, 5 s for the failover to end once that budget ran
out, 1 s to demote the old primary and resume; unmonitored (FAILOVER TO) 5 s.
*/}}
{{- define "valkey.stop" -}}
{{- include "valkey.loadDirectives" . -}}
{{- $shutdown := int64 (include "valkey.effective" (dict "ctx" . "names" (list "shutdown-timeout")) | default "10") -}}
{{- $grace := int64 .Values.terminationGracePeriodSeconds -}}
{{- $downAfter := int64 0 -}}
{{- $bound := int64 5 -}}
{{- if eq .Values.failover.mode "Sentinel" -}}
{{- $downAfter = int64 (toString (get (.Values.sentinel.config | default dict) "down-after-milliseconds" | default "30000")) -}}
{{- $bound = add 8 (div (add $downAfter 1999) 2000) -}}
{{- end -}}
{{- dict "enabled" .Values.preStop.enabled "grace" $grace "shutdown" $shutdown "downAfterMs" $downAfter "bound" $bound "timeout" (sub (sub $grace $shutdown) 2) | toJson -}}
{{- end -}}

{{/* terminationGracePeriodSeconds leaves room for the preStop handoff and the server's own stop (valkey.stop). */}}
{{- define "valkey.validateStop" -}}
{{- $st := include "valkey.stop" . | fromJson -}}
{{- $shutdown := int64 $st.shutdown -}}
{{- $grace := int64 $st.grace -}}
{{- if eq $shutdown 0 -}}
{{- fail "config.shutdown-timeout: 0 makes the server stop without waiting for lagging replicas, so a stop the preStop hook could not hand off loses the writes they had not received yet; set at least 1 (the engine default is 10)" -}}
{{- end -}}
{{- if regexMatch "(^|\\s)now(\\s|$)" (include "valkey.confValue" (get .Values.config "shutdown-on-sigterm" | default "")) -}}
{{- fail (printf "config.shutdown-on-sigterm: %q skips the wait for lagging replicas (shutdown-timeout) on SIGTERM, so a stop the preStop hook could not hand off loses the writes they had not received yet; remove \"now\"" (include "valkey.confValue" (get .Values.config "shutdown-on-sigterm"))) -}}
{{- end -}}
{{- if $st.enabled -}}
{{- $need := add (int64 $st.bound) $shutdown 2 -}}
{{- if lt $grace $need -}}
{{- $why := "FAILOVER TO, failover.mode None" -}}
{{- if eq .Values.failover.mode "Sentinel" -}}
{{- $why = printf "2 s to reach a Sentinel, %s s paused = half of down-after-milliseconds %d, 5 s for the failover's end, 1 s to resume" (toString (divf (int64 $st.downAfterMs) 2000.0)) (int64 $st.downAfterMs) -}}
{{- end -}}
{{- fail (printf "terminationGracePeriodSeconds: %d is too short: the preStop handoff needs %d s (%s) and the server's stop shutdown-timeout %d s + 2 s, %d s in all; set at least %d, lower config.shutdown-timeout, or set preStop.enabled: false" $grace (int64 $st.bound) $why $shutdown $need $need) -}}
{{- end -}}
{{- else if lt $grace (add $shutdown 2) -}}
{{- fail (printf "terminationGracePeriodSeconds: %d is shorter than the server's stop (shutdown-timeout %d s waiting for lagging replicas, 2 s to exit): the kubelet would kill it mid-wait; set at least %d or lower config.shutdown-timeout" $grace $shutdown (add $shutdown 2)) -}}
{{- end -}}
{{- end -}}

{{/*
sentinel.config keys go to SENTINEL SET on the Sentinels of the valkey-sentinel chart: each key and value must
be accepted by every valkey Sentinel version that chart runs.
*/}}
{{- define "valkey.validateSentinel" -}}
{{- $owned := dict
  "auth-pass" "the controller sets the Sentinel credentials from Secret F-sentinel-auth; remove it"
  "auth-user" "the controller sets the Sentinel credentials from Secret F-sentinel-auth; remove it"
  "quorum" "set sentinel.quorum instead"
  "notification-script" "scripts are not supported (the Sentinel image runs none and SENTINEL SET of a script is denied); remove it"
  "client-reconfig-script" "scripts are not supported (the Sentinel image runs none and SENTINEL SET of a script is denied); remove it"
  "rename-command" "the Sentinels send commands by their real names; remove it"
  "monitor" "the controller registers the monitor; remove it"
-}}
{{- $versions := include "valkey.engineVersions" (dict "ctx" . "engine" "valkey") | fromJsonArray -}}
{{- range $k, $v := .Values.sentinel.config -}}
{{- $field := printf "sentinel.config.%s" $k -}}
{{- if not (regexMatch "^[a-z][a-z0-9-]{0,63}$" $k) -}}
{{- fail (printf "sentinel.config key %q: not a SENTINEL SET option; options are lowercase letters, digits and '-' (for example down-after-milliseconds)" $k) -}}
{{- end -}}
{{- if hasKey $owned $k -}}
{{- fail (printf "%s: %s" $field (get $owned $k)) -}}
{{- end -}}
{{- range $ver := $versions -}}
{{- $data := include "valkey.engineData" (dict "ctx" $ "engine" "valkey" "version" $ver) | fromJson -}}
{{- $d := get $data.sentinelSet $k -}}
{{- if not $d -}}
{{- $known := without (keys $data.sentinelSet | sortAlpha) "auth-pass" "auth-user" "quorum" "notification-script" "client-reconfig-script" -}}
{{- fail (printf "%s: valkey %s Sentinel has no SENTINEL SET option %q (an option must exist in every valkey version the valkey-sentinel chart runs: %s); use one of %s" $field $ver $k (join ", " $versions) (join ", " $known)) -}}
{{- end -}}
{{- include "valkey.checkValue" (dict "field" $field "value" $v "d" $d "engine" (printf "valkey %s Sentinel (the value must suit every valkey version the valkey-sentinel chart runs: %s)" $ver (join ", " $versions))) -}}
{{- end -}}
{{- $ms := include "valkey.confValue" $v -}}
{{- if eq $k "down-after-milliseconds" -}}
{{- if lt (int64 $ms) 100 -}}
{{- fail (printf "%s: %s ms is too short: Sentinel flags a node down when one PING stays unanswered that long, so a scheduling hiccup fails over (1 ms gave 4 false +sdown in 15 s on an idle loopback); set at least 100, better 2000 or more (default 5000)" $field $ms) -}}
{{- end -}}
{{- end -}}
{{- if eq $k "failover-timeout" -}}
{{- if lt (int64 $ms) 1000 -}}
{{- fail (printf "%s: %s ms is too short: Sentinel aborts a failover whose promotion it has not seen within it (it polls INFO once a second), so failovers take many tries or never finish (10 ms: 28 of 28 tries aborted, 500 ms: 7.5 s instead of 2.3 s); set at least 1000 (default 15000)" $field $ms) -}}
{{- end -}}
{{- end -}}
{{- if and (has $k (list "down-after-milliseconds" "failover-timeout")) (gt (int64 $ms) 86400000) -}}
{{- fail (printf "%s: %s ms is more than a day, which means no failover at all (the controllers' timers overflow past 292 years); set at most 86400000, or failover.mode: None to turn automatic failover off" $field $ms) -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.failover.mode "Sentinel") (not .Values.sentinel.release) -}}
{{- fail "sentinel.release: empty, so this instance names no quorum: no Sentinel controller could read its _sentinel password and its pods would have no Sentinel credential; set it to the full name of the valkey-sentinel release that monitors it (sentinel by default), or failover.mode: None" -}}
{{- end -}}
{{- if and (ne .Values.failover.mode "Sentinel") (gt (int (.Values.sentinel.quorum | default 0)) 0) -}}
{{- fail (printf "sentinel.quorum: %d pins the quorum of a Sentinel monitor, but failover.mode %s registers none (no automatic failover); remove sentinel.quorum, or set failover.mode: Sentinel" (int .Values.sentinel.quorum) .Values.failover.mode) -}}
{{- end -}}
{{- if gt (int (.Values.sentinel.quorum | default 0)) 15 -}}
{{- fail (printf "sentinel.quorum: %d is more than the largest Sentinel release (15 Sentinels) could ever agree on, so failover would never happen; set it to at most the Sentinel count, or 0 for a majority" (int .Values.sentinel.quorum)) -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateUsers" -}}
{{- $seen := dict -}}
{{- $F := include "valkey.fullname" . -}}
{{- $owned := list (printf "%s-system" $F) (printf "%s-sentinel-auth" $F) (printf "%s-acl" $F) (printf "%s-acl-spec" $F) -}}
{{- with .Values.auth.existingSecret -}}
{{- if or (has . $owned) (hasPrefix (printf "%s-user-" $F) .) -}}
{{- fail (printf "auth.existingSecret: %q is a Secret this release generates itself; leave auth.existingSecret empty to keep the generated F-system, or name a Secret of your own" .) -}}
{{- end -}}
{{- end -}}
{{- $owned = append $owned (include "valkey.systemSecretName" .) -}}
{{- $quorum := list -}}
{{- with .Values.sentinel.release -}}
{{- $quorum = list (printf "%s-auth-admin" .) (printf "%s-auth-instance" .) (printf "%s-auth-client" .) (printf "%s-auth-controller" .) -}}
{{- end -}}
{{- if eq (include "valkey.crossNamespaceQuorum" .) "true" -}}
{{- /* F-quorum-auth: the copy of the _instance password that a quorum of another namespace fills */ -}}
{{- $quorum = append $quorum (printf "%s-quorum-auth" $F) -}}
{{- end -}}
{{- if has .Values.auth.existingSecret $quorum -}}
{{- fail (printf "auth.existingSecret: %q is a Secret of the Sentinel quorum %s (a Sentinel user's password), not this instance's system passwords: it has no key _operator, and this release would read the quorum's credentials; name a Secret of your own with keys _operator, _replication, _probe and _exporter, or leave it empty" .Values.auth.existingSecret .Values.sentinel.release) -}}
{{- end -}}
{{- range $i, $u := .Values.users -}}
{{- if or (eq $u.name "default") (hasPrefix "_" $u.name) -}}
{{- fail (printf "users[%d].name: %q is reserved: `default` is always off and names starting with _ belong to the system users (_operator, _replication, _sentinel, _probe, _exporter, _backup); choose another name" $i $u.name) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?$" $u.name) -}}
{{- fail (printf "users[%d].name: %q is not a user name: at most 32 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit; for example app" $i $u.name) -}}
{{- end -}}
{{- if hasKey $seen $u.name -}}
{{- fail (printf "users[%d].name: user %q is listed twice; user names must be unique" $i $u.name) -}}
{{- end -}}
{{- $_ := set $seen $u.name true -}}
{{- range $what := list "keys" "channels" -}}
{{- range $j, $p := (get $u $what | default list) -}}
{{- if not (regexMatch "^[^\\s\"'\\\\]{1,64}$" (toString $p)) -}}
{{- fail (printf "users[%d].%s[%d]: %q is not a pattern the ACL file can hold: 1 to 64 characters without spaces, quotes or backslashes; for example app:*" $i $what $j (toString $p)) -}}
{{- end -}}
{{- if regexMatch "[()]" (toString $p) -}}
{{- fail (printf "users[%d].%s[%d]: %q holds a parenthesis, which opens an ACL selector (rules that add to the user's), so the live sync refuses a user whose rules carry one; drop the parentheses, for example app:*" $i $what $j (toString $p)) -}}
{{- end -}}
{{- $prefix := ternary "~" "&" (eq $what "keys") -}}
{{- if or (hasPrefix $prefix (toString $p)) (and (eq $what "keys") (hasPrefix "%" (toString $p))) -}}
{{- fail (printf "users[%d].%s[%d]: %q starts with an ACL rule prefix (%s), which the chart writes itself, so the pattern would only match names beginning with it; write the bare pattern, such as %s" $i $what $j (toString $p) (ternary "~ or %R~/%W~" "&" (eq $what "keys")) (regexReplaceAll "^(%[RW]*)?[~&]" (toString $p) "")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $u.passwordSecret -}}
{{- include "valkey.checkFormat" (dict "field" (printf "users[%d].passwordSecret.name" $i) "value" .name "format" "dnsName" "example" "app-password") -}}
{{- if or (has .name $owned) (hasPrefix (printf "%s-user-" $F) .name) -}}
{{- fail (printf "users[%d].passwordSecret.name: %q holds passwords of this release (system users, Sentinel, generated user passwords) or its ACL, so user %s would share a password it must not know; name a Secret of your own, or drop passwordSecret to let the chart generate one" $i .name $u.name) -}}
{{- end -}}
{{- if has .name $quorum -}}
{{- fail (printf "users[%d].passwordSecret.name: %q is a Secret of the Sentinel quorum %s (a Sentinel user's password), so user %s would log in to the data nodes with it and this release's credentials Job would read it; name a Secret of your own, or drop passwordSecret to let the chart generate one" $i .name $.Values.sentinel.release $u.name) -}}
{{- end -}}
{{- include "valkey.checkFormat" (dict "field" (printf "users[%d].passwordSecret.key" $i) "value" .key "format" "secretKey" "example" "password") -}}
{{- end -}}
{{- range $j, $c := $u.channels | default list -}}
{{- $lit := regexFind "^[^*?\\[\\\\]*" $c -}}
{{- if or (hasPrefix "__sentinel__:" $lit) (hasPrefix $lit "__sentinel__:") -}}
{{- fail (printf "users[%d].channels[%d]: %q could match Sentinel's channel __sentinel__:hello, where a forged message moves the primary to any address; use a prefix of your own such as %q" $i $j $c (printf "%s.*" $u.name)) -}}
{{- end -}}
{{- end -}}
{{- if and $u.functions (ne ($u.access | default "readonly") "full") -}}
{{- fail (printf "users[%d].functions: access %s cannot FCALL, so the grant would only let user %s plant code that full users run; set access: full, or drop functions" $i ($u.access | default "readonly") $u.name) -}}
{{- end -}}
{{- $rot := $u.rotation | default dict -}}
{{- if and $u.passwordSecret $rot -}}
{{- fail (printf "users[%d].rotation: rotation applies to chart-generated passwords only; with passwordSecret, update that Secret instead (or drop passwordSecret)" $i) -}}
{{- end -}}
{{- if $rot.previousValidUntil -}}
{{- $raw := toString $rot.previousValidUntil -}}
{{- $until := toDate "2006-01-02T15:04:05Z07:00" $raw -}}
{{- if or (not (regexMatch "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$" $raw)) (eq $until.Unix (toDate "2006-01-02" "0001-01-01").Unix) -}}
{{- fail (printf "users[%d].rotation.previousValidUntil: %q is not a valid RFC 3339 time; write it like 2026-03-01T12:00:00Z, at most 7 days ahead" $i $raw) -}}
{{- end -}}
{{- /* the 7-day cap is checked where the rotation runs (the credentials Job, internal/chartjobs/credentials), never
against the render's clock: the same values render the same on any day (GitOps) */ -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateTLS" -}}
{{- if and .Values.tls.enabled (eq .Values.tls.authClients "yes") -}}
{{- fail "tls.authClients: \"yes\" requires a client certificate from every client, and the controller and the data pods' bootstrap connect without one, so nothing could observe or repair the instance; use optional (clients may present one) or no" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.existingSecret: tls.enabled needs a Secret with tls.crt, tls.key and ca.crt covering the node FQDNs; set tls.existingSecret (e.g. from cert-manager)" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.enabled) -}}
{{- fail "tls.certManager.enabled: the Certificate is for TLS; set tls.enabled too (and tls.existingSecret: the Secret cert-manager writes)" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.issuerRef.name: name the cert-manager Issuer or ClusterIssuer that signs the Certificate (its Secret must carry ca.crt: a CA or Vault issuer)" -}}
{{- end -}}
{{- if .Values.tls.certManager.enabled -}}
{{- include "valkey.checkCertManager" (dict "field" "tls.certManager" "cm" .Values.tls.certManager) -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled: needs metrics.enabled (the exporter sidecar)" -}}
{{- end -}}
{{- if and .Values.metrics.podMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.podMonitor.enabled: needs metrics.enabled (the exporter sidecar)" -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateLabels" -}}
{{- range $field, $m := dict "instanceLabels" .Values.instanceLabels "podLabels" .Values.podLabels -}}
{{- include "valkey.checkLabels" (dict "field" $field "labels" $m) -}}
{{- range $k, $v := $m -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k) -}}
{{- fail (printf "%s.%s: the prefixes app.kubernetes.io/, helm.sh/ and valkey.io/ are set by the chart; choose another label key (e.g. example.com/sentinel)" $field $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A StatefulSet's volumeClaimTemplates cannot change (the API server refuses the upgrade with a message naming
no value): compare the installed StatefulSets F-<i> with what this render would apply. Only a render that sees
the cluster checks this (`helm template` cannot, and renders).
*/}}
{{- define "valkey.validateClaims" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- $F := include "valkey.fullname" . -}}
{{- $own := and $s.persistence (not .Values.persistence.existingClaims) -}}
{{- $how := "see \"Growing the volumes\" in the chart README" -}}
{{- range $i := until (int (include "valkey.nodeCount" .)) -}}
{{- $sts := lookup "apps/v1" "StatefulSet" $.Release.Namespace (printf "%s-%d" $F $i) | default dict -}}
{{- if $sts -}}
{{- $vcts := $sts.spec.volumeClaimTemplates | default list -}}
{{- if and $own (not $vcts) -}}
{{- fail (printf "persistence: StatefulSet %s-%d has no claims of its own (persistence off, or persistence.existingClaims), and a StatefulSet's volumeClaimTemplates cannot change; delete the StatefulSets with --cascade=orphan before this upgrade (the pods keep running), %s" $F $i $how) -}}
{{- end -}}
{{- if and $vcts (not $own) -}}
{{- fail (printf "persistence: StatefulSet %s-%d has claims of its own, and a StatefulSet's volumeClaimTemplates cannot change; to turn persistence off or move to persistence.existingClaims, delete the StatefulSets with --cascade=orphan first (the pods keep running), %s" $F $i $how) -}}
{{- end -}}
{{- if and $own $vcts -}}
{{- $old := (index $vcts 0).spec -}}
{{- $oldSize := toString $old.resources.requests.storage -}}
{{- if ne (include "valkey.bytes" $oldSize) (include "valkey.bytes" $s.size) -}}
{{- fail (printf "persistence.size: StatefulSet %s-%d claims %s per node and a StatefulSet's volumeClaimTemplates cannot change, so %s cannot be applied by an upgrade; keep persistence.size: %s, or grow the volumes first (resize each PVC data-%s-<i>-0, then delete the StatefulSets with --cascade=orphan and upgrade): %s" $F $i $oldSize $s.size $oldSize $F $how) -}}
{{- end -}}
{{- $oldClass := toString ($old.storageClassName | default "") -}}
{{- if ne $oldClass (toString $.Values.persistence.storageClass) -}}
{{- fail (printf "persistence.storageClass: StatefulSet %s-%d claims %s and a StatefulSet's volumeClaimTemplates cannot change; %s (moving to another class means migrating the data to a new release)" $F $i (ternary (printf "storage class %q" $oldClass) "the cluster's default storage class" (ne $oldClass "")) (ternary (printf "keep persistence.storageClass: %s" $oldClass) "leave persistence.storageClass empty" (ne $oldClass ""))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* engine and monitor name are immutable: compare with the existing descriptor. */}}
{{- define "valkey.validateImmutable" -}}
{{- include "valkey.validateClaims" . -}}
{{- $cm := lookup "v1" "ConfigMap" .Release.Namespace (printf "%s-instance" (include "valkey.fullname" .)) | default dict -}}
{{- $raw := get ($cm.data | default dict) "instance.json" -}}
{{- if $raw -}}
{{- $old := $raw | fromJson -}}
{{- if and $old.engine (ne $old.engine .Values.engine) -}}
{{- fail (printf "engine: this instance runs %q and engine cannot change (data files are not interchangeable); keep engine: %s or install a new release and migrate" $old.engine $old.engine) -}}
{{- end -}}
{{- if and $old.monitorName (ne $old.monitorName (include "valkey.monitorName" .)) -}}
{{- fail (printf "sentinel.monitorName: this instance is monitored as %q and the monitor name cannot change (clients use it); set sentinel.monitorName: %s" $old.monitorName $old.monitorName) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
commonLabels, commonAnnotations and the Services: keys the chart sets itself are refused (they would appear
twice in an object, which the API server rejects or, worse, one silently wins).
*/}}
{{- define "valkey.validateCommon" -}}
{{- include "valkey.checkLabels" (dict "field" "commonLabels" "labels" .Values.commonLabels) -}}
{{- range $k, $_ := .Values.commonLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k) -}}
{{- fail (printf "commonLabels.%s: the prefixes app.kubernetes.io/, helm.sh/ and valkey.io/ are set by the chart; choose another label key (e.g. example.com/team)" $k) -}}
{{- end -}}
{{- end -}}
{{- $annotations := dict "commonAnnotations" .Values.commonAnnotations "podAnnotations" .Values.podAnnotations "service.primary.annotations" .Values.service.primary.annotations "service.replicas.annotations" .Values.service.replicas.annotations "service.headless.annotations" .Values.service.headless.annotations -}}
{{- range $field, $m := $annotations -}}
{{- range $k, $_ := $m -}}
{{- include "valkey.checkFormat" (dict "field" (printf "%s key %q" $field $k) "value" $k "format" "labelKey") -}}
{{- if and (eq $field "commonAnnotations") (or (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k)) -}}
{{- fail (printf "commonAnnotations.%s: the prefixes helm.sh/ and valkey.io/ are set by the chart (hooks, revisions); choose another annotation key (e.g. example.com/owner)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "valkey.checkServices" (list
  (list "service.primary" .Values.service.primary (list "valkey") (list (int .Values.port)))
  (list "service.replicas" .Values.service.replicas (list "valkey") (list (int .Values.port)))
  (list "service.headless" (merge (dict "type" "ClusterIP") .Values.service.headless) (list "valkey" "metrics") (ternary (list (int .Values.port) (int .Values.metrics.port)) (list (int .Values.port)) .Values.metrics.enabled))
) -}}
{{- end -}}

{{/*
extraEnvVars, initContainers, sidecars, extraVolumes and the pods' ServiceAccount: names the chart uses are
refused (a second container, variable or volume of the same name is rejected by the API server or, for
variables, silently overrides the chart's).
*/}}
{{- define "valkey.validatePodExtras" -}}
{{- include "valkey.checkEnv" (dict "field" "extraEnvVars" "list" .Values.extraEnvVars "reserved" (list "REDISCLI_AUTH")) -}}
{{- $names := dict -}}
{{- range $field := list "initContainers" "sidecars" -}}
{{- range $i, $c := get $.Values $field -}}
{{- $f := printf "%s[%d].name" $field $i -}}
{{- include "valkey.checkFormat" (dict "field" $f "value" ($c.name | default "") "format" "dnsLabel" "example" "log-shipper") -}}
{{- if has $c.name (list "install-ctl" "dns-resolv" "valkey" "dns-cache" "metrics") -}}
{{- fail (printf "%s: %q is a container of the chart (install-ctl, dns-resolv, valkey, dns-cache, metrics); choose another name" $f $c.name) -}}
{{- end -}}
{{- if hasKey $names $c.name -}}
{{- fail (printf "%s: %q is already the name of %s; container names must be unique in a pod (init containers included)" $f $c.name (get $names $c.name)) -}}
{{- end -}}
{{- $_ := set $names $c.name (printf "%s[%d]" $field $i) -}}
{{- if not $c.image -}}
{{- fail (printf "%s[%d].image: container %q has no image; set one" $field $i $c.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $volNames := dict -}}
{{- range $i, $v := .Values.extraVolumes -}}
{{- $f := printf "extraVolumes[%d].name" $i -}}
{{- include "valkey.checkFormat" (dict "field" $f "value" ($v.name | default "") "format" "dnsLabel" "example" "scratch") -}}
{{- if has $v.name (list "config" "instance" "sentinels" "sentinel-auth" "system" "acl" "runtime" "bin" "data" "tls" "dns") -}}
{{- fail (printf "%s: %q is a volume of the chart (config, instance, sentinels, sentinel-auth, system, acl, runtime, bin, data, tls, dns); choose another name" $f $v.name) -}}
{{- end -}}
{{- if hasKey $volNames $v.name -}}
{{- fail (printf "%s: %q is already the name of %s; volume names must be unique in a pod (the API server refuses the StatefulSet)" $f $v.name (get $volNames $v.name)) -}}
{{- end -}}
{{- $_ := set $volNames $v.name (printf "extraVolumes[%d]" $i) -}}
{{- $sources := omit $v "name" | keys | sortAlpha -}}
{{- if gt (len $sources) 1 -}}
{{- fail (printf "extraVolumes[%d]: %s are %d volume sources; a volume has exactly one (the API server refuses the StatefulSet); keep one" $i (join " and " $sources) (len $sources)) -}}
{{- end -}}
{{- end -}}
{{- $volumes := list -}}
{{- range .Values.extraVolumes -}}{{- $volumes = append $volumes .name -}}{{- end -}}
{{- include "valkey.checkMounts" (dict "field" "extraVolumeMounts" "list" .Values.extraVolumeMounts "volumes" $volumes "paths" (list "/data" "/etc/valkey-ha" "/opt/valkey-ha")) -}}
{{- $ports := dict (toString (int .Values.port)) "the server port (port)" -}}
{{- if .Values.metrics.enabled -}}{{- $_ := set $ports (toString (int .Values.metrics.port)) "the exporter's port (metrics.port)" -}}{{- end -}}
{{- include "valkey.checkContainerPorts" (dict "containers" (dict "sidecars" .Values.sidecars "initContainers" .Values.initContainers) "ports" $ports) -}}
{{- range $p := list "" "controller." -}}
{{- $v := ternary $.Values.controller $.Values (eq $p "controller.") -}}
{{- include "valkey.checkTolerations" (dict "field" (printf "%stolerations" $p) "list" $v.tolerations) -}}
{{- include "valkey.checkAffinity" (dict "field" (printf "%saffinity" $p) "affinity" $v.affinity) -}}
{{- include "valkey.checkSpread" (dict "field" (printf "%stopologySpreadConstraints" $p) "list" $v.topologySpreadConstraints) -}}
{{- end -}}
{{- $sa := .Values.serviceAccount -}}
{{- if $sa.name -}}
{{- include "valkey.checkFormat" (dict "field" "serviceAccount.name" "value" $sa.name "format" "dnsName" "example" "cache-data") -}}
{{- end -}}
{{- if and $sa.create (eq $sa.name "default") -}}
{{- fail "serviceAccount.name: \"default\" exists in every namespace and is not the chart's to create; leave serviceAccount.name empty, or set serviceAccount.create: false to use it" -}}
{{- end -}}
{{- if and (not $sa.create) $sa.annotations -}}
{{- fail "serviceAccount.annotations: they apply to a ServiceAccount the chart creates, and serviceAccount.create is false; annotate your ServiceAccount yourself, or remove them" -}}
{{- end -}}
{{- $F := include "valkey.fullname" . -}}
{{- $name := include "valkey.dataServiceAccount" . -}}
{{- range $other := list (printf "%s-controller" $F) (printf "%s-test" $F) (include "valkey.sentinelControllerSA" .) (include "valkey.sharedServiceAccount" .) -}}
{{- if eq $name $other -}}
{{- fail (printf "serviceAccount.name: %q is the ServiceAccount of a valkey-ha controller or of the helm test, which holds rights (or reads the _sentinel password) the data pods must not have; choose another name, or leave it empty for %s" $name $F) -}}
{{- end -}}
{{- end -}}
{{- if .Values.extraContainers -}}
{{- fail "extraContainers: renamed to sidecars; move the list there" -}}
{{- end -}}
{{- end -}}

{{/*
Controller knobs: requests at most the limits (a request above its limit is refused by the API server), the
priority class.
*/}}
{{- define "valkey.validateController" -}}
{{- if and (eq .Values.controller.mode "shared") (not .Values.controller.enabled) -}}
{{- fail "controller.mode: shared, but controller.enabled is false, which runs no controller at all; set controller.enabled: true for the shared controller, or leave controller.mode at dedicated" -}}
{{- end -}}
{{- if eq (include "valkey.shared" .) "true" -}}
{{- $F := include "valkey.fullname" . -}}
{{- $sa := include "valkey.sharedServiceAccount" . -}}
{{- if eq $sa "default" -}}
{{- fail "controller.shared.serviceAccount: \"default\" is the ServiceAccount of every pod that names none, so each of them could act on this instance; name the shared controller's own ServiceAccount (S-instance-controller of the valkey-sentinel release that runs it)" -}}
{{- end -}}
{{- $sharedNS := include "valkey.sharedNamespace" . -}}
{{- $own := and (eq $sharedNS .Release.Namespace) (has $sa (list (printf "%s-controller" $F) (printf "%s-test" $F))) -}}
{{- /* the quorum's controller lives in sentinel.namespace, which may be another namespace (docs/fleet.md) */ -}}
{{- $quorum := and (eq $sharedNS (include "valkey.sentinelNamespace" .)) (eq $sa (include "valkey.sentinelControllerSA" .)) -}}
{{- if $own -}}
{{- fail (printf "controller.shared.serviceAccount: %q is this release's own controller or its helm test, not a shared instance controller; name the valkey-sentinel release's S-instance-controller" $sa) -}}
{{- end -}}
{{- if $quorum -}}
{{- fail (printf "controller.shared.serviceAccount: %q in namespace %s is the quorum's Sentinel controller (sentinel.controllerServiceAccount), which must never get this instance's _operator password; name the shared instance controller, %s-instance-controller for valkey-sentinel release %s" $sa $sharedNS (include "valkey.sentinelRelease" .) (include "valkey.sentinelRelease" .)) -}}
{{- end -}}
{{- end -}}
{{- $r := .Values.controller.resources -}}
{{- $req := $r.requests | default dict -}}
{{- with include "valkey.given" $req.cpu -}}
{{- include "valkey.checkFormat" (dict "field" "controller.resources.requests.cpu" "value" . "format" "cpu" "example" "20m") -}}
{{- if eq (float64 (include "valkey.millicores" .)) 0.0 -}}
{{- fail (printf "controller.resources.requests.cpu: %q requests no CPU, so the controller could be starved on a busy node; request at least 1m, such as 20m, or leave it empty for the limit" (toString .)) -}}
{{- end -}}
{{- if gt (float64 (include "valkey.millicores" .)) (float64 (include "valkey.millicores" $r.cpu)) -}}
{{- fail (printf "controller.resources.requests.cpu: %s is above the limit controller.resources.cpu (%s); a request may not exceed its limit. Lower the request or raise the limit" (toString .) (toString $r.cpu)) -}}
{{- end -}}
{{- end -}}
{{- with $req.memory -}}
{{- include "valkey.checkFormat" (dict "field" "controller.resources.requests.memory" "value" . "format" "quantity" "example" "64Mi") -}}
{{- if eq (float64 (include "valkey.bytes" .)) 0.0 -}}
{{- fail (printf "controller.resources.requests.memory: %q requests no memory, so the controller would be the first pod evicted under memory pressure; request at least 32Mi, or leave it empty for the limit" (toString .)) -}}
{{- end -}}
{{- if gt (float64 (include "valkey.bytes" .)) (float64 (include "valkey.bytes" $r.memory)) -}}
{{- fail (printf "controller.resources.requests.memory: %s is above the limit controller.resources.memory (%s); a request may not exceed its limit. Lower the request or raise the limit" (toString .) (toString $r.memory)) -}}
{{- end -}}
{{- end -}}
{{- with .Values.controller.priorityClassName -}}
{{- include "valkey.checkFormat" (dict "field" "controller.priorityClassName" "value" . "format" "dnsName" "example" "high-priority") -}}
{{- if hasPrefix "system-" . -}}
{{- fail (printf "controller.priorityClassName: %q is reserved for pods in kube-system, so the controller pods would never be created here; use a PriorityClass of your own" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The valkey-sentinel release (fullname S, same namespace) that monitors this instance: sentinel.release.
Its controller's ServiceAccount gets the _sentinel password (sentinel.controllerServiceAccount, default
S-controller), and this instance's pods, controller and helm test use its _instance password, Secret
S-auth-instance (spec.SentinelSecretName), which that release publishes; the controller alone also reads its
_controller password (SENTINEL RESET), Secret S-auth-controller (valkey.quorumControllerSecret).
*/}}
{{- define "valkey.sentinelRelease" -}}
{{- .Values.sentinel.release -}}
{{- end -}}

{{- define "valkey.sentinelControllerSA" -}}
{{- .Values.sentinel.controllerServiceAccount | default (printf "%s-controller" (include "valkey.sentinelRelease" .)) -}}
{{- end -}}

{{/*
The Secret with the quorum's _instance credential, in this namespace: S-auth-instance of a quorum of this
namespace, or F-quorum-auth (spec.Instance.QuorumCredentialSecret), this release's copy of the credential of a
quorum in sentinel.namespace, which the credentials Job creates empty and that quorum's controller fills
(with its namespace and release: the only Sentinels it may go to).
*/}}
{{- define "valkey.quorumSecret" -}}
{{- if eq (include "valkey.crossNamespaceQuorum" .) "true" -}}
{{- printf "%s-quorum-auth" (include "valkey.fullname" .) -}}
{{- else -}}
{{- printf "%s-auth-instance" (include "valkey.sentinelRelease" .) -}}
{{- end -}}
{{- end -}}

{{/* true when the quorum is in another namespace (sentinel.namespace). */}}
{{- define "valkey.crossNamespaceQuorum" -}}
{{- ne (include "valkey.sentinelNamespace" .) .Release.Namespace -}}
{{- end -}}

{{/* The quorum's _controller Secret, S-auth-controller: granted to this instance's controller only, never
mounted into a pod and never granted to the helm test (its user may SENTINEL RESET). */}}
{{- define "valkey.quorumControllerSecret" -}}
{{- printf "%s-auth-controller" (include "valkey.sentinelRelease" .) -}}
{{- end -}}

{{/* ---------------------------------------------------------------- issue 27 knobs (podSecurityContext, ...) */}}

{{/*
Checks of the issue 27 knobs: data-pod requests (at most the limits, memory at least maxmemory) and the typed
Services' fields (each only with the Service type that reads it; no headless F-primary/F-replicas).
*/}}
{{- define "valkey.validateKnobs" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- $req := .Values.resources.requests -}}
{{- with include "valkey.given" $req.cpu -}}
{{- include "valkey.checkFormat" (dict "field" "resources.requests.cpu" "value" . "format" "cpu" "example" "100m") -}}
{{- if eq (float64 (include "valkey.millicores" .)) 0.0 -}}
{{- fail (printf "resources.requests.cpu: %q requests no CPU, so the server (and its probes) could be starved on a busy node and fail over for no reason; request at least 1m, such as 100m, or leave it empty for the limit" (toString .)) -}}
{{- end -}}
{{- if gt (float64 (include "valkey.millicores" .)) (float64 (include "valkey.millicores" $s.cpu)) -}}
{{- fail (printf "resources.requests.cpu: %s is above the CPU limit (%s, resources.limits.cpu or the plan's); a request may not exceed its limit. Lower the request or raise the limit" (toString .) $s.cpu) -}}
{{- end -}}
{{- end -}}
{{- with $req.memory -}}
{{- include "valkey.checkFormat" (dict "field" "resources.requests.memory" "value" . "format" "quantity" "example" "512Mi") -}}
{{- if gt (float64 (include "valkey.bytes" .)) (float64 (include "valkey.bytes" $s.memory)) -}}
{{- fail (printf "resources.requests.memory: %s is above the memory limit (%s, resources.limits.memory or the plan's); a request may not exceed its limit. Lower the request or raise the limit" (toString .) $s.memory) -}}
{{- end -}}
{{- if lt (float64 (include "valkey.bytes" .)) (float64 (include "valkey.bytes" $s.maxmemory)) -}}
{{- fail (printf "resources.requests.memory: %s is below maxmemory (%s): the scheduler would place the pod on a node that cannot hold its data set, and the first memory pressure evicts it (an evicted primary costs a failover). Request at least maxmemory, or leave it empty for the limit" (toString .) $s.maxmemory) -}}
{{- end -}}
{{- end -}}
{{- range $name := list "primary" "replicas" -}}
{{- $svc := get $.Values.service $name -}}
{{- $f := printf "service.%s" $name -}}
{{- with $svc.nodePort -}}
{{- if eq $svc.type "ClusterIP" -}}
{{- fail (printf "%s.nodePort: a ClusterIP Service has no node ports; set %s.type: NodePort or LoadBalancer, or leave nodePort 0" $f $f) -}}
{{- end -}}
{{- if or (lt (int .) 30000) (gt (int .) 32767) -}}
{{- fail (printf "%s.nodePort: %d is outside the API server's default NodePort range 30000-32767, so the Service would be refused after the release's other objects were created; choose a port in the range, or leave it 0 and Kubernetes picks one from your cluster's range" $f (int .)) -}}
{{- end -}}
{{- $others := list -}}
{{- range $o := list "primary" "replicas" -}}
{{- $os := get $.Values.service $o -}}
{{- if and (ne $o $name) $os.nodePort -}}{{- $others = append $others (int $os.nodePort) -}}{{- end -}}
{{- range $p := $os.extraPorts | default list -}}{{- with $p.nodePort -}}{{- $others = append $others (int .) -}}{{- end -}}{{- end -}}
{{- end -}}
{{- if $.Values.externalAccess.enabled -}}
{{- range $p := $.Values.externalAccess.nodePorts | default list -}}{{- $others = append $others (int $p) -}}{{- end -}}
{{- end -}}
{{- if has (int .) $others -}}
{{- fail (printf "%s.nodePort: %d is also a node port of another Service of this release (service.*.nodePort, service.*.extraPorts or externalAccess.nodePorts); a node port serves one Service, so the API server would refuse the second; choose another" $f (int .)) -}}
{{- end -}}
{{- end -}}
{{- if and $svc.externalTrafficPolicy (eq $svc.type "ClusterIP") -}}
{{- fail (printf "%s.externalTrafficPolicy: %s applies to type NodePort or LoadBalancer only (the API server refuses it on a ClusterIP Service); set %s.type, or leave it empty" $f $svc.externalTrafficPolicy $f) -}}
{{- end -}}
{{- range $k := list "loadBalancerIP" "loadBalancerClass" -}}
{{- if and (get $svc $k) (ne $svc.type "LoadBalancer") -}}
{{- fail (printf "%s.%s: %q applies to type LoadBalancer only (%s.type is %s, so it would be ignored or refused); set %s.type: LoadBalancer, or leave it empty" $f $k (get $svc $k) $f $svc.type $f) -}}
{{- end -}}
{{- end -}}
{{- with $svc.loadBalancerClass -}}
{{- if not (regexMatch "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" .) -}}
{{- fail (printf "%s.loadBalancerClass: %q is not a label-style name (prefix/name); for example service.k8s.aws/nlb" $f .) -}}
{{- end -}}
{{- end -}}
{{- with $svc.loadBalancerIP -}}
{{- if not (regexMatch "^([0-9]{1,3}\\.){3}[0-9]{1,3}$|^[0-9a-fA-F:]*:[0-9a-fA-F:.]*$" .) -}}
{{- fail (printf "%s.loadBalancerIP: %q is not an IP address; for example 203.0.113.10" $f .) -}}
{{- end -}}
{{- end -}}
{{- with $svc.clusterIP -}}
{{- if eq (lower .) "none" -}}
{{- fail (printf "%s.clusterIP: None would make Service F-%s headless: its name would resolve to pod addresses that clients and their resolvers cache past a switch (a cluster IP moves them within a second), and it could not be a NodePort or LoadBalancer. Leave it empty or give an address from the Service CIDR" $f $name) -}}
{{- end -}}
{{- if not (regexMatch "^([0-9]{1,3}\\.){3}[0-9]{1,3}$|^[0-9a-fA-F:]*:[0-9a-fA-F:.]*$" .) -}}
{{- fail (printf "%s.clusterIP: %q is not an IP address; give one from the cluster's Service CIDR (for example 10.96.0.50), or leave it empty" $f .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The optional spec fields of a typed Service (service.primary, service.replicas): only those set, each on a line of its own indented by 2. */}}
{{- define "valkey.serviceKnobs" -}}
{{- range $k := list "clusterIP" "externalTrafficPolicy" "loadBalancerClass" "loadBalancerIP" "sessionAffinity" }}
{{- with get $ $k }}
  {{ $k }}: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The issue 27 monitor and rule knobs of charts/valkey. */}}
{{- define "valkey.validateObservabilityKnobs" -}}
{{- include "valkey.validateMonitor" (dict "field" "metrics.podMonitor" "m" .Values.metrics.podMonitor "ctx" .) -}}
{{- include "valkey.validateMonitor" (dict "field" "metrics.serviceMonitor" "m" .Values.metrics.serviceMonitor "ctx" .) -}}
{{- include "valkey.validateMonitor" (dict "field" "controller.serviceMonitor" "m" .Values.controller.serviceMonitor "ctx" .) -}}
{{- include "valkey.validateAdditionalRules" . -}}
{{- end -}}

{{/* The StatefulSets whose claims come from their own volumeClaimTemplates (persistence on, no existingClaims), space-separated. */}}
{{- define "valkey.claimStatefulSets" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- if and $s.persistence (not .Values.persistence.existingClaims) -}}
{{- $F := include "valkey.fullname" . -}}
{{- $names := list -}}
{{- range $i := until (int (include "valkey.nodeCount" .)) }}{{ $names = append $names (printf "%s-%d" $F $i) }}{{ end -}}
{{- join " " $names -}}
{{- end -}}
{{- end -}}

{{/* diagnosticMode: refused while an instance controller would act on the pods (roll them, repair, sync users). */}}
{{- define "valkey.validateDiagnosticMode" -}}
{{- if and .Values.diagnosticMode.enabled .Values.controller.enabled -}}
{{- fail "diagnosticMode.enabled: the instance controller (controller.enabled) rolls pods whose template changed, so it would replace a replica with a diagnostic pod, halt there (that node no longer answers) and keep reporting and acting on the others: a mix you did not choose; set controller.enabled: false while you debug, and back to true with diagnosticMode.enabled: false" -}}
{{- end -}}
{{- end -}}

