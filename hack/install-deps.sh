#!/usr/bin/env bash
# install-deps.sh - install what the tests and the demo need on a Debian 12 machine, idempotently, from the
# Debian repositories and the Go module proxy only:
#   valkey-server / valkey-sentinel / valkey-tools 8.0 (bookworm-backports), redis-server / redis-sentinel /
#   redis-tools 7.0 (bookworm, the second engine), iptables (the fault-injection redirects of
#   internal/testsupport/valkeytest), valkey 9.1 (Debian sid on a trixie root filesystem in /var/cache/valkey-ha/engines, by
#   hack/engine-rootfs.sh; nothing of it is installed on the host), the helm CLI v3.22.0 (go install),
#   promtool (the binary only, from Debian's prometheus package), actionlint v1.7.12 (go install) with the
#   Debian package shellcheck for `make lint` of .github/workflows, and the S3-compatible server versitygw of the
#   backup tests (hack/install-s3.sh, go install).
# Package maintainer scripts are kept from starting services: tests start their own processes.
#
#   sudo hack/install-deps.sh            # packages + helm
#   hack/install-deps.sh --check         # print what is missing, change nothing
set -euo pipefail

HELM_VERSION=v3.22.0
ACTIONLINT_VERSION=v1.7.12
CHECK=0
[[ ${1:-} == --check ]] && CHECK=1

log() { printf '[install-deps] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# package -> pinned suite ("" = the default suite)
declare -A SUITE=(
  [valkey-server]=bookworm-backports [valkey-sentinel]=bookworm-backports [valkey-tools]=bookworm-backports
  [redis-server]="" [redis-sentinel]="" [redis-tools]=""
  [busybox-static]="" [iproute2]="" [iptables]="" [procps]="" [openssl]="" [ca-certificates]="" [curl]=""
  [shellcheck]=""
)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }

# debian_archive_uri: the archive URI of the machine's own bookworm sources, from apt's configuration
# shellcheck source=debian-archive.sh
. "$(dirname "${BASH_SOURCE[0]}")/debian-archive.sh"

ensure_backports() {
  apt-cache policy 2>/dev/null | grep -q " bookworm-backports/main" && return 0
  local uri
  uri=$(debian_archive_uri) || die "cannot find the Debian archive URI in apt's sources"
  log "apt: adding suite bookworm-backports"
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" >/etc/apt/sources.list.d/valkey-ha-backports.sources
  apt-get update -qq || die "apt-get update failed"
}

install_packages() {
  local missing=() p
  for p in "${!SUITE[@]}"; do installed "$p" || missing+=("$p"); done
  ((${#missing[@]})) || { log "packages: all present"; return 0; }
  if ((CHECK)); then log "missing packages: ${missing[*]}"; return 0; fi
  [[ $(id -u) == 0 ]] || die "must run as root to install: ${missing[*]}"
  apt-get update -qq || true
  ensure_backports
  local specs=()
  for p in "${missing[@]}"; do
    if [[ -n ${SUITE[$p]} ]]; then specs+=("$p/${SUITE[$p]}"); else specs+=("$p"); fi
  done
  local made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1
  fi
  log "apt: installing ${specs[*]}"
  local marker
  marker=$(mktemp)
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${specs[@]}"
  ((made_policy)) && rm -f /usr/sbin/policy-rc.d
  stop_started_services "$marker"
  rm -f "$marker"
  return 0
}

# Under a policy-rc.d that was already there (and allows starts), a package may still have started its
# default service on 6379/26379. Stop exactly those: the processes named by the packages' pid files written
# during this install. Never by name: test servers of other runs on this machine must not be touched.
stop_started_services() { # marker file created before apt-get install
  local f pid
  for f in /run/valkey/valkey-server.pid /run/valkey/valkey-sentinel.pid /run/redis/redis-server.pid \
           /run/sentinel/redis-sentinel.pid; do
    [[ -f $f && $f -nt $1 ]] || continue
    pid=$(<"$f")
    [[ $pid =~ ^[0-9]+$ ]] || continue
    log "stopping the service a package started (pid $pid from $f)"
    kill "$pid" 2>/dev/null || true
  done
}

install_helm() {
  local gobin
  gobin=$(go env GOPATH)/bin
  if command -v helm >/dev/null 2>&1 || [[ -x $gobin/helm ]]; then
    log "helm: present ($( (command -v helm || echo "$gobin/helm") | head -1))"
    return 0
  fi
  if ((CHECK)); then log "missing: helm CLI"; return 0; fi
  log "helm: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (a few minutes on 2 cores)"
  GOTOOLCHAIN=local go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# actionlint (`make lint`: the release workflow, which no CI here can run)
install_actionlint() {
  local gobin
  gobin=$(go env GOPATH)/bin
  if command -v actionlint >/dev/null 2>&1 || [[ -x $gobin/actionlint ]]; then
    log "actionlint: present"
    return 0
  fi
  if ((CHECK)); then log "missing: actionlint"; return 0; fi
  log "actionlint: go install github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
  (cd / && GOTOOLCHAIN=local GOFLAGS= go install "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION")
}

# promtool (the PrometheusRule unit tests of templates-tests): only the binary, taken out of Debian's
# prometheus package (2.42 in bookworm, about 19 MB to download), so no server, user or service is set up.
install_promtool() {
  if command -v promtool >/dev/null 2>&1; then
    log "promtool: present ($(command -v promtool))"
    return 0
  fi
  if ((CHECK)); then log "missing: promtool (from Debian's prometheus package)"; return 0; fi
  [[ $(id -u) == 0 ]] || die "must run as root to install promtool into /usr/local/bin"
  local tmp
  tmp=$(mktemp -d)
  chmod 0755 "$tmp" # apt-get download runs as _apt
  (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root prometheus) || { rm -rf "$tmp"; die "apt-get download prometheus failed"; }
  dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$tmp" ./usr/bin/promtool
  install -m 0755 "$tmp/usr/bin/promtool" /usr/local/bin/promtool
  rm -rf "$tmp"
  log "promtool: $(promtool --version 2>&1 | head -1)"
}

install_engines() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  if ((CHECK)); then "$here/engine-rootfs.sh" --check || true; return 0; fi
  "$here/engine-rootfs.sh" || die "valkey 9.1 root filesystem: hack/engine-rootfs.sh failed"
}

# versitygw, the S3-compatible server of the backup tests (internal/testsupport/s3test)
install_s3() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  if ((CHECK)); then "$here/install-s3.sh" --check; return 0; fi
  "$here/install-s3.sh" || die "versitygw: hack/install-s3.sh failed"
}

command -v go >/dev/null || die "go not found on PATH"
install_packages
install_engines
install_helm
install_promtool
install_actionlint
install_s3
log "done: valkey $(cat "${VALKEY_HA_ENGINES:-/var/cache/valkey-ha/engines}/valkey-9.1/VERSION" 2>/dev/null) (sid, default);" \
  "$(valkey-server --version 2>/dev/null | cut -d' ' -f1-3); $(redis-server --version 2>/dev/null | cut -d' ' -f1-3)"
