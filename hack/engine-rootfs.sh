#!/usr/bin/env bash
# engine-rootfs.sh - unpack valkey 9.1 from Debian sid onto a Debian trixie root filesystem in a cache folder
# outside the repo, idempotently. This host (Debian 12, libc 2.36) cannot run sid's valkey (it needs libc >= 2.38)
# and its libc is never upgraded: the binaries run through the root filesystem's own dynamic loader instead,
#   $ROOT/lib64/ld-linux-x86-64.so.2 --library-path $ROOT/usr/lib/x86_64-linux-gnu $ROOT/usr/bin/valkey-server ...
# which is how internal/testsupport/valkeytest starts them, and the same root filesystem becomes the valkey/valkey:9.1 image
# (hack/images.sh). Nothing is installed on the host: packages are resolved and downloaded by apt with a private
# configuration and state under the cache folder (the host's apt sources, preferences and dpkg status are not
# touched) and unpacked with dpkg-deb -x; no maintainer script runs.
#
#   sudo hack/engine-rootfs.sh          # build or check  $VALKEY_HA_ENGINES/valkey-9.1/rootfs
#   hack/engine-rootfs.sh --check       # exit 1 with what is missing, change nothing
#   hack/engine-rootfs.sh --print-root  # print the root filesystem's path
#
# Result, in $VALKEY_HA_ENGINES/valkey-9.1 (default /var/cache/valkey-ha/engines/valkey-9.1):
#   rootfs/        merged-/usr tree: usr/bin/valkey-{server,sentinel,cli,check-rdb,check-aof,benchmark}, trixie's
#                  libc 2.41, libssl3, libjemalloc2, ... and util-linux's setpriv (for the image's entrypoint)
#   VERSION        the Debian version of sid's valkey packages (VALKEY91_DEB below), e.g. 9.1.2-1
#   packages.txt   every unpacked package as "name version suite"
# Pinned: VALKEY91_DEB. Debian's sid keeps only its newest upload; when sid has moved on, this script stops with
# the version sid has now and how to move the pin (an existing root filesystem keeps working offline).
set -euo pipefail
umask 022 # the root filesystem is read and run by test processes under other uids (valkeytest.Redirect)

VALKEY91_DEB=${VALKEY91_DEB:-9.1.2-1}
ENGINES=${VALKEY_HA_ENGINES:-/var/cache/valkey-ha/engines}
DIR=$ENGINES/valkey-9.1
ROOT=$DIR/rootfs
# sid's valkey, and the libraries it links from trixie (apt resolves them; see resolve())
SID_PKGS=(valkey-server valkey-sentinel valkey-tools)
# valkey-tools depends on "systemd | systemd-standalone-tmpfiles" and "... | systemd-standalone-sysusers": name
# the small alternatives so apt does not pick systemd; they are downloaded but not unpacked
SKIP_PKGS=(systemd-standalone-tmpfiles systemd-standalone-sysusers)
# setpriv for the image's entrypoint, which drops root to uid 999 like the official image's: only that binary of
# trixie's util-linux and the one library it links (downloaded without their dependencies)
EXTRA_PKGS=(util-linux libcap-ng0)

log() { printf '[engine-rootfs] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

case ${1:-} in
  --print-root) echo "$ROOT"; exit 0 ;;
  --check | "") ;;
  *) die "unknown argument $1 (--check | --print-root)" ;;
esac

loader() { "$ROOT/lib64/ld-linux-x86-64.so.2" --library-path "$ROOT/usr/lib/x86_64-linux-gnu" "$@"; }

# ready: the root filesystem holds the pinned version and its server answers --version
ready() {
  [[ -f $DIR/VERSION && $(<"$DIR/VERSION") == "$VALKEY91_DEB" ]] || return 1
  local v
  v=$(loader "$ROOT/usr/bin/valkey-server" --version 2>/dev/null) || return 1
  [[ $v == "Valkey server v=${VALKEY91_DEB%%-*} "* ]] || return 1
  loader "$ROOT/usr/bin/valkey-cli" --version >/dev/null 2>&1
}

if ready; then
  log "valkey $(<"$DIR/VERSION") (sid) on trixie: present in $ROOT"
  exit 0
fi
if [[ ${1:-} == --check ]]; then
  log "missing: valkey $VALKEY91_DEB root filesystem in $ROOT (run sudo hack/engine-rootfs.sh)"
  exit 1
fi
[[ $(id -u) == 0 ]] || die "must run as root to write $ENGINES"

# shellcheck source=debian-archive.sh
. "$(dirname "${BASH_SOURCE[0]}")/debian-archive.sh"

