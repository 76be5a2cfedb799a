# shellcheck shell=bash
# lib.sh - helpers shared by hack/demo.sh and hack/e2e.sh (sourced, not executed).
#   use_cluster        KUBECONFIG that reaches a cluster; else bring up the local one (LOCAL_CLUSTER=1)
#   ensure_helm        helm CLI on PATH (go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION if missing)
#   load_images        hack/images.sh on the local cluster (skipped, with a note, on any other cluster)
#   alias_chart_images CHART [helm args]  tag the controller build with the chart's default name; warn about
#                      server images the chart names that are not built locally
#   wait_until DESC SECONDS CMD...        poll CMD every 2 s until it succeeds or the deadline passes
#   wait_pods NS DESC SECONDS CMD...       wait_until, but give up early when a pod in NS is stuck
#                      (image missing, config error, or a container restarted >= MAX_RESTARTS (3) times)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HACK=$ROOT/hack
# shellcheck source=k8s-local/env.sh
. "$HACK/k8s-local/env.sh" # BIN, ADMIN_KUBECONFIG, VALKEY_IMAGE, REDIS_IMAGE, NODE_NAME

HELM_VERSION=${HELM_VERSION:-v3.22.0}
# the charts' default controller image (the published reference): hack/images.sh tags the local build with it
CTL_IMAGE=${CTL_IMAGE:-$("$HACK/ctl-image.sh")}
export CTL_IMAGE
LOCAL_CLUSTER=0

say() { printf '\033[1m[%(%H:%M:%S)T] %s\033[0m\n' -1 "$*" >&2; }
fail() { printf '\033[1;31m[%(%H:%M:%S)T] FAILED: %s\033[0m\n' -1 "$*" >&2; exit 1; }
as_root() { if [[ $(id -u) == 0 ]]; then "$@"; elif ! command -v sudo >/dev/null; then fail "needs root (and sudo is not installed)"; else sudo env K8S_LOCAL_CACHE="$CACHE" CTL_IMAGE="$CTL_IMAGE" PATH="$PATH" "$@"; fi; }

kube_reachable() { kubectl cluster-info --request-timeout=5s >/dev/null 2>&1; }
kube_version() { kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"v\([0-9.]*\).*/\1/p' | tail -1; }
kube_server() { kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' 2>/dev/null; }

use_cluster() {
  # kubectl v1.34.4 built by k8s-local matches the local server; fall back to whatever is installed
  [[ -x $BIN/kubectl ]] && export PATH=$BIN:$PATH
  if command -v kubectl >/dev/null && kube_reachable; then
    local local_server=""
    [[ -f $ADMIN_KUBECONFIG ]] && local_server=$(KUBECONFIG=$ADMIN_KUBECONFIG kube_server)
    if [[ -n $local_server && $(kube_server) == "$local_server" ]]; then LOCAL_CLUSTER=1; fi
    say "using the cluster of ${KUBECONFIG:-~/.kube/config} ($(kube_server))$( ((LOCAL_CLUSTER)) && echo ', the local one')"
  else
    say "no cluster reachable through ${KUBECONFIG:-~/.kube/config}: bringing up the local cluster (hack/cluster.sh up)"
    local t0; t0=$(date +%s)
    KUBECONFIG=$("$HACK/cluster.sh" up) || fail "hack/cluster.sh up failed"
    export KUBECONFIG
    export PATH=$BIN:$PATH
    LOCAL_CLUSTER=1
    say "local cluster up in $(( $(date +%s) - t0 ))s; KUBECONFIG=$KUBECONFIG"
    kube_reachable || fail "the local cluster came up but is not reachable through $KUBECONFIG"
  fi
}

ensure_helm() {
  command -v helm >/dev/null && return 0
  local gobin
  gobin=$(go env GOBIN 2>/dev/null); [[ -n $gobin ]] || gobin=$(go env GOPATH 2>/dev/null)/bin
  if [[ ! -x $gobin/helm ]]; then
    command -v go >/dev/null || fail "neither helm nor go is installed"
    say "helm not found: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (a few minutes, once)"
    local t0; t0=$(date +%s)
    (cd / && GOFLAGS= go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION") || fail "go install helm failed"
    say "helm built in $(( $(date +%s) - t0 ))s"
  fi
  export PATH=$PATH:$gobin
}

load_images() { # the charts' images (not s3, the e2e suite's versitygw: hack/e2e.sh loads every image)
  if ((LOCAL_CLUSTER)); then
    as_root "$HACK/images.sh" valkey valkey80 redis controller || fail "hack/images.sh failed"
  else
    say "not the local cluster: images are not built here; $CTL_IMAGE and the valkey image must be pullable by that cluster"
  fi
}

# Every image a chart renders must exist on the local node (nothing can be pulled). The controller
# image under another tag than $CTL_IMAGE (e.g. a newer appVersion) is tagged onto the local build;
# server images are never aliased (a different version would be a lie), only reported.
alias_chart_images() { # chart [helm template args...]
  ((LOCAL_CLUSTER)) || return 0
  local chart=$1 imgs img; shift
  imgs=$(helm template alias-probe "$chart" --kube-version "$(kube_version)" "$@" 2>/dev/null | sed -n 's/^[ -]*image:[ ]*["'\'']\{0,1\}\([^"'\'' ]*\).*/\1/p' | sort -u) \
    || { say "helm template $chart failed; not checking its image names"; return 0; }
  for img in $imgs; do
    case $img in
      "$CTL_IMAGE" | "$VALKEY91_IMAGE" | "$VALKEY_IMAGE" | "$REDIS_IMAGE") ;;
      *valkey-sentinel-ctl*@sha256:*) say "WARNING: chart $chart uses $img (by digest): not available locally" ;;
      *valkey-sentinel-ctl*) as_root "$HACK/images.sh" alias "$CTL_IMAGE" "$img" || fail "could not tag $CTL_IMAGE as $img" ;;
      *) case " $VALKEY91_IMAGES $VALKEY_IMAGES $REDIS_IMAGES " in
           *" $img "*) ;;
           *) say "WARNING: chart $chart uses image $img, which is not built locally (local: $VALKEY91_IMAGES $VALKEY_IMAGES $REDIS_IMAGES $CTL_IMAGE)" ;;
         esac ;;
    esac
  done
}

