package topology

import (
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

var inst = spec.Instance{Name: "vk", Port: 6379, Nodes: []spec.Node{
	{Index: 0, Pod: "vk-0-0", Host: "vk-0-0.vk-0"},
	{Index: 1, Pod: "vk-1-0", Host: "vk-1-0.vk-1"},
	{Index: 2, Pod: "vk-2-0", Host: "vk-2-0.vk-2"},
}}

func primary(i int, label string, replicas int) NodeState {
	r := valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 100}
	for k := 0; k < replicas; k++ {
		r.Replicas = append(r.Replicas, valkey.ConnectedReplica{})
	}
	return NodeState{Node: inst.Nodes[i], PodExists: true, PodReady: true, RoleLabel: label, Reachable: true, Repl: r}
}

func replica(i int, label string, of int, offset int64) NodeState {
	return NodeState{Node: inst.Nodes[i], PodExists: true, PodReady: true, RoleLabel: label, Reachable: true,
		Repl: valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: inst.Nodes[of].Host, PrimaryPort: 6379, LinkUp: true, ReplicaReplOffset: offset}}
}

func down(i int, label string) NodeState {
	return NodeState{Node: inst.Nodes[i], PodExists: true, RoleLabel: label, Err: "connection refused"}
}

func sentinelNames(i int) SentinelView {
	return SentinelView{Monitored: true, Asked: 3, Answered: 3, Known: true, PrimaryHost: inst.Nodes[i].Host, PrimaryPort: 6379}
}

