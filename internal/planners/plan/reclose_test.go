package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func TestCloseOnRelabel(t *testing.T) {
	n0, n1 := spec.Node{Index: 0, Pod: "vk-0-0"}, spec.Node{Index: 1, Pod: "vk-1-0"}
	st := func(label string, reachable bool, role valkey.Role) topology.NodeState {
		return topology.NodeState{Node: n0, RoleLabel: label, Reachable: reachable, Repl: valkey.Replication{Role: role}}
	}
	unlabel := topology.Action{Kind: topology.Label, Node: n0, Role: ""}
	toReplica := topology.Action{Kind: topology.Label, Node: n0, Role: contract.RoleReplica}
	elsewhere := topology.Plan{Primary: &n1, PrimaryConfirmed: true}
	for _, tc := range []struct {
		name string
		n    topology.NodeState
		a    topology.Action
		tp   topology.Plan
		want bool
	}{
		{"demoted primary relabelled replica", st(contract.RolePrimary, true, valkey.RoleReplica), toReplica, elsewhere, true},
		{"stale primary while another is confirmed", st(contract.RolePrimary, true, valkey.RolePrimary), unlabel, elsewhere, true},
		{"stale primary, no confirmed primary", st(contract.RolePrimary, true, valkey.RolePrimary), unlabel, topology.Plan{Primary: &n1}, false},
		{"the confirmed primary itself", st(contract.RolePrimary, true, valkey.RolePrimary), unlabel, topology.Plan{Primary: &n0, PrimaryConfirmed: true}, false},
		{"unreachable", st(contract.RolePrimary, false, ""), unlabel, elsewhere, false},
		{"was a replica", st(contract.RoleReplica, true, valkey.RoleReplica), unlabel, elsewhere, false},
		{"labelled primary", st("", true, valkey.RolePrimary), topology.Action{Kind: topology.Label, Node: n0, Role: contract.RolePrimary}, elsewhere, false},
	} {
		assert.Equal(t, tc.want, CloseOnRelabel(tc.n, tc.a, tc.tp), tc.name)
	}
}

func TestReclose(t *testing.T) {
	now := time.Unix(1000, 0)
	n0, n1 := spec.Node{Index: 0, Pod: "vk-0-0"}, spec.Node{Index: 1, Pod: "vk-1-0"}
	world := func(label string, reachable bool, role valkey.Role) World {
		return World{Nodes: []Node{
			{NodeState: topology.NodeState{Node: n0, RoleLabel: label, Reachable: reachable, Repl: valkey.Replication{Role: role}}},
			{NodeState: topology.NodeState{Node: n1, RoleLabel: contract.RolePrimary, Reachable: true, Repl: valkey.Replication{Role: valkey.RolePrimary}}},
		}}
	}
	confirmed := topology.Plan{Primary: &n1, PrimaryConfirmed: true}
	open := map[int]time.Time{0: now.Add(time.Second)}
	for _, tc := range []struct {
		name      string
		w         World
		tp        topology.Plan
		until     map[int]time.Time
		wantClose []int
		wantOpen  bool
	}{
		{"demoted replica in its window", world(contract.RoleReplica, true, valkey.RoleReplica), confirmed, open, []int{0}, true},
		{"stale primary while another is confirmed", world("", true, valkey.RolePrimary), confirmed, open, []int{0}, true},
		{"stale primary, no confirmed primary", world("", true, valkey.RolePrimary), topology.Plan{Primary: &n1}, open, nil, true},
		{"unreachable: kept, not closed", world(contract.RoleReplica, false, ""), confirmed, open, nil, true},
		{"window passed", world(contract.RoleReplica, true, valkey.RoleReplica), confirmed, map[int]time.Time{0: now}, nil, false},
		{"primary again (topology)", world(contract.RoleReplica, true, valkey.RolePrimary), topology.Plan{Primary: &n0, PrimaryConfirmed: true}, open, nil, false},
		{"labelled primary again", world(contract.RolePrimary, true, valkey.RoleReplica), confirmed, open, nil, false},
		{"no window", world(contract.RoleReplica, true, valkey.RoleReplica), confirmed, nil, nil, false},
	} {
		got, left := Reclose(tc.w, tc.tp, tc.until, now)
		assert.Equal(t, tc.wantClose, got, tc.name)
		assert.Equal(t, tc.wantOpen, len(left) > 0, tc.name+": window still open")
	}
}
