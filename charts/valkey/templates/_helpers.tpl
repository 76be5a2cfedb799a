{{/*
Names, labels, derived settings and validate* helpers of charts/valkey.
Numbers from values arrive as float64: always pass them through `int` before printing.
*/}}

{{/* Chart name, truncated to 63 characters. */}}
{{- define "valkey.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name F, truncated to 63 characters. validateNames refuses more than 40, because F-<i> must stay a
valid StatefulSet name (revision hash label) and F-replicas a valid Service name.
*/}}
{{- define "valkey.fullname" -}}
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

{{- define "valkey.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Immutable selector subset. */}}
{{- define "valkey.selectorLabels" -}}
app.kubernetes.io/name: {{ include "valkey.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end -}}

{{/* Common labels; call with (dict "ctx" $ "component" "data"). */}}
{{- define "valkey.labels" -}}
{{- $ctx := .ctx -}}
helm.sh/chart: {{ include "valkey.chart" $ctx }}
{{ include "valkey.selectorLabels" $ctx }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
app.kubernetes.io/part-of: valkey-ha
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of data pod i (selector of StatefulSet F-<i>); call with (dict "ctx" $ "index" i). */}}
{{- define "valkey.nodeSelectorLabels" -}}
{{ include "valkey.selectorLabels" .ctx }}
app.kubernetes.io/component: data
valkey.io/instance: {{ include "valkey.fullname" .ctx }}
valkey.io/node-index: {{ .index | int | toString | quote }}
{{- end -}}

{{- define "valkey.serverImage" -}}
{{- $repo := .Values.image.repository | default (ternary "redis" "valkey/valkey" (eq .Values.engine "redis")) -}}
{{- $tag := .Values.image.tag | default (ternary "7.0" "9.1" (eq .Values.engine "redis")) -}}
{{- printf "%s:%s" $repo (toString $tag) -}}
{{- end -}}

{{- define "valkey.serverBin" -}}
{{- ternary "redis-server" "valkey-server" (eq .Values.engine "redis") -}}
{{- end -}}

{{- define "valkey.cliBin" -}}
{{- ternary "redis-cli" "valkey-cli" (eq .Values.engine "redis") -}}
{{- end -}}

{{- define "valkey.ctlImage" -}}
{{- printf "%s:%s" .Values.controller.image.repository (toString (.Values.controller.image.tag | default .Chart.AppVersion)) -}}
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

{{/* Secret holding the system passwords (mounted at /etc/valkey-ha/system). */}}
{{- define "valkey.systemSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-system" (include "valkey.fullname" .)) -}}
{{- end -}}

{{/* Restricted container securityContext (Pod Security Standard "restricted"). */}}
{{- define "valkey.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 999
runAsGroup: 999
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "valkey.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 999
runAsGroup: 999
fsGroup: 999
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
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
Effective sizing: the plan preset (seed 003's table), overridden by explicit values. Returns JSON.
maxmemory about 70% of the memory limit: the fork of an RDB/AOF rewrite needs copy-on-write headroom.
*/}}
{{- define "valkey.sizing" -}}
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
  "cpu" (toString (.Values.resources.limits.cpu | default $p.cpu))
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
{{- if $s.persistence }}
appendonly yes
appendfsync everysec
{{- else }}
appendonly no
save ""
{{- end }}
repl-diskless-sync yes
{{- if gt (int .Values.minReplicasToWrite) 0 }}
min-replicas-to-write {{ int .Values.minReplicasToWrite }}
min-replicas-max-lag {{ int .Values.minReplicasMaxLag }}
{{- end }}
{{- range $k := keys .Values.config | sortAlpha }}
{{- $v := get $.Values.config $k }}
{{- if kindIs "bool" $v }}
{{ $k }} {{ ternary "yes" "no" $v }}
{{- else if kindIs "float64" $v }}
{{ $k }} {{ int64 $v }}
{{- else if eq (toString $v) "" }}
{{ $k }} ""
{{- else }}
{{ $k }} {{ $v }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
Credentials of system and customer users, computed once per render and memoized on the root context so that
every template (Secrets, ACL) sees the same generated passwords. Existing Secrets are reused (lookup), so
passwords survive upgrades. Returns JSON:
{"system": {"_operator": pw, ...}, "sentinel": pw,
 "users": [{"name", "secretName", "managed", "password", "generation", "previousHash", "previousValidUntil", "previousActive"}]}
Rotation (issue 19): raising rotation.generation above the one stored in F-user-<name> issues a new password and
stores the SHA-256 of the old one with the deadline previousValidUntil had at that moment; later renders use
the stored deadline (values cannot stretch it) and drop both once it passed. The old plaintext is never kept.
*/}}
{{- define "valkey.credentials" -}}
{{- if not (hasKey . "_valkeyHACredentials") -}}
{{- $ns := .Release.Namespace -}}
{{- $F := include "valkey.fullname" . -}}
{{- $system := dict -}}
{{- if .Values.auth.existingSecret -}}
{{- $s := lookup "v1" "Secret" $ns .Values.auth.existingSecret | default dict -}}
{{- if not $s -}}
{{- fail (printf "auth.existingSecret: Secret %q not found in namespace %q; create it first with keys _operator, _replication, _probe and _exporter, or leave auth.existingSecret empty to let the chart generate them" .Values.auth.existingSecret $ns) -}}
{{- end -}}
{{- range $u := list "_operator" "_replication" "_probe" "_exporter" -}}
{{- $v := get ($s.data | default dict) $u -}}
{{- if not $v -}}
{{- fail (printf "auth.existingSecret: Secret %q has no key %q; add it (every system user needs a password)" $.Values.auth.existingSecret $u) -}}
{{- end -}}
{{- $_ := set $system $u (b64dec $v) -}}
{{- end -}}
{{- else -}}
{{- $s := lookup "v1" "Secret" $ns (printf "%s-system" $F) | default dict -}}
{{- $data := $s.data | default dict -}}
{{- range $u := list "_operator" "_replication" "_probe" "_exporter" -}}
{{- $v := get $data $u -}}
{{- $_ := set $system $u (ternary (b64dec (toString $v)) (randAlphaNum 40) (not (empty $v))) -}}
{{- end -}}
{{- end -}}
{{- $sa := lookup "v1" "Secret" $ns (printf "%s-sentinel-auth" $F) | default dict -}}
{{- $saPw := get ($sa.data | default dict) "password" -}}
{{- $sentinel := ternary (b64dec (toString $saPw)) (randAlphaNum 40) (not (empty $saPw)) -}}
{{- $users := list -}}
{{- range $i, $u := .Values.users -}}
{{- $rot := $u.rotation | default dict -}}
{{- $gen := int ($rot.generation | default 0) -}}
{{- $e := dict "name" $u.name "generation" $gen "previousHash" "" "previousValidUntil" "" "previousActive" false -}}
{{- if $u.passwordSecret -}}
{{- $s := lookup "v1" "Secret" $ns $u.passwordSecret.name | default dict -}}
{{- if not $s -}}
{{- fail (printf "users[%d].passwordSecret.name: Secret %q not found in namespace %q; create it first, or drop passwordSecret to let the chart generate the password" $i $u.passwordSecret.name $ns) -}}
{{- end -}}
{{- $v := get ($s.data | default dict) $u.passwordSecret.key -}}
{{- if not $v -}}
{{- fail (printf "users[%d].passwordSecret.key: Secret %q has no key %q" $i $u.passwordSecret.name $u.passwordSecret.key) -}}
{{- end -}}
{{- $_ := set $e "password" (b64dec $v) -}}
{{- $_ := set $e "secretName" $u.passwordSecret.name -}}
{{- $_ := set $e "managed" false -}}
{{- else -}}
{{- $sn := printf "%s-user-%s" $F $u.name -}}
{{- $s := lookup "v1" "Secret" $ns $sn | default dict -}}
{{- $data := $s.data | default dict -}}
{{- $_ := set $e "secretName" $sn -}}
{{- $_ := set $e "managed" true -}}
{{- if not (get $data "password") -}}
{{- $_ := set $e "password" (randAlphaNum 40) -}}
{{- else -}}
{{- $stored := int (atoi (b64dec (toString (get $data "generation" | default (b64enc "0"))))) -}}
{{- if gt $gen $stored -}}
{{- /* rotation: a new password; the old one's hash stays valid until previousValidUntil, fixed now */ -}}
{{- $_ := set $e "previousHash" (sha256sum (b64dec (toString (get $data "password")))) -}}
{{- $_ := set $e "previousValidUntil" (toString ($rot.previousValidUntil | default "")) -}}
{{- $_ := set $e "password" (randAlphaNum 40) -}}
{{- else if lt $gen $stored -}}
{{- fail (printf "users[%d].rotation.generation: %d is below the generation %d stored in Secret %s; generations only go up: keep %d, or raise it above %d to rotate again" $i $gen $stored $sn $stored $stored) -}}
{{- else -}}
{{- $_ := set $e "password" (b64dec (toString (get $data "password"))) -}}
{{- $prevHash := b64dec (toString (get $data "previousHash" | default "")) -}}
{{- $legacy := b64dec (toString (get $data "previous" | default "")) -}}
{{- if and (not $prevHash) $legacy -}}{{- $prevHash = sha256sum $legacy -}}{{- end -}}
{{- $_ := set $e "previousHash" $prevHash -}}
{{- $_ := set $e "previousValidUntil" (b64dec (toString (get $data "previousValidUntil" | default ""))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $e.previousHash $e.previousValidUntil -}}
{{- $_ := set $e "previousActive" (lt (now).Unix (mustToDate "2006-01-02T15:04:05Z07:00" $e.previousValidUntil).Unix) -}}
{{- end -}}
{{- if not $e.previousActive -}}
{{- $_ := set $e "previousHash" "" -}}
{{- $_ := set $e "previousValidUntil" "" -}}
{{- end -}}
{{- $users = append $users $e -}}
{{- end -}}
{{- $_ := set . "_valkeyHACredentials" (dict "system" $system "sentinel" $sentinel "users" $users) -}}
{{- end -}}
{{- toJson (get . "_valkeyHACredentials") -}}
{{- end -}}

{{/*
System users: one table, user -> rules (valkey 9.1 and 8.0, redis 7.0). internal/acl holds the same table; a test compares them.
  _operator     controller: observe (INFO, ROLE, CLIENT LIST), repair (REPLICAOF), CONFIG REWRITE after it,
                live ACL sync (ACL SETUSER/DELUSER/USERS/GETUSER/WHOAMI/LOG, CLIENT KILL USER to close the
                sessions of a revoked password), `test` writes a marker key under
                __valkey-ha:*, WAIT, and subscribes to Sentinel hello channels.
  _replication  replicas authenticate to the primary with it (masteruser): PSYNC, REPLCONF, PING only.
  _sentinel     exactly what Sentinel sends (Sentinel docs, "ACL"), plus FAILOVER for Valkey 9.
  _probe        readiness probe (valkey-cli with REDISCLI_AUTH): PING and INFO only.
  _exporter     metrics: stats only, no key access (no ~pattern), no CONFIG at all (GET would read masterauth;
                the exporter runs with --config-command=-).
*/}}
{{- define "valkey.systemUserRules" -}}
{{- toJson (list
  (list "_operator" "~__valkey-ha:* +hello +client|setname +client|list +ping +info +role +replicaof +failover +client|pause +client|unpause +config|get +config|rewrite +acl|setuser +acl|deluser +acl|users +acl|getuser +client|kill +acl|whoami +acl|log +get +set +del +wait +dbsize")
  (list "_replication" "+psync +replconf +ping")
  (list "_sentinel" "&__sentinel__:hello +multi +exec +ping +info +role +replicaof +slaveof +config|rewrite +client|setname +client|kill +script|kill +publish +subscribe +failover")
  (list "_probe" "+ping +info")
  (list "_exporter" "+hello +ping +info +client|list +slowlog|get +slowlog|len +latency|latest")
) -}}
{{- end -}}

{{/*
Customer access presets: rules after `nocommands` (internal/acl.Presets; a test compares them). `full` is
+@all without @admin: no ACL, CONFIG (GET would read masterauth), CLIENT KILL/PAUSE/LIST, replication,
SHUTDOWN, DEBUG, MODULE, MONITOR, SAVE, SLOWLOG or LATENCY.
*/}}
{{- define "valkey.accessPreset" -}}
{{- if eq . "readonly" -}}
-@all +@read +@connection -@admin +info +role
{{- else if eq . "readwrite" -}}
-@all +@read +@write +@connection +@transaction +@pubsub -@admin -@dangerous +info +role
{{- else -}}
+@all -@admin +role
{{- end -}}
{{- end -}}

{{/*
Subtracted from a customer whose keys are not exactly ["*"] (internal/acl.RestrictedKeyRules): commands that
list, pick or drop keys whatever the patterns, and that drop the script and function libraries of everyone.
*/}}
{{- define "valkey.restrictedKeyRules" -}}
-keys -randomkey -flushall -flushdb -swapdb -script|flush -function|flush -function|delete -function|restore
{{- end -}}

{{/*
Desired ACL state as a list (JSON): [{"name", "rules", "passwords": [{"hash"}, {"hash", "validUntil"}], "system"}].
"rules" is everything after the password hashes, so `user <name> on resetpass #h... <rules>` re-renders the line.
The `default` user is not in the list: it is always `off` in users.acl.
*/}}
{{- define "valkey.aclUsers" -}}
{{- $c := include "valkey.credentials" . | fromJson -}}
{{- $out := list -}}
{{- range $row := include "valkey.systemUserRules" . | fromJsonArray -}}
{{- $name := index $row 0 -}}
{{- $pw := ternary $c.sentinel (get $c.system $name) (eq $name "_sentinel") -}}
{{- $out = append $out (dict "name" $name "rules" (printf "resetkeys resetchannels nocommands %s" (index $row 1)) "passwords" (list (dict "hash" (sha256sum $pw))) "system" true) -}}
{{- end -}}
{{- range $i, $u := .Values.users -}}
{{- $cu := index $c.users $i -}}
{{- $pws := list (dict "hash" (sha256sum $cu.password)) -}}
{{- if $cu.previousActive -}}
{{- $pws = append $pws (dict "hash" $cu.previousHash "validUntil" $cu.previousValidUntil) -}}
{{- end -}}
{{- $keys := list -}}
{{- range $u.keys | default list -}}{{- $keys = append $keys (printf "~%s" .) -}}{{- end -}}
{{- $chans := list -}}
{{- range $u.channels | default list -}}{{- $chans = append $chans (printf "&%s" .) -}}{{- end -}}
{{- $rules := list "resetkeys" -}}
{{- $rules = concat $rules $keys (list "resetchannels") $chans (list "nocommands" (include "valkey.accessPreset" ($u.access | default "readonly"))) -}}
{{- if not (and (eq (len ($u.keys | default list)) 1) (eq (index $u.keys 0) "*")) -}}
{{- $rules = append $rules (include "valkey.restrictedKeyRules" .) -}}
{{- end -}}
{{- $out = append $out (dict "name" $u.name "rules" (join " " $rules) "passwords" $pws "system" false) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* users.acl: one clean-slate line per user (the ACL file format has no comments). */}}
{{- define "valkey.aclFile" -}}
user default off resetpass resetkeys resetchannels nocommands
{{- range $u := include "valkey.aclUsers" . | fromJsonArray }}
{{- $hashes := list -}}
{{- range $u.passwords -}}{{- $hashes = append $hashes (printf "#%s" .hash) -}}{{- end }}
user {{ $u.name }} on resetpass {{ join " " $hashes }} {{ $u.rules }}
{{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------- validation */}}

{{- define "valkey.validate" -}}
{{- include "valkey.validateNames" . -}}
{{- include "valkey.validateSizing" . -}}
{{- include "valkey.validateConfig" . -}}
{{- include "valkey.validateUsers" . -}}
{{- include "valkey.validateTLS" . -}}
{{- include "valkey.validateLabels" . -}}
{{- include "valkey.validateImmutable" . -}}
{{- end -}}

{{- define "valkey.validateNames" -}}
{{- $F := include "valkey.fullname" . -}}
{{- if gt (len $F) 40 -}}
{{- fail (printf "fullnameOverride: the full name %q is %d characters; at most 40 fit the per-node names (StatefulSet F-<i>, Service F-replicas). Set fullnameOverride to a shorter name" $F (len $F)) -}}
{{- end -}}
{{- if gt (int .Values.replicas) 99 -}}
{{- fail "replicas: at most 99 replicas (node names F-<i> must stay short); lower replicas" -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateSizing" -}}
{{- $s := include "valkey.sizing" . | fromJson -}}
{{- if not $s.memory -}}
{{- fail (printf "resources.limits.memory: plan %q sets no memory limit; set resources.limits.memory (e.g. 1Gi) or choose plan starter, casual or pro" .Values.plan) -}}
{{- end -}}
{{- if not $s.cpu -}}
{{- fail (printf "resources.limits.cpu: plan %q sets no CPU limit; set resources.limits.cpu (e.g. 250m) or choose plan starter, casual or pro" .Values.plan) -}}
{{- end -}}
{{- if not $s.maxmemory -}}
{{- fail (printf "maxmemory: plan %q sets no maxmemory; set maxmemory to about 70%% of resources.limits.memory (%s)" .Values.plan $s.memory) -}}
{{- end -}}
{{- $mem := float64 (include "valkey.bytes" $s.memory) -}}
{{- $max := float64 (include "valkey.bytes" $s.maxmemory) -}}
{{- if gt (mulf $max 100.0) (mulf $mem 80.0) -}}
{{- fail (printf "maxmemory: %s is above 80%% of resources.limits.memory (%s); an RDB/AOF rewrite forks and needs headroom. Lower maxmemory to about 70%% of the limit (%.0fM) or raise resources.limits.memory" $s.maxmemory $s.memory (divf (mulf $mem 0.7) 1e6)) -}}
{{- end -}}
{{- if $s.persistence -}}
{{- $size := float64 (include "valkey.bytes" $s.size) -}}
{{- if lt $size (mulf $max 5.0) -}}
{{- fail (printf "persistence.size: %s is under 5x maxmemory (%s); set persistence.size to at least %.0fM or lower maxmemory" $s.size $s.maxmemory (divf (mulf $max 5.0) 1e6)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Directives the chart or the bootstrap owns; passthrough must not override them. */}}
{{- define "valkey.reservedConfigKeys" -}}
{{- $bootstrap := "the bootstrap sets it (announce, role and replication auth are decided per pod)" -}}
{{- $fixed := "the chart fixes it" -}}
{{- toJson (dict
  "port" "set port" "tls-port" "set port and tls.enabled" "bind" $fixed "protected-mode" $fixed
  "dir" $fixed "aclfile" "define users in users" "user" "define users in users" "requirepass" "define users in users"
  "include" $fixed "rename-command" "restrict customer users with users[].access instead (the controller needs REPLICAOF and CONFIG REWRITE)"
  "replicaof" $bootstrap "slaveof" $bootstrap "masterauth" $bootstrap "masteruser" $bootstrap
  "replica-announce-ip" $bootstrap "slave-announce-ip" $bootstrap "replica-announce-port" "set port" "slave-announce-port" "set port"
  "maxmemory" "set maxmemory" "maxmemory-policy" "set maxmemoryPolicy" "maxclients" "set maxclients"
  "appendonly" "set persistence.enabled" "daemonize" $fixed "supervised" $fixed "pidfile" $fixed
  "logfile" $fixed "unixsocket" $fixed "repl-diskless-sync" $fixed
  "tls-cert-file" "set tls.existingSecret" "tls-key-file" "set tls.existingSecret" "tls-ca-cert-file" "set tls.existingSecret"
  "tls-replication" "set tls.enabled" "tls-auth-clients" "set tls.authClients" "tls-cluster" "set tls.enabled"
  "min-replicas-to-write" "set minReplicasToWrite" "min-slaves-to-write" "set minReplicasToWrite"
  "min-replicas-max-lag" "set minReplicasMaxLag" "min-slaves-max-lag" "set minReplicasMaxLag"
) -}}
{{- end -}}

{{- define "valkey.validateConfig" -}}
{{- if gt (int .Values.minReplicasToWrite) (int .Values.replicas) -}}
{{- fail (printf "minReplicasToWrite: %d is more than replicas (%d): the primary would refuse every write; set it to at most %d (0 turns it off)" (int .Values.minReplicasToWrite) (int .Values.replicas) (int .Values.replicas)) -}}
{{- end -}}
{{- $reserved := include "valkey.reservedConfigKeys" . | fromJson -}}
{{- range $k, $v := .Values.config -}}
{{- if not (regexMatch "^[a-z][a-z0-9-]{0,63}$" $k) -}}
{{- fail (printf "config.%s: not a server directive name (lowercase letters, digits and '-')" $k) -}}
{{- end -}}
{{- if hasKey $reserved (lower $k) -}}
{{- fail (printf "config.%s: %q is owned by the chart and cannot be passed through: %s" $k $k (get $reserved (lower $k))) -}}
{{- end -}}
{{- if hasPrefix "sentinel" (lower $k) -}}
{{- fail (printf "config.%s: Sentinel settings belong in sentinel.config (per master) or the valkey-sentinel chart" $k) -}}
{{- end -}}
{{- end -}}
{{- $ownedSentinelKeys := list "auth-pass" "auth-user" "notification-script" "client-reconfig-script" "quorum" "rename-command" "monitor" -}}
{{- range $k, $v := .Values.sentinel.config -}}
{{- if not (regexMatch "^[a-z][a-z0-9-]{0,63}$" $k) -}}
{{- fail (printf "sentinel.config.%s: not a SENTINEL SET key (lowercase letters, digits and '-')" $k) -}}
{{- end -}}
{{- if has $k $ownedSentinelKeys -}}
{{- fail (printf "sentinel.config.%s: owned by the Sentinel controller (auth and quorum come from the descriptor; scripts are not supported); remove it" $k) -}}
{{- end -}}
{{- end -}}
{{- if and (eq .Values.updateStrategy "RollingUpdate") .Values.controller.enabled -}}
{{- fail "updateStrategy: RollingUpdate lets the StatefulSet controller restart the primary without a failover; keep OnDelete while controller.enabled is true" -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateUsers" -}}
{{- $seen := dict -}}
{{- range $i, $u := .Values.users -}}
{{- if or (eq $u.name "default") (hasPrefix "_" $u.name) -}}
{{- fail (printf "users[%d].name: %q is reserved: `default` is always off and names starting with _ belong to the system users (_operator, _replication, _sentinel, _probe, _exporter); choose another name" $i $u.name) -}}
{{- end -}}
{{- if hasKey $seen $u.name -}}
{{- fail (printf "users[%d].name: user %q is listed twice; user names must be unique" $i $u.name) -}}
{{- end -}}
{{- $_ := set $seen $u.name true -}}
{{- range $j, $c := $u.channels | default list -}}
{{- $lit := regexFind "^[^*?\\[\\\\]*" $c -}}
{{- if or (hasPrefix "__sentinel__:" $lit) (hasPrefix $lit "__sentinel__:") -}}
{{- fail (printf "users[%d].channels[%d]: %q could match Sentinel's channel __sentinel__:hello, where a forged message moves the primary to any address; use a prefix of your own such as %q" $i $j $c (printf "%s.*" $u.name)) -}}
{{- end -}}
{{- end -}}
{{- $rot := $u.rotation | default dict -}}
{{- if and $u.passwordSecret $rot -}}
{{- fail (printf "users[%d].rotation: rotation applies to chart-generated passwords only; with passwordSecret, update that Secret instead (or drop passwordSecret)" $i) -}}
{{- end -}}
{{- if $rot.previousValidUntil -}}
{{- $until := mustToDate "2006-01-02T15:04:05Z07:00" (toString $rot.previousValidUntil) -}}
{{- if gt (sub $until.Unix (now).Unix) (mul 7 86400) -}}
{{- fail (printf "users[%d].rotation.previousValidUntil: %s is more than 7 days from now; the grace period of the previous password is capped at 7 days" $i $rot.previousValidUntil) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateTLS" -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.existingSecret: tls.enabled needs a Secret with tls.crt, tls.key and ca.crt covering the node FQDNs; set tls.existingSecret (e.g. from cert-manager)" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled: needs metrics.enabled (the exporter sidecar)" -}}
{{- end -}}
{{- if and .Values.metrics.podMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.podMonitor.enabled: needs metrics.enabled (the exporter sidecar)" -}}
{{- end -}}
{{- end -}}

{{- define "valkey.validateLabels" -}}
{{- range $k, $v := .Values.instanceLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k) -}}
{{- fail (printf "instanceLabels.%s: the prefixes app.kubernetes.io/, helm.sh/ and valkey.io/ are set by the chart; choose another label key (e.g. example.com/sentinel)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* engine and monitor name are immutable: compare with the existing descriptor. */}}
{{- define "valkey.validateImmutable" -}}
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
