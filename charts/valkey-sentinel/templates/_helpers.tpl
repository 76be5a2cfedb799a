{{/*
Names, labels, derived settings and validate* helpers of charts/valkey-sentinel.
Numbers from values arrive as float64: always pass them through `int` before printing.
*/}}

{{- define "vs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name S: the release name (docs/contract.md: release S, fullname S), truncated to 63. */}}
{{- define "vs.fullname" -}}
{{- include "vs.validate" . -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vs.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end -}}

{{/*
Labels of every object: commonLabels (and "extra", e.g. a monitor's labels, which wins over them), then the
chart's own (validateCommon keeps its prefixes out of commonLabels). Call with (dict "ctx" $ "component"
"sentinel" ["extra" map]). Never used in a selector.
*/}}
{{- define "vs.labels" -}}
{{- $ctx := .ctx -}}
{{- with merge (dict) (.extra | default dict) ($ctx.Values.commonLabels | default dict) }}{{ toYaml . }}
{{ end -}}
helm.sh/chart: {{ include "vs.chart" $ctx }}
{{ include "vs.selectorLabels" $ctx }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
app.kubernetes.io/part-of: valkey-ha
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Selector of the Sentinel pods (immutable). */}}
{{- define "vs.podSelectorLabels" -}}
{{ include "vs.selectorLabels" . }}
app.kubernetes.io/component: sentinel
valkey.io/sentinel: {{ include "vs.fullname" . }}
{{- end -}}

{{/*
Labels of the Sentinel pod template: commonLabels and podLabels (podLabels win), the selector labels, and the
chart's version labels. helm.sh/chart and app.kubernetes.io/version change with a chart upgrade, so the
controller then rolls the Sentinels (one at a time, while CKQUORUM passes).
*/}}
{{- define "vs.podLabels" -}}
{{- with merge (dict) (.Values.podLabels | default dict) (.Values.commonLabels | default dict) }}{{ toYaml . }}
{{ end -}}
{{ include "vs.podSelectorLabels" . }}
helm.sh/chart: {{ include "vs.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: valkey-ha
{{- end -}}

{{/*
Labels of a controller pod template (not the Deployment selector): commonLabels, the selector labels, the
component and the chart's version labels. Call with (dict "ctx" $).
*/}}
{{- define "vs.controllerPodLabels" -}}
{{- with .ctx.Values.commonLabels }}{{ toYaml . }}
{{ end -}}
{{ include "vs.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component | default "controller" }}
helm.sh/chart: {{ include "vs.chart" .ctx }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: valkey-ha
{{- end -}}

{{/*
An image reference: [registry/]repository[:tag][@digest], registry = global.imageRegistry, else the image's own.
Call with (dict "ctx" $ "image" <image values> "tag" t).
*/}}
{{- define "vs.imageRef" -}}
{{- $reg := .ctx.Values.global.imageRegistry | default .image.registry | default "" | trimSuffix "/" -}}
{{- $ref := ternary (printf "%s/%s" $reg .image.repository) .image.repository (ne $reg "") -}}
{{- with toString .tag }}{{ $ref = printf "%s:%s" $ref . }}{{ end -}}
{{- with .image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{- define "vs.image" -}}
{{- include "vs.imageRef" (dict "ctx" . "image" .Values.image "tag" .Values.image.tag) -}}
{{- end -}}

{{- define "vs.exporterImage" -}}
{{- include "vs.imageRef" (dict "ctx" . "image" .Values.metrics.image "tag" .Values.metrics.image.tag) -}}
{{- end -}}

{{- define "vs.ctlImage" -}}
{{- include "vs.imageRef" (dict "ctx" . "image" .Values.controller.image "tag" (.Values.controller.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}

{{- define "vs.headless" -}}
{{- printf "%s-headless" (include "vs.fullname" .) -}}
{{- end -}}

{{/* FQDN of Sentinel pod .index: S-<i>.S-headless.<ns>.svc.<domain> (internal/contract.SentinelHost). */}}
{{- define "vs.sentinelFQDN" -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "vs.fullname" .ctx) (int .index) (include "vs.headless" .ctx) .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{/*
ServiceAccount of this quorum's controller: S-controller unless controller.serviceAccountName names one.
Instances grant it `get` on their F-sentinel-auth Secret, so it must be this quorum's own (issue 19).
*/}}
{{- define "vs.controllerServiceAccount" -}}
{{- .Values.controller.serviceAccountName | default (printf "%s-controller" (include "vs.fullname" .)) -}}
{{- end -}}

{{/* Name of the shared instance controller's Deployment, ServiceAccount, Role and Lease: S-instance-controller. */}}
{{- define "vs.instanceController" -}}
{{- printf "%s-instance-controller" (include "vs.fullname" .) -}}
{{- end -}}

{{/* The namespaces named in `namespaces`, other than this release's own, sorted and without duplicates. */}}
{{- define "vs.otherNamespaces" -}}
{{- $out := list -}}
{{- range .Values.namespaces | default list -}}
{{- if ne . $.Release.Namespace -}}{{- $out = append $out . -}}{{- end -}}
{{- end -}}
{{- toJson ($out | uniq | sortAlpha) -}}
{{- end -}}

{{/* true when instances of other namespaces may be selected (`namespaces` or namespaceSelector). */}}
{{- define "vs.crossNamespace" -}}
{{- or (gt (len (include "vs.otherNamespaces" . | fromJsonArray)) 0) (ne (include "vs.labelSelectorString" .Values.namespaceSelector) "") -}}
{{- end -}}

{{/*
Flags shared by both controllers of this release: which namespaces they serve besides their own.
*/}}
{{- define "vs.namespaceArgs" -}}
{{- $out := list -}}
{{- with include "vs.otherNamespaces" . | fromJsonArray }}
{{- $out = concat $out (list "- --namespaces" (printf "- %s" (join "," . | quote))) }}
{{- end }}
{{- with include "vs.labelSelectorString" .Values.namespaceSelector }}
{{- $out = concat $out (list "- --namespace-selector" (printf "- %s" (. | quote))) }}
{{- end }}
{{- join "\n" $out -}}
{{- end -}}

{{/*
NetworkPolicy peers in the namespaces this quorum selects beyond its own, for pods of the given components
(a list); call with (dict "ctx" $ "components" (list ...)). Empty when it selects only its own namespace.
*/}}
{{- define "vs.otherNamespacePeers" -}}
{{- $ctx := .ctx -}}
{{- $nss := include "vs.otherNamespaces" $ctx | fromJsonArray -}}
{{- range $c := .components }}
{{- if $nss }}
- namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: In
        values: {{ toJson $nss }}
  podSelector:
    matchLabels:
      app.kubernetes.io/part-of: valkey-ha
      app.kubernetes.io/component: {{ $c }}
{{- end }}
{{- with $ctx.Values.namespaceSelector }}
{{- if or .matchLabels .matchExpressions }}
- namespaceSelector:
    {{- toYaml . | nindent 4 }}
  podSelector:
    matchLabels:
      app.kubernetes.io/part-of: valkey-ha
      app.kubernetes.io/component: {{ $c }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* ServiceAccount of the Sentinel pods: serviceAccount.name, else S when the chart creates it, else default. */}}
{{- define "vs.podServiceAccount" -}}
{{- .Values.serviceAccount.name | default (ternary (include "vs.fullname" .) "default" .Values.serviceAccount.create) -}}
{{- end -}}

{{/*
Secret of one Sentinel user (auth.enabled): (dict "ctx" $ "user" "_admin") -> S-auth-admin; _instance ->
S-auth-instance, _client -> S-auth-client, _controller -> S-auth-controller (spec.SentinelSecretName). The sentinel controller generates them at
run time when they do not exist (keys username and password); the chart never renders them.
*/}}
{{/*
The Sentinel users whose Secrets the quorum publishes, without the leading "_", space-separated, in the order the
credentials Job creates them (internal/cli sentinelUsers): the Sentinel pods mount all four, the Job reads them.
*/}}
{{- define "vs.authUsers" -}}
admin instance client controller
{{- end -}}

{{- define "vs.authSecret" -}}
{{- printf "%s-auth-%s" (include "vs.fullname" .ctx) (trimPrefix "_" .user) -}}
{{- end -}}

{{/*
The Sentinels' users (internal/acl.SentinelUsers, Valkey rules; templates-tests compares the two): name and
rules after "resetkeys resetchannels nocommands", as a JSON list of [name, rules]. default is off.
*/}}
{{- define "vs.sentinelUsers" -}}
{{- $discovery := "&* +hello +auth +ping +client|setname +client|setinfo +info +role +subscribe +psubscribe +unsubscribe +punsubscribe +sentinel|get-master-addr-by-name +sentinel|get-primary-addr-by-name +sentinel|master +sentinel|primary +sentinel|masters +sentinel|primaries +sentinel|replicas +sentinel|slaves +sentinel|sentinels +sentinel|ckquorum" -}}
{{- toJson (list
  (list "_admin" "&__sentinel__:hello +hello +auth +ping +client|setname +client|setinfo +info +role +publish +sentinel -sentinel|debug -sentinel|simulate-failure -sentinel|config")
  (list "_instance" (printf "%s +sentinel|failover" $discovery))
  (list "_client" $discovery)
  (list "_controller" "+hello +auth +ping +client|setname +client|setinfo +sentinel|reset")) -}}
{{- end -}}

{{- define "vs.containerSecurityContext" -}}
runAsNonRoot: true
{{- include "vs.securityIds" (dict "ctx" . "pod" false) }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "vs.podSecurityContext" -}}
runAsNonRoot: true
{{- include "vs.securityIds" (dict "ctx" . "pod" true) }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
valkeySelector as a label-selector string for the controller's --selector flag
(k=v, key in (a,b), key notin (a), key, !key). Empty: "" (matches nothing).
*/}}
{{- define "vs.selectorString" -}}
{{- include "vs.labelSelectorString" .Values.valkeySelector -}}
{{- end -}}

{{/* A label selector (matchLabels, matchExpressions) as a selector string; call with the selector map. */}}
{{- define "vs.labelSelectorString" -}}
{{- $parts := list -}}
{{- $ml := .matchLabels | default dict -}}
{{- range $k := keys $ml | sortAlpha -}}
{{- $parts = append $parts (printf "%s=%s" $k (get $ml $k)) -}}
{{- end -}}
{{- range .matchExpressions | default list -}}
{{- if eq .operator "In" -}}
{{- $parts = append $parts (printf "%s in (%s)" .key (join "," (.values | sortAlpha))) -}}
{{- else if eq .operator "NotIn" -}}
{{- $parts = append $parts (printf "%s notin (%s)" .key (join "," (.values | sortAlpha))) -}}
{{- else if eq .operator "Exists" -}}
{{- $parts = append $parts .key -}}
{{- else -}}
{{- $parts = append $parts (printf "!%s" .key) -}}
{{- end -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/*
sentinel.conf directives the chart or the start step owns, or that break a Sentinel, with the reason; config
must not set them.
*/}}
{{- define "vs.ownedDirectives" -}}
{{- $start := "the start step writes it for each pod (announce address, hostnames and a stable myid); remove it" -}}
{{- $path := "a path inside the pod; the chart owns the pod's files (state in /data/sentinel.conf, logs on stdout, TLS files from tls.existingSecret); remove it" -}}
{{- $tls := "the chart sets it from tls.enabled and tls.existingSecret; set those instead" -}}
{{- $auth := "the chart writes the Sentinels' users and sentinel-user/sentinel-pass (auth.enabled); remove it" -}}
{{- $socket := "nothing in the pod uses a unix socket; remove it" -}}
{{- $ciphers := "the chart cannot check cipher names against the image's OpenSSL, and one it does not know stops the Sentinel at start; the image's OpenSSL defaults apply (TLS 1.2 and 1.3 with strong ciphers), remove it" -}}
{{- $fg := "the Sentinel must stay in the foreground as the container's process; remove it" -}}
{{- toJson (dict
  "port" "every Sentinel listens on 26379 (clients, peers and the controllers use it); remove it"
  "maxmemory-clients" "the chart sets it to an eighth of resources.memory, so clients that never read their replies cannot get the Sentinel OOM-killed; change resources.memory instead"
  "tls-port" $tls "tls-replication" $tls "tls-cluster" $tls "tls-auth-clients" "set tls.authClients instead"
  "tls-ciphers" $ciphers "tls-ciphersuites" $ciphers
  "tls-auth-clients-user" "it logs a client in as the user its certificate names, bypassing the Sentinels' passwords (auth.enabled); remove it"
  "bind" "the chart listens on every pod address so peers, data pods and clients reach it; remove it"
  "bind-source-addr" "pod addresses change with every restart; remove it"
  "protected-mode" "the chart turns it off so peers and clients on other pods can connect; remove it"
  "dir" $path "pidfile" $path "logfile" $path "include" $path "aclfile" $path "dbfilename" $path
  "tls-cert-file" $path "tls-key-file" $path "tls-ca-cert-file" $path "tls-ca-cert-dir" $path
  "tls-client-cert-file" $path "tls-client-key-file" $path "tls-dh-params-file" $path
  "tls-key-file-pass" $path "tls-client-key-file-pass" $path
  "unixsocket" $socket "unixsocketperm" $socket "unixsocketgroup" $socket
  "daemonize" $fg "supervised" $fg
  "requirepass" $auth "user" $auth "sentinel sentinel-pass" $auth "sentinel sentinel-user" $auth
  "rename-command" "the controllers send commands by their real names; remove it"
  "loadmodule" "a Sentinel loads no modules; remove it"
  "enable-module-command" "a Sentinel loads no modules; remove it"
  "enable-debug-command" "DEBUG can crash or stall the Sentinel; remove it"
  "enable-protected-configs" "it lets clients change paths and other protected settings at run time; remove it"
  "sentinel announce-ip" $start "sentinel announce-port" $start "sentinel announce-hostnames" $start
  "sentinel resolve-hostnames" $start "sentinel myid" $start
  "sentinel current-epoch" "Sentinel keeps its epoch in /data/sentinel.conf; remove it"
) -}}
{{- end -}}

{{/* Per-master directives: they belong to the monitor (the valkey chart's sentinel.config), not here. */}}
{{- define "vs.perMasterKeys" -}}
{{- toJson (list "sentinel monitor" "sentinel known-replica" "sentinel known-slave" "sentinel known-sentinel"
  "sentinel config-epoch" "sentinel leader-epoch" "sentinel auth-pass" "sentinel auth-user"
  "sentinel down-after-milliseconds" "sentinel failover-timeout" "sentinel parallel-syncs"
  "sentinel notification-script" "sentinel client-reconfig-script" "sentinel rename-command"
  "sentinel master-reboot-down-after-period" "sentinel primary-reboot-down-after-period") -}}
{{- end -}}

{{/*
Server directives a Sentinel process uses (logging, clients, TLS, process settings); the engine accepts every
server directive in sentinel.conf, but the data-node ones (memory, persistence, replication, encodings) do
nothing in a Sentinel and belong in the valkey chart's config.
*/}}
{{- define "vs.sentinelDirectives" -}}
{{- toJson (list "loglevel" "syslog-enabled" "syslog-ident" "syslog-facility" "maxclients" "timeout" "tcp-keepalive"
  "tcp-backlog" "hz" "dynamic-hz" "latency-tracking" "latency-tracking-info-percentiles" "slowlog-log-slower-than"
  "slowlog-max-len" "acllog-max-len" "oom-score-adj" "oom-score-adj-values" "crash-log-enabled"
  "crash-memcheck-enabled" "set-proc-title" "proc-title-template" "always-show-logo" "io-threads"
  "tls-protocols" "tls-prefer-server-ciphers" "tls-session-caching"
  "tls-session-cache-size" "tls-session-cache-timeout" "client-output-buffer-limit" "client-query-buffer-limit"
  "disable-thp" "hide-user-data-from-log" "locale-collate" "max-new-connections-per-cycle"
  "max-new-tls-connections-per-cycle" "jemalloc-bg-thread" "server-cpulist" "bio-cpulist") -}}
{{- end -}}

{{/* sentinel.conf template (process-global only); the start step appends announce-ip and myid. */}}
{{- define "vs.config" -}}
{{- include "vs.loadDirectives" . -}}
{{- $data := get . "_vsDirectives" -}}
# Rendered by charts/valkey-sentinel. Copied to /data/sentinel.conf (writable: Sentinel rewrites it) by the
# start step, which appends sentinel announce-ip <own FQDN>, announce-hostnames, resolve-hostnames and a
# stable sentinel myid. Monitors are registered by the sentinel controller, never rendered here.
{{- if .Values.tls.enabled }}
port 0
tls-port 26379
tls-cert-file /etc/valkey-ha/tls/tls.crt
tls-key-file /etc/valkey-ha/tls/tls.key
tls-ca-cert-file /etc/valkey-ha/tls/ca.crt
tls-replication yes
tls-auth-clients {{ .Values.tls.authClients }}
{{- else }}
port 26379
{{- end }}
bind * -::*
protected-mode no
dir /data
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
# all clients' buffers together (query and unread replies), an eighth of resources.memory (20 connections that
# pipeline and never read, flooding again and again, left a Sentinel at 44 MB RSS of 64Mi; a quarter at 69 MB):
# above it the Sentinel closes the largest client, so such clients cannot get it OOM-killed
maxmemory-clients {{ printf "%.0f" (divf (float64 (include "vs.bytes" .Values.resources.memory)) 8) }}
{{- range $k := keys .Values.config | sortAlpha }}
{{- $d := ternary (get $data.sentinel (trimPrefix "sentinel " $k)) (get $data.server $k) (hasPrefix "sentinel " $k) }}
{{ include "vs.confLine" (dict "name" $k "value" (get $.Values.config $k) "d" $d) }}
{{- end }}
{{- end -}}

{{/* Start step: copy the template to the writable /data unless an up-to-date rewritten copy exists. */}}
{{- define "vs.initScript" -}}
{{- $S := include "vs.fullname" . -}}
set -eu
conf=/data/sentinel.conf
template=/etc/valkey-ha/config/sentinel.conf
case "${POD_NAME:-}" in
  ""|*[!a-z0-9.-]*) echo "POD_NAME is empty or not a DNS name: refusing to announce it" >&2; exit 1 ;;
esac
fqdn="${POD_NAME}.{{ include "vs.headless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}"
myid="$(printf %s "{{ .Release.Namespace }}/${POD_NAME}" | sha1sum | cut -c1-40)"
{{- if .Values.auth.enabled }}
# Sentinel users (auth.enabled): default off, each user with the SHA-256 of its password from Secrets
# S-auth-admin, S-auth-instance, S-auth-client and S-auth-controller (mounted here only); _admin is also what the Sentinels send
# each other (sentinel-user/sentinel-pass).
auth=/etc/valkey-ha/auth
users="$conf.users"
cr="$(printf '\r')"
secret_password() {
  pw="$(cat "$auth/$1")"
  # $(cat) drops a trailing newline that the probes' REDISCLI_AUTH (the Secret as it is) keeps: refuse it, and
  # any other whitespace at either end (the data pods and controllers read _instance trimmed)
  case "$pw" in
    "") ws=0 ;;
    [[:space:]]*|*[[:space:]]) ws=1 ;;
    *) ws="$(( $(wc -c < "$auth/$1") - $(printf %s "$pw" | wc -c) ))" ;;
  esac
  if [ "$ws" -ne 0 ]; then
    echo "Secret {{ $S }}-auth-$1: key password starts or ends with whitespace (a newline from kubectl create secret --from-file?); remove it: the probes and clients send the password as it is and would be refused" >&2; exit 1
  fi
  case "$pw" in
    ""|*"$cr"*) echo "Secret {{ $S }}-auth-$1: key password is empty or holds a line break; give it one line" >&2; exit 1 ;;
  esac
  if [ "$(printf %s "$pw" | wc -l)" -ne 0 ]; then
    echo "Secret {{ $S }}-auth-$1: key password holds a line break; give it one line" >&2; exit 1
  fi
  printf %s "$pw"
}
for u in {{ include "vs.authUsers" . }}; do secret_password "$u" > /dev/null; done
{
  echo "user default off resetpass resetkeys resetchannels nocommands"
{{- range $u := include "vs.sentinelUsers" . | fromJsonArray }}
  echo "user {{ index $u 0 }} on resetpass #$(secret_password {{ trimPrefix "_" (index $u 0) }} | sha256sum | cut -c1-64) resetkeys resetchannels nocommands {{ index $u 1 }}"
{{- end }}
} > "$users"
want="$(cat "$template" "$users" | sha256sum | cut -c1-64)"
{{- else }}
want="$(sha256sum < "$template" | cut -c1-64)"
{{- end }}
if [ -s "$conf" ] && [ "$(cat "$conf.hash" 2>/dev/null || true)" = "$want" ]; then
  {{- if .Values.auth.enabled }}
  rm -f "$users"
  {{- end }}
  echo "keeping $conf: Sentinel state from a previous start"
  exit 0
fi
tmp="$conf.tmp"
{ cat "$template"; echo; } > "$tmp"
{
  echo "sentinel announce-ip $fqdn"
  echo "sentinel announce-hostnames yes"
  echo "sentinel resolve-hostnames yes"
  echo "sentinel myid $myid"
} >> "$tmp"
{{- if .Values.auth.enabled }}
pw="$(secret_password admin | sed -e 's/[\\"]/\\&/g')"
{
  cat "$users"
  echo "sentinel sentinel-user _admin"
  # printf, not echo: dash's echo would turn a backslash of the password into an escape
  printf 'sentinel sentinel-pass "%s"\n' "$pw"
} >> "$tmp"
{{- end }}
if [ -s "$conf" ]; then
  # The template changed: keep the Sentinel state (monitors, epochs, known peers) of the previous file.
  grep -E '^sentinel (monitor|known-replica|known-slave|known-sentinel|config-epoch|leader-epoch|current-epoch|auth-pass|auth-user|down-after-milliseconds|failover-timeout|parallel-syncs|master-reboot-down-after-period|primary-reboot-down-after-period|rename-command) ' "$conf" >> "$tmp" || true
