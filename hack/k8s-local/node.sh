#!/usr/bin/env bash
# node.sh - node-level faults for tests on the local cluster (hack/cluster.sh node ...). Every fault touches
# only this machine's own cluster: the node daemons up.sh started (by recorded PID), the processes in a node's
# pod cgroups, and iptables rules that name the cluster's pod CIDRs, node addresses and API server port, in a
# chain of its own (K8SLF-<id>-...) that `heal` removes. Faults given --ttl SECONDS undo themselves after that
# long even when the test that made them died (a detached timer; `heal`/`start` cancel it).
#
#   node.sh list                          index, name, zone, node IP, pod CIDR, kubelet/containerd PIDs
#   node.sh kill NODE [--ttl S]           crash NODE: SIGKILL its kubelet, containerd, shims and pod processes
#                                         (the API keeps the node, NotReady after the grace period, pods stuck)
#   node.sh start NODE                    bring a killed node back (up.sh --no-check: starts what is missing)
#   node.sh crash NODE CONTAINER-ID       SIGKILL one container's main process (a crash the kubelet restarts,
#                                         with or without the API server)
#   node.sh signal NODE CONTAINER-ID STOP|CONT  pause (SIGSTOP) or resume (SIGCONT) one container's main process:
#                                         a frozen process whose connections stay open (from inside the
#                                         container PID 1 ignores SIGSTOP)
#   node.sh partition ID NODE... [--api] [--keep-dns] [--ttl S]
#                                         cut the pods of the listed nodes off from the pods of every other node
#                                         (both ways, Service traffic included); --api also cuts those nodes
#                                         from the API server (their kubelets and pods; node 1's kubelet talks
#                                         to the API over loopback and cannot be cut); --keep-dns lets DNS (port
#                                         53) through, as a node-local DNS cache would answer on each side
#   node.sh isolate-api ID NODE... [--ttl S]  only the API part of partition --api
#   node.sh heal ID | --all               remove fault ID (or every fault) and cancel its timer
#   node.sh faults                        active faults
#   node.sh usage [SECONDS]               memory (RSS) and CPU of every cluster process, by daemon and node,
#                                         CPU averaged over SECONDS (default 30)
#
# NODE is a node name (k8s-local, k8s-local-2, ...) or its index (1, 2, ...). Needs root.
set -euo pipefail
# shellcheck source=env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# shellcheck source=nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/nodes.sh"

[[ $(id -u) == 0 ]] || die "must run as root"
FAULTS=$RUN/faults
CHAIN_PREFIX=K8SLF- # chains K8SLF-<id>-FWD/-IN/-OUT (iptables allows 28 characters)
usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }

node_index() { # name-or-index -> index (of a node of the current count)
  local a=$1 n i
  n=$(want_nodes)
  for ((i = 1; i <= n; i++)); do
    if [[ $a == "$i" || $a == "$(node_name "$i")" ]]; then echo "$i"; return 0; fi
  done
  die "unknown node $a (nodes: $(for ((i = 1; i <= n; i++)); do printf '%s ' "$(node_name "$i")"; done))"
}
pod_cidr() { kctl get node "$(node_name "$1")" -o jsonpath='{.spec.podCIDR}' --request-timeout=10s; }

cmd_list() {
  local n i pk pc
  n=$(want_nodes)
  printf '%-3s %-14s %-4s %-15s %-15s %s\n' IDX NAME ZONE NODE-IP POD-CIDR DAEMONS
  for ((i = 1; i <= n; i++)); do
    pk=$(daemon_pid "$(node_daemon "$i" kubelet)" 2>/dev/null || echo STOPPED)
    pc=$(daemon_pid "$(node_daemon "$i" containerd)" 2>/dev/null || echo STOPPED)
    printf '%-3s %-14s %-4s %-15s %-15s kubelet(%s) containerd(%s)\n' "$i" "$(node_name "$i")" "$(node_zone "$i")" \
      "$(node_ip "$i")" "$(pod_cidr "$i" 2>/dev/null || echo '?')" "$pk" "$pc"
  done
}

