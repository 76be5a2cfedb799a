#!/usr/bin/env bash
# cluster.sh - the project's local Kubernetes cluster: a thin wrapper around hack/k8s-local
# (a real Kubernetes v1.34 built from Debian packages + Go builds, one node or several on this machine;
# see hack/k8s-local/README.md). Binaries, image tarballs and cluster state live outside the repo,
# in ${K8S_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-local}.
#
#   hack/cluster.sh up [--check]        start (cold: 8-14 min of apt + go build, once; warm: ~4 s); idempotent.
#                                       Prints the kubeconfig path on stdout. --check also runs
#                                       k8s-local/check.sh (StatefulSet + DNS + replication self-test).
#                                       NODES=3: one control plane and 3 kubelets (nodes 2.. each in a network
#                                       namespace of its own, zones a, b, c); the count is kept for later ups
#                                       (NODES=1 goes back to a single node).
#   hack/cluster.sh down [--keep-data|--purge]
#                                       stop everything it started (by recorded PID) and clean the host;
#                                       --keep-data keeps etcd/images for the next up, --purge also drops
#                                       binaries, certs and image tarballs.
#   hack/cluster.sh status              daemons, nodes Ready, CoreDNS ready, images in containerd;
#                                       exit 0 only when the cluster is usable.
#   hack/cluster.sh ready               quiet: exit 0 when every node is Ready and CoreDNS ready
#   hack/cluster.sh kubeconfig          print the admin kubeconfig path
#                                       (export KUBECONFIG=$(hack/cluster.sh kubeconfig))
#   hack/cluster.sh env                 print export lines (KUBECONFIG, PATH with kubectl v1.34.4):
#                                       eval "$(hack/cluster.sh env)"
#   hack/cluster.sh load-image MODE ... pass-through to k8s-local/load-image.sh:
#                                         load-image import FILE.tar
#                                         load-image binary REF ./bin/x [-user 65532] [--busybox]
#                                         load-image rootfs REF DIR [mkimage args]
#   hack/cluster.sh node ...            pass-through to k8s-local/node.sh (list, kill, start, crash, partition,
#                                       isolate-api, heal, faults: the fault tools of the multi-node tests)
#
# up/down/load-image need root (re-run through sudo when not root). Only one up/down runs at a time
# (flock on $CACHE/.cluster.lock; an up.sh started by hand is waited for, never killed).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
K8S=$HACK/k8s-local
if [[ -n ${NODES:-} ]]; then export K8S_LOCAL_NODES=$NODES; fi
# shellcheck source=k8s-local/env.sh
. "$K8S/env.sh"
# shellcheck source=k8s-local/nodes.sh
. "$K8S/nodes.sh"