fi
mv "$tmp" "$conf"
echo "$want" > "$conf.hash"
{{- if .Values.auth.enabled }}
rm -f "$users"
{{- end }}
echo "wrote $conf announcing $fqdn"
{{- end -}}

{{/* ---------------------------------------------------------------- validation */}}

{{/*
Values whose default is not null, as dotted paths: every leaf of values.yaml (a map or list default counts as
one leaf), except dnsConfig (null keeps the cluster's resolver settings, by design) and the keys inside the
pass-through maps sentinel.config and metrics.grafanaDashboard.labels (null drops one). checkNulls refuses a
null on any of them; TestNullRefusedWhereTheChartHasADefault keeps this list equal to values.yaml.
*/}}
{{- define "vs.defaultedValues" -}}
dnsCache.enabled dnsCache.resources.cpu dnsCache.resources.memory nameOverride fullnameOverride engineVersion global.imageRegistry image.registry image.repository image.tag
image.digest image.pullPolicy commonLabels commonAnnotations imagePullSecrets replicas clusterDomain
valkeySelector.matchLabels valkeySelector.matchExpressions config auth.enabled tls.enabled tls.existingSecret
tls.authClients tls.certManager.enabled tls.certManager.issuerRef.name tls.certManager.issuerRef.kind
tls.certManager.issuerRef.group tls.certManager.duration tls.certManager.renewBefore
tls.certManager.extraDnsNames persistence.enabled persistence.size persistence.storageClass
persistence.accessModes resources.cpu resources.memory service.type service.annotations
service.loadBalancerSourceRanges service.extraPorts service.headless.annotations service.headless.extraPorts
allowedSources networkPolicy.enabled networkPolicy.allowSameNamespace networkPolicy.clientPodSelector
networkPolicy.metricsNamespaceSelector networkPolicy.dns.namespaceSelector networkPolicy.dns.podSelector
pdb.enabled pdb.maxUnavailable probes.livenessPeriodSeconds
probes.livenessFailureThreshold probes.readinessPeriodSeconds metrics.enabled metrics.image.registry
metrics.image.repository metrics.image.tag metrics.image.digest metrics.image.pullPolicy metrics.port
metrics.resources.cpu metrics.resources.memory metrics.podMonitor.enabled metrics.podMonitor.interval
metrics.podMonitor.labels metrics.prometheusRule.enabled metrics.prometheusRule.labels
metrics.prometheusRule.alertLabels metrics.prometheusRule.rollHeldSeconds
metrics.prometheusRule.notReconcilingSeconds metrics.grafanaDashboard.enabled metrics.grafanaDashboard.labels
metrics.grafanaDashboard.annotations controller.enabled controller.image.registry controller.image.repository
controller.image.tag controller.image.digest controller.image.pullPolicy controller.serviceAccountName
controller.createServiceAccount controller.replicas controller.resources.cpu controller.resources.memory
controller.resources.requests.cpu controller.resources.requests.memory controller.nodeSelector
controller.tolerations controller.affinity controller.topologySpreadConstraints controller.priorityClassName
controller.serviceMonitor.enabled controller.serviceMonitor.interval controller.serviceMonitor.labels
podLabels podAnnotations affinity topologySpreadConstraints tolerations nodeSelector priorityClassName
terminationGracePeriodSeconds preStop.enabled preStop.timeoutSeconds extraEnvVars initContainers sidecars
extraVolumes extraVolumeMounts serviceAccount.create serviceAccount.name serviceAccount.annotations
namespaces namespaceSelector sharedTrustDomain instanceController.enabled instanceController.replicas instanceController.workers
instanceController.resources.cpu instanceController.resources.memory instanceController.resources.requests.cpu
instanceController.resources.requests.memory instanceController.serviceMonitor.enabled
instanceController.serviceMonitor.interval instanceController.serviceMonitor.labels
podSecurityContext.enabled podSecurityContext.runAsUser podSecurityContext.runAsGroup podSecurityContext.fsGroup
metrics.prometheusRule.additionalRules
metrics.podMonitor.scrapeTimeout metrics.podMonitor.honorLabels metrics.podMonitor.relabelings metrics.podMonitor.metricRelabelings controller.serviceMonitor.scrapeTimeout controller.serviceMonitor.honorLabels controller.serviceMonitor.relabelings controller.serviceMonitor.metricRelabelings instanceController.serviceMonitor.scrapeTimeout instanceController.serviceMonitor.honorLabels instanceController.serviceMonitor.relabelings instanceController.serviceMonitor.metricRelabelings
networkPolicy.clientNamespaceSelector networkPolicy.extraIngress
persistence.labels persistence.annotations hostAliases schedulerName runtimeClassName
diagnosticMode.enabled diagnosticMode.command
externalAccess.enabled externalAccess.type externalAccess.host externalAccess.nodePorts externalAccess.loadBalancerIPs
externalAccess.loadBalancerSourceRanges externalAccess.loadBalancerClass externalAccess.externalTrafficPolicy externalAccess.annotations
{{- end -}}

