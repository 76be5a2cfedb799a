package topology

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
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
			[]string{"label:vk-1-0=replica", "label:vk-2-0=replica", "label:vk-0-0=primary"}, 0},
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
