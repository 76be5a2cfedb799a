package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestPrimaryAnswered: a pass stops waiting for silent nodes only once the Sentinels agree on a primary of
// the instance and that node answered as master (issue 30: a paused old primary held the relabel).
func TestPrimaryAnswered(t *testing.T) {
	all := []bool{true, true, true}
	onlyPrimary := []bool{true, false, false}
	switched := func(w *World) { // the Sentinels name node 1, which reports master; node 0 is silent
		for i := range w.Sentinels {
			w.Sentinels[i].Monitor.Host = w.Instance.Nodes[1].Host
		}
		w.Nodes[1].Repl = valkey.Replication{Role: valkey.RolePrimary}
		w.Nodes[0].Reachable, w.Nodes[0].Repl = false, valkey.Replication{}
	}
	for _, tc := range []struct {
		name     string
		mutate   func(w *World)
		answered []bool
		want     bool
	}{
		{"steady, all answered", nil, all, true},
		{"steady, only the primary answered", nil, onlyPrimary, true},
		{"the primary is still silent", nil, []bool{false, true, true}, false},
		{"after a switch: the new primary answered, the old one silent", switched, []bool{false, true, true}, true},
		{"after a switch: the new primary silent", switched, []bool{false, false, true}, false},
		{"the Sentinels' primary reports replica (not promoted yet)", func(w *World) {
			w.Nodes[0].Repl = valkey.Replication{Role: valkey.RoleReplica}
		}, onlyPrimary, false},
		{"the Sentinels' primary answered with an error", func(w *World) { w.Nodes[0].Reachable, w.Nodes[0].Err = false, "i/o timeout" }, onlyPrimary, false},
		{"one Sentinel has not heard of the switch yet", func(w *World) {
			switched(w)
			w.Sentinels[2].Monitor.Host = w.Instance.Nodes[0].Host
		}, []bool{false, true, true}, true},
		{"only a minority has heard of the switch", func(w *World) {
			switched(w)
			w.Sentinels[1].Monitor.Host, w.Sentinels[2].Monitor.Host = w.Instance.Nodes[0].Host, w.Instance.Nodes[0].Host
		}, []bool{false, true, true}, false},
		{"a failover still reconfigures the replicas", func(w *World) {
			switched(w)
			w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
		}, []bool{false, true, true}, true},
		{"no Sentinel answered", func(w *World) {
			for i := range w.Sentinels {
				w.Sentinels[i].Err = "connection refused"
			}
		}, onlyPrimary, false},
		{"the Sentinels name an address that is not a node", func(w *World) {
			for i := range w.Sentinels {
				w.Sentinels[i].Monitor.Host = "elsewhere"
			}
		}, onlyPrimary, false},
		{"unmonitored", func(w *World) { w.SentinelInfo, w.Sentinels, w.Instance.FailoverMode = nil, nil, contract.FailoverNone }, onlyPrimary, false},
		{"answered shorter than the nodes (garbage)", nil, nil, false},
	} {
		w := steadyWorld()
		if tc.mutate != nil {
			tc.mutate(&w)
		}
		assert.Equal(t, tc.want, PrimaryAnswered(w, tc.answered), tc.name)
	}
}
