# shellcheck shell=bash
# Shared settings for up.sh / down.sh / check.sh / load-image.sh. Every value can be overridden
# from the environment. Sourced, not executed.

K8S_LOCAL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Versions. K8S_VERSION must match go/k8s/go.mod; COREDNS_VERSION must match go/tools/go.mod.
K8S_VERSION=v1.34.4
COREDNS_VERSION=v1.14.0

# Where things live. Build outputs and image tarballs are kept across down/up; STATE is the
# running cluster (etcd data, containerd root, kubelet dir, certs, logs).
CACHE=${K8S_LOCAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-local}
BIN=$CACHE/bin
IMAGES=$CACHE/images
STATE=${K8S_LOCAL_STATE:-$CACHE/state}
RUN=${K8S_LOCAL_RUN:-/run/k8s-local}
LOGS=$STATE/logs
STORAGE=$STATE/storage # volumes of StorageClass local-path (one directory per PV)
PKI=$STATE/pki
CONF=$STATE/conf
ADMIN_KUBECONFIG=${K8S_LOCAL_KUBECONFIG:-$CACHE/admin.kubeconfig}

# Network.
NODE_NAME=${K8S_LOCAL_NODE_NAME:-k8s-local}
CLUSTER_CIDR=${K8S_LOCAL_CLUSTER_CIDR:-10.244.0.0/16}
POD_CIDR=${K8S_LOCAL_POD_CIDR:-10.244.0.0/24}
SERVICE_CIDR=${K8S_LOCAL_SERVICE_CIDR:-10.96.0.0/16}
APISERVER_SVC_IP=${K8S_LOCAL_APISERVER_SVC_IP:-10.96.0.1}
DNS_SVC_IP=${K8S_LOCAL_DNS_SVC_IP:-10.96.0.10}
CLUSTER_DOMAIN=cluster.local
BRIDGE=${K8S_LOCAL_BRIDGE:-k8slocal0}
CNI_NET=k8s-local
# Extra nodes (NODES > 1, see nodes.sh): node i in network namespace $NODE_NAME-i, linked to the host by a veth
# pair $NODE_NET.i.1 (host) / $NODE_NET.i.2 (node). K8S_LOCAL_NODES: node count (default: that of the last up).
NODE_NET=${K8S_LOCAL_NODE_NET:-10.243}
CNI_BIN_DIR=${K8S_LOCAL_CNI_BIN_DIR:-/usr/lib/cni}

# Images (all built locally, never pulled). "valkey/valkey:8.0" is stored by containerd under
# its normalised Docker Hub name, so charts that say image: valkey/valkey:8.0 find it.
# VALKEY_IMAGES: space-separated tags for the same valkey image (Debian's valkey 8.0.1).
PAUSE_IMAGE=${K8S_LOCAL_PAUSE_IMAGE:-localhost/k8s-local/pause:3.10}
COREDNS_IMAGE=localhost/k8s-local/coredns:$COREDNS_VERSION
VALKEY_IMAGES=${K8S_LOCAL_VALKEY_IMAGES:-valkey/valkey:8.0 valkey/valkey:8.0.1 valkey/valkey:8}
VALKEY_IMAGE=${VALKEY_IMAGES%% *}
# REDIS_IMAGES: tags of the redis image (Debian bookworm's redis 7.0.15), built only when the
# redis-server/redis-sentinel/redis-tools packages are installed (hack/images.sh installs them).
REDIS_IMAGES=${K8S_LOCAL_REDIS_IMAGES:-redis:7.0 redis:7.0.15 redis:7}
REDIS_IMAGE=${REDIS_IMAGES%% *}
# VALKEY91_IMAGES: tags of the valkey 9.1 image (Debian sid's valkey on a trixie root filesystem, unpacked by
# the project's hack/engine-rootfs.sh into VALKEY91_DIR), built only where that root filesystem exists. The
# tags are the official image's (9.1, 9.1.<patch>, their -trixie forms, 9), so charts that default to
# valkey/valkey:9.1 find it.
VALKEY91_DIR=${VALKEY_HA_ENGINES:-/var/cache/valkey-ha/engines}/valkey-9.1
VALKEY91_VERSION=$(cut -d- -f1 "$VALKEY91_DIR/VERSION" 2>/dev/null || true)
VALKEY91_IMAGES=${K8S_LOCAL_VALKEY91_IMAGES:-valkey/valkey:9.1${VALKEY91_VERSION:+ valkey/valkey:$VALKEY91_VERSION} valkey/valkey:9.1-trixie${VALKEY91_VERSION:+ valkey/valkey:$VALKEY91_VERSION-trixie} valkey/valkey:9}
VALKEY91_IMAGE=${VALKEY91_IMAGES%% *}

