#!/usr/bin/env bash
# images.sh - build the project's container images from local files (no registry) and load them into
# the local cluster's containerd (hack/cluster.sh / hack/k8s-local). Idempotent: an image whose inputs
# did not change and that containerd still holds is neither rebuilt nor re-imported.
#
#   hack/images.sh                      # all five: valkey (9.1), valkey80, redis, controller, s3
#   hack/images.sh controller           # only some of: valkey valkey80 redis controller s3
#   hack/images.sh alias SRC DST...     # add tag DST to the loaded image SRC (e.g. a chart's default name)
#   NO_LOAD=1 hack/images.sh            # build only
#
# Images:
#   valkey/valkey:9.1 (+ :9.1.2, :9.1-trixie, :9.1.2-trixie, :9)
#                                     the charts' default: Debian sid's valkey 9.1 on a Debian trixie root
#                                     filesystem (hack/engine-rootfs.sh unpacks it into
#                                     /var/cache/valkey-ha/engines/valkey-9.1; run here if missing), laid out
#                                     like the official image: valkey-server/-sentinel/-cli in /usr/local/bin,
#                                     busybox sh + tools, docker-entrypoint.sh, setpriv, uid 999; built by
#                                     k8s-local/up.sh (rootfs_valkey91)
#   valkey/valkey:8.0 (+ :8.0.1, :8)  Debian bookworm-backports valkey 8.0.1 (the host's), same layout; built by
#                                     k8s-local/up.sh (rootfs_valkey)
#   redis:7.0 (+ :7.0.15, :7)         Debian bookworm redis 7.0.15, same layout (rootfs_redis in up.sh);
#                                     the redis-server/redis-sentinel/redis-tools packages are installed here
#                                     if missing (services kept from starting with policy-rc.d)
#   ghcr.io/valkey-ha/valkey-sentinel-ctl:<appVersion>  (hack/ctl-image.sh: the charts' default reference, so
#                                     the demo and e2e run the charts' defaults without --set; never pushed)
#                                     CGO_ENABLED=0 go build -trimpath ./cmd/valkey-sentinel-ctl; only the
#                                     binary at /valkey-sentinel-ctl, entrypoint it, user 65532
#   valkey-ha-e2e/versitygw:local      the S3-compatible server of e2e TestBackupRestoreIntoNewInstance (never a
#                                     chart's image): the versitygw binary hack/install-s3.sh builds (run here if
#                                     missing) at /versitygw + busybox (the test pod makes its bucket directory
#                                     and the test lists the objects with it); no user set (the pod runs as 65532)
# Knobs: S3_IMAGE (ref of the versitygw image; e2e reads E2E_S3_IMAGE), CTL_IMAGE (ref), CTL_PKG (package, default ./cmd/valkey-sentinel-ctl), CTL_BUILD_DIR (module dir
# to build in, default the repo root), CTL_EXTRA_TAGS (space-separated extra refs for the controller image),
# CTL_STAMP (name of the load stamp, default controller; e2e/upgrade_test.go builds an earlier commit's controller
# under its own tag and stamp, so the current one is not rebuilt by the next run).
# Needs root (apt, containerd socket); re-runs itself with sudo otherwise.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S=$ROOT/hack/k8s-local
if [[ $(id -u) != 0 ]]; then command -v sudo >/dev/null || { echo "images.sh: needs root" >&2; exit 1; }; exec sudo --preserve-env=VALKEY_HA_ENGINES,K8S_LOCAL_CACHE,XDG_CACHE_HOME,CTL_IMAGE,CTL_PKG,CTL_BUILD_DIR,CTL_EXTRA_TAGS,CTL_STAMP,S3_IMAGE,VALKEY_HA_S3_DIR,NO_LOAD,PATH,GOPATH,GOCACHE,GOMODCACHE,GOFLAGS "$0" "$@"; fi
# shellcheck source=k8s-local/env.sh
. "$K8S/env.sh"
# shellcheck source=k8s-local/nodes.sh
. "$K8S/nodes.sh"

CTL_IMAGE=${CTL_IMAGE:-$("$ROOT/hack/ctl-image.sh")}
CTL_PKG=${CTL_PKG:-./cmd/valkey-sentinel-ctl}
CTL_BUILD_DIR=${CTL_BUILD_DIR:-$ROOT}
CTL_EXTRA_TAGS=${CTL_EXTRA_TAGS:-}
CTL_STAMP=${CTL_STAMP:-controller}
S3_IMAGE=${S3_IMAGE:-valkey-ha-e2e/versitygw:local}
S3_DIR=${VALKEY_HA_S3_DIR:-/var/cache/valkey-ha/s3}
[[ $CTL_STAMP =~ ^[A-Za-z0-9._-]+$ ]] || { echo "images.sh: CTL_STAMP=$CTL_STAMP: use letters, digits, . _ -" >&2; exit 1; }
NO_LOAD=${NO_LOAD:-0}
LOADED=$RUN/loaded # load stamps; $RUN is removed by down.sh, as is containerd's image store
REDIS_PKGS=(redis-server redis-sentinel redis-tools)
TMPDIRS=()
trap 'rm -rf "${TMPDIRS[@]}"' EXIT