{{/*
Every check, once per render and before any template reads a value (vs.fullname starts with it, and every
template calls vs.fullname first). Each message names the field, the value and the fix.
templates/validate/values.yaml includes it (and then vs.validateInputs, _inputs.tpl) before any other
template renders, so Helm reports every refusal there.
*/}}
{{- define "vs.validate" -}}
{{- if not (hasKey . "_vsValidated") -}}
{{- $_ := set . "_vsValidated" true -}}
{{- include "vs.checkKeys" (dict "v" .Values "n" (include "vs.knownKeys" . | fromJson) "p" "") -}}
{{- include "vs.checkNulls" (dict "values" .Values "paths" (regexSplit "\\s+" (trim (include "vs.defaultedValues" .)) -1)) -}}
{{- include "vs.validateFormats" . -}}
{{- include "vs.validateNames" . -}}
{{- include "vs.validateImage" . -}}
{{- include "vs.validateResources" . -}}
{{- include "vs.validateSelectors" . -}}
{{- include "vs.validateTrustDomain" . -}}
{{- include "vs.validateConfig" . -}}
{{- include "vs.validateServiceAccount" . -}}
{{- include "vs.validateCommon" . -}}
{{- include "vs.validatePodExtras" . -}}
{{- include "vs.validateController" . -}}
{{- include "vs.validateStop" . -}}
{{- include "vs.validateObservabilityKnobs" . -}}
{{- include "vs.validateNetworkPolicyKnobs" . -}}
{{- include "vs.validatePodKnobs" . -}}
{{- include "vs.validateDiagnosticMode" . -}}
{{- end -}}
{{- end -}}

