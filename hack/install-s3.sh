#!/usr/bin/env bash
# install-s3.sh - install the S3-compatible server the backup tests upload to (internal/testsupport/s3test): versitygw
# (an S3 gateway over a POSIX directory, Apache-2.0), built with `go install` from the Go module proxy into
# /var/cache/valkey-ha/s3/bin (VALKEY_HA_S3_DIR). Idempotent: a present binary of this version is kept. About
# 1.5 minutes on 2 cores (the first build downloads its modules). The tests find it there or through
# VALKEY_HA_S3_SERVER / PATH.
#
#   hack/install-s3.sh            # install
#   hack/install-s3.sh --check    # print whether it is missing, change nothing
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
DIR=${VALKEY_HA_S3_DIR:-/var/cache/valkey-ha/s3}
log() { printf '[install-s3] %s\n' "$*" >&2; }

if [[ -x $DIR/bin/versitygw && $(cat "$DIR/VERSION" 2>/dev/null) == "$VERSITYGW_VERSION" ]]; then
  log "versitygw $VERSITYGW_VERSION: present ($DIR/bin/versitygw)"
  exit 0
fi
if [[ ${1:-} == --check ]]; then log "missing: versitygw $VERSITYGW_VERSION in $DIR/bin"; exit 0; fi
command -v go >/dev/null || { log "ERROR: go not found on PATH"; exit 1; }
mkdir -p "$DIR/bin"
log "versitygw: go install github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION (about 1.5 minutes on 2 cores)"
(cd / && GOTOOLCHAIN=local GOFLAGS="" GOBIN="$DIR/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION")
echo "$VERSITYGW_VERSION" >"$DIR/VERSION"
log "versitygw: $("$DIR/bin/versitygw" --version 2>&1 | head -1)"
