#!/usr/bin/env bash
# demo.sh - `make demo`: one valkey instance (1 primary + 2 replicas) watched by one Sentinel quorum (3),
# installed with the charts' defaults plus the local image names, proven by `helm test`.
#
#   1. cluster: the one KUBECONFIG reaches (kubectl cluster-info); if none, the local one (hack/cluster.sh up)
#   2. helm CLI (go install helm.sh/helm/v3/cmd/helm@v3.22.0 if missing)
#   3. images: hack/images.sh (valkey, redis, controller) into the local cluster's containerd
#   4. helm upgrade --install  demo     charts/valkey           replicas=2, instanceLabels valkey-ha/quorum=main
#      helm upgrade --install  sentinel charts/valkey-sentinel  replicas=3, valkeySelector matchLabels the same
#      into namespace valkey-demo (Pod Security "restricted" enforced on it)
#   5. wait (polling, with a deadline) for: 3 data pods Ready, exactly one labelled primary and two replica,
#      3 Sentinel pods Ready, every controller Deployment available; give up early when a pod is stuck
#      (image missing, config error, CrashLoopBackOff after MAX_RESTARTS=3 restarts)
#   6. helm test demo; helm test sentinel
#   7. valkey-sentinel-ctl status (exec in the instance controller pod), and how to connect
# Exit status 0 only if every step passed; on failure the pods, events and logs are printed.
#
#   hack/demo.sh [--fresh]   --fresh (or DEMO_FRESH=1): delete the namespace first (both releases with it);
#                            otherwise an existing demo is upgraded in place (data pods use OnDelete, so
#                            a broken earlier attempt is best redone with --fresh)
# Knobs: DEMO_NAMESPACE (valkey-demo), DEMO_TIMEOUT (readiness deadline, s, default 600),
# DEMO_PSS (Pod Security level enforced on the namespace; "" = none; default restricted),
# DEMO_VALKEY_ARGS / DEMO_SENTINEL_ARGS (extra helm args, e.g. "--set controller.image.tag=dev"),
# DEMO_SKIP_IMAGES=1, CTL_IMAGE. Uninstall: helm -n valkey-demo uninstall demo sentinel.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NS=${DEMO_NAMESPACE:-valkey-demo}
TIMEOUT=${DEMO_TIMEOUT:-600}
PSS=${DEMO_PSS-restricted}
DATA_REL=demo SENT_REL=sentinel
REPLICAS=2 SENTINELS=3
LABEL_KEY=valkey-ha/quorum LABEL_VAL=main
read -r -a VALKEY_ARGS <<<"${DEMO_VALKEY_ARGS:-}"
read -r -a SENTINEL_ARGS <<<"${DEMO_SENTINEL_ARGS:-}"
FRESH=${DEMO_FRESH:-0}
for a in "$@"; do
  case $a in
    --fresh) FRESH=1 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "unknown argument $a" >&2; exit 2 ;;
  esac
done
T0=$(date +%s)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

step() { say "== $* (+$(( $(date +%s) - T0 ))s)"; }

# ---- selectors (docs/contract.md: common labels) ----
sel() { echo "app.kubernetes.io/instance=$1,app.kubernetes.io/component=$2"; }
DATA_SEL=$(sel $DATA_REL data)
SENT_SEL=$(sel $SENT_REL sentinel)

ready_count() { # selector -> "ready total"
  kubectl -n "$NS" get pods -l "$1" -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{$r := "False"}}{{range .status.conditions}}{{if eq .type "Ready"}}{{$r = .status}}{{end}}{{end}}{{$r}}{{"\n"}}{{end}}{{end}}' 2>/dev/null \
    | awk '{t++} $1=="True"{r++} END{printf "%d %d\n", r, t}'
}
pods_ready() { # selector n
  local r t; read -r r t < <(ready_count "$1"); [[ $r == "$2" && $t == "$2" ]]
}
role_count() { kubectl -n "$NS" get pods -l "$DATA_SEL,valkey.io/role=$1" -o name 2>/dev/null | wc -l; }
roles_ok() { [[ $(role_count primary) == 1 && $(role_count replica) == "$REPLICAS" ]]; }
controllers_ready() { # every controller Deployment of both releases available (at least one exists)
  local out
  out=$(kubectl -n "$NS" get deploy -l "app.kubernetes.io/component=controller,app.kubernetes.io/instance in ($DATA_REL,$SENT_REL)" \
        -o go-template='{{range .items}}{{.metadata.name}} {{or .status.readyReplicas 0}} {{.spec.replicas}}{{"\n"}}{{end}}' 2>/dev/null) || return 1
  [[ -n $out ]] || return 1
  awk '$2 != $3 || $3 == 0 {bad=1} END {exit bad}' <<<"$out"
}

