{{/*
Names, labels, derived settings and validate* helpers of charts/valkey-sentinel.
Numbers from values arrive as float64: always pass them through `int` before printing.
*/}}

{{/* Full name S: the release name (docs/contract.md: release S, fullname S), truncated to 63. */}}
{{- define "vs.fullname" -}}
{{- include "vs.validate" . -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
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

{{- define "vs.image" -}}
{{- include "vs.imageRef" (dict "ctx" . "image" .Values.image "tag" .Values.image.tag) -}}
{{- end -}}

{{- define "vs.headless" -}}
{{- printf "%s-headless" (include "vs.fullname" .) -}}
{{- end -}}

{{/* FQDN of Sentinel pod .index: S-<i>.S-headless.<ns>.svc.<domain> (internal/chartapi/contract.SentinelHost). */}}
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
The Sentinels' users (internal/valkeyapi/acl.SentinelUsers, Valkey rules; templates-tests compares the two): name and
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
namespaces namespaceSelector sharedTrustDomain instanceController.closeDemotedClients instanceController.enabled instanceController.replicas instanceController.workers
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
are asked in parallel (INFO sentinel as _client, 1 s each; not itself, by $HOSTNAME); a peer that does not answer (its node gone, DNS
down) is skipped, so a dead peer never makes the others unready, and an instance no Sentinel monitors yet
changes nothing. The monitors' passwords are not needed: only names are compared. docs/design.md, "Sentinel
readiness". The probe runs in the sentinel container's cgroup, so every process it starts spends Sentinel's
CPU limit (50m by default): it starts as few as it can (one valkey-cli per other Sentinel and one awk for
every reply, where it once started 13 processes and kept a 50m Sentinel throttled in 85 % of CFS periods, its
timer late enough for TILT mode).
*/}}
{{- define "vs.readinessScript" -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $peers = append $peers (printf "%s:26379" (include "vs.sentinelFQDN" (dict "ctx" $ "index" $i))) -}}
{{- end -}}
own=$({{ include "vs.cli" . }} info sentinel 2>&1) || { echo "$own"; exit 1; }
case "$own" in *sentinel_masters:*) ;; *) echo "no Sentinel answer: $own"; exit 1 ;; esac
missing=$({ printf '%s\n@@\n' "$own"
  for p in {{ join " " $peers }}; do
    case "$p" in "$HOSTNAME".*) continue ;; esac
    timeout 1 {{ include "vs.cliNoPort" . }} -h "${p%:*}" -p "${p##*:}" info sentinel 2>/dev/null &
  done
  wait; } | awk -F '[=,]' '/^@@/ { peers = 1; next } !/^master[0-9]*:name=/ { next } !peers { own[$2] = 1; next } !($2 in own) && !($2 in seen) { seen[$2] = 1; n++; if (n <= 5) list = list " " $2 } END { if (n) print n ":" list }')
[ -z "$missing" ] && exit 0
echo "this Sentinel lacks ${missing%%:*} monitor(s) its peers hold, until the sentinel controller registers them:${missing#*:}"
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
vs.given renders a value the user set as a string ("" when unset: null or missing), so a number 0 counts as
set ("0", refused by the checks) where `default` and `with` would take it for unset and use the plan's.
*/}}
{{- define "vs.given" -}}
{{- if not (kindIs "invalid" .) -}}{{- toString . -}}{{- end -}}
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
{{- with include "vs.given" $req.cpu -}}
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

{{/* ---------------------------------------------------------------- issue 27 knobs (podSecurityContext, ...) */}}

{{/* The issue 27 monitor and rule knobs of charts/valkey-sentinel. */}}
{{- define "vs.validateObservabilityKnobs" -}}
{{- include "vs.validateMonitor" (dict "field" "metrics.podMonitor" "m" .Values.metrics.podMonitor "ctx" .) -}}
{{- include "vs.validateMonitor" (dict "field" "controller.serviceMonitor" "m" .Values.controller.serviceMonitor "ctx" .) -}}
{{- include "vs.validateMonitor" (dict "field" "instanceController.serviceMonitor" "m" .Values.instanceController.serviceMonitor "ctx" .) -}}
{{- include "vs.validateAdditionalRules" . -}}
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