wait_until() { # description seconds command...
  local what=$1 t=$2 deadline; shift 2
  deadline=$(( $(date +%s) + t ))
  say "waiting (up to ${t}s) for $what"
  while :; do
    if "$@" >/dev/null 2>&1; then say "ok: $what"; return 0; fi
    (( $(date +%s) >= deadline )) && { say "timed out after ${t}s waiting for $what"; return 1; }
    sleep 2
  done
}

# pods of NS that cannot become Ready by waiting: "pod/container: reason" lines (empty = none)
stuck_pods() { # ns
  kubectl -n "$1" get pods -o go-template='{{range $p := .items}}{{range $c := $p.status.initContainerStatuses}}{{$p.metadata.name}} {{$c.name}} {{$c.restartCount}} {{if $c.state.waiting}}{{$c.state.waiting.reason}}{{else}}-{{end}}{{"\n"}}{{end}}{{range $c := $p.status.containerStatuses}}{{$p.metadata.name}} {{$c.name}} {{$c.restartCount}} {{if $c.state.waiting}}{{$c.state.waiting.reason}}{{else}}-{{end}}{{"\n"}}{{end}}{{end}}' 2>/dev/null \
    | awk -v max="${MAX_RESTARTS:-3}" '
        $4 ~ /^(ErrImagePull|ImagePullBackOff|ErrImageNeverPull|InvalidImageName|CreateContainerConfigError|CreateContainerError|RunContainerError)$/ ||
        ($3 + 0 >= max + 0 && $4 == "CrashLoopBackOff") { printf "%s/%s: %s (restarts %s)\n", $1, $2, $4, $3 }' || true
  # pods the scheduler has refused for UNSCHEDULABLE_AFTER seconds (default 60: a roll or a deletion frees room
  # within that on a healthy cluster)
  local now; now=$(date +%s)
  kubectl -n "$1" get pods -o go-template='{{range $p := .items}}{{range $p.status.conditions}}{{if and (eq .type "PodScheduled") (eq .reason "Unschedulable")}}{{$p.metadata.name}}|{{.lastTransitionTime}}|{{.message}}{{"\n"}}{{end}}{{end}}{{end}}' 2>/dev/null \
    | while IFS='|' read -r pod since msg; do
        [[ -n $pod && -n $since ]] || continue
        if (( now - $(date -d "$since" +%s) >= ${UNSCHEDULABLE_AFTER:-60} )); then
          printf '%s: Unschedulable since %s: %s\n' "$pod" "$since" "$msg"
        fi
      done || true
}

wait_pods() { # ns description seconds command...
  local ns=$1 what=$2 t=$3 deadline stuck; shift 3
  deadline=$(( $(date +%s) + t ))
  say "waiting (up to ${t}s) for $what"
  while :; do
    if "$@" >/dev/null 2>&1; then say "ok: $what"; return 0; fi
    stuck=$(stuck_pods "$ns")
    if [[ -n $stuck ]]; then say "giving up on $what: pods are stuck:"; sed 's/^/  /' <<<"$stuck" >&2; return 1; fi
    (( $(date +%s) >= deadline )) && { say "timed out after ${t}s waiting for $what"; return 1; }
    sleep 2
  done
}
