# shellcheck shell=bash
# nodes.sh - the extra nodes of a multi-node k8s-local cluster (sourced by up.sh, down.sh and node.sh after
# env.sh; not executed).
#
# Node 1 is the host itself (control plane + kubelet + the one kube-proxy, pods on bridge $BRIDGE). Node i
# (2..NODES) runs in network namespace $NODE_NAME-i: a veth pair (host k8slocal-v<i> = $NODE_NET.<i>.1,
# namespace eth0 = $NODE_NET.<i>.2, default route to the host), its own containerd (root, state, socket, runc
# root, CNI conf dir under $STATE/nodes/<name> and $RUN/nodes/<name>), its own bridge k8slocal<i> on the pod
# CIDR the controller-manager allocates to it (the host routes that CIDR into the namespace), and a kubelet
# (cgroupRoot /<name>, pod logs and root dir of its own) registered as <name> with
# topology.kubernetes.io/zone = the i-th letter. Service traffic from a namespace node is routed to the host,
# where the one kube-proxy translates it; the host masquerades only what it sends back into the node it came
# from (hairpin through a Service), so pods see each other's real addresses.

NODES_FILE=$STATE/node-count # node count of the last up (absent = 1); kept by down, dropped by down --purge
MAX_NODES=9
HOST_NAT_CHAIN=K8SLOCAL-POSTROUTING

# want_nodes: K8S_LOCAL_NODES when set, else the count of the last up, else 1
want_nodes() {
  local n=${K8S_LOCAL_NODES:-}
  [[ -n $n ]] || { [[ -f $NODES_FILE ]] && n=$(<"$NODES_FILE"); }
  n=${n:-1}
  [[ $n =~ ^[1-9]$ ]] || die "NODES must be 1..$MAX_NODES (got '$n')"
  echo "$n"
}
node_name() { if (($1 == 1)); then echo "$NODE_NAME"; else echo "$NODE_NAME-$1"; fi; }
node_zone() { local z=abcdefghi; echo "${z:$(($1 - 1)):1}"; }
node_netns() { echo "$NODE_NAME-$1"; }
node_veth() { echo "k8slocal-v$1"; }
node_bridge() { echo "k8slocal$1"; }
node_host_ip() { echo "$NODE_NET.$1.1"; }
node_ip() { if (($1 == 1)); then echo "$NODE_IP"; else echo "$NODE_NET.$1.2"; fi; }
node_state() { echo "$STATE/nodes/$(node_name "$1")"; }
node_run() { echo "$RUN/nodes/$(node_name "$1")"; }
node_sock() { if (($1 == 1)); then echo "$CTRD_SOCK"; else echo "$(node_run "$1")/containerd/containerd.sock"; fi; }
# daemon names (PID files in $RUN): node 1 keeps the single-node names
node_daemon() { if (($1 == 1)); then echo "$2"; else echo "$(node_name "$1").$2"; fi; }
# cgroup parent of the node's pods (kubelet cgroupRoot + kubepods), relative to a v1 hierarchy
node_cgroup_root() { if (($1 == 1)); then echo ""; else echo "/$(node_name "$1")"; fi; }

