#!/usr/bin/env bash
# e2e.sh - run the e2e suite (e2e/, build tag e2e) against a real cluster.
#   1. cluster: the one KUBECONFIG reaches; if none, the local one (hack/cluster.sh up)
#   2. images: hack/images.sh into the local cluster (the controller image is skipped, with a warning,
#      while cmd/valkey-sentinel-ctl does not exist yet)
#   3. go test -tags e2e -count=1 -timeout 55m ./e2e/... [extra go test args]
#
#   hack/e2e.sh                         # everything
#   hack/e2e.sh -run TestClusterReachable -v
# Knobs: E2E_KEEP=1 / E2E_KEEP_FAILED=1 (keep test namespaces), E2E_PSS, E2E_SKIP_IMAGES=1, E2E_TAGS (build tags,
# default e2e; make chaos-cluster uses "e2e chaos"),
# E2E_TIMEOUT (go test -timeout, default 55m), E2E_PARALLEL=1 (run the deployment tests in parallel; the
# default runs one deployment at a time: on 2 cores with requests = limits, more leave pods Pending).
# make e2e: the suite without the longTest tests (make e2e-long runs those, E2E_LONG=1), measured on the 2-core
# local cluster of 2026-12-04; the whole suite took about 63 minutes there (its 55-minute timeout ran out).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
T0=$(date +%s)

use_cluster
if [[ ${E2E_SKIP_IMAGES:-0} == 1 ]]; then
  say "images: skipped (E2E_SKIP_IMAGES=1)"
elif ((LOCAL_CLUSTER)); then
  if [[ -d $ROOT/cmd/valkey-sentinel-ctl ]]; then
    as_root "$HACK/images.sh" || fail "hack/images.sh failed"
  else
    say "WARNING: cmd/valkey-sentinel-ctl does not exist yet: loading only the server images"
    as_root "$HACK/images.sh" valkey redis || fail "hack/images.sh failed"
  fi
else
  say "not the local cluster: images are not built here"
fi
export KUBECONFIG=${KUBECONFIG:-$HOME/.kube/config}
# the node faults of the multi-node tests (hack/cluster.sh node) act on the local cluster only
if ((LOCAL_CLUSTER)); then export E2E_LOCAL_CLUSTER=1; fi

# CI owns the machine: namespaces an earlier, interrupted run left behind (the e2e label) would hold CPU that the
# tests wait for (requests = limits on 2 cores) until their deadlines pass; delete them first. Outside CI another
# run may be using them, so they are only listed.
leftover=$(kubectl get ns -l app.kubernetes.io/part-of=valkey-ha-e2e -o name 2>/dev/null || true)
if [[ -n $leftover ]]; then
  if [[ ${CI:-} == true ]]; then
    say "CI: deleting e2e namespaces left by an earlier run: $(echo $leftover)"
    # shellcheck disable=SC2086
    kubectl delete --wait=true --timeout=5m $leftover || fail "could not delete leftover e2e namespaces"
  else
    say "note: e2e namespaces exist (another run, or E2E_KEEP): $(echo $leftover)"
  fi
fi

say "go test -tags ${E2E_TAGS:-e2e} -count=1 -timeout ${E2E_TIMEOUT:-55m} ./e2e/... $*"
cd "$ROOT"
rc=0
go test -tags "${E2E_TAGS:-e2e}" -count=1 -timeout "${E2E_TIMEOUT:-55m}" ./e2e/... "$@" || rc=$?
say "e2e finished in $(( $(date +%s) - T0 ))s (exit $rc)"
exit "$rc"
