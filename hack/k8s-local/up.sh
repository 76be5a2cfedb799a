#!/usr/bin/env bash
# up.sh - bring up a real single-node Kubernetes cluster (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet + containerd/runc, kube-proxy (iptables),
# bridge CNI, CoreDNS) using only Debian apt packages and the Go module proxy.
# Idempotent: re-running skips whatever is already installed/built/running.
#
#   sudo ./up.sh            # install, build, start, self-check
#   ./up.sh --no-check      # skip check.sh at the end
#   export KUBECONFIG=$(./up.sh --print-kubeconfig)
set -euo pipefail
# shellcheck source=env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# shellcheck source=nodes.sh
. "$(dirname "${BASH_SOURCE[0]}")/nodes.sh"

RUN_CHECK=1
for a in "$@"; do
  case $a in
    --no-check) RUN_CHECK=0 ;;
    --print-kubeconfig) echo "$ADMIN_KUBECONFIG"; exit 0 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) die "unknown argument $a" ;;
  esac
done

[[ $(id -u) == 0 ]] || die "must run as root"
[[ -n $NODE_IP ]] || die "cannot detect a node IP; set K8S_LOCAL_NODE_IP"
T0=$(date +%s)

# ---------------------------------------------------------------------------------------------
# 1. Debian packages
APT_PKGS=(containerd runc etcd-server containernetworking-plugins iptables conntrack busybox-static
          valkey-server valkey-sentinel valkey-tools openssl curl ca-certificates)
# containerd 1.7 and etcd 3.5 come from trixie (they install on bookworm without pulling a new
# libc); valkey from bookworm-backports. Where those suites are absent, the default is used.
declare -A APT_SUITE=([containerd]=trixie [etcd-server]=trixie
                      [valkey-server]=bookworm-backports [valkey-sentinel]=bookworm-backports
                      [valkey-tools]=bookworm-backports)
