{{/* GENERATED from charts/_shared/helpers.tpl by `go test ./templates-tests -run TestSharedTemplatesGenerated -update`;
do not edit here: edit charts/_shared/helpers.tpl (PREFIX. is this chart's valkey.) and rerun. */}}

{{/* Chart name, truncated to 63 characters. */}}
{{- define "valkey.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "valkey.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Immutable selector subset. */}}
{{- define "valkey.selectorLabels" -}}
app.kubernetes.io/name: {{ include "valkey.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end -}}

{{/*
Labels of every object: commonLabels (and "extra", e.g. charts/valkey's instanceLabels or a monitor's labels,
which wins over them), then the chart's own (validateCommon keeps its prefixes out of commonLabels). Call with
(dict "ctx" $ "component" "data" ["extra" map]). Never used in a selector.
*/}}
{{- define "valkey.labels" -}}
{{- $ctx := .ctx -}}
{{- with merge (dict) (.extra | default dict) ($ctx.Values.commonLabels | default dict) }}{{ toYaml . }}
{{ end -}}
helm.sh/chart: {{ include "valkey.chart" $ctx }}
{{ include "valkey.selectorLabels" $ctx }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
app.kubernetes.io/part-of: valkey-ha
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Labels of the controller pod template (not the Deployment selector): commonLabels, the selector labels, the
component (controller unless "component" says otherwise) and the chart's version labels. Call with (dict "ctx" $ ["component" c]).
*/}}
{{- define "valkey.controllerPodLabels" -}}
{{- with .ctx.Values.commonLabels }}{{ toYaml . }}
{{ end -}}
{{ include "valkey.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component | default "controller" }}
helm.sh/chart: {{ include "valkey.chart" .ctx }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: valkey-ha
{{- end -}}

{{/* Restricted container securityContext (Pod Security Standard "restricted"). */}}
{{- define "valkey.containerSecurityContext" -}}
runAsNonRoot: true
{{- include "valkey.securityIds" (dict "ctx" . "pod" false) }}
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
{{- include "valkey.securityIds" (dict "ctx" . "pod" true) }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* CPU quantity (100m, 0.5, 2) in millicores, printed as a number. */}}
{{- define "valkey.millicores" -}}
{{- $q := toString . -}}
{{- if hasSuffix "m" $q -}}{{- printf "%.3f" (float64 (trimSuffix "m" $q)) -}}{{- else -}}{{- printf "%.3f" (mulf (float64 $q) 1000.0) -}}{{- end -}}
{{- end -}}

{{/*
podDNS: the pod's dnsConfig as given (dnsPolicy stays ClusterFirst, the kubelet writes the pod's resolv.conf).
With dnsCache the server's resolv.conf is the kubelet's with 127.0.0.1 (the cache) put first (valkey.dnsResolvInit),
so the kubelet's file may name at most 2 nameservers (the cluster DNS and one of dnsConfig's): a resolver reads 3.
*/}}
{{- define "valkey.podDNS" -}}
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
{{- define "valkey.dnsResolvInit" -}}
{{- if .Values.dnsCache.enabled }}
- name: dns-resolv
  image: {{ include "valkey.ctlImage" . }}
  imagePullPolicy: {{ .Values.controller.image.pullPolicy }}
  command:
    - /valkey-sentinel-ctl
    - dns-cache
    - resolv-conf
    - --in=/etc/resolv.conf
    - --out=/etc/valkey-ha/dns/resolv.conf
    - --cache=127.0.0.1
  securityContext:
    {{- include "valkey.containerSecurityContext" . | nindent 4 }}
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

{{/* The server's (Sentinel's) /etc/resolv.conf: the file valkey.dnsResolvInit wrote. */}}
{{- define "valkey.dnsResolvMount" -}}
{{- if .Values.dnsCache.enabled }}
# the DNS cache first (RELIABILITY.md, "Found" 3); written by init container dns-resolv
- name: dns
  mountPath: /etc/resolv.conf
  subPath: resolv.conf
  readOnly: true
{{- end }}
{{- end -}}

{{- define "valkey.dnsVolume" -}}
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
{{- define "valkey.dnsCacheContainer" -}}
{{- if .Values.dnsCache.enabled }}
# answers the server's lookups within a bound while a cluster DNS replica is dead (RELIABILITY.md, "Found" 3)
- name: dns-cache
  image: {{ include "valkey.ctlImage" . }}
  imagePullPolicy: {{ .Values.controller.image.pullPolicy }}
  command:
    - /valkey-sentinel-ctl
    - dns-cache
    - --listen=127.0.0.1:53
    - --resolv-conf=/etc/resolv.conf
  securityContext:
    {{- include "valkey.containerSecurityContext" . | nindent 4 }}
  resources:
    limits:
      cpu: {{ .Values.dnsCache.resources.cpu | quote }}
      memory: {{ .Values.dnsCache.resources.memory | quote }}
    requests:
      cpu: {{ .Values.dnsCache.resources.cpu | quote }}
      memory: {{ .Values.dnsCache.resources.memory | quote }}
{{- end }}
{{- end -}}

{{/*
runAsUser and runAsGroup (and fsGroup for a pod) from podSecurityContext, each on its own line after a newline;
nothing with podSecurityContext.enabled false (the platform assigns them, e.g. OpenShift's restricted-v2).
*/}}
{{- define "valkey.securityIds" -}}
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
{{- define "valkey.monitorKnobs" -}}
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
{{- define "valkey.protectedLabels" -}}
namespace pod valkey_instance replica controller object quorum monitor sentinel master_name
{{- end -}}

{{/*
Checks of a monitor's knobs. Call with (dict "field" "metrics.podMonitor" "m" .Values.metrics.podMonitor "ctx" $):
scrapeTimeout a duration at most interval; no relabeling that writes (targetLabel), drops (labeldrop) or leaves
out (labelkeep) a protected label.
*/}}
{{- define "valkey.validateMonitor" -}}
{{- $f := .field -}}
{{- with .m.scrapeTimeout -}}
{{- include "valkey.checkFormat" (dict "field" (printf "%s.scrapeTimeout" $f) "value" . "format" "interval" "example" "10s") -}}
{{- if gt (float64 (include "valkey.seconds" .)) (float64 (include "valkey.seconds" $.m.interval)) -}}
{{- fail (printf "%s.scrapeTimeout: %s is longer than %s.interval (%s); Prometheus refuses the scrape config. Shorten it or raise the interval" $f . $f (toString $.m.interval)) -}}
{{- end -}}
{{- end -}}
{{- $protected := splitList " " (include "valkey.protectedLabels" .ctx) -}}
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
{{- define "valkey.validateAdditionalRules" -}}
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

{{/*
Checks of networkPolicy.clientNamespaceSelector (checkSelector also refuses an empty one) and networkPolicy.extraIngress
(each rule names its sources and ports, none the exporter port).
*/}}
{{- define "valkey.validateNetworkPolicyKnobs" -}}
{{- $np := .Values.networkPolicy -}}
{{- with $np.clientNamespaceSelector -}}
{{- include "valkey.checkSelector" (dict "field" "networkPolicy.clientNamespaceSelector" "selector" .) -}}
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
{{- with $p.podSelector }}{{ include "valkey.checkSelector" (dict "field" (printf "%s.from[%d].podSelector" $at $j) "selector" .) }}{{ end -}}
{{- with $p.namespaceSelector }}{{ include "valkey.checkSelector" (dict "field" (printf "%s.from[%d].namespaceSelector" $at $j) "selector" .) }}{{ end -}}
{{- with $p.ipBlock -}}
{{- include "valkey.checkCIDR" (dict "field" (printf "%s.from[%d].ipBlock.cidr" $at $j) "value" .cidr) -}}
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

{{/* hostAliases, schedulerName and runtimeClassName of the data pods or the Sentinel pods (issue 27), each only when set; lines indented by 6. */}}
{{- define "valkey.podKnobs" -}}
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
{{- define "valkey.validatePodKnobs" -}}
{{- with .Values.schedulerName -}}
{{- include "valkey.checkFormat" (dict "field" "schedulerName" "value" . "format" "dnsName" "example" "bin-packing-scheduler") -}}
{{- end -}}
{{- with .Values.runtimeClassName -}}
{{- include "valkey.checkFormat" (dict "field" "runtimeClassName" "value" . "format" "dnsName" "example" "gvisor") -}}
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
{{- include "valkey.checkFormat" (dict "field" (printf "%s.hostnames[%d]" $at $j) "value" $n "format" "dnsName" "example" "backup.example.com") -}}
{{- if or (hasSuffix $svc $n) (hasSuffix (printf "%s." $svc) $n) (hasSuffix ".svc" $n) (eq $n "localhost") -}}
{{- fail (printf "%s.hostnames[%d]: %q is a name the cluster DNS answers (the node and Sentinel FQDNs, Services) or localhost; pinning it in /etc/hosts would send replication, Sentinel traffic and credentials to a fixed address that outlives the pod. Use hostAliases for names outside the cluster" $at $j $n) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- include "valkey.checkLabels" (dict "field" "persistence.labels" "labels" .Values.persistence.labels) -}}
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
{{- range $name := compact (splitList " " (include "valkey.claimStatefulSets" .)) -}}
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

{{/*
A controller Deployment: charts/valkey's instance controller (F-controller), charts/valkey-sentinel's sentinel
controller and shared instance controller. Same image, pull secrets, scheduling (controller.*), posture and
probes. Call with (dict "ctx" $ "name" ... "component" ... "serviceAccount" ... "replicas" n "resources" map "args"
list ["extraArgs" text] ["sentinelAuth" true] ["migrateFrom" map] ["plainArgs" true]): args are printed quoted
(unquoted with plainArgs, as charts/valkey always has), then extraArgs (lines, e.g. vs.namespaceArgs), the
metrics/health addresses, --leader-elect with standbys, --auth (sentinelAuth with auth.enabled) and the
migration flags, volume and mount (migrateFrom with a host, charts/valkey).
*/}}
{{- define "valkey.controllerDeployment" -}}
{{- $ctx := .ctx -}}
{{- $c := $ctx.Values.controller -}}
{{- $replicas := int .replicas -}}
{{- $migrate := .migrateFrom | default dict -}}
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
    {{- include "valkey.labels" (dict "ctx" $ctx "component" .component) | nindent 4 }}
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
      {{- include "valkey.selectorLabels" $ctx | nindent 6 }}
      app.kubernetes.io/component: {{ .component }}
  template:
    metadata:
      labels:
        {{- include "valkey.controllerPodLabels" (dict "ctx" $ctx "component" .component) | nindent 8 }}
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
        {{- include "valkey.podSecurityContext" $ctx | nindent 8 }}
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
                    {{- include "valkey.selectorLabels" $ctx | nindent 20 }}
                    app.kubernetes.io/component: {{ .component }}
      {{- end }}
      {{- with $c.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- include "valkey.spreadConstraints" (dict "list" . "selector" (merge (include "valkey.selectorLabels" $ctx | fromYaml) (dict "app.kubernetes.io/component" $.component))) | nindent 8 }}
      {{- end }}
      containers:
        - name: controller
          image: {{ include "valkey.ctlImage" $ctx }}
          imagePullPolicy: {{ $c.image.pullPolicy }}
          command:
            - /valkey-sentinel-ctl
          args:
            {{- range .args }}
            - {{ ternary . (quote .) (eq $.plainArgs true) }}
            {{- end }}
            {{- with .extraArgs }}{{ . | nindent 12 }}{{ end }}
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
            {{- with $migrate }}{{ if .host }}
            # migrateFrom (README "Migration"): no topology step while node 0 follows the source; switch on migrateFrom.switch
            - --migrate-from
            - {{ printf "%s:%d" .host (int .port) | quote }}
            - --migrate-user
            - {{ .username | quote }}
            - --migrate-password-file
            - /etc/valkey-ha/migrate/password
            {{- if .switch }}
            - --migrate-switch
            {{- end }}
            {{- end }}{{ end }}
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
            {{- include "valkey.containerSecurityContext" $ctx | nindent 12 }}
          resources:
            limits:
              cpu: {{ .resources.cpu | quote }}
              memory: {{ .resources.memory | quote }}
            requests:
              cpu: {{ (.resources.requests | default dict).cpu | default .resources.cpu | quote }}
              memory: {{ (.resources.requests | default dict).memory | default .resources.memory | quote }}
          {{- if or $ctx.Values.tls.enabled $migrate.host }}
          volumeMounts:
            {{- if $ctx.Values.tls.enabled }}
            - name: tls
              mountPath: /etc/valkey-ha/tls
              readOnly: true
            {{- end }}
            {{- if $migrate.host }}
            - name: migrate
              mountPath: /etc/valkey-ha/migrate
              readOnly: true
            {{- end }}
          {{- end }}
      {{- if or $ctx.Values.tls.enabled $migrate.host }}
      volumes:
        {{- if $ctx.Values.tls.enabled }}
        - name: tls
          secret:
            secretName: {{ $ctx.Values.tls.existingSecret }}
            defaultMode: 0440
        {{- end }}
        {{- if $migrate.host }}
        - name: migrate
          secret:
            secretName: {{ $migrate.existingSecret }}
            defaultMode: 0440
            items:
              - key: {{ $migrate.secretKey }}
                path: password
        {{- end }}
      {{- end }}
{{- end -}}

{{/*
An image reference: [registry/]repository[:tag][@digest], registry = global.imageRegistry, else the image's own.
Call with (dict "ctx" $ "image" <image values> "tag" t ["repository" r]); repository defaults to the image's
(charts/valkey's server image passes the engine's default one).
*/}}
{{- define "valkey.imageRef" -}}
{{- $reg := .ctx.Values.global.imageRegistry | default .image.registry | default "" | trimSuffix "/" -}}
{{- $repo := .repository | default .image.repository -}}
{{- $ref := ternary (printf "%s/%s" $reg $repo) $repo (ne $reg "") -}}
{{- with toString .tag }}{{ $ref = printf "%s:%s" $ref . }}{{ end -}}
{{- with .image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{- $ref -}}
{{- end -}}

{{- define "valkey.exporterImage" -}}
{{- include "valkey.imageRef" (dict "ctx" . "image" .Values.metrics.image "tag" .Values.metrics.image.tag) -}}
{{- end -}}

{{- define "valkey.ctlImage" -}}
{{- include "valkey.imageRef" (dict "ctx" . "image" .Values.controller.image "tag" (.Values.controller.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}

{{/*
A ServiceMonitor of one /metrics port of this release: charts/valkey's data pods (the exporter) and instance
controller, charts/valkey-sentinel's sentinel controller and shared instance controller. Call with (dict "ctx" $
"name" n "component" c "monitor" <its serviceMonitor values> "match" "<the one selector label beside the chart's>").
The caller writes the "---" and the comment above it.
*/}}
{{- define "valkey.serviceMonitor" -}}
{{- $ctx := .ctx -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ .name }}
  namespace: {{ $ctx.Release.Namespace }}
  {{- with $ctx.Values.commonAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  labels:
    {{- include "valkey.labels" (dict "ctx" $ctx "component" .component "extra" .monitor.labels) | nindent 4 }}
spec:
  selector:
    matchLabels:
      {{- include "valkey.selectorLabels" $ctx | nindent 6 }}
      {{ .match }}
  endpoints:
    - port: metrics
      interval: {{ .monitor.interval }}
      {{- include "valkey.monitorKnobs" .monitor }}
{{- end -}}