usage() { sed -n '2,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
as_root() { if [[ $(id -u) == 0 ]]; then "$@"; elif ! command -v sudo >/dev/null; then die "needs root (and sudo is not installed)"; else sudo env K8S_LOCAL_CACHE="$CACHE" ${K8S_LOCAL_NODES:+K8S_LOCAL_NODES=$K8S_LOCAL_NODES} "$@"; fi; }

# kubectl: the cluster's own v1.34.4 build when present, else whatever is on PATH
kubectl_bin() { if [[ -x $BIN/kubectl ]]; then echo "$BIN/kubectl"; else command -v kubectl; fi; }
k() { "$(kubectl_bin)" --kubeconfig "$ADMIN_KUBECONFIG" --request-timeout=10s "$@"; }

# up.sh processes not started by us (e.g. someone ran it by hand): wait, never kill
other_up_running() {
  local p
  for p in /proc/[0-9]*; do
    [[ ${p#/proc/} == "$$" ]] && continue
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qE "(^| )([^ ]*/)?k8s-local/(up|down)\.sh( |$)" && return 0
  done
  return 1
}
with_lock() { # cmd... : serialise up/down between concurrent callers
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.cluster.lock"
  if ! flock -n 9; then
    log "another cluster.sh up/down is running; waiting for it"
    flock 9
  fi
  local waited=0
  while other_up_running; do
    ((waited)) || log "an up.sh/down.sh started outside cluster.sh is running; waiting for it to finish"
    waited=1; sleep 5
  done
  # fd 9 (the lock) must not leak into the daemons up.sh starts: they would hold the lock for the cluster's
  # lifetime and every later up/down would wait forever
  "$@" 9>&-
}

node_ready() { [[ $(k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; }
cluster_ready() { # quiet: every node Ready and CoreDNS available
  [[ -f $ADMIN_KUBECONFIG ]] || return 1
  local i n
  n=$(want_nodes)
  for ((i = 1; i <= n; i++)); do node_ready "$(node_name "$i")" || return 1; done
  [[ $(k -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}' 2>/dev/null) -ge 1 ]] 2>/dev/null || return 1
}

cmd_up() {
  local check=0 a
  for a in "$@"; do
    case $a in --check) check=1 ;; *) die "up: unknown argument $a" ;; esac
  done
  local t0; t0=$(date +%s)
  # up.sh is idempotent: with everything built and running it only verifies (about 10 s)
  if ((check)); then as_root "$K8S/up.sh" >&2; else as_root "$K8S/up.sh" --no-check >&2; fi
  log "cluster.sh up: done in $(( $(date +%s) - t0 ))s"
  echo "$ADMIN_KUBECONFIG"
}

cmd_status() {
  local rc=0 d pid
  echo "kubeconfig: $ADMIN_KUBECONFIG"
  echo "cache:      $CACHE"
  printf 'daemons:   '
  for d in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy local-path-provisioner; do
    if pid=$(daemon_pid "$d" 2>/dev/null); then printf ' %s(%s)' "$d" "$pid"; else printf ' %s(STOPPED)' "$d"; rc=1; fi
  done
  echo
  local i n name ready
  n=$(want_nodes)
  for ((i = 2; i <= n; i++)); do
    printf 'node %d:    ' "$i"
    for d in containerd kubelet; do
      if pid=$(daemon_pid "$(node_daemon "$i" "$d")" 2>/dev/null); then printf ' %s(%s)' "$d" "$pid"; else printf ' %s(STOPPED)' "$d"; rc=1; fi
    done
    echo " netns $(node_netns "$i")"
  done
  if [[ ! -f $ADMIN_KUBECONFIG ]]; then echo "cluster:    never started (run: hack/cluster.sh up)"; return 1; fi
  for ((i = 1; i <= n; i++)); do
    name=$(node_name "$i")
    ready=$(k get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
    if [[ $ready == True ]]; then
      echo "node:       $name Ready ($(k get node "$name" -o jsonpath='{.status.nodeInfo.kubeletVersion}, {.metadata.labels.topology\.kubernetes\.io/zone}, {.spec.podCIDR}'), $(node_ip "$i"))"
    else
      echo "node:       $name NOT Ready (${ready:-API unreachable})"; rc=1
    fi
  done
  local dns
  dns=$(k -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}/{.spec.replicas}' 2>/dev/null || true)
  if [[ -n $dns && ${dns%/*} == "${dns#*/}" ]]; then echo "coredns:    ready ($dns)"; else echo "coredns:    NOT ready (${dns:-missing})"; rc=1; fi
  echo "images (containerd k8s.io namespace$( ((n > 1)) && echo ", node 1; every node holds the same")):"
  if [[ $(id -u) == 0 ]] && daemon_pid containerd >/dev/null 2>&1; then
    kctr images ls 2>/dev/null | awk 'NR>1 && $1 !~ /^sha256:/ {printf "  %-58s %s %s\n", $1, $4, $5}' | sort
  elif [[ $ready == True ]]; then # without root: what the kubelet reports
    k get node "$NODE_NAME" -o go-template='{{range .status.images}}{{range .names}}{{if not (eq (slice . 0 7) "sha256:")}}  {{.}}{{"\n"}}{{end}}{{end}}{{end}}' 2>/dev/null \
      | grep -v '@sha256:' | sort
  else
    echo "  (unknown: containerd not reachable)"
  fi
  if ((rc)); then echo "status:     NOT healthy"; else echo "status:     healthy"; fi
  return "$rc"
}

cmd_env() {
  echo "export KUBECONFIG=$ADMIN_KUBECONFIG"
  [[ -x $BIN/kubectl ]] && echo "export PATH=$BIN:\$PATH"
  return 0
}

sub=${1:-}; shift || true
case $sub in
  up) with_lock cmd_up "$@" ;;
  down) with_lock as_root "$K8S/down.sh" "$@" ;;
  status) cmd_status ;;
  ready) cluster_ready ;; # quiet health check for scripts (exit status only)
  kubeconfig) echo "$ADMIN_KUBECONFIG" ;;
  env) cmd_env ;;
  load-image) as_root "$K8S/load-image.sh" "$@" ;;
  node) as_root "$K8S/node.sh" "$@" ;;
  -h|--help|help|"") usage; [[ -n $sub ]] ;;
  *) usage >&2; die "unknown command $sub" ;;
esac