APTDIR=$ENGINES/apt
export APT_CONFIG=$APTDIR/apt.conf
private_apt() {
  local uri
  uri=$(debian_archive_uri) || die "cannot find the Debian archive URI in apt's sources"
  mkdir -p "$APTDIR"/etc/apt/{sources.list.d,preferences.d,apt.conf.d} "$APTDIR"/state/lists/partial \
    "$APTDIR"/cache/archives/partial
  : >"$APTDIR/status"
  printf 'Types: deb\nURIs: %s\nSuites: trixie sid\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" >"$APTDIR/etc/apt/sources.list.d/engines.sources"
  # everything from trixie unless asked for by suite: only the valkey packages come from sid
  printf 'Package: *\nPin: release n=sid\nPin-Priority: 100\n' >"$APTDIR/etc/apt/preferences.d/sid"
  # sid's Release file is short-lived (Valid-Until a week): a mirror snapshot older than that must still load
  cat >"$APT_CONFIG" <<EOF
Dir::Etc "$APTDIR/etc/apt";
Dir::State "$APTDIR/state";
Dir::State::status "$APTDIR/status";
Dir::Cache "$APTDIR/cache";
APT::Architecture "amd64";
APT::Install-Recommends "false";
Acquire::Check-Valid-Until "false";
APT::Sandbox::User "root";
EOF
  log "apt (private, in $APTDIR): update trixie + sid"
  apt-get update -qq >&2 || die "apt-get update (private configuration $APT_CONFIG) failed"
}

# resolve: the package closure of sid's valkey on an empty system, as "name version" lines
resolve() {
  local specs=() p have
  have=$(apt-cache madison valkey-server 2>/dev/null | awk -F'|' '$3 ~ /sid/ {gsub(/ /, "", $2); print $2; exit}')
  if [[ $have != "$VALKEY91_DEB" ]]; then
    die "Debian sid has valkey-server ${have:-(none)}, the pin is $VALKEY91_DEB. Check the new version (a 9.1.x is
    a drop-in; anything else needs the tests run on it), then set VALKEY91_DEB=<version> for one run or move the pin
    in hack/engine-rootfs.sh (and the version in README.md, hack/README.md, docs/contract.md)."
  fi
  for p in "${SID_PKGS[@]}"; do specs+=("$p=$VALKEY91_DEB"); done
  apt-get install -s -qq "${specs[@]}" "${SKIP_PKGS[@]}" 2>/dev/null |
    awk '$1 == "Inst" { v = $3; if (v ~ /^\[/) v = $4; gsub(/[()]/, "", v); print $2, v }'
  for p in "${EXTRA_PKGS[@]}"; do
    apt-cache policy "$p" 2>/dev/null | awk -v p="$p" '$1 == "Candidate:" {print p, $2}'
  done
}

build() {
  private_apt
  local list name ver tmp
  list=$(resolve)
  [[ -n $list ]] || die "apt could not resolve valkey $VALKEY91_DEB (see: APT_CONFIG=$APT_CONFIG apt-get install -s valkey-server=$VALKEY91_DEB)"
  log "apt: downloading $(wc -l <<<"$list") packages"
  (cd "$APTDIR/cache/archives" && apt-get download -qq $(awk '{print $1 "=" $2}' <<<"$list") >&2) \
    || die "apt-get download failed (private configuration $APT_CONFIG)"
  tmp=$(mktemp -d "$ENGINES/.rootfs.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/root/usr/lib64" "$tmp/root/usr/bin" "$tmp/root/usr/sbin" "$tmp/util"
  # merged /usr, as trixie's base-files/usrmerge lay it out
  ln -s usr/lib "$tmp/root/lib"; ln -s usr/lib64 "$tmp/root/lib64"
  ln -s usr/bin "$tmp/root/bin"; ln -s usr/sbin "$tmp/root/sbin"
  : >"$tmp/packages.txt"
  while read -r name ver; do
    local deb
    deb=$(ls "$APTDIR"/cache/archives/"${name}"_*.deb 2>/dev/null | while read -r f; do
      [[ $(dpkg-deb -f "$f" Version) == "$ver" ]] && echo "$f"; done | head -1)
    [[ -n $deb ]] || die "downloaded package $name $ver not found in $APTDIR/cache/archives"
    local suite=trixie
    [[ " ${SID_PKGS[*]} " == *" $name "* ]] && suite=sid
    echo "$name $ver $suite" >>"$tmp/packages.txt"
    case " ${SKIP_PKGS[*]} " in *" $name "*) continue ;; esac
    if [[ $name == util-linux ]]; then
      dpkg-deb -x "$deb" "$tmp/util"
      install -m 0755 "$tmp/util/usr/bin/setpriv" "$tmp/root/usr/bin/setpriv"
      continue
    fi
    dpkg-deb -x "$deb" "$tmp/root"
  done <<<"$list"
  rm -rf "$tmp/root/usr/share/doc" "$tmp/root/usr/share/man" "$tmp/root/usr/share/lintian" \
    "$tmp/root/usr/share/locale" "$tmp/root/usr/share/info"
  echo "$VALKEY91_DEB" >"$tmp/VERSION"
  mkdir -p "$DIR"
  rm -rf "$DIR/rootfs.old"
  [[ -d $ROOT ]] && mv "$ROOT" "$DIR/rootfs.old"
  mv "$tmp/root" "$ROOT"
  mv "$tmp/packages.txt" "$DIR/packages.txt"
  mv "$tmp/VERSION" "$DIR/VERSION"
  rm -rf "$DIR/rootfs.old" "$tmp"
  trap - EXIT
}

t0=$(date +%s)
build
ready || die "the unpacked valkey does not start through $ROOT/lib64/ld-linux-x86-64.so.2 (see $DIR/packages.txt)"
log "valkey $(<"$DIR/VERSION") (sid) on trixie: built in $ROOT in $(( $(date +%s) - t0 ))s ($(du -sh "$ROOT" | cut -f1))"