# extra nodes that have state or a running daemon, by index
existing_extra_nodes() {
  local d i
  for d in "$STATE"/nodes/"$NODE_NAME"-[0-9] "$RUN"/nodes/"$NODE_NAME"-[0-9]; do
    [[ -d $d ]] || continue
    i=${d##*-}; echo "$i"
  done | sort -un
}
# indexes of the nodes whose containerd runs (1 first)
running_nodes() {
  local i
  daemon_pid containerd >/dev/null 2>&1 && echo 1
  for i in $(existing_extra_nodes); do daemon_pid "$(node_daemon "$i" containerd)" >/dev/null 2>&1 && echo "$i"; done
  return 0
}
nctr() { local i=$1; shift; ctr --address "$(node_sock "$i")" -n k8s.io "$@"; }

# ---- network namespace of node i ------------------------------------------------------------------------
node_net_up() { # i
  local i=$1 ns veth
  ns=$(node_netns "$i") veth=$(node_veth "$i")
  [[ -e /run/netns/$ns ]] || ip netns add "$ns"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
  fi
  ip addr replace "$(node_host_ip "$i")/24" dev "$veth"
  ip link set "$veth" up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr replace "$(node_ip "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" route replace default via "$(node_host_ip "$i")"
  nsenter --net="/run/netns/$ns" sh -c 'echo 1 >/proc/sys/net/ipv4/ip_forward'
}
node_net_down() { # i
  local i=$1 cidr
  cidr=$(ip route | awk -v v="$(node_veth "$i")" '$0 ~ (" dev " v "( |$)") && $1 ~ /\// && $2 == "via" {print $1}')
  for c in $cidr; do ip route del "$c" 2>/dev/null || true; done
  ip link del "$(node_veth "$i")" 2>/dev/null || true
  if [[ -e /run/netns/$(node_netns "$i") ]]; then ip netns del "$(node_netns "$i")" || true; fi
  return 0
}

# host NAT for the extra nodes (chain $HOST_NAT_CHAIN, first in nat POSTROUTING): traffic between pods is
# never masqueraded (the bridge plugin of node 1 would otherwise hide node-1 pods behind the veth address),
# except Service traffic the host DNATs back into the node it came from (its reply would bypass the host)
host_nat_sync() { # cidr-of-node-2 cidr-of-node-3 ...
  local c
  if (($# == 0)); then host_nat_clean; return 0; fi
  iptables -t nat -N "$HOST_NAT_CHAIN" 2>/dev/null || true
  iptables -t nat -F "$HOST_NAT_CHAIN"
  for c in "$@"; do
    iptables -t nat -A "$HOST_NAT_CHAIN" -s "$c" -d "$c" -m comment --comment "k8s-local: hairpin Service traffic of node $c" -j MASQUERADE
  done
  iptables -t nat -A "$HOST_NAT_CHAIN" -s "$CLUSTER_CIDR" -d "$CLUSTER_CIDR" -m mark ! --mark 0x4000/0x4000 \
    -m comment --comment "k8s-local: pod to pod keeps its address" -j ACCEPT
  iptables -t nat -C POSTROUTING -j "$HOST_NAT_CHAIN" 2>/dev/null || iptables -t nat -I POSTROUTING 1 -j "$HOST_NAT_CHAIN"
}
host_nat_clean() {
  while iptables -t nat -D POSTROUTING -j "$HOST_NAT_CHAIN" 2>/dev/null; do :; done
  iptables -t nat -F "$HOST_NAT_CHAIN" 2>/dev/null || true
  iptables -t nat -X "$HOST_NAT_CHAIN" 2>/dev/null || true
  return 0
}

# ---- processes of node i --------------------------------------------------------------------------------
# every process in the node's pod cgroups (pids hierarchy), and the containerd shims serving its socket
node_pod_pids() { # i
  local i=$1 root f
  root=/sys/fs/cgroup/pids$(node_cgroup_root "$i")/kubepods
  [[ -d $root ]] || return 0
  find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un
}
node_shim_pids() { # i
  local sock p
  sock=$(node_sock "$1")
  for p in /proc/[0-9]*; do
    [[ -r $p/cmdline ]] || continue
    if tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF "$sock"; then echo "${p#/proc/}"; fi
  done
}
# node_kill i: what a node crash does: kubelet and containerd SIGKILLed, every shim and pod process too.
# Nothing is cleaned up: the API keeps the node (NotReady after the grace period) and its pods.
node_kill() { # i
  local i=$1 d pid
  for d in kubelet containerd; do
    if pid=$(daemon_pid "$(node_daemon "$i" "$d")"); then kill -KILL "$pid" 2>/dev/null || true; fi
  done
  for pid in $(node_shim_pids "$i") $(node_pod_pids "$i"); do kill -KILL "$pid" 2>/dev/null || true; done
  # pods forked while we looked (a restarting container): once more
  sleep 0.5
  for pid in $(node_shim_pids "$i") $(node_pod_pids "$i"); do kill -KILL "$pid" 2>/dev/null || true; done
  return 0
}

umount_under() { # dir: every mount at or below dir, deepest first
  local d=$1 m
  [[ -n $d && -d $d ]] || return 0
  for m in $(awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}
rm_cgroups() { # relative path under every v1 hierarchy (and the unified one), depth-first
  local rel=$1 c
  for c in /sys/fs/cgroup/*"$rel" /sys/fs/cgroup"$rel"; do
    [[ -d $c && $c != /sys/fs/cgroup ]] || continue
    find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  return 0
}

# node_down i [keep]: stop node i and remove everything it made on the host (pods, daemons, shims, mounts,
# cgroups, veth, route, namespace); without keep also its state (containerd root, kubelet dir) and its Node
# object. keep=1 is down --keep-data: the next up resumes the node with its images.
node_down() { # i [keep]
  local i=$1 keep=${2:-0} name id
  name=$(node_name "$i")
  if ((!keep)) && [[ -x $BIN/kubectl && -f $ADMIN_KUBECONFIG ]] && daemon_pid kube-apiserver >/dev/null 2>&1; then
    # its pods first (nothing would finish their deletion once the node is gone), then the node
    kctl delete pods --all-namespaces --field-selector "spec.nodeName=$name" --force --grace-period=0 \
      --wait=false --request-timeout=10s >/dev/null 2>&1 || true
    kctl delete node "$name" --wait=false --request-timeout=10s >/dev/null 2>&1 || true
  fi
  stop_daemon "$(node_daemon "$i" kubelet)"
  if daemon_pid "$(node_daemon "$i" containerd)" >/dev/null; then
    for id in $(nctr "$i" tasks ls -q 2>/dev/null); do nctr "$i" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    sleep 1
    for id in $(nctr "$i" tasks ls -q 2>/dev/null); do nctr "$i" tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(nctr "$i" containers ls -q 2>/dev/null); do nctr "$i" containers rm "$id" >/dev/null 2>&1 || true; done
  fi
  stop_daemon "$(node_daemon "$i" containerd)" 30
  node_kill "$i"
  umount_under "$(node_run "$i")"
  umount_under "$(node_state "$i")"
  rm_cgroups "$(node_cgroup_root "$i")"
  node_net_down "$i"
  rm -rf "$(node_run "$i")"
  rmdir "$RUN/nodes" 2>/dev/null || true # once the last extra node is gone
  if ((!keep)); then
    rm -rf "$(node_state "$i")"
    rmdir "$STATE/nodes" 2>/dev/null || true
    rm -f "$LOGS/$name".*.log
  fi
  log "node $name down$( ((keep)) && echo ' (state kept)')"
}
