#!/usr/bin/env bash
# ctl-image.sh - print the controller image reference the charts use by default:
# <controller.image.registry>/<controller.image.repository>:<appVersion> of charts/valkey (the Sentinel chart's
# is the same; templates-tests TestHackImageIsTheChartDefault compares all three). hack/images.sh tags the local
# build with it, so the demo and the e2e suite run exactly the charts' defaults.
set -euo pipefail
CHART=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/charts/${1:-valkey}
awk '
  /^controller:/ { c = 1; next }
  c && /^[^ #]/ { c = 0 }
  c && /^  image:/ { i = 1; next }
  i && /^  [^ ]/ { i = 0 }
  i && $1 == "registry:" { gsub(/"/, "", $2); r = $2 }
  i && $1 == "repository:" { gsub(/"/, "", $2); p = $2 }
  i && $1 == "tag:" { gsub(/"/, "", $2); t = $2 }
  END { printf "%s%s%s", (r == "" ? "" : r "/"), p, (t == "" ? "" : ":" t) }
' "$CHART/values.yaml"
# an empty tag means the chart's appVersion
if ! awk '/^controller:/ { c = 1; next } c && /^[^ #]/ { c = 0 } c && /^  image:/ { i = 1; next } i && /^  [^ ]/ { i = 0 } i && $1 == "tag:" && $2 != "\"\"" { f = 1 } END { exit !f }' "$CHART/values.yaml"; then
  printf ':%s' "$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$CHART/Chart.yaml")"
fi
echo
