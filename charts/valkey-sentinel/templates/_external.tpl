{{/*
externalAccess (issue 27): one Service per Sentinel pod for Sentinel-aware clients outside the cluster, and the
address map S-external. What the Sentinels announce does not change (in-cluster FQDNs, gossiped to each other
and returned by SENTINEL SENTINELS): an outside client maps each announced name:port to the external address of
that Sentinel's Service (README, "Clients outside the cluster"). Sentinel gossip keeps the in-cluster path.
*/}}

{{/* Name of the external Service of Sentinel j: S-<j>-external; call with (dict "ctx" $ "index" j). */}}
{{- define "vs.externalServiceName" -}}
{{- printf "%s-%d-external" (include "vs.fullname" .ctx) (int .index) -}}
{{- end -}}

{{/* Name of the address map ConfigMap: S-external. */}}
{{- define "vs.externalMapName" -}}
{{- printf "%s-external" (include "vs.fullname" .) -}}
{{- end -}}

{{/*
The external address ("host:port") of Sentinel j when the values fix it, else "": NodePort with
externalAccess.host and externalAccess.nodePorts, LoadBalancer with externalAccess.loadBalancerIPs. Call with
(dict "ctx" $ "index" j).
*/}}
{{- define "vs.externalAddress" -}}
{{- $e := .ctx.Values.externalAccess -}}
{{- if eq $e.type "NodePort" -}}
{{- if and $e.host $e.nodePorts -}}
{{- printf "%s:%d" (include "vs.externalHost" $e.host) (int (index $e.nodePorts (int .index))) -}}
{{- end -}}
{{- else if $e.loadBalancerIPs -}}
{{- printf "%s:26379" (include "vs.externalHost" (index $e.loadBalancerIPs (int .index))) -}}
{{- end -}}
{{- end -}}

{{/* A host for "host:port": an IPv6 address in brackets, anything else as given. */}}
{{- define "vs.externalHost" -}}
{{- if contains ":" . -}}[{{ . }}]{{- else -}}{{ . }}{{- end -}}
{{- end -}}

{{/*
Checks of externalAccess: each field only with the type that reads it, one nodePort / loadBalancerIP per
Sentinel, an open LoadBalancer without TLS, and the NetworkPolicy that would drop every outside client.
*/}}
{{- define "vs.validateExternalAccess" -}}
{{- $e := .Values.externalAccess -}}
{{- $n := int .Values.replicas -}}
{{- if not $e.enabled -}}
{{- $d := dict "type" "NodePort" "host" "" "nodePorts" list "loadBalancerIPs" list "loadBalancerSourceRanges" list "loadBalancerClass" "" "externalTrafficPolicy" "" "annotations" dict -}}
{{- range $k := keys $d | sortAlpha -}}
{{- if and (hasKey $e $k) (not (deepEqual (get $e $k) (get $d $k))) -}}
{{- fail (printf "externalAccess.%s: set while externalAccess.enabled is false, so no external Service is rendered and the chart ignores it; set externalAccess.enabled: true, or remove externalAccess.%s" $k $k) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- if eq $e.type "NodePort" -}}
{{- range $k := list "loadBalancerIPs" "loadBalancerSourceRanges" "loadBalancerClass" -}}
{{- if get $e $k -}}
{{- fail (printf "externalAccess.%s: applies to type LoadBalancer only (externalAccess.type is NodePort, so it would be ignored); set externalAccess.type: LoadBalancer, or remove externalAccess.%s" $k $k) -}}
{{- end -}}
{{- end -}}
{{- with $e.nodePorts -}}
{{- if ne (len .) $n -}}
{{- fail (printf "externalAccess.nodePorts: %d given for %d Sentinels (replicas); give one per Sentinel, in order (S-0 first), or none to let Kubernetes pick them" (len .) $n) -}}
{{- end -}}
{{- if ne (len (uniq .)) (len .) -}}
{{- fail (printf "externalAccess.nodePorts: %v repeats a port; every Sentinel needs a node port of its own" .) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- range $k := list "host" "nodePorts" -}}
{{- if get $e $k -}}
{{- fail (printf "externalAccess.%s: applies to type NodePort only (externalAccess.type is LoadBalancer: each Sentinel gets a load balancer address of its own); use externalAccess.loadBalancerIPs, or remove externalAccess.%s" $k $k) -}}
{{- end -}}
{{- end -}}
{{- with $e.loadBalancerIPs -}}
{{- if ne (len .) $n -}}
{{- fail (printf "externalAccess.loadBalancerIPs: %d given for %d Sentinels (replicas); give one per Sentinel, in order (S-0 first), or none to let the provider pick them" (len .) $n) -}}
{{- end -}}
{{- range $i, $ip := . -}}
{{- if not (regexMatch "^([0-9]{1,3}\\.){3}[0-9]{1,3}$|^[0-9a-fA-F:]*:[0-9a-fA-F:.]*$" $ip) -}}
{{- fail (printf "externalAccess.loadBalancerIPs[%d]: %q is not an IP address; for example 203.0.113.10" $i $ip) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $i, $c := $e.loadBalancerSourceRanges -}}
{{- include "vs.checkCIDR" (dict "field" (printf "externalAccess.loadBalancerSourceRanges[%d]" $i) "value" $c) -}}
{{- end -}}
{{- $ranges := $e.loadBalancerSourceRanges | default list -}}
{{- if and (not .Values.tls.enabled) (or (not $ranges) (has "0.0.0.0/0" $ranges) (has "::/0" $ranges)) -}}
{{- fail (printf "externalAccess.loadBalancerSourceRanges: %s, so each Sentinel's LoadBalancer takes connections from any address, and without tls.enabled passwords cross that network in plaintext; list your clients' CIDRs, or set tls.enabled: true" (ternary "empty" "0.0.0.0/0 or ::/0" (not $ranges))) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not .Values.allowedSources) -}}
{{- fail "externalAccess.enabled: networkPolicy.enabled with no allowedSources drops every outside client at the Sentinels; list them in allowedSources (externalTrafficPolicy Local: the clients' CIDRs; Cluster: the nodes' addresses, which the node's SNAT puts in place of the client's), or set networkPolicy.enabled: false" -}}
{{- end -}}
{{- end -}}
{{- end -}}