diagnose() {
  say "---- diagnostics for namespace $NS ----"
  kubectl -n "$NS" get pods,statefulsets,deployments,services,configmaps -o wide 2>&1 | sed 's/^/  /' >&2 || true
  say "---- recent events ----"
  kubectl -n "$NS" get events --sort-by=.lastTimestamp 2>&1 | tail -25 | sed 's/^/  /' >&2 || true
  local p c
  for p in $(kubectl -n "$NS" get pods -o go-template='{{range .items}}{{$r := "True"}}{{range .status.conditions}}{{if eq .type "Ready"}}{{$r = .status}}{{end}}{{end}}{{if ne $r "True"}}{{.metadata.name}} {{end}}{{end}}' 2>/dev/null); do
    say "---- pod $p (not Ready) ----"
    kubectl -n "$NS" get pod "$p" -o go-template='{{range .status.initContainerStatuses}}init {{.name}}: {{.state}} restarts={{.restartCount}}{{with .lastState.terminated}} last: exit {{.exitCode}} {{.reason}}{{with .message}} {{.}}{{end}}{{end}}{{"\n"}}{{end}}{{range .status.containerStatuses}}{{.name}}: {{.state}} restarts={{.restartCount}}{{with .lastState.terminated}} last: exit {{.exitCode}} {{.reason}}{{with .message}} {{.}}{{end}}{{end}}{{"\n"}}{{end}}' 2>&1 | sed 's/^/  /' >&2 || true
    for c in $(kubectl -n "$NS" get pod "$p" -o jsonpath='{.spec.initContainers[*].name} {.spec.containers[*].name}' 2>/dev/null); do
      say "  logs $p/$c (last 20 lines; the previous run's if it restarted)"
      { kubectl -n "$NS" logs "$p" -c "$c" --previous --tail=20 2>/dev/null || kubectl -n "$NS" logs "$p" -c "$c" --tail=20 2>&1; } | sed 's/^/    /' >&2 || true
    done
  done
  for p in $(kubectl -n "$NS" get pods -l app.kubernetes.io/component=controller -o name 2>/dev/null); do
    say "---- logs $p (last 30 lines) ----"
    { kubectl -n "$NS" logs "$p" --all-containers --previous --tail=30 2>/dev/null || kubectl -n "$NS" logs "$p" --all-containers --tail=30 2>&1; } | sed 's/^/  /' >&2 || true
  done
}
die_diag() { diagnose; fail "$*"; }

# 1-3 ------------------------------------------------------------------------------------------------
step "cluster"
use_cluster
step "helm"
ensure_helm
say "$(helm version --short 2>/dev/null || helm version)"
step "images"
if [[ ${DEMO_SKIP_IMAGES:-0} == 1 ]]; then say "skipped (DEMO_SKIP_IMAGES=1)"; else load_images; fi

for c in valkey valkey-sentinel; do
  [[ -f $ROOT/charts/$c/Chart.yaml ]] || fail "charts/$c/Chart.yaml not found (chart not written yet?)"
done

# 4 --------------------------------------------------------------------------------------------------
step "namespace $NS"
if [[ $FRESH == 1 ]] && kubectl get namespace "$NS" >/dev/null 2>&1; then
  say "--fresh: deleting namespace $NS"
  kubectl delete namespace "$NS" --wait=true --timeout=180s >/dev/null || fail "could not delete namespace $NS"
fi
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
if [[ -n $PSS ]]; then
  kubectl label --overwrite namespace "$NS" "pod-security.kubernetes.io/enforce=$PSS" \
    "pod-security.kubernetes.io/warn=$PSS" >/dev/null
fi

cat >"$TMP/valkey.yaml" <<EOF
replicas: $REPLICAS
instanceLabels:
  $LABEL_KEY: $LABEL_VAL
EOF
cat >"$TMP/sentinel.yaml" <<EOF
replicas: $SENTINELS
valkeySelector:
  matchLabels:
    $LABEL_KEY: $LABEL_VAL
EOF
VALKEY_HELM=(-f "$TMP/valkey.yaml" "${VALKEY_ARGS[@]}")
SENTINEL_HELM=(-f "$TMP/sentinel.yaml" "${SENTINEL_ARGS[@]}")

alias_chart_images "$ROOT/charts/valkey" -n "$NS" "${VALKEY_HELM[@]}"
alias_chart_images "$ROOT/charts/valkey-sentinel" -n "$NS" "${SENTINEL_HELM[@]}"

step "helm upgrade --install $DATA_REL charts/valkey"
helm upgrade --install "$DATA_REL" "$ROOT/charts/valkey" -n "$NS" "${VALKEY_HELM[@]}" --timeout 5m \
  || die_diag "helm upgrade --install $DATA_REL charts/valkey"
step "helm upgrade --install $SENT_REL charts/valkey-sentinel"
helm upgrade --install "$SENT_REL" "$ROOT/charts/valkey-sentinel" -n "$NS" "${SENTINEL_HELM[@]}" --timeout 5m \
  || die_diag "helm upgrade --install $SENT_REL charts/valkey-sentinel"