# ---- timers: a detached `node.sh <undo>` after ttl seconds --------------------------------------------------
arm_timer() { # id ttl undo-args...
  local id=$1 ttl=$2; shift 2
  [[ $ttl =~ ^[0-9]+$ ]] && ((ttl > 0)) || return 0
  mkdir -p "$FAULTS"
  detached bash -c 'sleep "$1"; shift; exec "$@"' timer "$ttl" "$0" "$@" >>"$LOGS/faults.log" 2>&1 </dev/null &
  echo $! >"$FAULTS/$id.timer"
}
disarm_timer() { # id
  local f=$FAULTS/$1.timer pid
  [[ -f $f ]] || return 0
  pid=$(<"$f")
  # only our timer (a bash waiting to run node.sh for this fault); its sleep child just runs out
  if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "timer .*node\.sh"; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# ---- kill / start -------------------------------------------------------------------------------------------
cmd_kill() {
  local node="" ttl=0 i
  while (($#)); do
    case $1 in --ttl) ttl=$2; shift 2 ;; *) node=$1; shift ;; esac
  done
  [[ -n $node ]] || die "kill: which node?"
  i=$(node_index "$node")
  node_kill "$i"
  mkdir -p "$FAULTS"; echo "kill $(node_name "$i")" >"$FAULTS/kill-$i"
  arm_timer "kill-$i" "$ttl" start "$i"
  log "node $(node_name "$i") killed (kubelet, containerd, shims and pod processes)"
}
cmd_start() {
  local i
  i=$(node_index "${1:?start: which node?}")
  disarm_timer "kill-$i"
  "$K8S_LOCAL_DIR/up.sh" --no-check >/dev/null
  rm -f "$FAULTS/kill-$i"
  log "node $(node_name "$i") started"
}

cmd_crash() { # node container-id (containerd://<id> or <id>)
  local i id pid
  i=$(node_index "${1:?crash: which node?}")
  id=${2:?crash: which container?}; id=${id#containerd://}
  pid=$(nctr "$i" tasks ls 2>/dev/null | awk -v id="$id" '$1 == id {print $2}')
  [[ -n $pid ]] || die "container $id has no running task on $(node_name "$i")"
  kill -KILL "$pid"
  log "container ${id:0:12} on $(node_name "$i"): process $pid killed"
}

cmd_signal() { # node container-id STOP|CONT
  local i id sig pid
  i=$(node_index "${1:?signal: which node?}")
  id=${2:?signal: which container?}; id=${id#containerd://}
  sig=${3:?signal: STOP or CONT?}
  [[ $sig == STOP || $sig == CONT ]] || die "signal: STOP or CONT (got '$sig')"
  pid=$(nctr "$i" tasks ls 2>/dev/null | awk -v id="$id" '$1 == id {print $2}')
  [[ -n $pid ]] || die "container $id has no running task on $(node_name "$i")"
  kill -"$sig" "$pid"
  log "container ${id:0:12} on $(node_name "$i"): process $pid SIG$sig"
}

# ---- partitions ---------------------------------------------------------------------------------------------
valid_id() { [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9-]{0,15}$ ]] || die "fault id must be 1-16 letters, digits or '-' (got '$1')"; }
chain_of() { case $2 in FORWARD) echo "$CHAIN_PREFIX$1-FWD" ;; INPUT) echo "$CHAIN_PREFIX$1-IN" ;; OUTPUT) echo "$CHAIN_PREFIX$1-OUT" ;; esac; }
add_rule() { # id base-chain rule... [-j TARGET] (creates the chain and its jump on first use; default DROP)
  local id=$1 base=$2 chain; chain=$(chain_of "$1" "$2"); shift 2
  iptables -N "$chain" 2>/dev/null || true
  iptables -C "$base" -j "$chain" 2>/dev/null || iptables -I "$base" 1 -j "$chain"
  if [[ " $* " == *" -j "* ]]; then
    iptables -A "$chain" "$@" -m comment --comment "k8s-local fault $id"
  else
    iptables -A "$chain" "$@" -m comment --comment "k8s-local fault $id" -j DROP
  fi
}
api_rules() { # id index
  local id=$1 i=$2 cidr
  cidr=$(pod_cidr "$i")
  # pods -> API server (the kubernetes Service is DNATed to the node IP on the host: local delivery)
  add_rule "$id" INPUT -s "$cidr" -p tcp --dport 6443
  if ((i > 1)); then
    add_rule "$id" INPUT -s "$(node_ip "$i")" -p tcp --dport 6443  # kubelet -> API server
    add_rule "$id" OUTPUT -d "$(node_ip "$i")" -p tcp --dport 10250 # API server -> kubelet (exec, logs)
  fi
}
cmd_partition() { # [--api-only]
  local api=0 only_api=0 dns=0 ttl=0 id="" nodes=() i j n cidr other p
  while (($#)); do
    case $1 in
      --api) api=1; shift ;;
      --keep-dns) dns=1; shift ;;
      --api-only) only_api=1; shift ;;
      --ttl) ttl=$2; shift 2 ;;
      *) if [[ -z $id ]]; then id=$1; else nodes+=("$(node_index "$1")"); fi; shift ;;
    esac
  done
  valid_id "$id"
  ((${#nodes[@]})) || die "partition $id: which nodes?"
  if fault_ids | grep -qxF "$id"; then die "fault $id exists (heal it first)"; fi
  n=$(want_nodes)
  mkdir -p "$FAULTS"
  if ((!only_api)); then
    if ((dns)); then
      for p in udp tcp; do
        add_rule "$id" FORWARD -p "$p" --dport 53 -j RETURN
        add_rule "$id" FORWARD -p "$p" --sport 53 -j RETURN
      done
    fi
    for i in "${nodes[@]}"; do
      cidr=$(pod_cidr "$i")
      for ((j = 1; j <= n; j++)); do
        [[ " ${nodes[*]} " == *" $j "* ]] && continue
        other=$(pod_cidr "$j")
        add_rule "$id" FORWARD -s "$cidr" -d "$other"
        add_rule "$id" FORWARD -s "$other" -d "$cidr"
      done
    done
  fi
  if ((api || only_api)); then
    for i in "${nodes[@]}"; do api_rules "$id" "$i"; done
  fi
  echo "partition ${nodes[*]}$( ((api)) && echo ' +api')$( ((only_api)) && echo ' api only')$( ((dns)) && echo ' (DNS kept)')" >"$FAULTS/$id"
  arm_timer "$id" "$ttl" heal "$id"
  log "fault $id: $(<"$FAULTS/$id") (nodes $(for i in "${nodes[@]}"; do printf '%s ' "$(node_name "$i")"; done))"
}
heal_one() { # id
  local id=$1 base chain
  for base in FORWARD INPUT OUTPUT; do
    chain=$(chain_of "$id" "$base")
    while iptables -D "$base" -j "$chain" 2>/dev/null; do :; done
    iptables -F "$chain" 2>/dev/null || true
    iptables -X "$chain" 2>/dev/null || true
  done
  disarm_timer "$id"
  rm -f "$FAULTS/$id"
}
fault_ids() { iptables -S 2>/dev/null | sed -n "s/^-N $CHAIN_PREFIX\(.*\)-\(FWD\|IN\|OUT\)\$/\1/p" | sort -u; }
cmd_heal() {
  local id
  [[ -n ${1:-} ]] || die "heal: which fault? (an id or --all)"
  if [[ $1 == --all ]]; then
    for id in $(fault_ids); do heal_one "$id"; log "fault $id healed"; done
    return 0
  fi
  valid_id "$1"
  heal_one "$1"
  log "fault $1 healed"
}
cmd_faults() {
  local id f
  for id in $(fault_ids); do echo "$id: $(cat "$FAULTS/$id" 2>/dev/null || echo '?')"; done
  for f in "$FAULTS"/kill-*; do [[ -f $f ]] && echo "${f##*/}: $(<"$f")"; done
  return 0
}

# ---- resources ------------------------------------------------------------------------------------------
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
cmd_usage() {
  local secs=${1:-30} n i d pid groups=() g pids t0 t1 hz total_rss=0 total_cpu=0 rss cpu
  n=$(want_nodes)
  hz=$(getconf CLK_TCK)
  declare -A members=()
  for d in etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy local-path-provisioner; do
    pid=$(daemon_pid "$d" 2>/dev/null) && { groups+=("$d"); members[$d]=$pid; }
  done
  for ((i = 1; i <= n; i++)); do
    for d in containerd kubelet; do
      pid=$(daemon_pid "$(node_daemon "$i" "$d")" 2>/dev/null) && { g="$(node_name "$i") $d"; groups+=("$g"); members[$g]=$pid; }
    done
    g="$(node_name "$i") shims+pods"; groups+=("$g")
    members[$g]="$(node_shim_pids "$i" | tr '\n' ' ') $(node_pod_pids "$i" | tr '\n' ' ')"
  done
  declare -A start=()
  for g in "${groups[@]}"; do for pid in ${members[$g]}; do start[$pid]=$(ticks "$pid"); done; done
  sleep "$secs"
  printf '%-36s %9s %7s\n' PROCESS RSS-MiB CPU-%
  for g in "${groups[@]}"; do
    rss=0 cpu=0
    for pid in ${members[$g]}; do
      [[ -d /proc/$pid ]] || continue
      rss=$((rss + $(rss_kib "$pid")))
      cpu=$((cpu + $(ticks "$pid") - ${start[$pid]:-0}))
    done
    total_rss=$((total_rss + rss)) total_cpu=$((total_cpu + cpu))
    awk -v g="$g" -v r="$rss" -v c="$cpu" -v hz="$hz" -v s="$secs" 'BEGIN {printf "%-36s %9.1f %7.2f\n", g, r / 1024, 100 * c / hz / s}'
  done
  awk -v r="$total_rss" -v c="$total_cpu" -v hz="$hz" -v s="$secs" \
    'BEGIN {printf "%-36s %9.1f %7.2f   (CPU %% of one core, over %ss)\n", "TOTAL", r / 1024, 100 * c / hz / s, s}'
}

sub=${1:-}; shift || true
case $sub in
  list) cmd_list ;;
  kill) cmd_kill "$@" ;;
  start) cmd_start "$@" ;;
  crash) cmd_crash "$@" ;;
  signal) cmd_signal "$@" ;;
  partition) cmd_partition "$@" ;;
  isolate-api) cmd_partition --api-only "$@" ;;
  heal) cmd_heal "$@" ;;
  faults) cmd_faults ;;
  usage) cmd_usage "$@" ;;
  -h|--help|help|"") usage; [[ -n $sub ]] ;;
  *) usage >&2; die "unknown command $sub" ;;
esac