CTRD_SOCK=$RUN/containerd/containerd.sock

detect_node_ip() {
  local ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)
  [[ -n $ip ]] || ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
  echo "$ip"
}
NODE_IP=${K8S_LOCAL_NODE_IP:-$(detect_node_ip)}

export PATH="$BIN:$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

kctl() { "$BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
kctr() { ctr --address "$CTRD_SOCK" -n k8s.io "$@"; }
log() { printf '[k8s-local %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# pid bookkeeping: $RUN/<name>.pid + $RUN/<name>.exe (resolved binary path)
daemon_pid() {
  local pf=$RUN/$1.pid pid exe
  [[ -f $pf ]] || return 1
  pid=$(<"$pf")
  [[ -n $pid && -d /proc/$pid ]] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ ${exe% (deleted)} == "$(<"$RUN/$1.exe")" ]] || return 1
  echo "$pid"
}

# detached command...: exec it in a session of its own holding no descriptor of the caller's but 0-2 (run it in
# the background, with its own redirections: `detached exe args >>log 2>&1 </dev/null &`; $! is then the
# command's pid). A daemon must not keep an inherited lock open: one started under
# `flock /tmp/valkey-ha-cluster.lock ...` (HELPERS.md) held that lock on fd 3 for the cluster's lifetime, so every
# later waiter blocked forever.
detached() {
  local fd
  for fd in "/proc/$BASHPID/fd"/*; do
    fd=${fd##*/}
    ((fd > 2)) && eval "exec $fd>&-"
  done
  exec setsid "$@"
}

stop_daemon() { # name [timeout]
  local name=$1 t=${2:-20} pid i
  if pid=$(daemon_pid "$name"); then
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < t * 10; i++)); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
    [[ -d /proc/$pid ]] && { log "$name did not stop, SIGKILL"; kill -KILL "$pid" 2>/dev/null; sleep 0.5; }
  fi
  rm -f "$RUN/$name.pid" "$RUN/$name.exe" "$RUN/$name.fp"
}

# ---- image helpers (used by up.sh and load-image.sh) ----
deterministic_tar() { tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$1" -cf "$2" .; }
copy_with_libs() { # rootfs file...
  local root=$1 f l; shift
  for f in "$@"; do
    install -D -m 0755 "$f" "$root$f"
    for l in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
      [[ -e $root$l ]] || install -D -m 0755 "$l" "$root$l"
    done
  done
}
add_busybox() { # rootfs
  local root=$1 a
  install -D -m 0755 "$(command -v busybox)" "$root/bin/busybox"
  for a in $(busybox --list); do
    [[ -e $root/bin/$a ]] || ln -s busybox "$root/bin/$a"
  done
  mkdir -p "$root/usr" "$root/etc" "$root/tmp" "$root/root"
  [[ -e $root/usr/bin ]] || mkdir -p "$root/usr/bin"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nvalkey:x:999:999:valkey:/data:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
  printf 'root:x:0:\nvalkey:x:999:\nnogroup:x:65534:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
}