# 5 --------------------------------------------------------------------------------------------------
step "readiness"
deadline=$(( $(date +%s) + TIMEOUT ))
left() { local l=$(( deadline - $(date +%s) )); (( l > 0 )) && echo "$l" || echo 1; }
wait_pods "$NS" "$((REPLICAS + 1)) data pods Ready ($DATA_SEL)" "$(left)" pods_ready "$DATA_SEL" $((REPLICAS + 1)) \
  || die_diag "data pods not Ready: $(ready_count "$DATA_SEL" | awk '{print $1"/"$2}') ready"
wait_pods "$NS" "$SENTINELS Sentinel pods Ready ($SENT_SEL)" "$(left)" pods_ready "$SENT_SEL" $SENTINELS \
  || die_diag "Sentinel pods not Ready: $(ready_count "$SENT_SEL" | awk '{print $1"/"$2}') ready"
wait_pods "$NS" "controller Deployments available" "$(left)" controllers_ready \
  || die_diag "controller Deployments not available"
wait_pods "$NS" "role labels: 1 primary + $REPLICAS replicas (valkey.io/role)" "$(left)" roles_ok \
  || die_diag "role labels: $(role_count primary) primary, $(role_count replica) replica"

# 6 --------------------------------------------------------------------------------------------------
step "helm test"
# no --logs: the test pods are deleted once they pass (hook-delete-policy hook-succeeded), so helm could not
# fetch their logs; a failed test pod stays, and die_diag shows its log
for rel in "$DATA_REL" "$SENT_REL"; do
  if ! helm test "$rel" -n "$NS" --timeout 5m; then
    kubectl -n "$NS" logs -l "app.kubernetes.io/instance=$rel,app.kubernetes.io/component=test" --tail=50 || true
    die_diag "helm test $rel failed"
  fi
done

# 7 --------------------------------------------------------------------------------------------------
step "valkey-sentinel-ctl status"
ctl_pod=$(kubectl -n "$NS" get pods -l "$(sel $DATA_REL controller)" --field-selector=status.phase=Running -o name 2>/dev/null | head -1)
[[ -n $ctl_pod ]] || ctl_pod=$(kubectl -n "$NS" get pods -l "$(sel $SENT_REL controller)" --field-selector=status.phase=Running -o name 2>/dev/null | head -1)
[[ -n $ctl_pod ]] || die_diag "no running controller pod to run valkey-sentinel-ctl status in"
kubectl -n "$NS" exec "$ctl_pod" -- /valkey-sentinel-ctl status --namespace "$NS" \
  || die_diag "valkey-sentinel-ctl status failed (in $ctl_pod)"

# how to connect
desc=$(kubectl -n "$NS" get configmap -l "$(sel $DATA_REL instance)" -o jsonpath='{.items[0].data.instance\.json}' 2>/dev/null || true)
F=$(sed -n 's/.*"name"[ ]*:[ ]*"\([^"]*\)".*/\1/p' <<<"$desc" | head -1)
MON=$(sed -n 's/.*"monitorName"[ ]*:[ ]*"\([^"]*\)".*/\1/p' <<<"$desc" | head -1)
PORT=$(sed -n 's/.*"port"[ ]*:[ ]*\([0-9]*\).*/\1/p' <<<"$desc" | head -1)
: "${F:=demo-valkey}" "${MON:=$F}" "${PORT:=6379}"
SENT_SVC=$(kubectl -n "$NS" get svc -l "app.kubernetes.io/instance=$SENT_REL" -o go-template='{{range .items}}{{if ne .spec.clusterIP "None"}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}' 2>/dev/null | head -1)
: "${SENT_SVC:=$SENT_REL}"
cat <<EOF

Demo is up in namespace $NS (helm releases $DATA_REL, $SENT_REL) after $(( $(date +%s) - T0 ))s.
KUBECONFIG=${KUBECONFIG:-~/.kube/config}

Connect (the default user is off; use a user from the chart's 'users:' values):
  Sentinel-aware client (recommended): sentinels $SENT_SVC.$NS.svc:26379, master name "$MON"
  primary Service:   $F-primary.$NS.svc:$PORT      replicas (read-only): $F-replicas.$NS.svc:$PORT
  from this machine: kubectl -n $NS port-forward svc/$F-primary $PORT:$PORT
                     valkey-cli -p $PORT --user <user> --askpass
  inside a pod:      kubectl -n $NS exec -it $F-0-0 -c valkey -- valkey-cli -p $PORT --user <user> --askpass
  status:            kubectl -n $NS exec $ctl_pod -- /valkey-sentinel-ctl status --namespace $NS
  notes:             helm -n $NS get notes $DATA_REL
  remove:            helm -n $NS uninstall $DATA_REL $SENT_REL
EOF