{{/* Names, quantities and labels (the schema checks types; the words are here). */}}
{{- define "vs.validateFormats" -}}
{{- $checks := list
  (list "nameOverride" .Values.nameOverride "dnsLabel" "valkey-sentinel")
  (list "fullnameOverride" .Values.fullnameOverride "dnsLabel" "quorum")
  (list "image.repository" .Values.image.repository "imageRepository" "valkey/valkey")
  (list "image.tag" .Values.image.tag "imageTag" "8.0")
  (list "clusterDomain" .Values.clusterDomain "dnsName" "cluster.local")
  (list "tls.existingSecret" .Values.tls.existingSecret "dnsName" "sentinel-tls")
  (list "persistence.size" .Values.persistence.size "quantity" "1Gi")
  (list "persistence.storageClass" .Values.persistence.storageClass "dnsName" "fast-ssd")
  (list "resources.cpu" .Values.resources.cpu "cpu" "50m")
  (list "resources.memory" .Values.resources.memory "quantity" "64Mi")
  (list "controller.image.repository" .Values.controller.image.repository "imageRepository" "valkey-ha/valkey-sentinel-ctl")
  (list "controller.image.tag" .Values.controller.image.tag "imageTag" "0.1.0")
  (list "global.imageRegistry" .Values.global.imageRegistry "imageRegistry" "registry.example.com:5000/mirror")
  (list "image.registry" .Values.image.registry "imageRegistry" "registry.example.com")
  (list "image.digest" .Values.image.digest "imageDigest" "sha256:<64 hex digits>")
  (list "metrics.image.registry" .Values.metrics.image.registry "imageRegistry" "registry.example.com")
  (list "metrics.image.digest" .Values.metrics.image.digest "imageDigest" "sha256:<64 hex digits>")
  (list "controller.image.registry" .Values.controller.image.registry "imageRegistry" "registry.example.com")
  (list "controller.image.digest" .Values.controller.image.digest "imageDigest" "sha256:<64 hex digits>")
  (list "controller.serviceAccountName" .Values.controller.serviceAccountName "dnsName" "valkey-sentinel-controller")
  (list "priorityClassName" .Values.priorityClassName "dnsName" "high-priority")
  (list "metrics.image.repository" .Values.metrics.image.repository "imageRepository" "oliver006/redis_exporter")
  (list "metrics.image.tag" .Values.metrics.image.tag "imageTag" "v1.67.0")
  (list "metrics.resources.cpu" .Values.metrics.resources.cpu "cpu" "50m")
  (list "metrics.resources.memory" .Values.metrics.resources.memory "quantity" "32Mi")
  (list "metrics.podMonitor.interval" .Values.metrics.podMonitor.interval "interval" "30s")
  (list "controller.serviceMonitor.interval" .Values.controller.serviceMonitor.interval "interval" "30s")
-}}
{{- if not (kindIs "string" .Values.engineVersion) -}}
{{- /* engineVersion: 8.0 unquoted is the number 8: checkFormat names that YAML trap */ -}}
{{- include "vs.checkFormat" (dict "field" "engineVersion" "value" .Values.engineVersion "format" "imageTag") -}}
{{- end -}}
{{- range $c := $checks -}}
{{- if not (empty (index $c 1)) -}}
{{- include "vs.checkFormat" (dict "field" (index $c 0) "value" (index $c 1) "format" (index $c 2) "example" (index $c 3)) -}}
{{- end -}}
{{- end -}}
{{- include "vs.checkImageHosts" (dict "values" .Values "images" (list (list "image" .Values.image) (list "metrics.image" .Values.metrics.image) (list "controller.image" .Values.controller.image))) -}}
{{- range $i, $s := .Values.allowedSources -}}
{{- include "vs.checkCIDR" (dict "field" (printf "allowedSources[%d]" $i) "value" $s) -}}
{{- end -}}
{{- range $i, $n := .Values.namespaces -}}
{{- include "vs.checkFormat" (dict "field" (printf "namespaces[%d]" $i) "value" $n "format" "dnsLabel" "example" "tenant-a") -}}
{{- end -}}
{{- range $i, $s := .Values.imagePullSecrets -}}
{{- include "vs.checkFormat" (dict "field" (printf "imagePullSecrets[%d].name" $i) "value" ($s.name | default "") "format" "dnsName" "example" "regcred") -}}
{{- end -}}
{{- range $f, $img := dict "image" .Values.image "metrics.image" .Values.metrics.image "controller.image" .Values.controller.image -}}
{{- if and $img.digest (contains "@" (toString $img.tag)) -}}
{{- fail (printf "%s.digest: %s.tag %q pins a digest already; keep one of them (a tag without @sha256:..., or no digest)" $f $f (toString $img.tag)) -}}
{{- end -}}
{{- end -}}
{{- range $field, $m := dict "podLabels" .Values.podLabels "nodeSelector" .Values.nodeSelector "controller.nodeSelector" .Values.controller.nodeSelector "metrics.podMonitor.labels" .Values.metrics.podMonitor.labels "metrics.prometheusRule.labels" .Values.metrics.prometheusRule.labels "metrics.grafanaDashboard.labels" .Values.metrics.grafanaDashboard.labels "controller.serviceMonitor.labels" .Values.controller.serviceMonitor.labels -}}
{{- include "vs.checkLabels" (dict "field" $field "labels" $m) -}}
{{- end -}}
{{- range $k, $_ := .Values.metrics.grafanaDashboard.annotations -}}
{{- include "vs.checkFormat" (dict "field" (printf "metrics.grafanaDashboard.annotations key %q" $k) "value" $k "format" "labelKey") -}}
{{- end -}}
{{- range $k, $_ := .Values.metrics.prometheusRule.alertLabels -}}
{{- if not (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" $k) -}}
{{- fail (printf "metrics.prometheusRule.alertLabels key %q: not a Prometheus label name (letters, digits and '_', not starting with a digit): Prometheus 2 refuses the whole rule group over it (promtool: invalid label name); for example team_name" $k) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.clusterDomain -}}
{{- fail "clusterDomain: empty, so the Sentinel FQDNs would end in \"svc.\"; set the cluster's DNS domain (cluster.local on most clusters)" -}}
{{- end -}}
{{- if and .Values.metrics.enabled (lt (int .Values.metrics.port) 1024) -}}
{{- fail (printf "metrics.port: %d is below 1024, and the exporter runs as a non-root user without capabilities, so it could not listen (bind: Permission denied) and would restart forever; use a port from 1024 up, such as 9121" (int .Values.metrics.port)) -}}
{{- end -}}
{{- if and .Values.metrics.enabled (eq (int .Values.metrics.port) 26379) -}}
{{- fail "metrics.port: 26379 is the Sentinel port; the exporter sidecar could not listen. Set metrics.port to another port, such as 9121" -}}
{{- end -}}
{{- range $k, $_ := .Values.podLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k) -}}
{{- fail (printf "podLabels.%s: the prefixes app.kubernetes.io/, helm.sh/ and valkey.io/ are set by the chart; choose another label key (e.g. example.com/team)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vs.validateNames" -}}
{{- $S := .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- if has (lower $S) (list "y" "n" "yes" "no" "on" "off" "true" "false") -}}
{{- fail (printf "fullnameOverride: the full name %q (the release name by default) reads as a YAML boolean in object names; set fullnameOverride to another name, e.g. %s-sentinel" $S $S) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $S) -}}
{{- $set := not (empty .Values.fullnameOverride) -}}
{{- fail (printf "fullnameOverride: the full name %q%s cannot name the Services S and S-headless: a Service name starts with a letter and holds only lowercase letters, digits and '-'. Set fullnameOverride (e.g. sentinel)%s" $S (ternary "" (printf " (the release name)") $set) (ternary "" ", or choose another release name" $set)) -}}
{{- end -}}
{{- if gt (len $S) 42 -}}
{{- fail (printf "fullnameOverride: the full name %q%s is %d characters; at most 42 fit every object name (the credentials Job S-credentials-<hash> adds 21 and Kubernetes takes 63). Set fullnameOverride to a shorter name%s" $S (ternary "" " (the release name)" (not (empty .Values.fullnameOverride))) (len $S) (ternary "" ", or choose a shorter release name" (not (empty .Values.fullnameOverride)))) -}}
{{- end -}}
{{- $n := int .Values.replicas -}}
{{- $maxUnavailable := int .Values.pdb.maxUnavailable -}}
{{- $tolerated := sub $n (add1 (div $n 2)) -}}
{{- if and .Values.pdb.enabled (gt $maxUnavailable $tolerated) -}}
{{- fail (printf "pdb.maxUnavailable: %d of %d Sentinels down loses the majority (%d needed); set pdb.maxUnavailable to at most %d" $maxUnavailable $n (add1 (div $n 2)) $tolerated) -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.existingSecret: tls.enabled needs a Secret with tls.crt, tls.key and ca.crt covering the Sentinel FQDNs; set tls.existingSecret" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.enabled) -}}
{{- fail "tls.certManager.enabled: the Certificate is for TLS; set tls.enabled too (and tls.existingSecret: the Secret cert-manager writes)" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.issuerRef.name: name the cert-manager Issuer or ClusterIssuer that signs the Certificate (its Secret must carry ca.crt: a CA or Vault issuer)" -}}
{{- end -}}
{{- if .Values.tls.certManager.enabled -}}
{{- include "vs.checkCertManager" (dict "field" "tls.certManager" "cm" .Values.tls.certManager) -}}
{{- end -}}
{{- if and .Values.metrics.podMonitor.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.podMonitor.enabled: needs metrics.enabled (the exporter sidecar)" -}}
{{- end -}}
{{- if and .Values.tls.enabled (eq .Values.tls.authClients "yes") -}}
{{- fail "tls.authClients: \"yes\" requires a client certificate from every client, and the controllers and the data pods' bootstrap connect without one, so no monitor could be registered or asked; use optional (clients may present one) or no" -}}
{{- end -}}
{{- if hasPrefix "system-" .Values.priorityClassName -}}
{{- fail (printf "priorityClassName: %q is reserved for pods in kube-system, so the Sentinel pods would never be created here; use a PriorityClass of your own" .Values.priorityClassName) -}}
{{- end -}}
{{- if eq .Values.controller.serviceAccountName "default" -}}
{{- fail "controller.serviceAccountName: \"default\" is the ServiceAccount of every pod that names none, so each of them would get the controller's rights (and read the Sentinel passwords instances grant it); choose another name, such as valkey-sentinel-controller" -}}
{{- end -}}
{{- if and .Values.persistence.enabled (eq (float64 (include "vs.bytes" .Values.persistence.size)) 0.0) -}}
{{- fail (printf "persistence.size: %q is no space at all; the API server refuses such a volume claim. Set a size such as 1Gi" (toString .Values.persistence.size)) -}}
{{- end -}}
{{- end -}}

{{/*
The Sentinel runs valkey-sentinel and valkey-cli from the image: a redis image has neither. The version whose
directive list checks config: engineVersion, else the leading major.minor of the image tag.
*/}}
{{- define "vs.engineVersion" -}}
{{- .Values.engineVersion | default (regexFind "^[0-9]+\\.[0-9]+" (toString .Values.image.tag)) -}}
{{- end -}}

{{- define "vs.validateImage" -}}
{{- $name := last (splitList "/" .Values.image.repository) -}}
{{- if and (contains "redis" $name) (not (contains "valkey" $name)) -}}
{{- fail (printf "image.repository: %q is a Redis image, but this chart runs valkey-sentinel and valkey-cli, which it does not ship; use a valkey image such as valkey/valkey (a valkey Sentinel also monitors redis instances)" .Values.image.repository) -}}
{{- end -}}
{{- include "vs.loadDirectives" . -}}
{{- end -}}

{{/* Loads the directive list of the Sentinel's valkey version into the render context (key _vsDirectives). */}}
{{- define "vs.loadDirectives" -}}
{{- if not (hasKey . "_vsDirectives") -}}
{{- $v := include "vs.engineVersion" . -}}
{{- $raw := include "vs.engineData" (dict "ctx" . "engine" "valkey" "version" $v) -}}
{{- if not $raw -}}
{{- $known := include "vs.engineVersions" (dict "ctx" . "engine" "valkey") | fromJsonArray -}}
{{- if .Values.engineVersion -}}
{{- fail (printf "engineVersion: %q is not a valkey version this chart knows (%s); set engineVersion to one of them, matching the image" .Values.engineVersion (join ", " $known)) -}}
{{- else if $v -}}
{{- fail (printf "image.tag: %q runs valkey %s, a version this chart has no directive list for (it knows %s); use an image of one of those versions, or set engineVersion to the known version your image matches" (toString .Values.image.tag) $v (join ", " $known)) -}}
{{- else -}}
{{- fail (printf "image.tag: %q does not start with a version (major.minor), so the chart cannot tell which directives the Sentinel accepts; set engineVersion to the valkey version the image runs (%s)" (toString .Values.image.tag) (join ", " $known)) -}}
{{- end -}}
{{- end -}}
{{- $_ := set . "_vsDirectives" ($raw | fromJson) -}}
{{- end -}}
{{- end -}}

{{/* Memory floors: an idle Sentinel ~10 MB plus the readiness probe's valkey-cli ~7 MB; the controller is a Go process. */}}
{{- define "vs.validateResources" -}}
{{- range $field, $q := dict "resources" (list .Values.resources "32Mi" "a Sentinel and its readiness probe") "controller.resources" (list .Values.controller.resources "64Mi" "the controller (a Go process watching the namespace)") -}}
{{- $r := index $q 0 -}}
{{- if eq (float64 (trimSuffix "m" (toString $r.cpu))) 0.0 -}}
{{- fail (printf "%s.cpu: %q is no CPU at all; the container could not run. Set at least 1m, such as 50m" $field (toString $r.cpu)) -}}
{{- end -}}
{{- if lt (float64 (include "vs.bytes" $r.memory)) (float64 (include "vs.bytes" (index $q 1))) -}}
{{- fail (printf "%s.memory: %s is too small for %s; set at least %s" $field $r.memory (index $q 2) (index $q 1)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Quantity (512Mi, 1Gi, 768M) to bytes. */}}
{{- define "vs.bytes" -}}
{{- $q := toString . -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $mult := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 -}}
{{- printf "%.0f" (mulf (float64 $num) (get $mult (trimPrefix $num $q))) -}}
{{- end -}}

{{/*
A quorum that selects instances of other namespaces is one trust domain for all of them (issue 25): Sentinel
takes a hello about any monitor from any monitored node, so whoever holds a system password of one tenant (its
namespace admin) can move every other tenant's monitor to a server of theirs, and any tenant's `_instance` may
SENTINEL FAILOVER every monitor (Sentinel ACLs cannot bind a subcommand to a monitor name). The controllers
restore a foreign primary within seconds, but the Sentinels have already sent it the victim's `_sentinel`
password. A platform team must accept that in writing: sharedTrustDomain: accept.
*/}}
{{- define "vs.validateTrustDomain" -}}
{{- $td := .Values.sharedTrustDomain | default "" | toString -}}
{{- if not (has $td (list "" "accept")) -}}
{{- fail (printf "sharedTrustDomain: %q is not a value; leave it empty (the default: one namespace, one trust domain) or set accept" $td) -}}
{{- end -}}
{{- if and (eq (include "vs.crossNamespace" .) "true") (ne $td "accept") -}}
{{- fail (printf "namespaces: a quorum serving namespaces other than %s (namespaces, namespaceSelector) is ONE trust domain: a namespace admin of any of them can move every other tenant's monitor with one forged Sentinel hello (docs/fleet.md). Install one quorum per tenant namespace, or, when one team runs every selected namespace, set sharedTrustDomain: accept" .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{- define "vs.validateSelectors" -}}
{{- include "vs.checkSelector" (dict "field" "valkeySelector" "selector" .Values.valkeySelector "flag" true) -}}
{{- include "vs.checkSelector" (dict "field" "namespaceSelector" "selector" .Values.namespaceSelector "flag" true) -}}
{{- include "vs.checkSelector" (dict "field" "networkPolicy.clientPodSelector" "selector" .Values.networkPolicy.clientPodSelector) -}}
{{- include "vs.checkSelector" (dict "field" "networkPolicy.metricsNamespaceSelector" "selector" .Values.networkPolicy.metricsNamespaceSelector) -}}
{{- include "vs.checkSelector" (dict "field" "networkPolicy.dns.namespaceSelector" "selector" .Values.networkPolicy.dns.namespaceSelector) -}}
{{- include "vs.checkSelector" (dict "field" "networkPolicy.dns.podSelector" "selector" .Values.networkPolicy.dns.podSelector) -}}
{{- if and .Values.networkPolicy.dns.podSelector (not .Values.networkPolicy.dns.namespaceSelector) -}}
{{- fail "networkPolicy.dns.namespaceSelector: empty selects every namespace, so a pod of any namespace wearing the podSelector's labels would be reachable on port 53 (the exporter's /scrape or a customer's MIGRATE could dial it); name the namespace of your cluster DNS, for example {matchLabels: {kubernetes.io/metadata.name: kube-system}}" -}}
{{- end -}}
{{- end -}}

{{/*
config: each directive must exist in the Sentinel's engine version (server directives or `sentinel <name>`),
be one a Sentinel uses, not be owned by the chart, and carry a value the engine accepts.
*/}}
{{- define "vs.validateConfig" -}}
{{- $perMaster := include "vs.perMasterKeys" . | fromJsonArray -}}
{{- $owned := include "vs.ownedDirectives" . | fromJson -}}
{{- $useful := include "vs.sentinelDirectives" . | fromJsonArray -}}
{{- include "vs.loadDirectives" . -}}
{{- $data := get . "_vsDirectives" -}}
{{- $engine := printf "valkey %s" $data.version -}}
{{- range $k, $v := .Values.config -}}
{{- $field := ternary (printf "config key %q" $k) (printf "config.%s" $k) (contains " " $k) -}}
{{- if not (regexMatch "^(sentinel )?[a-z][a-z0-9_-]{0,63}$" $k) -}}
{{- fail (printf "config key %q: not a sentinel.conf directive name (lowercase letters, digits and '-', optionally after \"sentinel \")" $k) -}}
{{- end -}}
{{- if has $k $perMaster -}}
{{- fail (printf "%s: a per-master directive; set it per instance in the valkey chart's sentinel.config (the controller sends SENTINEL SET)" $field) -}}
{{- end -}}
{{- if hasKey $owned $k -}}
{{- fail (printf "%s: %s" $field (get $owned $k)) -}}
{{- end -}}
{{- if hasPrefix "sentinel " $k -}}
{{- $name := trimPrefix "sentinel " $k -}}
{{- $d := get $data.sentinel $name -}}
{{- if not $d -}}
{{- fail (printf "config key %q: %s Sentinel has no statement \"sentinel %s\"; check the name, or remove it" $k $engine $name) -}}
{{- end -}}
{{- include "vs.checkValue" (dict "field" $field "value" $v "d" $d "engine" (printf "%s Sentinel" $engine)) -}}
{{- if and (eq $name "deny-scripts-reconfig") (eq (include "vs.confValue" $v) "no") -}}
{{- fail (printf "%s: no lets any client that reaches port 26379 point the Sentinels at a program to run (SENTINEL SET notification-script); keep yes, or remove it" $field) -}}
{{- end -}}
{{- else -}}
{{- $d := get $data.server $k -}}
{{- if not $d -}}
{{- fail (printf "%s: %s has no directive %q; check the name, or remove it" $field $engine $k) -}}
{{- end -}}
{{- if not (has $k $useful) -}}
{{- fail (printf "%s: a data-node directive; it does nothing in a Sentinel (which takes logging, client, TLS and process directives such as loglevel, maxclients or tcp-keepalive). Set it in the valkey chart's config, or remove it" $field) -}}
{{- end -}}
{{- include "vs.checkValue" (dict "field" $field "value" $v "d" $d "engine" $engine) -}}
{{- if and (eq $k "maxclients") (lt (int (include "vs.confValue" $v)) 64) -}}
{{- fail (printf "config.maxclients: %s leaves no room for the links a Sentinel must accept (its peers, the controllers, booting data pods and your clients); set at least 64" (include "vs.confValue" $v)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
With createServiceAccount false the controller's ServiceAccount must exist already: checked at install time,
when the chart can see the cluster (lookup answers; `helm template` cannot tell, and renders).
*/}}
{{- define "vs.validateServiceAccount" -}}
{{- if and .Values.controller.enabled (not .Values.controller.createServiceAccount) -}}
{{- $sa := include "vs.controllerServiceAccount" . -}}
{{- $all := lookup "v1" "ServiceAccount" .Release.Namespace "" -}}
{{- if $all -}}
{{- $found := false -}}
{{- range ($all.items | default list) -}}
{{- if eq .metadata.name $sa -}}{{- $found = true -}}{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- fail (printf "controller.createServiceAccount: false, but ServiceAccount %q does not exist in namespace %q, so the controller pods could never start; create it first, or set controller.createServiceAccount: true" $sa .Release.Namespace) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
commonLabels, commonAnnotations and the Services: keys the chart sets itself are refused (they would appear
twice in an object, which the API server rejects or, worse, one silently wins).
*/}}
{{- define "vs.validateCommon" -}}
{{- include "vs.checkLabels" (dict "field" "commonLabels" "labels" .Values.commonLabels) -}}
{{- range $k, $_ := .Values.commonLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k) -}}
{{- fail (printf "commonLabels.%s: the prefixes app.kubernetes.io/, helm.sh/ and valkey.io/ are set by the chart; choose another label key (e.g. example.com/team)" $k) -}}
{{- end -}}
{{- end -}}
{{- $annotations := dict "commonAnnotations" .Values.commonAnnotations "podAnnotations" .Values.podAnnotations "service.annotations" .Values.service.annotations "service.headless.annotations" .Values.service.headless.annotations -}}
{{- range $field, $m := $annotations -}}
{{- range $k, $_ := $m -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s key %q" $field $k) "value" $k "format" "labelKey") -}}
{{- if and (eq $field "commonAnnotations") (or (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k)) -}}
{{- fail (printf "commonAnnotations.%s: the prefixes helm.sh/ and valkey.io/ are set by the chart (hooks, revisions); choose another annotation key (e.g. example.com/owner)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "vs.checkServices" (list
  (list "service" .Values.service (list "sentinel") (list 26379))
  (list "service.headless" (merge (dict "type" "ClusterIP") .Values.service.headless) (list "sentinel") (list 26379))
) -}}
{{- end -}}

{{/*
extraEnvVars, initContainers, sidecars, extraVolumes and the pods' ServiceAccount: names the chart uses are
refused (a second container, variable or volume of the same name is rejected by the API server or, for
variables, silently overrides the chart's).
*/}}
{{- define "vs.validatePodExtras" -}}
{{- include "vs.checkEnv" (dict "field" "extraEnvVars" "list" .Values.extraEnvVars "reserved" (list "REDISCLI_AUTH")) -}}
{{- $names := dict -}}
{{- range $field := list "initContainers" "sidecars" -}}
{{- range $i, $c := get $.Values $field -}}
{{- $f := printf "%s[%d].name" $field $i -}}
{{- include "vs.checkFormat" (dict "field" $f "value" ($c.name | default "") "format" "dnsLabel" "example" "log-shipper") -}}
{{- if has $c.name (list "config" "dns-resolv" "sentinel" "dns-cache" "metrics") -}}
{{- fail (printf "%s: %q is a container of the chart (config, dns-resolv, sentinel, dns-cache, metrics); choose another name" $f $c.name) -}}
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
{{- include "vs.checkFormat" (dict "field" $f "value" ($v.name | default "") "format" "dnsLabel" "example" "scratch") -}}
{{- if has $v.name (list "config" "auth" "tls" "data" "dns") -}}
{{- fail (printf "%s: %q is a volume of the chart (config, auth, tls, data, dns); choose another name" $f $v.name) -}}
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
{{- include "vs.checkMounts" (dict "field" "extraVolumeMounts" "list" .Values.extraVolumeMounts "volumes" $volumes "paths" (list "/data" "/etc/valkey-ha")) -}}
{{- $ports := dict "26379" "the Sentinel port" -}}
{{- if .Values.metrics.enabled -}}{{- $_ := set $ports (toString (int .Values.metrics.port)) "the exporter's port (metrics.port)" -}}{{- end -}}
{{- include "vs.checkContainerPorts" (dict "containers" (dict "sidecars" .Values.sidecars "initContainers" .Values.initContainers) "ports" $ports) -}}
{{- range $p := list "" "controller." -}}
{{- $v := ternary $.Values.controller $.Values (eq $p "controller.") -}}
{{- include "vs.checkTolerations" (dict "field" (printf "%stolerations" $p) "list" $v.tolerations) -}}
{{- include "vs.checkAffinity" (dict "field" (printf "%saffinity" $p) "affinity" $v.affinity) -}}
{{- include "vs.checkSpread" (dict "field" (printf "%stopologySpreadConstraints" $p) "list" $v.topologySpreadConstraints) -}}
{{- end -}}
{{- $sa := .Values.serviceAccount -}}
{{- if $sa.name -}}
{{- include "vs.checkFormat" (dict "field" "serviceAccount.name" "value" $sa.name "format" "dnsName" "example" "cache-data") -}}
{{- end -}}
{{- if and $sa.create (eq $sa.name "default") -}}
{{- fail "serviceAccount.name: \"default\" exists in every namespace and is not the chart's to create; leave serviceAccount.name empty, or set serviceAccount.create: false to use it" -}}
{{- end -}}
{{- if and (not $sa.create) $sa.annotations -}}
{{- fail "serviceAccount.annotations: they apply to a ServiceAccount the chart creates, and serviceAccount.create is false; annotate your ServiceAccount yourself, or remove them" -}}
{{- end -}}
{{- $S := include "vs.fullname" . -}}
{{- $name := include "vs.podServiceAccount" . -}}
{{- range $other := list (include "vs.controllerServiceAccount" .) (printf "%s-test" $S) (printf "%s-credentials" $S) (include "vs.instanceController" .) -}}
{{- if eq $name $other -}}
{{- fail (printf "serviceAccount.name: %q is the ServiceAccount of the controller, the credentials Job or the helm test, which holds rights (and reads instances' _sentinel passwords) the Sentinel pods must not have; choose another name, or leave it empty for %s" $name $S) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* CPU quantity (100m, 0.5, 2) in millicores, printed as a number. */}}
{{- define "vs.millicores" -}}
{{- $q := toString . -}}
{{- if hasSuffix "m" $q -}}{{- printf "%.3f" (float64 (trimSuffix "m" $q)) -}}{{- else -}}{{- printf "%.3f" (mulf (float64 $q) 1000.0) -}}{{- end -}}
{{- end -}}

{{/*
Controller knobs: requests at most the limits (a request above its limit is refused by the API server), the
priority class.
*/}}
{{- define "vs.validateController" -}}
{{- if eq (include "vs.controllerServiceAccount" .) (include "vs.instanceController" .) -}}
{{- fail (printf "controller.serviceAccountName: %q is the shared instance controller's ServiceAccount, which instances grant their _operator master key; the quorum's controller must have its own. Choose another name, or leave it empty for %s-controller" (include "vs.controllerServiceAccount" .) (include "vs.fullname" .)) -}}
{{- end -}}
{{- include "vs.checkControllerResources" (dict "field" "controller.resources" "resources" .Values.controller.resources) -}}
{{- include "vs.checkControllerResources" (dict "field" "instanceController.resources" "resources" .Values.instanceController.resources) -}}
{{- with .Values.controller.priorityClassName -}}
{{- include "vs.checkFormat" (dict "field" "controller.priorityClassName" "value" . "format" "dnsName" "example" "high-priority") -}}
{{- if hasPrefix "system-" . -}}
{{- fail (printf "controller.priorityClassName: %q is reserved for pods in kube-system, so the controller pods would never be created here; use a PriorityClass of your own" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
preStop hook of the sentinel container (issue 14): while this Sentinel runs a failover (the flag
failover_in_progress in SENTINEL MASTERS: this Sentinel is its leader), the stop waits for its end, at most
preStop.timeoutSeconds; a leader stopped mid-failover leaves the failover to time out (failover-timeout) and
the other Sentinels wait twice that before they try again. It asks its own Sentinel the way the readiness
probe does (vs.cli: TLS flags; REDISCLI_AUTH from the container's environment when Sentinel auth is on).
Messages go to the container's stdout (kubectl logs); a wait that ran out fails the hook, which the kubelet
reports as a FailedPreStopHook Event. The container stops either way.
*/}}
{{- define "vs.preStopScript" -}}
{{- $t := int .Values.preStop.timeoutSeconds -}}
end=$(( $(date +%s) + {{ $t }} )); waited=0
while [ "$(date +%s)" -lt "$end" ]; do
  out=$({{ include "vs.cli" . }} sentinel masters 2>&1) || exit 0
  case "$out" in
    *failover_in_progress*) ;;
    *) if [ "$waited" = 1 ]; then echo "preStop: the failover ended; stopping" >>/proc/1/fd/1; fi; exit 0 ;;
  esac
  if [ "$waited" = 0 ]; then echo "preStop: this Sentinel runs a failover; the stop waits for its end (at most {{ $t }} s)" >>/proc/1/fd/1; fi
  waited=1
  sleep 0.5
done
echo "preStop: this Sentinel still runs a failover after {{ $t }} s; stopping anyway" | tee -a /proc/1/fd/1 >&2
exit 1
{{- end -}}

{{/*
Readiness (issue 24, 2): this Sentinel answers and holds every monitor that any of its peers holds. A
Sentinel that came back empty (emptyDir) stays unready until the sentinel controller registered its monitors
again, so the PodDisruptionBudget (which counts ready pods) refuses to evict a second Sentinel meanwhile: a
majority always knows every monitor and a primary crash still fails over with every controller down. Peers
are asked in parallel (INFO sentinel as _client, 1 s each); a peer that does not answer (its node gone, DNS
down) is skipped, so a dead peer never makes the others unready, and an instance no Sentinel monitors yet
changes nothing. The monitors' passwords are not needed: only names are compared. docs/design.md, "Sentinel
readiness".
*/}}
{{- define "vs.readinessScript" -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $peers = append $peers (printf "%s:26379" (include "vs.sentinelFQDN" (dict "ctx" $ "index" $i))) -}}
{{- end -}}
own=$({{ include "vs.cli" . }} info sentinel 2>&1) || { echo "$own"; exit 1; }
case "$own" in *sentinel_masters:*) ;; *) echo "no Sentinel answer: $own"; exit 1 ;; esac
missing=$({ printf '%s\n' "$own" | sed -n 's/^master[0-9]*:name=\([^,]*\),.*/+\1/p'
  for p in {{ join " " $peers }}; do
    timeout 1 {{ include "vs.cliNoPort" . }} -h "${p%:*}" -p "${p##*:}" info sentinel 2>/dev/null | sed -n 's/^master[0-9]*:name=\([^,]*\),.*/-\1/p' &
  done
  wait; } | awk '/^[+]/ { own[substr($0, 2)] = 1; next } { n = substr($0, 2) } !(n in own) && !(n in seen) { seen[n] = 1; print n }')
[ -z "$missing" ] && exit 0
echo "this Sentinel lacks $(printf '%s\n' "$missing" | wc -l) monitor(s) its peers hold, until the sentinel controller registers them:" $(printf '%s\n' "$missing" | head -n 5)
exit 1
{{- end -}}

{{/*
valkey-cli against this pod's own Sentinel (readiness probe and preStop hook); with auth.enabled as _client,
the password in REDISCLI_AUTH (the sentinel container's environment, from Secret S-auth-client).
*/}}
{{- define "vs.cli" -}}
{{ include "vs.cliNoPort" . }} -p 26379
{{- end -}}

{{/* valkey-cli as vs.cli, without the address (the readiness probe asks the peers with it). */}}
{{- define "vs.cliNoPort" -}}
valkey-cli{{ if .Values.tls.enabled }} --tls --cacert /etc/valkey-ha/tls/ca.crt --cert /etc/valkey-ha/tls/tls.crt --key /etc/valkey-ha/tls/tls.key{{ end }}{{ if .Values.auth.enabled }} --user _client{{ end }}
{{- end -}}

{{/* terminationGracePeriodSeconds leaves room for the preStop wait. */}}
{{- define "vs.validateStop" -}}
{{- if .Values.preStop.enabled -}}
{{- $need := add (int .Values.preStop.timeoutSeconds) 2 -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) $need -}}
{{- fail (printf "terminationGracePeriodSeconds: %d is shorter than the preStop wait for a running failover (preStop.timeoutSeconds %d) and 2 s for Sentinel to exit; set at least %d, lower preStop.timeoutSeconds, or set preStop.enabled: false" (int .Values.terminationGracePeriodSeconds) (int .Values.preStop.timeoutSeconds) $need) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A controller's resources: limits in the right format, requests at most the limits (a request above its limit
is refused by the API server). Call with (dict "field" "controller.resources" "resources" map).
*/}}
{{- define "vs.checkControllerResources" -}}
{{- $f := .field -}}
{{- $r := .resources -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s.cpu" $f) "value" $r.cpu "format" "cpu" "example" "100m") -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s.memory" $f) "value" $r.memory "format" "quantity" "example" "128Mi") -}}
{{- $req := $r.requests | default dict -}}
{{- with $req.cpu -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s.requests.cpu" $f) "value" . "format" "cpu" "example" "20m") -}}
{{- if eq (float64 (include "vs.millicores" .)) 0.0 -}}
{{- fail (printf "%s.requests.cpu: %q requests no CPU, so the controller could be starved on a busy node; request at least 1m, such as 20m, or leave it empty for the limit" $f (toString .)) -}}
{{- end -}}
{{- if gt (float64 (include "vs.millicores" .)) (float64 (include "vs.millicores" $r.cpu)) -}}
{{- fail (printf "%s.requests.cpu: %s is above the limit %s.cpu (%s); a request may not exceed its limit. Lower the request or raise the limit" $f (toString .) $f (toString $r.cpu)) -}}
{{- end -}}
{{- end -}}
{{- with $req.memory -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s.requests.memory" $f) "value" . "format" "quantity" "example" "64Mi") -}}
{{- if eq (float64 (include "vs.bytes" .)) 0.0 -}}
{{- fail (printf "%s.requests.memory: %q requests no memory, so the controller would be the first pod evicted under memory pressure; request at least 32Mi, or leave it empty for the limit" $f (toString .)) -}}
{{- end -}}
{{- if gt (float64 (include "vs.bytes" .)) (float64 (include "vs.bytes" $r.memory)) -}}
{{- fail (printf "%s.requests.memory: %s is above the limit %s.memory (%s); a request may not exceed its limit. Lower the request or raise the limit" $f (toString .) $f (toString $r.memory)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A controller Deployment of this release (the sentinel controller, the shared instance controller): same image,
pull secrets, scheduling (controller.*), posture and probes. Call with (dict "ctx" $ "name" ... "component" ...
"serviceAccount" ... "replicas" n "resources" map "args" list ["sentinelAuth" true]); the namespace flags
(vs.namespaceArgs) and the metrics/health addresses are appended to args.
*/}}
{{- define "vs.controllerDeployment" -}}
{{- $ctx := .ctx -}}
{{- $c := $ctx.Values.controller -}}
{{- $replicas := int .replicas -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ $ctx.Release.Namespace }}
  {{- with $ctx.Values.commonAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  labels:
    {{- include "vs.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
spec:
  replicas: {{ $replicas }}
  {{- if gt $replicas 1 }}
  # Standbys behind the Lease: one new pod at a time, ready as a standby before an old one goes.
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  {{- else }}
  # One pod: the old one is gone before the new one acts.
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      {{- include "vs.selectorLabels" $ctx | nindent 6 }}
      app.kubernetes.io/component: {{ .component }}
  template:
    metadata:
      labels:
        {{- include "vs.controllerPodLabels" (dict "ctx" $ctx "component" .component) | nindent 8 }}
    spec:
      serviceAccountName: {{ .serviceAccount }}
      # The controller talks to the Kubernetes API: it needs its token.
      automountServiceAccountToken: true
      enableServiceLinks: false
      {{- with $ctx.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- include "vs.podSecurityContext" $ctx | nindent 8 }}
      {{- with $c.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $c.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- if $c.affinity }}
      affinity:
        {{- toYaml $c.affinity | nindent 8 }}
      {{- else if gt $replicas 1 }}
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "vs.selectorLabels" $ctx | nindent 20 }}
                    app.kubernetes.io/component: {{ .component }}
      {{- end }}
      {{- with $c.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- include "vs.spreadConstraints" (dict "list" . "selector" (merge (include "vs.selectorLabels" $ctx | fromYaml) (dict "app.kubernetes.io/component" $.component))) | nindent 8 }}
      {{- end }}
      containers:
        - name: controller
          image: {{ include "vs.ctlImage" $ctx }}
          imagePullPolicy: {{ $c.image.pullPolicy }}
          command:
            - /valkey-sentinel-ctl
          args:
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            {{- with include "vs.namespaceArgs" $ctx }}{{ . | nindent 12 }}{{ end }}
            - --metrics-addr
            - :9090
            - --health-addr
            - :8081
            {{- if gt $replicas 1 }}
            - --leader-elect
            {{- end }}
            {{- if and .sentinelAuth $ctx.Values.auth.enabled }}
            # authenticate as _admin (Secret S-auth-admin, created by the credentials Job; waits for it)
            - --auth
            {{- end }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            # the Go runtime keeps its heap under 90% of this (cli.ApplyMemoryLimit)
            - name: VALKEY_HA_MEMORY_LIMIT
              valueFrom:
                resourceFieldRef:
                  containerName: controller
                  resource: limits.memory
          ports:
            - name: metrics
              containerPort: 9090
              protocol: TCP
            - name: health
              containerPort: 8081
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /healthz
              port: health
            periodSeconds: 10
          readinessProbe:
            httpGet:
              path: /readyz
              port: health
            periodSeconds: 5
          securityContext:
            {{- include "vs.containerSecurityContext" $ctx | nindent 12 }}
          resources:
            limits:
              cpu: {{ .resources.cpu | quote }}
              memory: {{ .resources.memory | quote }}
            requests:
              cpu: {{ (.resources.requests | default dict).cpu | default .resources.cpu | quote }}
              memory: {{ (.resources.requests | default dict).memory | default .resources.memory | quote }}
          {{- if $ctx.Values.tls.enabled }}
          volumeMounts:
            - name: tls
              mountPath: /etc/valkey-ha/tls
              readOnly: true
          {{- end }}
      {{- if $ctx.Values.tls.enabled }}
      volumes:
        - name: tls
          secret:
            secretName: {{ $ctx.Values.tls.existingSecret }}
            defaultMode: 0440
      {{- end }}
{{- end -}}

{{/*
podDNS: the pod's dnsConfig as given (dnsPolicy stays ClusterFirst, the kubelet writes the pod's resolv.conf).
With dnsCache the server's resolv.conf is the kubelet's with 127.0.0.1 (the cache) put first (vs.dnsResolvInit),
so the kubelet's file may name at most 2 nameservers (the cluster DNS and one of dnsConfig's): a resolver reads 3.
*/}}
{{- define "vs.podDNS" -}}
{{- $dc := .Values.dnsConfig | default dict -}}
{{- if and .Values.dnsCache.enabled (gt (len ($dc.nameservers | default list)) 1) -}}
{{- fail (printf "dnsConfig.nameservers: %d given, but with dnsCache the server's resolv.conf already names 2 (127.0.0.1, the cache, and the cluster DNS) and a resolver reads 3: give at most 1, or set dnsCache.enabled: false" (len $dc.nameservers)) -}}
{{- end -}}
{{- if $dc -}}
dnsConfig:
  {{- toYaml $dc | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
The init container that writes the server's resolv.conf into volume dns: the kubelet's /etc/resolv.conf (its own,
unchanged: init containers resolve through the cluster DNS, before the cache runs) with 127.0.0.1 first and
the kubelet's nameservers after it (a lookup the cache cannot answer goes on to the cluster DNS), the search list
and options unchanged. The chart never needs the cluster DNS Service's address: the kubelet knows it.
*/}}
{{- define "vs.dnsResolvInit" -}}
{{- if .Values.dnsCache.enabled }}
- name: dns-resolv
  image: {{ include "vs.ctlImage" . }}
  imagePullPolicy: {{ .Values.controller.image.pullPolicy }}
  command:
    - /valkey-sentinel-ctl
    - dns-cache
    - resolv-conf
    - --in=/etc/resolv.conf
    - --out=/etc/valkey-ha/dns/resolv.conf
    - --cache=127.0.0.1
  securityContext:
    {{- include "vs.containerSecurityContext" . | nindent 4 }}
  resources:
    limits:
      cpu: 50m
      memory: 32Mi
    requests:
      cpu: 50m
      memory: 32Mi
  volumeMounts:
    - name: dns
      mountPath: /etc/valkey-ha/dns
{{- end }}
{{- end -}}

{{/* The server's (Sentinel's) /etc/resolv.conf: the file vs.dnsResolvInit wrote. */}}
{{- define "vs.dnsResolvMount" -}}
{{- if .Values.dnsCache.enabled }}
# the DNS cache first (RELIABILITY.md, "Found" 3); written by init container dns-resolv
- name: dns
  mountPath: /etc/resolv.conf
  subPath: resolv.conf
  readOnly: true
{{- end }}
{{- end -}}

{{- define "vs.dnsVolume" -}}
{{- if .Values.dnsCache.enabled }}
# the server's resolv.conf (init container dns-resolv)
- name: dns
  emptyDir:
    sizeLimit: 1Mi
{{- end }}
{{- end -}}

{{/*
The dns-cache container (valkey-sentinel-ctl dns-cache on 127.0.0.1:53). It forwards to the first nameserver of
its own /etc/resolv.conf, the kubelet's (the cluster DNS Service with dnsPolicy ClusterFirst).
*/}}
{{- define "vs.dnsCacheContainer" -}}
{{- if .Values.dnsCache.enabled }}
# answers the server's lookups within a bound while a cluster DNS replica is dead (RELIABILITY.md, "Found" 3)
- name: dns-cache
  image: {{ include "vs.ctlImage" . }}
  imagePullPolicy: {{ .Values.controller.image.pullPolicy }}
  command:
    - /valkey-sentinel-ctl
    - dns-cache
    - --listen=127.0.0.1:53
    - --resolv-conf=/etc/resolv.conf
  securityContext:
    {{- include "vs.containerSecurityContext" . | nindent 4 }}
  resources:
    limits:
      cpu: {{ .Values.dnsCache.resources.cpu | quote }}
      memory: {{ .Values.dnsCache.resources.memory | quote }}
    requests:
      cpu: {{ .Values.dnsCache.resources.cpu | quote }}
      memory: {{ .Values.dnsCache.resources.memory | quote }}
{{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------- issue 27 knobs (podSecurityContext, ...) */}}

{{/*
runAsUser and runAsGroup (and fsGroup for a pod) from podSecurityContext, each on its own line after a newline;
nothing with podSecurityContext.enabled false (the platform assigns them, e.g. OpenShift's restricted-v2).
*/}}
{{- define "vs.securityIds" -}}
{{- $v := .ctx.Values.podSecurityContext -}}
{{- if $v.enabled }}
runAsUser: {{ int64 $v.runAsUser }}
runAsGroup: {{ int64 $v.runAsGroup }}
{{- if .pod }}
fsGroup: {{ int64 $v.fsGroup }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The optional fields of a scrape endpoint (PodMonitor podMetricsEndpoints, ServiceMonitor endpoints) from a
monitor's values: scrapeTimeout, honorLabels, relabelings, metricRelabelings; each line indented by 6.
*/}}
{{- define "vs.monitorKnobs" -}}
{{- with .scrapeTimeout }}
      scrapeTimeout: {{ . }}
{{- end }}
{{- if .honorLabels }}
      honorLabels: true
{{- end }}
{{- with .relabelings }}
      relabelings:
        {{- toYaml . | nindent 8 }}
{{- end }}
{{- with .metricRelabelings }}
      metricRelabelings:
        {{- toYaml . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The labels the charts' alerts and dashboards group or select by: relabelings may not write or drop them. */}}
{{- define "vs.protectedLabels" -}}
namespace pod valkey_instance replica controller object quorum monitor sentinel master_name
{{- end -}}

{{/*
Checks of a monitor's knobs. Call with (dict "field" "metrics.podMonitor" "m" .Values.metrics.podMonitor "ctx" $):
scrapeTimeout a duration at most interval; no relabeling that writes (targetLabel), drops (labeldrop) or leaves
out (labelkeep) a protected label.
*/}}
{{- define "vs.validateMonitor" -}}
{{- $f := .field -}}
{{- with .m.scrapeTimeout -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s.scrapeTimeout" $f) "value" . "format" "interval" "example" "10s") -}}
{{- if gt (float64 (include "vs.seconds" .)) (float64 (include "vs.seconds" $.m.interval)) -}}
{{- fail (printf "%s.scrapeTimeout: %s is longer than %s.interval (%s); Prometheus refuses the scrape config. Shorten it or raise the interval" $f . $f (toString $.m.interval)) -}}
{{- end -}}
{{- end -}}
{{- $protected := splitList " " (include "vs.protectedLabels" .ctx) -}}
{{- range $kind := list "relabelings" "metricRelabelings" -}}
{{- range $i, $r := (get $.m $kind) -}}
{{- $at := printf "%s.%s[%d]" $f $kind $i -}}
{{- $action := lower ($r.action | default "replace") -}}
{{- $regex := printf "^(?:%s)$" (toString ($r.regex | default "(.*)")) -}}
{{- range $l := $protected -}}
{{- if and (eq (toString $r.targetLabel) $l) (not (has $action (list "keep" "drop" "keepequal" "dropequal" "labeldrop" "labelkeep"))) -}}
{{- fail (printf "%s.targetLabel: %s is a label the chart's alerts and dashboards group by, so they would count the wrong series or none; write another label" $at $l) -}}
{{- end -}}
{{- if and (eq $action "labeldrop") (regexMatch $regex $l) -}}
{{- fail (printf "%s: labeldrop with regex %q drops label %s, which the chart's alerts and dashboards group by; narrow the regex" $at (toString $r.regex) $l) -}}
{{- end -}}
{{- if and (eq $action "labelkeep") (not (regexMatch $regex $l)) -}}
{{- fail (printf "%s: labelkeep with regex %q drops label %s, which the chart's alerts and dashboards group by; add it to the regex" $at (toString $r.regex) $l) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Checks of metrics.prometheusRule.additionalRules: each an alert or a recording rule (not both), with a valid name. */}}
{{- define "vs.validateAdditionalRules" -}}
{{- range $i, $r := .Values.metrics.prometheusRule.additionalRules -}}
{{- $at := printf "metrics.prometheusRule.additionalRules[%d]" $i -}}
{{- if eq (len (compact (list ($r.alert | default "") ($r.record | default "")))) 1 | not -}}
{{- fail (printf "%s: give exactly one of alert (an alerting rule) and record (a recording rule)" $at) -}}
{{- end -}}
{{- with $r.alert -}}
{{- if not (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" .) -}}
{{- fail (printf "%s.alert: %q is not an alert name (letters, digits and '_', not starting with a digit); for example CacheHitRateLow" $at .) -}}
{{- end -}}
{{- end -}}
{{- with $r.record -}}
{{- if not (regexMatch "^[a-zA-Z_:][a-zA-Z0-9_:]*$" .) -}}
{{- fail (printf "%s.record: %q is not a metric name (letters, digits, '_' and ':'); for example valkey:hit_ratio:rate5m" $at .) -}}
{{- end -}}
{{- if or $r.for $r.keep_firing_for $r.annotations -}}
{{- fail (printf "%s: for, keep_firing_for and annotations belong to alerting rules; a recording rule (record) takes expr and labels only" $at) -}}
{{- end -}}
{{- end -}}
{{- range $k := list "for" "keep_firing_for" -}}
{{- with get $r $k -}}
{{- if not (regexMatch "^([0-9]+(ms|s|m|h|d|w|y))+$" (toString .)) -}}
{{- fail (printf "%s.%s: %q is not a Prometheus duration; for example 5m" $at $k (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $r.labels -}}
{{- range $k, $_ := . -}}
{{- if not (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" $k) -}}
{{- fail (printf "%s.labels key %q: not a Prometheus label name (letters, digits and '_', not starting with a digit); for example team_name" $at $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.metrics.prometheusRule.additionalRules (not .Values.metrics.prometheusRule.enabled) -}}
{{- fail "metrics.prometheusRule.additionalRules: set, but metrics.prometheusRule.enabled is false, so no PrometheusRule carries them; enable it or remove the rules" -}}
{{- end -}}
{{- end -}}

{{/* The issue 27 monitor and rule knobs of charts/valkey-sentinel. */}}
{{- define "vs.validateObservabilityKnobs" -}}
{{- include "vs.validateMonitor" (dict "field" "metrics.podMonitor" "m" .Values.metrics.podMonitor "ctx" .) -}}
{{- include "vs.validateMonitor" (dict "field" "controller.serviceMonitor" "m" .Values.controller.serviceMonitor "ctx" .) -}}
{{- include "vs.validateMonitor" (dict "field" "instanceController.serviceMonitor" "m" .Values.instanceController.serviceMonitor "ctx" .) -}}
{{- include "vs.validateAdditionalRules" . -}}
{{- end -}}

{{/*
Checks of networkPolicy.clientNamespaceSelector (checkSelector also refuses an empty one) and networkPolicy.extraIngress
(each rule names its sources and ports, none the exporter port).
*/}}
{{- define "vs.validateNetworkPolicyKnobs" -}}
{{- $np := .Values.networkPolicy -}}
{{- with $np.clientNamespaceSelector -}}
{{- include "vs.checkSelector" (dict "field" "networkPolicy.clientNamespaceSelector" "selector" .) -}}
{{- end -}}
{{- range $i, $r := $np.extraIngress -}}
{{- $at := printf "networkPolicy.extraIngress[%d]" $i -}}
{{- if not $r.from -}}
{{- fail (printf "%s.from: empty or missing, so the rule admits every source (every pod of the cluster and every address); name the peers (podSelector, namespaceSelector, ipBlock)" $at) -}}
{{- end -}}
{{- if not $r.ports -}}
{{- fail (printf "%s.ports: empty or missing, so the rule admits its sources on every port, the exporter's too (its /scrape dials any target); list the ports" $at) -}}
{{- end -}}
{{- range $j, $p := $r.from -}}
{{- if not $p -}}
{{- fail (printf "%s.from[%d]: an empty peer; give podSelector, namespaceSelector or ipBlock" $at $j) -}}
{{- end -}}
{{- with $p.podSelector }}{{ include "vs.checkSelector" (dict "field" (printf "%s.from[%d].podSelector" $at $j) "selector" .) }}{{ end -}}
{{- with $p.namespaceSelector }}{{ include "vs.checkSelector" (dict "field" (printf "%s.from[%d].namespaceSelector" $at $j) "selector" .) }}{{ end -}}
{{- with $p.ipBlock -}}
{{- include "vs.checkCIDR" (dict "field" (printf "%s.from[%d].ipBlock.cidr" $at $j) "value" .cidr) -}}
{{- end -}}
{{- end -}}
{{- range $j, $p := $r.ports -}}
{{- $port := toString ($p.port | default "") -}}
{{- if eq $port "" -}}
{{- fail (printf "%s.ports[%d].port: missing, so the rule admits every port, the exporter's too; give the port" $at $j) -}}
{{- end -}}
{{- $mp := int $.Values.metrics.port -}}
{{- $end := int ($p.endPort | default 0) -}}
{{- if or (eq $port "metrics") (eq $port (toString $mp)) (and $end (regexMatch "^[0-9]+$" $port) (le (int $port) $mp) (ge $end $mp)) -}}
{{- fail (printf "%s.ports[%d]: names the exporter port (%d, metrics), which only metrics scrapers may reach (networkPolicy.metricsNamespaceSelector): its /scrape dials any target with the exporter's password" $at $j $mp) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* hostAliases, schedulerName and runtimeClassName of the Sentinel pods (issue 27), each only when set; lines indented by 6. */}}
{{- define "vs.podKnobs" -}}
{{- with .Values.schedulerName }}
      schedulerName: {{ . }}
{{- end }}
{{- with .Values.runtimeClassName }}
      runtimeClassName: {{ . }}
{{- end }}
{{- with .Values.hostAliases }}
      hostAliases:
        {{- toYaml . | nindent 8 }}
{{- end }}
{{- end -}}

{{/*
Checks of the pod and claim knobs: scheduler and runtime class names, hostAliases (never a cluster Service or pod
name), PVC labels and annotations (not the chart's keys; unchanged on an installed release, whose StatefulSets'
volumeClaimTemplates cannot change).
*/}}
{{- define "vs.validatePodKnobs" -}}
{{- with .Values.schedulerName -}}
{{- include "vs.checkFormat" (dict "field" "schedulerName" "value" . "format" "dnsName" "example" "bin-packing-scheduler") -}}
{{- end -}}
{{- with .Values.runtimeClassName -}}
{{- include "vs.checkFormat" (dict "field" "runtimeClassName" "value" . "format" "dnsName" "example" "gvisor") -}}
{{- end -}}
{{- $svc := printf ".svc.%s" .Values.clusterDomain -}}
{{- range $i, $h := .Values.hostAliases -}}
{{- $at := printf "hostAliases[%d]" $i -}}
{{- if not (regexMatch "^([0-9]{1,3}\\.){3}[0-9]{1,3}$|^[0-9a-fA-F:]*:[0-9a-fA-F:.]*$" (toString ($h.ip | default ""))) -}}
{{- fail (printf "%s.ip: %q is not an IP address; for example 10.0.0.5" $at (toString ($h.ip | default ""))) -}}
{{- end -}}
{{- if not $h.hostnames -}}
{{- fail (printf "%s.hostnames: empty; list the names that resolve to %s" $at (toString $h.ip)) -}}
{{- end -}}
{{- range $j, $n := $h.hostnames -}}
{{- include "vs.checkFormat" (dict "field" (printf "%s.hostnames[%d]" $at $j) "value" $n "format" "dnsName" "example" "backup.example.com") -}}
{{- if or (hasSuffix $svc $n) (hasSuffix (printf "%s." $svc) $n) (hasSuffix ".svc" $n) (eq $n "localhost") -}}
{{- fail (printf "%s.hostnames[%d]: %q is a name the cluster DNS answers (the node and Sentinel FQDNs, Services) or localhost; pinning it in /etc/hosts would send replication, Sentinel traffic and credentials to a fixed address that outlives the pod. Use hostAliases for names outside the cluster" $at $j $n) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "vs.checkLabels" (dict "field" "persistence.labels" "labels" .Values.persistence.labels) -}}
{{- range $k, $_ := .Values.persistence.labels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k) -}}
{{- fail (printf "persistence.labels.%s: the prefixes app.kubernetes.io/, helm.sh/ and valkey.io/ are set by the chart; choose another label key (e.g. example.com/backup)" $k) -}}
{{- end -}}
{{- end -}}
{{- range $k, $v := .Values.persistence.annotations -}}
{{- if not (kindIs "string" $v) -}}
{{- fail (printf "persistence.annotations.%s: %v is not text; quote it" $k $v) -}}
{{- end -}}
{{- end -}}
{{- range $name := compact (splitList " " (include "vs.claimStatefulSets" .)) -}}
{{- $sts := lookup "apps/v1" "StatefulSet" $.Release.Namespace $name | default dict -}}
{{- with ($sts.spec | default dict).volumeClaimTemplates -}}
{{- $meta := (index . 0).metadata | default dict -}}
{{- $oldLabels := $meta.labels | default dict -}}
{{- $ours := dict -}}
{{- range $k, $v := $oldLabels -}}
{{- if not (or (hasPrefix "app.kubernetes.io/" $k) (hasPrefix "helm.sh/" $k) (hasPrefix "valkey.io/" $k)) -}}
{{- $_ := set $ours $k $v -}}
{{- end -}}
{{- end -}}
{{- if ne (toJson $ours) (toJson ($.Values.persistence.labels | default dict)) -}}
{{- fail (printf "persistence.labels: StatefulSet %s claims with labels %s and a StatefulSet's volumeClaimTemplates cannot change; keep persistence.labels: %s (label the existing PVCs with kubectl label instead)" $name (toJson $ours) (toJson $ours)) -}}
{{- end -}}
{{- $oldAnn := $meta.annotations | default dict -}}
{{- if ne (toJson $oldAnn) (toJson ($.Values.persistence.annotations | default dict)) -}}
{{- fail (printf "persistence.annotations: StatefulSet %s claims with annotations %s and a StatefulSet's volumeClaimTemplates cannot change; keep persistence.annotations: %s (annotate the existing PVCs with kubectl annotate instead)" $name (toJson $oldAnn) (toJson $oldAnn)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The StatefulSet whose claims come from its volumeClaimTemplates (persistence on). */}}
{{- define "vs.claimStatefulSets" -}}
{{- if .Values.persistence.enabled -}}{{ include "vs.fullname" . }}{{- end -}}
{{- end -}}

{{/* diagnosticMode: refused while a controller of this release would act on the Sentinels or their instances. */}}
{{- define "vs.validateDiagnosticMode" -}}
{{- if and .Values.diagnosticMode.enabled .Values.controller.enabled -}}
{{- fail "diagnosticMode.enabled: the sentinel controller (controller.enabled) would roll the Sentinel pods and re-register monitors on Sentinels that do not run; set controller.enabled: false while you debug, and back to true with diagnosticMode.enabled: false" -}}
{{- end -}}
{{- if and .Values.diagnosticMode.enabled .Values.instanceController.enabled -}}
{{- fail "diagnosticMode.enabled: the shared instance controller (instanceController.enabled) would act on instances whose quorum cannot answer; set instanceController.enabled: false while you debug" -}}
{{- end -}}
{{- end -}}