# The extra suites (bookworm-backports, trixie) live on the same archive as the machine's own
# bookworm sources: read its URI from apt's configuration instead of naming a host here.
debian_archive_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk 'BEGIN{RS=""} /Suites:[^\n]*bookworm([ \n]|$)/ && !/security/ {
           if (match($0, /URIs:[ \t]*[^ \t\n]+/)) { u=substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", u); print u; exit } }' "$f"
  done | head -n1 | grep . && return 0
  awk '$1=="deb" && $3=="bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null | grep .
}
ensure_apt_suites() {
  local want=() s uri
  for s in bookworm-backports trixie; do
    apt-cache policy 2>/dev/null | grep -q " $s/main" || want+=("$s")
  done
  ((${#want[@]})) || return 0
  uri=$(debian_archive_uri) || die "cannot find the Debian archive URI in apt's sources"
  log "apt: adding suites ${want[*]} (trixie pinned below bookworm)"
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" "${want[*]}" >/etc/apt/sources.list.d/k8s-local-extra.sources
  printf 'Package: *\nPin: release n=trixie\nPin-Priority: 50\n' >/etc/apt/preferences.d/k8s-local-trixie
  apt-get update -qq || die "apt-get update failed"
}

install_packages() {
  local missing=() p spec
  for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  ensure_apt_suites
  log "apt: installing ${missing[*]}"
  local specs=()
  for p in "${missing[@]}"; do
    spec=$p
    if [[ -n ${APT_SUITE[$p]:-} ]] && apt-cache policy "$p" | grep -q " ${APT_SUITE[$p]}/"; then
      spec="$p/${APT_SUITE[$p]}"
    fi
    specs+=("$spec")
  done
  # keep maintainer scripts from starting etcd/valkey/containerd services
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${specs[@]}"; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${specs[@]}"
  fi
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  return 0
}

# ---------------------------------------------------------------------------------------------
# 2. Go builds (k8s binaries, coredns, mkimage, pause) into $BIN
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
TOOLS_CMDS=(coredns mkimage pause)
go_build() { # dir stamp-name out-dir ldflags pkgs...
  local dir=$1 name=$2 ldflags=$3; shift 3
  local stamp sum
  sum=$({ cat "$dir/go.mod" "$dir/go.sum"; find "$dir" -name '*.go' -type f | sort | xargs -r cat; echo "$ldflags $*"; } | sha256sum | cut -c1-16)
  stamp=$BIN/.stamp-$name-$sum
  local b ok=1
  for b in "$@"; do [[ -x $BIN/$(basename "$b") ]] || ok=0; done
  if ((ok)) && [[ -f $stamp ]]; then return 0; fi
  command -v go >/dev/null || die "go not found (expected Go >= 1.26 on PATH)"
  log "go build $name ($*)"
  local t=$(date +%s)
  (cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/" "$@")
  rm -f "$BIN"/.stamp-"$name"-*; touch "$stamp"
  log "go build $name done in $(( $(date +%s) - t ))s"
}
build_binaries() {
  mkdir -p "$BIN"
  local v=$K8S_VERSION minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  local p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    ld+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  local pkgs=()
  for p in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$p"); done
  go_build "$K8S_LOCAL_DIR/go/k8s" k8s "$ld" "${pkgs[@]}"
  pkgs=()
  for p in "${TOOLS_CMDS[@]}"; do pkgs+=("./$p"); done
  go_build "$K8S_LOCAL_DIR/go/tools" tools "-s -w" "${pkgs[@]}"
  go_build "$K8S_LOCAL_DIR/go/provisioner" provisioner "-s -w" ./local-path-provisioner
}

# ---------------------------------------------------------------------------------------------
# 3. Images: built from local files only, imported into containerd's k8s.io namespace later
build_image() { # name ref rootfs-builder-fn mkimage-args...
  local name=$1 ref=$2 fn=$3; shift 3
  local out=$IMAGES/$name.tar stamp
  stamp=$(printf '%s\n' "$ref" "$*" "$(sha256sum "$BIN/mkimage" | cut -c1-16)" \
          "$(declare -f "$fn" rootfs_engine engine_layout add_busybox copy_with_libs)" \
          "$(ls -l "$BIN"/* /usr/bin/valkey-* /usr/bin/redis-* /usr/bin/setpriv 2>/dev/null)" \
          "$(cat "$VALKEY91_DIR/packages.txt" 2>/dev/null)" | sha256sum | cut -c1-16)
  [[ -f $out && -f $IMAGES/.$name.$stamp ]] && return 0
  log "image: building $ref"
  local root=$IMAGES/$name.rootfs
  rm -rf "$root"; mkdir -p "$root"
  "$fn" "$root"
  deterministic_tar "$root" "$IMAGES/$name.layer.tar"
  local tags=() r
  for r in $ref; do tags+=(-tag "$r"); done  # ref may be a space-separated list of tags
  "$BIN/mkimage" "${tags[@]}" -o "$out" -layer "$IMAGES/$name.layer.tar" "$@"
  rm -rf "$root" "$IMAGES/$name.layer.tar" "$IMAGES"/."$name".*; touch "$IMAGES/.$name.$stamp"
}
rootfs_pause() { install -D -m 0755 "$BIN/pause" "$1/pause"; }
rootfs_coredns() { install -D -m 0755 "$BIN/coredns" "$1/coredns"; mkdir -p "$1/etc/coredns" "$1/tmp"; }
# valkey / redis images laid out like the official ones: binaries in /usr/local/bin, WORKDIR /data,
# docker-entrypoint.sh, user <engine> = 999 (a root start of <engine>-server drops to it via setpriv, as
# upstream does; non-root pods just run as the uid they ask for)
rootfs_engine() { # engine rootfs
  local e=$1 root=$2
  # Debian ships one binary (<engine>-check-rdb); <engine>-server/-sentinel are symlinks to it
  copy_with_libs "$root" "/usr/bin/$e-check-rdb" "/usr/bin/$e-check-aof" "/usr/bin/$e-cli" "/usr/bin/$e-benchmark" /usr/bin/setpriv
  ln -s "$e-check-rdb" "$root/usr/bin/$e-server"
  ln -s "$e-check-rdb" "$root/usr/bin/$e-sentinel"
  engine_layout "$e" "$root"
}
# the official image's layout around /usr/bin/<engine>-* and /usr/bin/setpriv already in rootfs
engine_layout() { # engine rootfs
  local e=$1 root=$2 b
  add_busybox "$root"
  printf 'root:x:0:0:root:/root:/bin/sh\n%s:x:999:999:%s:/data:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' "$e" "$e" >"$root/etc/passwd"
  printf 'root:x:0:\n%s:x:999:\nnogroup:x:65534:\n' "$e" >"$root/etc/group"
  mkdir -p "$root/usr/local/bin" "$root/data" "$root/etc/$e"
  chmod 0777 "$root/data" "$root/etc/$e"
  for b in server sentinel cli benchmark check-rdb check-aof; do
    ln -s "/usr/bin/$e-$b" "$root/usr/local/bin/$e-$b"
    # the valkey image also answers to the redis-* names, like upstream's
    if [[ $e == valkey ]]; then ln -s "/usr/bin/$e-$b" "$root/usr/local/bin/redis-$b"; fi
  done
  sed "s/@E@/$e/g" >"$root/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
# like the upstream @E@ image: options or a .conf file as first argument mean @E@-server; started as
# root, @E@-server drops to user @E@ (999) after taking ownership of the working directory
set -e
if [ "${1#-}" != "$1" ] || [ "${1%.conf}" != "$1" ]; then set -- @E@-server "$@"; fi
if [ "$1" = @E@-server ] && [ "$(id -u)" = 0 ]; then
  find . \! -user @E@ -exec chown @E@ '{}' +
  exec /usr/bin/setpriv --reuid=@E@ --regid=@E@ --clear-groups -- "$0" "$@"
fi
# set an appropriate umask (if one isn't set already), as upstream does
um=$(umask)
if [ "$um" = 0022 ]; then umask 0077; fi
exec "$@"
EOF
  chmod 0755 "$root/usr/local/bin/docker-entrypoint.sh"
}
rootfs_valkey() { rootfs_engine valkey "$1"; }
# valkey 9.1: the trixie + sid root filesystem as it is (its own libc, setpriv), plus the same layout
rootfs_valkey91() { cp -a "$VALKEY91_DIR/rootfs/." "$1/"; engine_layout valkey "$1"; }
rootfs_redis() { rootfs_engine redis "$1"; }
build_images() {
  mkdir -p "$IMAGES"
  build_image pause "$PAUSE_IMAGE" rootfs_pause -entrypoint /pause
  build_image coredns "$COREDNS_IMAGE" rootfs_coredns -entrypoint /coredns
  build_image valkey "$VALKEY_IMAGES" rootfs_valkey -entrypoint docker-entrypoint.sh -cmd valkey-server -workdir /data
  # redis (Debian bookworm's 7.0) only where its packages are installed (hack/images.sh installs them)
  if [[ -x /usr/bin/redis-check-rdb ]]; then
    build_image redis "$REDIS_IMAGES" rootfs_redis -entrypoint docker-entrypoint.sh -cmd redis-server -workdir /data
  fi
  # valkey 9.1 only where its root filesystem was unpacked (the project's hack/engine-rootfs.sh)
  if [[ -f $VALKEY91_DIR/VERSION && -x $VALKEY91_DIR/rootfs/usr/bin/valkey-check-rdb ]]; then
    build_image valkey91 "$VALKEY91_IMAGES" rootfs_valkey91 -entrypoint docker-entrypoint.sh -cmd valkey-server -workdir /data
  fi
}
import_images() {
  local t
  for t in "$IMAGES"/*.tar; do
    kctr images import "$t" >/dev/null
  done
}

# ---------------------------------------------------------------------------------------------
# 4. PKI + kubeconfigs (openssl)
gen_cert() { # name subj san(or "") [ca-flag]
  local name=$1 subj=$2 san=$3
  [[ -f $PKI/$name.crt ]] && return 0
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [[ -n $san ]] && echo "subjectAltName=$san"
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
write_kubeconfig() { # file user cert-name server
  local f=$1 user=$2 c=$3 server=$4
  write_if_changed "$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: k8s-local
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$c.crt")
    client-key-data: $(base64 -w0 "$PKI/$c.key")
contexts:
- name: k8s-local
  context: {cluster: k8s-local, user: $user}
current-context: k8s-local
EOF
  chmod 600 "$f"
}
setup_pki() {
  mkdir -p "$PKI" "$CONF"
  chmod 700 "$PKI"
  if [[ ! -f $PKI/ca.crt ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 \
      -subj "/CN=k8s-local-ca" 2>/dev/null
  fi
  [[ -f $PKI/sa.key ]] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
  local ips="IP:127.0.0.1,IP:$APISERVER_SVC_IP,IP:$NODE_IP"
  # apiserver cert: regenerate if the node IP changed
  if [[ -f $PKI/apiserver.crt ]] && ! openssl x509 -in "$PKI/apiserver.crt" -noout -text | grep -q "IP Address:$NODE_IP\b"; then
    rm -f "$PKI/apiserver.crt" "$PKI/kubelet.crt"
  fi
  gen_cert apiserver "/CN=kube-apiserver" "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost,DNS:$NODE_NAME,$ips"
  gen_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" ""
  gen_cert admin "/O=system:masters/CN=kubernetes-admin" ""
  gen_cert controller-manager "/CN=system:kube-controller-manager" ""
  gen_cert scheduler "/CN=system:kube-scheduler" ""
  gen_cert kube-proxy "/CN=system:kube-proxy" ""
  gen_cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP"
  local local_url=https://127.0.0.1:6443
  write_kubeconfig "$CONF/controller-manager.kubeconfig" system:kube-controller-manager controller-manager "$local_url"
  write_kubeconfig "$CONF/scheduler.kubeconfig" system:kube-scheduler scheduler "$local_url"
  write_kubeconfig "$CONF/kube-proxy.kubeconfig" system:kube-proxy kube-proxy "$local_url"
  write_kubeconfig "$CONF/provisioner.kubeconfig" kubernetes-admin admin "$local_url"
  write_kubeconfig "$CONF/kubelet.kubeconfig" "system:node:$NODE_NAME" kubelet "$local_url"
  mkdir -p "$(dirname "$ADMIN_KUBECONFIG")"
  write_kubeconfig "$ADMIN_KUBECONFIG" kubernetes-admin admin "https://$NODE_IP:6443"
}

# ---------------------------------------------------------------------------------------------
# 5. Host settings (original values saved once, restored by down.sh)
SYSCTLS=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables net/bridge/bridge-nf-call-ip6tables
         vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops
         kernel/keys/root_maxkeys kernel/keys/root_maxbytes net/ipv4/conf/all/route_localnet)
host_setup() {
  local s
  if [[ ! -f $STATE/sysctl.orig ]]; then
    for s in "${SYSCTLS[@]}"; do
      [[ -f /proc/sys/$s ]] && echo "$s $(</proc/sys/$s)"
    done >"$STATE/sysctl.orig"
  fi
  [[ -d /proc/sys/net/bridge ]] || die "br_netfilter not available (needed for Service traffic between pods on the bridge)"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-iptables
  echo 1 >/proc/sys/net/bridge/bridge-nf-call-ip6tables
  # cgroup v1 hybrid hosts: make sure the v1 controllers kubelet needs are mounted
  local c
  if [[ $(stat -f -c %T /sys/fs/cgroup) != cgroup2fs ]]; then
    for c in cpu cpuacct cpuset memory pids; do
      grep -qE "^[^ ]+ /sys/fs/cgroup/[^ ]*\b$c\b" /proc/mounts || die "cgroup v1 controller $c not mounted"
    done
  fi
}

# ---------------------------------------------------------------------------------------------
# 6. Configs
# rewrite a file only when its content changes (kube-proxy exits when its config file is touched)
write_if_changed() { # file < content
  local f=$1 tmp
  tmp=$(mktemp "$(dirname "$f")/.tmp.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$f"; then rm -f "$tmp"; else chmod 644 "$tmp"; mv "$tmp" "$f"; fi
}
has_cap_sys_resource() { # CAP_SYS_RESOURCE = bit 24 of the effective set
  local eff; eff=$(awk '/^CapEff/ {print $2}' /proc/self/status)
  (( (16#$eff >> 24) & 1 ))
}
# without CAP_SYS_RESOURCE nobody may lower oom_score_adj (see containerd_toml)
RESTRICT_OOM=false DAEMON_OOM=-999
if ! has_cap_sys_resource; then RESTRICT_OOM=true DAEMON_OOM=0; fi
# containerd configuration: root state socket opt-dir cni-conf-dir [runc-root]
containerd_toml() {
  local runc_root=""
  [[ -z ${6:-} ]] || runc_root="        Root = \"$6\""$'\n'
  cat <<EOF
version = 2
root = "$1"
state = "$2"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$3"
[plugins."io.containerd.internal.v1.opt"]
  path = "$4"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  # clamp container oom_score_adj to containerd's own: lowering it needs CAP_SYS_RESOURCE, which
  # some VMs/sandboxes do not grant even to root (sandboxes would fail with runc "can't get final
  # child's PID from pipe: EOF" / "failed to update /proc/self/oom_score_adj: Permission denied")
  restrict_oom_score_adj = $RESTRICT_OOM
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
${runc_root}  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$5"
EOF
}
# kubelet configuration: address containerd-socket tls-cert tls-key [extra lines]
kubelet_yaml() {
  cat <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
address: "$1"
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: "unix://$2"
clusterDNS: ["$DNS_SVC_IP"]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: /etc/resolv.conf
tlsCertFile: "$3"
tlsPrivateKeyFile: "$4"
rotateCertificates: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 110
oomScoreAdj: $DAEMON_OOM
EOF
  printf '%s' "${5:-}"
}
# CNI network (bridge + host-local IPAM + portmap): bridge ip-masquerade(true|false) subnet ipam-dir
cni_conflist() {
  cat <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$1",
      "isGateway": true,
      "ipMasq": $2,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$4",
        "ranges": [[{"subnet": "$3"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}
write_configs() {
  # kube-proxy takes a zero minSyncPeriod for unset and uses its default, 1s
  case ${KUBE_PROXY_MIN_SYNC:-1s} in
    0 | 0s | 0ms) die "KUBE_PROXY_MIN_SYNC=${KUBE_PROXY_MIN_SYNC}: kube-proxy reads a zero minSyncPeriod as unset and uses 1s; use a small value such as 10ms" ;;
  esac
  mkdir -p "$CONF" "$STATE/cni/net.d" "$STATE/cni/ipam" "$STATE/kubelet" "$STATE/containerd" "$RUN/containerd"
  cni_conflist "$BRIDGE" true "$POD_CIDR" "$STATE/cni/ipam" | write_if_changed "$STATE/cni/net.d/10-k8s-local.conflist"
  containerd_toml "$STATE/containerd/root" "$RUN/containerd/state" "$CTRD_SOCK" "$STATE/containerd/opt" "$STATE/cni/net.d" \
    | write_if_changed "$CONF/containerd.toml"
  kubelet_yaml "$NODE_IP" "$CTRD_SOCK" "$PKI/kubelet.crt" "$PKI/kubelet.key" | write_if_changed "$CONF/kubelet.yaml"
  write_if_changed "$CONF/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$CONF/kube-proxy.kubeconfig"}
mode: iptables
clusterCIDR: $CLUSTER_CIDR
hostnameOverride: $NODE_NAME
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0}
nodePortAddresses: [primary]
iptables: {localhostNodePorts: false, syncPeriod: 30s, minSyncPeriod: ${KUBE_PROXY_MIN_SYNC:-1s}}
oomScoreAdj: $DAEMON_OOM
EOF
}

# ---------------------------------------------------------------------------------------------
# 7. Daemons (plain background processes; PID + binary path recorded in $RUN for down.sh)
# a daemon is restarted when its binary, arguments or any config file named in them changed; DAEMON_NETNS set:
# started in that network namespace
fingerprint() { # exe args...
  local a v
  { stat -c '%n %s %Y' "$1"; printf '%s\n' "$@"
    for a in "$@"; do v=${a#*=}; if [[ -f $v ]]; then cat "$v"; fi; done; } | sha256sum | cut -c1-32
}
start_daemon() { # name binary args...
  local name=$1 bin=$2; shift 2
  local exe fp; exe=$(readlink -f "$(command -v "$bin")")
  fp=$(fingerprint "$exe" "$@")
  if daemon_pid "$name" >/dev/null; then
    [[ -f $RUN/$name.fp && $(<"$RUN/$name.fp") == "$fp" ]] && return 0
    log "$name: binary or configuration changed, restarting"
    stop_daemon "$name"
  fi
  log "starting $name${DAEMON_NETNS:+ in network namespace $DAEMON_NETNS}"
  # nsenter --net, not ip netns exec: the latter remounts /sys and hides the cgroup hierarchies
  if [[ -n ${DAEMON_NETNS:-} ]]; then
    detached nsenter --net="/run/netns/$DAEMON_NETNS" "$exe" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  else
    detached "$exe" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  fi
  echo $! >"$RUN/$name.pid"
  echo "$exe" >"$RUN/$name.exe"
  echo "$fp" >"$RUN/$name.fp"
}
wait_for() { # description timeout-seconds command...
  local what=$1 t=$2 i; shift 2
  for ((i = 0; i < t * 2; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "timed out after ${t}s waiting for $what (logs: $LOGS)"
}
curl_api() { curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:6443$1"; }
start_all() {
  mkdir -p "$LOGS" "$RUN"
  start_daemon containerd containerd --config "$CONF/containerd.toml"
  start_daemon etcd etcd --name k8s-local --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster k8s-local=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
    --unsafe-no-fsync --snapshot-count 10000 --log-level warn
  wait_for etcd 60 curl -sf http://127.0.0.1:2379/health
  start_daemon kube-apiserver kube-apiserver \
    --advertise-address="$NODE_IP" --bind-address=0.0.0.0 --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --profiling=false --v=1
  wait_for kube-apiserver 120 curl_api /readyz
  start_daemon kube-controller-manager kube-controller-manager \
    --kubeconfig="$CONF/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CONF/controller-manager.kubeconfig" --authorization-kubeconfig="$CONF/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" --use-service-account-credentials=true \
    --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false --v=1
  start_daemon local-path-provisioner local-path-provisioner -kubeconfig "$CONF/provisioner.kubeconfig" -root "$STORAGE"
  start_daemon kube-scheduler kube-scheduler \
    --kubeconfig="$CONF/scheduler.kubeconfig" \
    --authentication-kubeconfig="$CONF/scheduler.kubeconfig" --authorization-kubeconfig="$CONF/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1
  wait_for containerd 60 kctr version
  import_images
  start_daemon kubelet kubelet --config="$CONF/kubelet.yaml" --kubeconfig="$CONF/kubelet.kubeconfig" \
    --root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1
  start_daemon kube-proxy kube-proxy --config="$CONF/kube-proxy.yaml" --v=1
}

# ---------------------------------------------------------------------------------------------
# 8. Cluster add-ons: CoreDNS (pod, from the locally built image; with several nodes 2 replicas that never share a
#    node: a node fault takes at most one, whereas the preferred form had put both on one node after drains, and
#    killing that node took the cluster's DNS), StorageClass local-path
apply_addons() {
  wait_for "node $NODE_NAME Ready" 180 kctl wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
  local corefile
  corefile=$(cat <<EOF
.:53 {
    errors
    health :8080
    ready :8181
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loadbalance
}
EOF
)
  kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
$(sed 's/^/    /' <<<"$corefile")
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: coredns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  replicas: $(( $(want_nodes) > 1 ? 2 : 1 ))
  # old pod out first: a surge pod could never be placed next to one with the required anti-affinity of the
  # multi-node form (going back to one node would wait forever)
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
      annotations: {k8s-local/corefile-sha: "$(sha256sum <<<"$corefile" | cut -c1-16)"}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      affinity:
        podAntiAffinity:
$(if (( $(want_nodes) > 1 )); then
    echo "          requiredDuringSchedulingIgnoredDuringExecution:"
    echo "          - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {k8s-app: kube-dns}}}"
  else
    echo "          preferredDuringSchedulingIgnoredDuringExecution:"
    echo "          - weight: 100"
    echo "            podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {k8s-app: kube-dns}}}"
  fi)
      dnsPolicy: Default
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: metrics, containerPort: 9153, protocol: TCP}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
        livenessProbe: {httpGet: {path: /health, port: 8080}, initialDelaySeconds: 10}
        readinessProbe: {httpGet: {path: /ready, port: 8181}, periodSeconds: 2}
        resources: {requests: {cpu: 50m, memory: 40Mi}, limits: {memory: 170Mi}}
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $DNS_SVC_IP
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  - {name: metrics, port: 9153, protocol: TCP, targetPort: 9153}
EOF
  # the default StorageClass: directories under $STORAGE as local PVs (go/provisioner, a host daemon)
  kctl apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: k8s-local.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
EOF
  wait_coredns
}

# wait_coredns: the CoreDNS rollout, at most 180 s. Going from several nodes to one, the new pod is created while
# the old one (required anti-affinity) still terminates; the scheduler parks it as unschedulable and, when it
# misses the deletion, retries only after its 5-minute flush (measured: the rollout timed out at 180 s and the pod
# was placed 5 min after it was created). A pod Pending 30 s is deleted so that its replacement is scheduled at once.
wait_coredns() {
  local try
  for try in 1 2 3 4 5; do
    kctl -n kube-system rollout status deploy/coredns --timeout=30s >/dev/null 2>&1 && return 0
    log "CoreDNS rollout not done after $((try * 30)) s: deleting its Pending pods (the scheduler retries a new pod at once)"
    kctl -n kube-system delete pod -l k8s-app=kube-dns --field-selector=status.phase=Pending --wait=false >/dev/null || true
  done
  kctl -n kube-system rollout status deploy/coredns --timeout=30s >/dev/null
}

# ---------------------------------------------------------------------------------------------
# 9. Extra nodes (NODES > 1, see nodes.sh): node i in network namespace $NODE_NAME-i
image_list() { nctr "$1" images ls 2>/dev/null | awk 'NR > 1 && $1 !~ /^sha256:/ {print $1, $3}' | sort; }
sync_node_images() { # i: import every tagged image of node 1 that node i lacks or holds under another digest
  local i=$1 refs tmp
  refs=$(comm -23 <(image_list 1) <(image_list "$i") | awk '{print $1}')
  [[ -n $refs ]] || return 0
  tmp=$(mktemp -d)
  # shellcheck disable=SC2086 # one word per image reference
  nctr 1 images export --platform linux/amd64 "$tmp/images.tar" $refs
  nctr "$i" images import "$tmp/images.tar" >/dev/null
  rm -rf "$tmp"
  log "node $(node_name "$i"): imported $(wc -w <<<"$refs") images from $NODE_NAME"
}
node_pod_cidr() { kctl get node "$(node_name "$1")" -o jsonpath='{.spec.podCIDR}' 2>/dev/null | grep .; }
node_up() { # i: network, cgroup root, certs, configs, containerd (+ images), kubelet
  local i=$1 name ns st rn sock c
  name=$(node_name "$i") ns=$(node_netns "$i") st=$(node_state "$i") rn=$(node_run "$i") sock=$(node_sock "$i")
  mkdir -p "$st/conf" "$st/cni/net.d" "$st/cni/ipam" "$st/kubelet" "$st/containerd" "$st/pod-logs" "$rn/containerd"
  node_net_up "$i"
  # the kubelet's cgroupRoot must exist in every hierarchy ("cgroup has some missing paths" otherwise)
  for c in /sys/fs/cgroup/*/; do [[ -f ${c}cgroup.procs ]] && mkdir -p "$c$name"; done
  gen_cert "kubelet-$name" "/O=system:nodes/CN=system:node:$name" "DNS:$name,IP:$(node_ip "$i")"
  write_kubeconfig "$st/conf/kubelet.kubeconfig" "system:node:$name" "kubelet-$name" "https://$NODE_IP:6443"
  containerd_toml "$st/containerd/root" "$rn/containerd/state" "$sock" "$st/containerd/opt" "$st/cni/net.d" "$rn/runc" \
    | write_if_changed "$st/conf/containerd.toml"
  kubelet_yaml "$(node_ip "$i")" "$sock" "$PKI/kubelet-$name.crt" "$PKI/kubelet-$name.key" \
    "cgroupRoot: /$name"$'\n'"podLogsDir: $st/pod-logs"$'\n' | write_if_changed "$st/conf/kubelet.yaml"
  DAEMON_NETNS=$ns start_daemon "$(node_daemon "$i" containerd)" containerd --config "$st/conf/containerd.toml"
  wait_for "containerd of $name" 60 nctr "$i" version
  sync_node_images "$i"
  DAEMON_NETNS=$ns start_daemon "$(node_daemon "$i" kubelet)" kubelet --config="$st/conf/kubelet.yaml" \
    --kubeconfig="$st/conf/kubelet.kubeconfig" --root-dir="$st/kubelet" --cert-dir="$st/kubelet/pki" \
    --hostname-override="$name" --node-ip="$(node_ip "$i")" --node-labels="topology.kubernetes.io/zone=$(node_zone "$i")" --v=1
}
# ensure_nodes: exactly want_nodes nodes: extra nodes above the count go, the missing ones come up; then the
# pod CIDR the controller-manager gave each one becomes its CNI network and a host route
ensure_nodes() {
  local want i cidr cidrs=()
  want=$(want_nodes)
  for i in $(existing_extra_nodes); do ((i <= want)) || node_down "$i"; done
  for ((i = 2; i <= want; i++)); do node_up "$i"; done
  for ((i = 2; i <= want; i++)); do
    wait_for "node $(node_name "$i") registered with a pod CIDR" 120 node_pod_cidr "$i"
    cidr=$(node_pod_cidr "$i")
    cni_conflist "$(node_bridge "$i")" false "$cidr" "$(node_state "$i")/cni/ipam" \
      | write_if_changed "$(node_state "$i")/cni/net.d/10-k8s-local.conflist"
    ip route replace "$cidr" via "$(node_ip "$i")" dev "$(node_veth "$i")"
    cidrs+=("$cidr")
  done
  host_nat_sync "${cidrs[@]}"
  for ((i = 1; i <= want; i++)); do
    kctl label node "$(node_name "$i")" "topology.kubernetes.io/zone=$(node_zone "$i")" --overwrite >/dev/null
  done
  for ((i = 2; i <= want; i++)); do
    wait_for "node $(node_name "$i") Ready" 180 kctl wait --for=condition=Ready "node/$(node_name "$i")" --timeout=2s
  done
  echo "$want" >"$NODES_FILE"
}

# ---------------------------------------------------------------------------------------------
main() {
  mkdir -p "$STATE" "$LOGS" "$RUN"
  install_packages
  build_binaries
  build_images
  setup_pki
  host_setup
  write_configs
  start_all
  wait_for "node $NODE_NAME Ready" 180 kctl wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
  ensure_nodes
  apply_addons
  log "cluster up in $(( $(date +%s) - T0 ))s; $(want_nodes) node(s), $NODE_NAME ($NODE_IP), apiserver https://$NODE_IP:6443"
  log "export KUBECONFIG=$ADMIN_KUBECONFIG"
  if ((RUN_CHECK)); then
    "$K8S_LOCAL_DIR/check.sh"
  fi
  echo "$ADMIN_KUBECONFIG"
}
# sourcing (for debugging single steps) only defines the functions
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main; fi
