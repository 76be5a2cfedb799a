{{/*
Names, labels, derived settings and validate* helpers of charts/valkey-sentinel.
Numbers from values arrive as float64: always pass them through `int` before printing.
*/}}

{{- define "vs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name S: the release name (docs/contract.md: release S, fullname S), truncated to 63. */}}
{{- define "vs.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vs.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "vs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end -}}

{{/* Common labels; call with (dict "ctx" $ "component" "sentinel"). */}}
{{- define "vs.labels" -}}
{{- $ctx := .ctx -}}
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

{{- define "vs.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) -}}
{{- end -}}

{{- define "vs.ctlImage" -}}
{{- printf "%s:%s" .Values.controller.image.repository (toString (.Values.controller.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}

{{- define "vs.headless" -}}
{{- printf "%s-headless" (include "vs.fullname" .) -}}
{{- end -}}

{{/*
ServiceAccount of this quorum's controller: S-controller unless controller.serviceAccountName names one.
Instances grant it `get` on their F-sentinel-auth Secret, so it must be this quorum's own (issue 19).
*/}}
{{- define "vs.controllerServiceAccount" -}}
{{- .Values.controller.serviceAccountName | default (printf "%s-controller" (include "vs.fullname" .)) -}}
{{- end -}}

{{- define "vs.authSecretName" -}}
{{- .Values.auth.existingSecret | default (printf "%s-auth" (include "vs.fullname" .)) -}}
{{- end -}}

{{- define "vs.containerSecurityContext" -}}
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

{{- define "vs.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 999
runAsGroup: 999
fsGroup: 999
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
valkeySelector as a label-selector string for the controller's --selector flag
(k=v, key in (a,b), key notin (a), key, !key). Empty: "" (matches nothing).
*/}}
{{- define "vs.selectorString" -}}
{{- $parts := list -}}
{{- $ml := .Values.valkeySelector.matchLabels | default dict -}}
{{- range $k := keys $ml | sortAlpha -}}
{{- $parts = append $parts (printf "%s=%s" $k (get $ml $k)) -}}
{{- end -}}
{{- range .Values.valkeySelector.matchExpressions | default list -}}
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

{{/* Directives the chart (or the start step) owns: a passthrough key colliding with them is dropped and listed in NOTES. */}}
{{- define "vs.ownedKeys" -}}
{{- toJson (list "port" "tls-port" "bind" "protected-mode" "dir" "daemonize" "pidfile" "include" "requirepass"
  "tls-cert-file" "tls-key-file" "tls-ca-cert-file" "tls-replication" "tls-auth-clients" "tls-cluster"
  "sentinel announce-ip" "sentinel announce-port" "sentinel announce-hostnames" "sentinel resolve-hostnames"
  "sentinel myid" "sentinel sentinel-pass" "sentinel sentinel-user" "sentinel current-epoch") -}}
{{- end -}}

{{/* Per-master directives: they belong to the monitor (the valkey chart's sentinel.config), not here. */}}
{{- define "vs.perMasterKeys" -}}
{{- toJson (list "sentinel monitor" "sentinel known-replica" "sentinel known-slave" "sentinel known-sentinel"
  "sentinel config-epoch" "sentinel leader-epoch" "sentinel auth-pass" "sentinel auth-user"
  "sentinel down-after-milliseconds" "sentinel failover-timeout" "sentinel parallel-syncs"
  "sentinel notification-script" "sentinel client-reconfig-script" "sentinel rename-command"
  "sentinel master-reboot-down-after-period" "sentinel primary-reboot-down-after-period") -}}
{{- end -}}

{{/* Passthrough keys dropped because the chart owns them (sorted). */}}
{{- define "vs.collisions" -}}
{{- $owned := include "vs.ownedKeys" . | fromJsonArray -}}
{{- $out := list -}}
{{- range $k := keys .Values.config | sortAlpha -}}
{{- if has (lower $k) $owned -}}{{- $out = append $out $k -}}{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* sentinel.conf template (process-global only); the start step appends announce-ip and myid. */}}
{{- define "vs.config" -}}
{{- $owned := include "vs.ownedKeys" . | fromJsonArray -}}
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
{{- range $k := keys .Values.config | sortAlpha }}
{{- if not (has (lower $k) $owned) }}
{{- $v := get $.Values.config $k }}
{{- if kindIs "bool" $v }}
{{ $k }} {{ ternary "yes" "no" $v }}
{{- else if kindIs "float64" $v }}
{{ $k }} {{ int64 $v }}
{{- else }}
{{ $k }} {{ $v }}
{{- end }}
{{- end }}
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
want="$(cat "$template" /etc/valkey-ha/auth/password | sha256sum | cut -c1-64)"
{{- else }}
want="$(sha256sum < "$template" | cut -c1-64)"
{{- end }}
if [ -s "$conf" ] && [ "$(cat "$conf.hash" 2>/dev/null || true)" = "$want" ]; then
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
pw="$(sed -e 's/[\\"]/\\&/g' /etc/valkey-ha/auth/password)"
{
  echo "requirepass \"$pw\""
  echo "sentinel sentinel-pass \"$pw\""
} >> "$tmp"
{{- end }}
if [ -s "$conf" ]; then
  # The template changed: keep the Sentinel state (monitors, epochs, known peers) of the previous file.
  grep -E '^sentinel (monitor|known-replica|known-slave|known-sentinel|config-epoch|leader-epoch|current-epoch|auth-pass|auth-user|down-after-milliseconds|failover-timeout|parallel-syncs|master-reboot-down-after-period|primary-reboot-down-after-period|rename-command) ' "$conf" >> "$tmp" || true
fi
mv "$tmp" "$conf"
echo "$want" > "$conf.hash"
echo "wrote $conf announcing $fqdn"
{{- end -}}

{{/* ---------------------------------------------------------------- validation */}}

{{- define "vs.validate" -}}
{{- $S := include "vs.fullname" . -}}
{{- if has (lower $S) (list "y" "n" "yes" "no" "on" "off" "true" "false") -}}
{{- fail (printf "fullnameOverride: the full name %q (the release name by default) reads as a YAML boolean in object names; set fullnameOverride to another name, e.g. %s-sentinel" $S $S) -}}
{{- end -}}
{{- if .Values.auth.enabled -}}
{{- fail "auth.enabled: Sentinel client authentication is not supported yet: data pods and the instance controllers could not ask the Sentinels for the primary (bootstrap would lose its split-brain guard). Leave auth.enabled false and restrict access to port 26379 with networkPolicy.enabled (plus allowedSources / networkPolicy.clientPodSelector for your clients)" -}}
{{- end -}}
{{- if gt (len $S) 50 -}}
{{- fail (printf "fullnameOverride: the full name %q is %d characters; at most 50 fit the StatefulSet and S-headless Service names. Set fullnameOverride to a shorter name" $S (len $S)) -}}
{{- end -}}
{{- $n := int .Values.replicas -}}
{{- $maxUnavailable := int .Values.pdb.maxUnavailable -}}
{{- $tolerated := sub $n (add1 (div $n 2)) -}}
{{- if and .Values.pdb.enabled (gt $maxUnavailable $tolerated) -}}
{{- fail (printf "pdb.maxUnavailable: %d of %d Sentinels down loses the majority (%d needed); set pdb.maxUnavailable to at most %d" $maxUnavailable $n (add1 (div $n 2)) $tolerated) -}}
{{- end -}}
{{- $perMaster := include "vs.perMasterKeys" . | fromJsonArray -}}
{{- range $k, $v := .Values.config -}}
{{- if not (regexMatch "^(sentinel )?[a-z][a-z0-9-]{0,63}$" $k) -}}
{{- fail (printf "config.%s: not a sentinel.conf directive name (lowercase letters, digits and '-', optionally after \"sentinel \")" $k) -}}
{{- end -}}
{{- if has (lower $k) $perMaster -}}
{{- fail (printf "config.%s: a per-master directive; set it per instance in the valkey chart's sentinel.config (the controller sends SENTINEL SET)" $k) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.existingSecret: tls.enabled needs a Secret with tls.crt, tls.key and ca.crt covering the Sentinel FQDNs; set tls.existingSecret" -}}
{{- end -}}
{{- end -}}
