#!/usr/bin/env bash
# pin-digest.sh - set controller.image.digest in a chart's values.yaml to DIGEST, in place, keeping every
# comment and every other line as it is (the release workflow's charts job; no yq needed on the runner).
#
#   hack/pin-digest.sh charts/valkey/values.yaml sha256:<64 hex>
#
# Fails, changing nothing, when DIGEST is not sha256:<64 hex> or the file has not exactly one
# `    digest:` line under the top-level `controller:` → `  image:` block.
set -euo pipefail
file=${1:?usage: pin-digest.sh VALUES_FILE sha256:<64 hex>}
digest=${2:?usage: pin-digest.sh VALUES_FILE sha256:<64 hex>}
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || { echo "pin-digest: digest $digest is not sha256:<64 hex>" >&2; exit 1; }
tmp=$(mktemp "$file.XXXXXX")
trap 'rm -f "$tmp"' EXIT
awk -v d="$digest" '
  /^[^ #]/             { ctl = ($0 ~ /^controller:/); img = 0 }
  ctl && /^  [^ #]/    { img = ($0 ~ /^  image:/) }
  ctl && img && /^    digest:/ { print "    digest: \"" d "\""; n++; next }
  { print }
  END { if (n != 1) { print "pin-digest: " n " controller.image.digest lines in " FILENAME ", want 1" > "/dev/stderr"; exit 1 } }
' "$file" >"$tmp"
cat "$tmp" >"$file"
