package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// switchedWorld is steadyWorld after a plain SENTINEL FAILOVER from node 0 to node 1 that Sentinel has not
// finished cleaning up: every Sentinel names node 1 under config epoch 1, node 1 reports role master with node
// 2 as its replica, node 0 still reports role master. The memory names node 0 under epoch 0 (the pass before
// the switch).
func switchedWorld() (World, Memory) {
	w, m := steadyWorld(), settledMemory()
	in := w.Instance
	w.Nodes[1].Repl = valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 120, Replicas: []valkey.ConnectedReplica{{}}}
	w.Nodes[0].Repl = valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 130}
	w.Nodes[2].Repl.PrimaryHost = in.Nodes[1].Host
	for i := range w.Sentinels {
		w.Sentinels[i].Monitor.Host, w.Sentinels[i].Monitor.ConfigEpoch = in.Nodes[1].Host, 1
	}
	m.Named = Named{Host: in.Nodes[0].Host, Port: 6379}
	return w, m
}

// stale makes Sentinel i one that has not heard of the switch: it names node 0 under epoch 0.
func staleSentinel(w *World, i int) {
	w.Sentinels[i].Monitor.Host, w.Sentinels[i].Monitor.ConfigEpoch = w.Instance.Nodes[0].Host, 0
}

// TestFollowSwitch is the step after a switch (planFollowSwitch) and its policy (switchSettled), through the
// instance planner: one row per case, what is planned and what the policy leaves of it.
func TestFollowSwitch(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(w *World, m *Memory)
		step    string // the Repoint's node ("" = none)
		refused string // substring of Decision.Refused ("" = empty)
	}{
		{name: "every Sentinel switched: the old primary is demoted (the orphan repair)", step: "vk-0-0"},
		{name: "one Sentinel has not heard of the switch: the old primary is demoted all the same",
			mutate: func(w *World, _ *Memory) { staleSentinel(w, 2) }, step: "vk-0-0"},
		{name: "a Sentinel names the old primary under the new epoch: refused",
			mutate:  func(w *World, _ *Memory) { staleSentinel(w, 2); w.Sentinels[2].Monitor.ConfigEpoch = 1 },
			refused: "neither the switch to vk-1-0 nor the former primary"},
		{name: "a Sentinel names a third node: refused",
			mutate: func(w *World, _ *Memory) {
				w.Sentinels[2].Monitor.Host = w.Instance.Nodes[2].Host
				w.Sentinels[2].Monitor.ConfigEpoch = 2
			},
			refused: "neither the switch"},
		{name: "only one of three names the new primary (the others have not heard): refused",
			mutate: func(w *World, _ *Memory) { staleSentinel(w, 1); staleSentinel(w, 2) }},
		{name: "the leader's failover is in flight: refused, never acted on",
			mutate: func(w *World, _ *Memory) {
				staleSentinel(w, 0)
				w.Sentinels[0].Monitor.ConfigEpoch = 1
				w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
			}, refused: "a Sentinel reports a failover in flight"},
		{name: "a Sentinel flags the primary down: refused",
			mutate: func(w *World, _ *Memory) {
				staleSentinel(w, 2)
				w.Sentinels[2].Monitor.Flags = []string{"master", "s_down"}
			},
			refused: "flags the primary down"},
		{name: "the controller saw no switch (it restarted) and a Sentinel has not heard of it: the former primary read from that Sentinel is demoted",
			mutate: func(w *World, m *Memory) { staleSentinel(w, 2); m.Named = Named{} }, step: "vk-0-0"},
		{name: "restarted, the memory names the new primary already: the former primary read from the Sentinels is demoted",
			mutate: func(w *World, m *Memory) {
				staleSentinel(w, 2)
				m.Named = Named{Host: w.Instance.Nodes[1].Host, Port: 6379, Epoch: 1}
			}, step: "vk-0-0"},
		{name: "restarted, the other Sentinel names the old primary under the new epoch: nothing",
			mutate: func(w *World, m *Memory) {
				staleSentinel(w, 2)
				w.Sentinels[2].Monitor.ConfigEpoch = 1
				m.Named = Named{}
			}},
		{name: "restarted, the other Sentinel names a third node: nothing",
			mutate: func(w *World, m *Memory) {
				w.Sentinels[2].Monitor.Host = w.Instance.Nodes[2].Host
				w.Sentinels[2].Monitor.ConfigEpoch = 0
				m.Named = Named{}
			}},
		{name: "restarted, the other Sentinel names a node that is not the instance's: nothing",
			mutate: func(w *World, m *Memory) {
				staleSentinel(w, 2)
				w.Sentinels[2].Monitor.Port = 7000
				m.Named = Named{}
			}},
		{name: "restarted, a Sentinel does not know the monitor: nothing",
			mutate: func(w *World, m *Memory) {
				staleSentinel(w, 2)
				w.Sentinels[1].Found = false
				m.Named = Named{}
			}},
		{name: "restarted, only one of three names the new primary: nothing",
			mutate: func(w *World, m *Memory) { staleSentinel(w, 1); staleSentinel(w, 2); m.Named = Named{} }},
		{name: "a replica still follows the former primary: repointed",
			mutate: func(w *World, _ *Memory) {
				w.Nodes[0].Repl = valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: w.Instance.Nodes[1].Host, PrimaryPort: 6379, LinkUp: true}
				w.Nodes[2].Repl.PrimaryHost = w.Instance.Nodes[0].Host
			}, step: "vk-2-0"},
		{name: "the former primary first, then its replicas (one step per pass)",
			mutate: func(w *World, _ *Memory) { w.Nodes[2].Repl.PrimaryHost = w.Instance.Nodes[0].Host }, step: "vk-0-0"},
		{name: "a replica of the former primary with a Sentinel unanswered and one not informed: nothing (no majority names the switch)",
			mutate: func(w *World, _ *Memory) {
				w.Nodes[0].Repl = valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: w.Instance.Nodes[1].Host, PrimaryPort: 6379, LinkUp: true}
				w.Nodes[2].Repl.PrimaryHost = w.Instance.Nodes[0].Host
				w.Sentinels[1].Err = "i/o timeout"
				staleSentinel(w, 2)
			}},
		{name: "a replica of another node with no switch seen: Sentinel's to reconfigure, refused",
			mutate: func(w *World, m *Memory) {
				w.Nodes[0].Repl = valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: w.Instance.Nodes[1].Host, PrimaryPort: 6379, LinkUp: true}
				w.Nodes[2].Repl.PrimaryHost = w.Instance.Nodes[0].Host
				m.Named = Named{}
			}},
		{name: "the former primary's pod terminates: not touched (its preStop hook)",
			mutate: func(w *World, _ *Memory) { w.Nodes[0].Terminating = true }},
		{name: "the new primary does not report role master yet: nothing",
			mutate: func(w *World, _ *Memory) { w.Nodes[1].Repl = valkey.Replication{Role: valkey.RoleReplica} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, m := switchedWorld()
			if tt.mutate != nil {
				tt.mutate(&w, &m)
			}
			d := Instance(w, m)
			if tt.step == "" {
				assert.Nil(t, d.Step, "step: %v", d.Step)
			} else if assert.NotNil(t, d.Step, "refused: %s", d.Refused) {
				assert.Equal(t, Repoint, d.Step.Kind)
				assert.Equal(t, tt.step, d.Step.Node.Pod)
				assert.Equal(t, "vk-1-0", d.Step.Target.Pod)
				assert.True(t, d.Repair, "runs before the labels")
			}
			if tt.refused == "" {
				assert.Empty(t, d.Refused)
			} else {
				assert.Contains(t, d.Refused, tt.refused)
			}
		})
	}
}

