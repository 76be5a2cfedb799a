package plan

import (
	"slices"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// RecloseWindow is how long after the primary label left a node its application connections are closed
// again at every pass: the primary Service's routing lags the label (EndpointSlice, then kube-proxy: 1-2 s
// measured on the local cluster, BENCHMARKS.md "Clients without Sentinel"), and a client that reconnected
// meanwhile landed on the old node again. Longer would also keep closing the readers the replica Service sends there.
const RecloseWindow = 3 * time.Second

// Reclose returns the node indexes whose application connections are closed again this pass, and the
// windows still open after it (nil when none): a node in an open window (until after now) that is reachable,
// not labelled primary and not the topology's primary, and that reports role replica, or role master while
// another node is the confirmed primary (CloseOnRelabel's rule). A node that became the primary again, or
// whose window passed, leaves the memory. The until map is not modified.
func Reclose(w World, tp topology.Plan, until map[int]time.Time, now time.Time) (closeNow []int, open map[int]time.Time) {
	for i, t := range until {
		if !now.Before(t) || (tp.Primary != nil && tp.Primary.Index == i) {
			continue
		}
		n := w.Node(i).NodeState
		if n.RoleLabel == contract.RolePrimary {
			continue
		}
		if open == nil {
			open = map[int]time.Time{}
		}
		open[i] = t
		if !n.Reachable {
			continue
		}
		if n.Repl.Role == valkey.RoleReplica || (n.Repl.Role == valkey.RolePrimary && tp.Primary != nil && tp.PrimaryConfirmed) {
			closeNow = append(closeNow, i)
		}
	}
	slices.Sort(closeNow)
	return closeNow, open
}

// CloseOnRelabel reports whether the label change a, planned in tp, takes the primary label off a node whose
// application connections must then be closed: the node was labelled primary and is reachable, and it either
// reports role replica (it was demoted), or still reports role master while tp's confirmed primary is another
// node (a stale primary that Sentinel demotes at its next INFO, up to about a second later: every write it
// acknowledges meanwhile is lost, so its clients are better sent to the real primary at once).
func CloseOnRelabel(n topology.NodeState, a topology.Action, tp topology.Plan) bool {
	if a.Kind != topology.Label || a.Role == contract.RolePrimary || n.RoleLabel != contract.RolePrimary || !n.Reachable {
		return false
	}
	switch n.Repl.Role {
	case valkey.RoleReplica:
		return true
	case valkey.RolePrimary:
		return tp.Primary != nil && tp.PrimaryConfirmed && tp.Primary.Index != n.Node.Index
	}
	return false
}

// relabelCloses returns the node indexes of tp's label changes that CloseOnRelabel names, in label order.
func relabelCloses(w World, d Decision) []int {
	var out []int
	for _, a := range d.Labels() {
		if CloseOnRelabel(w.Node(a.Node.Index).NodeState, a, d.Topology) {
			out = append(out, a.Node.Index)
		}
	}
	return out
}

// rememberReclose opens a reclose window of RecloseWindow for each node whose connections the applier closed
// when it took the primary label off (closed: node index -> when). The map is copied, never changed in place.
func rememberReclose(m *Memory, closed map[int]time.Time) {
	if len(closed) == 0 {
		return
	}
	next := make(map[int]time.Time, len(m.Reclose)+len(closed))
	for i, t := range m.Reclose {
		next[i] = t
	}
	for i, t := range closed {
		next[i] = t.Add(RecloseWindow)
	}
	m.Reclose = next
}