# digest of the image containerd holds under REF; Docker Hub names are stored in normalised form
# (<hub>/valkey/valkey:8.0, <hub>/library/redis:7.0), so match the reference as a path suffix too
# Both awk programs read their whole input and print the first match at the end: an early `exit` would close the
# pipe under a still-writing ctr, whose SIGPIPE status then fails `dig=$(...)` silently under pipefail + errexit
# (seen with long image lists).
ctr_digest() {
  kctr images ls 2>/dev/null | awk -v r="$1" 'NR > 1 && !found {
      n = $1
      if (n == r || (index(r, "/") == 0 && substr(n, length(n) - length(r) - 8) == "/library/" r) ||
          (substr(n, length(n) - length(r)) == "/" r && r !~ /^localhost\//)) { found = $3 } }
    END { if (found != "") print found }'
}
ctr_name() { # full containerd name of REF (for ctr images tag)
  kctr images ls -q 2>/dev/null | awk -v r="$1" '
      !found && ($1 == r || (index(r, "/") == 0 && substr($1, length($1) - length(r) - 8) == "/library/" r) ||
      (r !~ /^localhost\// && substr($1, length($1) - length(r)) == "/" r)) { found = $1 }
    END { if (found != "") print found }'
}

need_containerd() {
  ((NO_LOAD)) && return 0
  daemon_pid containerd >/dev/null || die "the local cluster is not running: run hack/cluster.sh up first"
}

ensure_redis_packages() {
  local missing=() p made_policy=0
  for p in "${REDIS_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "apt: installing ${missing[*]} (for the redis image)"
  # keep the maintainer scripts from starting redis services on this host
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; } || rc=$?
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || die "apt-get install ${missing[*]} failed"
}

# the valkey 9.1 root filesystem (a no-op when present)
ensure_valkey91_rootfs() { "$ROOT/hack/engine-rootfs.sh" >&2 || die "hack/engine-rootfs.sh failed (valkey 9.1 image)"; }

# valkey + redis tarballs: built by up.sh's own build_images (stamped; a no-op when unchanged)
build_engine_images() {
  [[ -x $BIN/mkimage ]] || die "k8s-local tools not built yet: run hack/cluster.sh up first"
  ( set --; . "$K8S/up.sh"; build_images )
}

load_tarball() { # name tarball ref
  local name=$1 tar=$2 ref=$3 sum dig
  [[ -f $tar ]] || die "$tar missing"
  ((NO_LOAD)) && { log "image $ref: built ($tar)"; return 0; }
  sum=$(sha256sum "$tar" | cut -c1-16)
  dig=$(ctr_digest "$ref")
  if [[ -n $dig && -f $LOADED/$name && $(<"$LOADED/$name") == "$sum $dig" ]]; then
    log "image $ref: loaded, unchanged ($dig)"; return 0
  fi
  log "image $ref: loading $tar"
  "$K8S/load-image.sh" import "$tar" >/dev/null
  dig=$(ctr_digest "$ref"); [[ -n $dig ]] || die "$ref not found in containerd after import"
  mkdir -p "$LOADED"; echo "$sum $dig" >"$LOADED/$name"
  log "image $ref: loaded ($dig)"
}

build_controller() {
  local tmp bin sum dig args=(-user 65532:65532) t
  [[ -d $CTL_BUILD_DIR/$CTL_PKG ]] || die "controller package $CTL_PKG not found under $CTL_BUILD_DIR (not written yet?)"
  tmp=$(mktemp -d); bin=$tmp/valkey-sentinel-ctl
  TMPDIRS+=("$tmp")
  t=$(date +%s)
  (cd "$CTL_BUILD_DIR" && CGO_ENABLED=0 go build -trimpath -o "$bin" "$CTL_PKG") || die "go build $CTL_PKG failed"
  log "controller: go build $CTL_PKG in $(( $(date +%s) - t ))s"
  ((NO_LOAD)) && { log "image $CTL_IMAGE: binary built, not loaded (NO_LOAD=1)"; return 0; }
  local r
  for r in $CTL_EXTRA_TAGS; do args+=(-tag "$r"); done
  sum=$({ sha256sum <"$bin"; echo "$CTL_IMAGE ${args[*]}"; sha256sum <"$K8S/load-image.sh"; } | sha256sum | cut -c1-16)
  dig=$(ctr_digest "$CTL_IMAGE")
  if [[ -n $dig && -f $LOADED/$CTL_STAMP && $(<"$LOADED/$CTL_STAMP") == "$sum $dig" ]]; then
    log "image $CTL_IMAGE: loaded, unchanged ($dig)"; return 0
  fi
  "$K8S/load-image.sh" binary "$CTL_IMAGE" "$bin" "${args[@]}" >/dev/null
  dig=$(ctr_digest "$CTL_IMAGE"); [[ -n $dig ]] || die "$CTL_IMAGE not found in containerd after import"
  mkdir -p "$LOADED"; echo "$sum $dig" >"$LOADED/$CTL_STAMP"
  log "image $CTL_IMAGE: loaded ($dig)"
}

# the versitygw image of the e2e S3 target (TestBackupRestoreIntoNewInstance): the binary hack/install-s3.sh
# builds (installed here when missing, about 1.5 minutes once), with busybox; stamped like the controller
build_s3() {
  local bin=$S3_DIR/bin/versitygw sum dig ver
  VALKEY_HA_S3_DIR=$S3_DIR "$ROOT/hack/install-s3.sh" || die "hack/install-s3.sh failed (the e2e S3 server image)"
  [[ -x $bin ]] || die "$bin missing after hack/install-s3.sh"
  ver=$(cat "$S3_DIR/VERSION" 2>/dev/null || echo unknown)
  ((NO_LOAD)) && { log "image $S3_IMAGE: versitygw $ver present, not loaded (NO_LOAD=1)"; return 0; }
  sum=$({ sha256sum <"$bin"; echo "$S3_IMAGE $ver"; sha256sum <"$K8S/load-image.sh"; } | sha256sum | cut -c1-16)
  dig=$(ctr_digest "$S3_IMAGE")
  if [[ -n $dig && -f $LOADED/s3 && $(<"$LOADED/s3") == "$sum $dig" ]]; then
    log "image $S3_IMAGE: loaded, unchanged ($dig)"; return 0
  fi
  "$K8S/load-image.sh" binary "$S3_IMAGE" "$bin" --busybox >/dev/null
  dig=$(ctr_digest "$S3_IMAGE"); [[ -n $dig ]] || die "$S3_IMAGE not found in containerd after import"
  mkdir -p "$LOADED"; echo "$sum $dig" >"$LOADED/s3"
  log "image $S3_IMAGE: loaded, versitygw $ver ($dig)"
}

cmd_alias() { # SRC DST...
  local src=$1 full d; shift
  need_containerd
  full=$(ctr_name "$src"); [[ -n $full ]] || die "alias: image $src is not loaded"
  for d in "$@"; do
    for i in $(running_nodes); do nctr "$i" images tag --force "$full" "$d" >/dev/null; done
    log "image $d -> $src"
  done
}

main() {
  local want=("$@") w t0
  [[ ${want[0]:-} == alias ]] && { [[ $# -ge 3 ]] || die "usage: images.sh alias SRC DST..."; cmd_alias "${want[@]:1}"; return; }
  ((${#want[@]})) || want=(valkey valkey80 redis controller s3)
  for w in "${want[@]}"; do [[ $w =~ ^(valkey|valkey80|redis|controller|s3)$ ]] || die "unknown image $w (valkey|valkey80|redis|controller|s3|alias)"; done
  need_containerd
  t0=$(date +%s)
  if [[ " ${want[*]} " =~ \ (valkey|valkey80|redis)\  ]]; then
    ensure_redis_packages
    ensure_valkey91_rootfs
    # env.sh read the 9.1 version (for the tags) before the root filesystem may have existed
    VALKEY91_VERSION=$(cut -d- -f1 "$VALKEY91_DIR/VERSION")
    [[ -n ${K8S_LOCAL_VALKEY91_IMAGES:-} ]] || VALKEY91_IMAGES="valkey/valkey:9.1 valkey/valkey:$VALKEY91_VERSION valkey/valkey:9.1-trixie valkey/valkey:$VALKEY91_VERSION-trixie valkey/valkey:9"
    build_engine_images
  fi
  for w in "${want[@]}"; do
    case $w in
      valkey) load_tarball valkey91 "$IMAGES/valkey91.tar" "$VALKEY91_IMAGE" ;;
      valkey80) load_tarball valkey "$IMAGES/valkey.tar" "$VALKEY_IMAGE" ;;
      redis) load_tarball redis "$IMAGES/redis.tar" "$REDIS_IMAGE" ;;
      controller) build_controller ;;
      s3) build_s3 ;;
    esac
  done
  log "images done in $(( $(date +%s) - t0 ))s"
}
main "$@"