func kinds(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		s := string(a.Kind) + ":" + a.Node.Pod
		if a.Kind == Label {
			s += "=" + a.Role
		}
		if a.Kind == Repoint {
			s += "->" + a.Target.Pod
		}
		out = append(out, s)
	}
	return out
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name    string
		obs     Observation
		want    []string
		primary int // -1 = none
	}{
		{"steady state: nothing to do",
			Observation{Nodes: []NodeState{primary(0, "primary", 2), replica(1, "replica", 0, 100), replica(2, "replica", 0, 100)}, Sentinel: sentinelNames(0)},
			nil, 0},
		{"fresh pods get labels",
			Observation{Nodes: []NodeState{primary(0, "", 2), replica(1, "", 0, 100), replica(2, "", 0, 100)}, Sentinel: sentinelNames(0)},
			[]string{"label:vk-0-0=primary", "label:vk-1-0=replica", "label:vk-2-0=replica"}, 0},
		{"TestCaseS05 orphan primary is repointed to Sentinel's primary",
			Observation{Nodes: []NodeState{primary(0, "primary", 0), primary(1, "replica", 1), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(1)},
			[]string{"repoint:vk-0-0->vk-1-0", "label:vk-0-0=", "label:vk-1-0=primary"}, 1},
		{"failover in flight: do nothing topological, never label a new primary",
			Observation{Nodes: []NodeState{down(0, "primary"), primary(1, "replica", 0), replica(2, "replica", 0, 90)},
				Sentinel: SentinelView{Monitored: true, Known: true, PrimaryHost: inst.Nodes[0].Host, PrimaryPort: 6379, FailoverInProgress: true, PrimaryDown: true}},
			[]string{"label:vk-0-0=", "label:vk-1-0="}, 0},
		{"Sentinels disagree (a failover's new primary reaches them one by one): no repoint of the promoted node",
			Observation{Nodes: []NodeState{primary(0, "primary", 0), primary(1, "replica", 0)},
				Sentinel: SentinelView{Monitored: true, Asked: 3, Answered: 3, Known: true, PrimaryHost: inst.Nodes[0].Host, PrimaryPort: 6379, Disagree: true}},
			[]string{"label:vk-1-0="}, 0},
		{"never target Sentinel's primary even when it claims fewer replicas",
			Observation{Nodes: []NodeState{primary(0, "replica", 0), primary(1, "primary", 2), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(0)},
			[]string{"repoint:vk-1-0->vk-0-0", "label:vk-1-0=", "label:vk-0-0=primary"}, 0},
		{"TestCaseS21 after failover the label moves: removal before addition",
			Observation{Nodes: []NodeState{replica(0, "primary", 1, 90), primary(1, "replica", 2), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(1)},
			[]string{"label:vk-0-0=replica", "label:vk-1-0=primary"}, 1},
		{"after a planned handoff took the old primary's label off: the primary label before the replica labels (issue 30)",
			Observation{Nodes: []NodeState{replica(0, "", 1, 90), primary(1, "replica", 2), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(1)},
			[]string{"label:vk-1-0=primary", "label:vk-0-0=replica"}, 1},
		{"Sentinel's primary not yet confirmed: held, no primary label",
			Observation{Nodes: []NodeState{replica(0, "primary", 1, 90), replica(1, "", 0, 100), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(1)},
			[]string{"label:vk-0-0=replica", "label:vk-1-0=replica"}, 1},
		{"monitored replicas following another node are Sentinel's job",
			Observation{Nodes: []NodeState{primary(0, "primary", 1), replica(1, "replica", 0, 100), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(0)},
			nil, 0},
		{"unmonitored: stray replica is repointed",
			Observation{Nodes: []NodeState{primary(0, "primary", 1), replica(1, "replica", 0, 100), replica(2, "replica", 1, 100)}},
			[]string{"repoint:vk-2-0->vk-0-0"}, 0},
		{"unmonitored: split brain keeps the primary with more replicas",
			Observation{Nodes: []NodeState{primary(0, "primary", 0), primary(1, "", 1), replica(2, "replica", 1, 100)}},
			[]string{"repoint:vk-0-0->vk-1-0", "label:vk-0-0=", "label:vk-1-0=primary"}, 1},
		{"TestCaseS07 unmonitored, no primary for long enough: promote highest offset",
			Observation{Nodes: []NodeState{down(0, "primary"), replica(1, "replica", 0, 50), replica(2, "replica", 0, 80)}, NoPrimaryFor: 11 * time.Second},
			[]string{"promote:vk-2-0", "label:vk-0-0="}, -1},
		{"unmonitored, no primary briefly: wait",
			Observation{Nodes: []NodeState{down(0, "primary"), replica(1, "replica", 0, 50), replica(2, "replica", 0, 80)}, NoPrimaryFor: 3 * time.Second},
			[]string{"label:vk-0-0="}, -1},
		{"unmonitored, minority reachable: never promote",
			Observation{Nodes: []NodeState{down(0, ""), down(1, ""), replica(2, "replica", 0, 80)}, NoPrimaryFor: time.Minute},
			nil, -1},
		{"monitored, no primary: never promote (the election is Sentinel's)",
			Observation{Nodes: []NodeState{down(0, ""), replica(1, "replica", 0, 50), replica(2, "replica", 0, 80)},
				Sentinel: SentinelView{Monitored: true, Answered: 3}, NoPrimaryFor: time.Minute},
			nil, -1},
		{"missing pods are not labelled",
			Observation{Nodes: []NodeState{primary(0, "primary", 1), replica(1, "replica", 0, 100), {Node: inst.Nodes[2]}}, Sentinel: sentinelNames(0)},
			nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Instance = inst
			p := Build(tt.obs)
			assert.Equal(t, tt.want, kinds(p), "held: %s", p.Held)
			if tt.primary < 0 {
				assert.Nil(t, p.Primary)
			} else if assert.NotNil(t, p.Primary) {
				assert.Equal(t, tt.primary, p.Primary.Index)
			}
			disruptive := 0
			for _, a := range p.Actions {
				if a.Disruptive() {
					disruptive++
				}
				if a.Kind == Repoint && p.Primary != nil {
					assert.NotEqual(t, p.Primary.Index, a.Node.Index, "never repoint the agreed primary")
				}
			}
			assert.LessOrEqual(t, disruptive, 1, "one disruptive step per pass")
		})
	}
}

func terminating(n NodeState) NodeState { n.Terminating = true; return n }

// TestBuildPrimaryHandingOff (issue 14): a primary whose pod is terminating is handing off in its preStop
// hook: no repair runs against it or around it, its primary label goes at once, and the label follows the
// handoff as soon as Sentinel names the promoted replica and it reports master.
func TestBuildPrimaryHandingOff(t *testing.T) {
	tests := []struct {
		name       string
		obs        Observation
		want       []string
		handingOff int // -1 = none
		held       string
	}{
		{"monitored: the terminating primary loses its label, nothing else moves",
			Observation{Nodes: []NodeState{terminating(primary(0, "primary", 2)), replica(1, "replica", 0, 100), replica(2, "replica", 0, 100)}, Sentinel: sentinelNames(0)},
			[]string{"label:vk-0-0="}, 0, "terminating"},
		{"monitored: an orphan primary beside it is not repointed while the hook runs",
			Observation{Nodes: []NodeState{terminating(primary(0, "", 1)), primary(1, "replica", 0), replica(2, "replica", 0, 100)}, Sentinel: sentinelNames(0)},
			[]string{"label:vk-1-0="}, 0, "terminating"},
		{"monitored: Sentinel names it and it no longer answers (the server is stopping)",
			Observation{Nodes: []NodeState{terminating(down(0, "")), replica(1, "replica", 0, 100), replica(2, "replica", 0, 100)}, Sentinel: sentinelNames(0)},
			nil, 0, "terminating"},
		{"monitored: handed off: the promoted replica gets the label in the same pass, before the old primary's replica label",
			Observation{Nodes: []NodeState{terminating(replica(0, "", 1, 100)), primary(1, "replica", 2), replica(2, "replica", 1, 100)}, Sentinel: sentinelNames(1)},
			[]string{"label:vk-1-0=primary", "label:vk-0-0=replica"}, -1, ""},
		{"monitored: a terminating replica changes nothing",
			Observation{Nodes: []NodeState{primary(0, "primary", 2), terminating(replica(1, "replica", 0, 100)), replica(2, "replica", 0, 100)}, Sentinel: sentinelNames(0)},
			nil, -1, ""},
		{"unmonitored: no promotion while the primary hands off (FAILOVER TO), even after PromoteAfter",
			Observation{Nodes: []NodeState{terminating(primary(0, "primary", 2)), replica(1, "replica", 0, 50), replica(2, "replica", 1, 100)}, NoPrimaryFor: time.Minute},
			[]string{"label:vk-0-0="}, 0, "terminating"},
		{"unmonitored: a terminating replica is never promoted",
			Observation{Nodes: []NodeState{down(0, "primary"), terminating(replica(1, "replica", 0, 90)), replica(2, "replica", 0, 50)}, NoPrimaryFor: time.Minute},
			[]string{"promote:vk-2-0", "label:vk-0-0="}, -1, ""},
		{"unmonitored: a terminating replica that follows another node is not repointed",
			Observation{Nodes: []NodeState{primary(0, "primary", 1), replica(1, "replica", 0, 100), terminating(replica(2, "replica", 1, 100))}},
			nil, -1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Instance = inst
			p := Build(tt.obs)
			assert.Equal(t, tt.want, kinds(p), "held: %s", p.Held)
			if tt.handingOff < 0 {
				assert.Nil(t, p.HandingOff)
			} else if assert.NotNil(t, p.HandingOff) {
				assert.Equal(t, tt.handingOff, p.HandingOff.Index)
			}
			assert.Contains(t, p.Held, tt.held)
			for _, a := range p.Actions {
				if a.Kind == Label && a.Role == contract.RolePrimary {
					for _, n := range tt.obs.Nodes {
						assert.False(t, n.Terminating && n.Node.Index == a.Node.Index, "a terminating pod is never labelled primary")
					}
				}
			}
		})
	}
}

// TestSecurityForeignPrimaryIsNeverFollowed: the Sentinels name an address that is not a node (issue 25: a
// forged hello on a shared quorum). No repair runs (an orphan primary is not repointed), the primary label
// stays on the node that reports master with connected replicas, and a node that already follows the
// foreign address is no replica of the instance. Before the fix the primary label was removed from the real
// primary (its Service lost its endpoint).
func TestSecurityForeignPrimaryIsNeverFollowed(t *testing.T) {
	sv := SentinelView{Monitored: true, Asked: 3, Answered: 3, Known: true, PrimaryHost: "attacker.tenant-a.svc", PrimaryPort: 6379}
	p := Build(Observation{Instance: inst, Sentinel: sv, Nodes: []NodeState{
		primary(0, contract.RolePrimary, 1), replica(1, contract.RoleReplica, 0, 90), primary(2, "", 0)}})
	assert.Equal(t, "attacker.tenant-a.svc:6379", p.Foreign)
	assert.Contains(t, p.Held, "not a node of this instance")
	assert.NotNil(t, p.Primary)
	assert.Equal(t, 0, p.Primary.Index)
	assert.Empty(t, kinds(p), "no repair, no label change")

	// a replica that already follows the foreign address loses its replica label
	hijacked := replica(1, contract.RoleReplica, 0, 90)
	hijacked.Repl.PrimaryHost = "attacker.tenant-a.svc"
	p = Build(Observation{Instance: inst, Sentinel: sv, Nodes: []NodeState{primary(0, contract.RolePrimary, 1), hijacked, replica(2, contract.RoleReplica, 0, 90)}})
	assert.Equal(t, []string{"label:vk-1-0="}, kinds(p))

	// without a primary that has connected replicas, no node is labelled primary and nothing is repaired
	p = Build(Observation{Instance: inst, Sentinel: sv, Nodes: []NodeState{
		primary(0, contract.RolePrimary, 0), down(1, ""), down(2, "")}})
	assert.Nil(t, p.Primary)
	assert.Equal(t, []string{"label:vk-0-0="}, kinds(p))
}