// TestRememberNamed: the memory of the primary the Sentinels name and of the one before it.
func TestRememberNamed(t *testing.T) {
	w, m := switchedWorld()
	in := w.Instance
	node := func(i int, epoch int64) Named { return Named{Host: in.Nodes[i].Host, Port: 6379, Epoch: epoch} }
	d := Instance(w, m)
	assert.Equal(t, node(1, 1), d.Memory.Named)
	assert.Equal(t, node(0, 0), d.Memory.Former, "the switch is remembered with the former epoch")

	// the leader names the old primary under the failover's epoch before it switches: not the old one's epoch
	w, m = steadyWorld(), settledMemory()
	w.Sentinels[0].Monitor.ConfigEpoch, w.Sentinels[0].Monitor.Flags = 1, []string{"master", "failover_in_progress"}
	d = Instance(w, m)
	assert.Equal(t, node(0, 0), d.Memory.Named)
	assert.False(t, d.Memory.Former.Known())

	// a controller that did not see the switch reads the former primary from the Sentinel that has not heard
	// of it, under that Sentinel's epoch; with every Sentinel switched there is nothing to read
	w, m = switchedWorld()
	staleSentinel(&w, 2)
	d = Instance(w, Memory{})
	assert.Equal(t, node(1, 1), d.Memory.Named)
	assert.Equal(t, node(0, 0), d.Memory.Former, "the former primary read from the Sentinel that has not heard of the switch")
	w, _ = switchedWorld()
	assert.False(t, Instance(w, Memory{}).Memory.Former.Known(), "every Sentinel switched: no former primary to read")

	// not monitored, or no majority: nothing changes
	w, m = steadyWorld(), Memory{Named: node(2, 5)}
	for i := range w.Sentinels {
		w.Sentinels[i].Err = "refused"
	}
	assert.Equal(t, node(2, 5), Instance(w, m).Memory.Named)
}

