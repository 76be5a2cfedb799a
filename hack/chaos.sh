#!/usr/bin/env bash
# chaos.sh - the multi-node scenarios (e2e/chaos_test.go, build tags e2e + chaos; RELIABILITY.md) on the local
# cluster with three nodes. The cluster is brought to NODES=3 first and back to its previous node count at the
# end (KEEP_NODES=1 leaves three), so a shared machine's cluster keeps the shape other runs expect.
#
#   hack/chaos.sh                      # every TestChaos* (about 20 minutes)
#   hack/chaos.sh '^TestChaosKillPrimaryNode$'
# Results: one JSON line per scenario appended to $E2E_CHAOS_RESULTS (default ./chaos-results.jsonl).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
RUN=${1:-^TestChaos}
prev=$(cat "$STATE/node-count" 2>/dev/null || echo 1)
restore() {
  if [[ ${KEEP_NODES:-0} != 1 && $prev != 3 ]]; then
    say "back to $prev node(s)"
    NODES=$prev "$HACK/cluster.sh" up >/dev/null || NODES=$prev "$HACK/cluster.sh" up >/dev/null \
      || say "WARNING: could not go back to $prev node(s)"
  fi
}
trap restore EXIT
say "local cluster with 3 nodes (was $prev)"
NODES=3 "$HACK/cluster.sh" up >/dev/null || fail "NODES=3 hack/cluster.sh up failed"
export E2E_TAGS="e2e chaos" E2E_REQUIRE_NODES=3 E2E_TIMEOUT=${E2E_TIMEOUT:-90m}
export E2E_CHAOS_RESULTS=${E2E_CHAOS_RESULTS:-$ROOT/chaos-results.jsonl}
"$HACK/e2e.sh" -run "$RUN" -v