// TestCheckStepAfterSwitch: the policy's rule for a Repoint while the Sentinels disagree or of a replica
// (switchSettled), asked directly with the step the planner would propose.
func TestCheckStepAfterSwitch(t *testing.T) {
	in := testInstance(3)
	demote := Step{Kind: Repoint, Node: in.Nodes[0], Target: in.Nodes[1]}
	replica := Step{Kind: Repoint, Node: in.Nodes[2], Target: in.Nodes[1]}
	switched := func() (World, Memory) {
		w, m := switchedWorld()
		m.Former, m.Named = m.Named, Named{Host: in.Nodes[1].Host, Port: 6379, Epoch: 1}
		return w, m
	}
	asReplicaOfFormer := func(w *World) {
		w.Nodes[0].Repl = valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: in.Nodes[1].Host, PrimaryPort: 6379, LinkUp: true}
		w.Nodes[2].Repl.PrimaryHost = in.Nodes[0].Host
	}
	tests := []struct {
		name   string
		step   Step
		mutate func(w *World, m *Memory)
		want   string // substring of the refusal ("" = allowed)
	}{
		{"demote with a stale Sentinel", demote, func(w *World, _ *Memory) { staleSentinel(w, 2) }, ""},
		{"demote with a stale Sentinel, no switch remembered", demote, func(w *World, m *Memory) { staleSentinel(w, 2); m.Former = Named{} },
			"no switch was seen by this controller"},
		{"demote with a stale Sentinel, the target under an epoch not above the former's", demote,
			func(w *World, m *Memory) { staleSentinel(w, 2); m.Former.Epoch = 1 }, "neither the switch"},
		{"a replica of the former primary", replica, func(w *World, _ *Memory) { asReplicaOfFormer(w) }, ""},
		{"a replica of the former primary, one Sentinel answers", replica, func(w *World, _ *Memory) {
			asReplicaOfFormer(w)
			w.Sentinels[1].Err, w.Sentinels[2].Err = "i/o timeout", "i/o timeout"
		}, "only 1 of 3 Sentinels name vk-1-0"},
		{"a replica of the new primary is not the step's subject", replica, nil, "neither the former primary vk-0-0 nor a replica of it"},
		{"a replica, a Sentinel does not know the monitor", replica, func(w *World, _ *Memory) { asReplicaOfFormer(w); w.Sentinels[2].Found = false },
			"does not know monitor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, m := switched()
			if tt.mutate != nil {
				tt.mutate(&w, &m)
			}
			got := Check(w, m, tt.step)
			if tt.want == "" {
				assert.Empty(t, got)
			} else {
				assert.Contains(t, got, tt.want)
			}
		})
	}
}
