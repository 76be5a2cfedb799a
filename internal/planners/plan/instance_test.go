package plan

import (
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/planners/roll"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestInstance is the instance planner's precedence, one row per case: repair before roll before reset,
// one disruptive step per pass, the handoff gate and its memory, and what the policy leaves of the step.
func TestInstance(t *testing.T) {
	in := testInstance(3)
	stale := func(w *World, i int) { w.Nodes[i].StatefulSet.UpdateRevision = "r2" }
	orphan := func(w *World) { w.Nodes[1].Repl = valkey.Replication{Role: valkey.RolePrimary} }
	tests := []struct {
		name     string
		mutate   func(w *World, m *Memory)
		step     StepKind // "" = none
		node     string   // the step's node (or Sentinel for a reset)
		roll     string   // substring of Decision.Roll ("" = empty)
		refused  string   // substring of Decision.Refused ("" = empty)
		planned  bool     // RollPlanned
		checkMem func(t *testing.T, d Decision)
	}{
		{name: "steady: nothing to do", planned: true},
		{name: "orphan primary: repair", mutate: func(w *World, _ *Memory) { orphan(w) }, step: Repoint, node: "vk-1-0"},
		{name: "repair before roll: orphan and a stale replica", mutate: func(w *World, _ *Memory) { orphan(w); stale(w, 2) },
			step: Repoint, node: "vk-1-0"},
		{name: "a stale replica is replaced", mutate: func(w *World, _ *Memory) { stale(w, 1) }, step: DeletePod, node: "vk-1-0", planned: true},
		{name: "the stale primary is handed off", mutate: func(w *World, _ *Memory) { stale(w, 0) }, step: HandOff, node: "vk-0-0", planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.NotEmpty(t, d.HandoffPrint)
				assert.Equal(t, []string{"s2:26379", "s1:26379", "s0:26379"}, d.FailoverOrder, "SENTINEL FAILOVER asks the last Sentinel first")
			}},
		{name: "an unmonitored stale primary is handed off with FAILOVER TO: no Sentinel order", mutate: func(w *World, _ *Memory) {
			stale(w, 0)
			w.SentinelInfo, w.Sentinels, w.Quorum, w.QuorumAsked = nil, nil, valkey.Quorum{}, false
		}, step: HandOff, node: "vk-0-0", planned: true,
			checkMem: func(t *testing.T, d Decision) { assert.Nil(t, d.FailoverOrder) }},
		{name: "a replica's roll asks no Sentinel to fail over", mutate: func(w *World, _ *Memory) { stale(w, 1) }, step: DeletePod, node: "vk-1-0", planned: true,
			checkMem: func(t *testing.T, d Decision) { assert.Nil(t, d.FailoverOrder) }},
		{name: "the primary's pod terminates with a quorum: nothing stops its preStop handoff", mutate: func(w *World, _ *Memory) {
			w.Nodes[0].Terminating = true
		}, planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.NotNil(t, d.Topology.HandingOff)
				assert.Empty(t, d.HandoffObstacle)
			}},
		{name: "the primary's pod terminates without a quorum: the obstacle is named", mutate: func(w *World, _ *Memory) {
			w.Nodes[0].Terminating = true
			w.Quorum = valkey.Quorum{Message: "NOQUORUM 1 usable Sentinels"}
		}, planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.Equal(t, "no Sentinel quorum (NOQUORUM 1 usable Sentinels)", d.HandoffObstacle)
			}},
		{name: "no primary handing off: no obstacle looked for", mutate: func(w *World, _ *Memory) { w.Quorum.OK = false }, planned: true,
			checkMem: func(t *testing.T, d Decision) { assert.Empty(t, d.HandoffObstacle) }},
		{name: "memory: a confirmed primary move is a PrimaryChange", mutate: func(w *World, m *Memory) { m.LastPrimaryPod = "vk-1-0" }, planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.Equal(t, PrimaryChange{From: "vk-1-0", To: "vk-0-0"}, d.PrimaryChanged)
				assert.Equal(t, "vk-0-0", d.Memory.LastPrimaryPod)
			}},
		{name: "a node labelled primary that reports replica: relabelled, its connections closed after", mutate: func(w *World, _ *Memory) {
			w.Nodes[0].RoleLabel, w.Nodes[1].RoleLabel, w.Nodes[2].RoleLabel = contract.RolePrimary, contract.RolePrimary, contract.RoleReplica
		}, planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.Equal(t, []int{1}, d.CloseOnRelabel)
				assert.Empty(t, d.Reclose)
			}},
		{name: "memory: an open reclose window closes the demoted node's connections again", mutate: func(w *World, m *Memory) {
			w.Nodes[0].RoleLabel, w.Nodes[1].RoleLabel, w.Nodes[2].RoleLabel = contract.RolePrimary, contract.RoleReplica, contract.RoleReplica
			m.Reclose = map[int]time.Time{1: now.Add(time.Second), 2: now}
		}, planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.Empty(t, d.CloseOnRelabel)
				assert.Equal(t, []int{1}, d.Reclose)
				assert.Equal(t, map[int]time.Time{1: now.Add(time.Second)}, d.Memory.Reclose, "a window that passed is forgotten")
			}},
		{name: "memory: the first confirmed primary is no move", mutate: func(w *World, m *Memory) { m.LastPrimaryPod = "" }, planned: true,
			checkMem: func(t *testing.T, d Decision) { assert.Zero(t, d.PrimaryChanged) }},
		{name: "memory: the same primary is no move", mutate: func(w *World, m *Memory) { m.LastPrimaryPod = "vk-0-0" }, planned: true,
			checkMem: func(t *testing.T, d Decision) { assert.Zero(t, d.PrimaryChanged) }},
		{name: "handoff gated: a Sentinel flags a replica down", mutate: func(w *World, _ *Memory) {
			stale(w, 0)
			w.Sentinels[1].Replicas[0].Flags = []string{"s_down", "slave"}
		}, roll: "flags replica", planned: true},
		{name: "handoff refused for want of a promotable replica: not retried under the same view", mutate: func(w *World, m *Memory) {
			stale(w, 0)
			d := Instance(*w, *m)
			m.HandoffRefused = HandoffRefusal{Print: d.HandoffPrint, Why: "handoff refused: NOGOODSLAVE"}
		}, roll: "handoff refused: NOGOODSLAVE", planned: true},
		{name: "handoff refused earlier: retried once the view changed", mutate: func(w *World, m *Memory) {
			stale(w, 0)
			m.HandoffRefused = HandoffRefusal{Print: "another view", Why: "handoff refused: NOGOODSLAVE"}
		}, step: HandOff, node: "vk-0-0", planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.Empty(t, d.Memory.HandoffRefused.Why, "the refusal is forgotten")
			}},
		{name: "a failed handoff backs off", mutate: func(w *World, m *Memory) {
			stale(w, 0)
			m.HandoffDeferredUntil = now.Add(time.Minute)
		}, roll: "backing off", planned: true},
		{name: "no promotable replica", mutate: func(w *World, _ *Memory) {
			stale(w, 0)
			w.Nodes[1].Repl.ReplicaPriority, w.Nodes[2].Repl.ReplicaPriority = 0, 0
		}, roll: roll.NoPromotableReplica, planned: true},
		{name: "nothing to roll: a gone replica is reset", mutate: func(w *World, _ *Memory) { withGone(w) }, step: Reset, node: "s0:26379", planned: true},
		{name: "roll before reset: a stale replica and a gone one", mutate: func(w *World, _ *Memory) { withGone(w); stale(w, 2) },
			step: DeletePod, node: "vk-2-0", planned: true},
		{name: "repair before reset: an orphan and a gone replica", mutate: func(w *World, _ *Memory) { withGone(w); orphan(w) },
			step: Repoint, node: "vk-1-0"},
		{name: "the policy refuses the reset after a primary change; nothing else is taken", mutate: func(w *World, m *Memory) {
			withGone(w)
			m.PrimarySince = now.Add(-5 * time.Second)
		}, refused: "sentinel-reset refused: the primary changed", planned: true},
		{name: "a failover in flight: no step, the roll waits", mutate: func(w *World, _ *Memory) {
			stale(w, 1)
			w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
		}, roll: "a failover is in flight", planned: true},
		{name: "an upgrade half applied: the roll waits", mutate: func(w *World, _ *Memory) {
			stale(w, 1)
			w.Nodes[0].StatefulSet.ReleaseRevision, w.Nodes[0].StatefulSet.HasReleaseRevision = "2", true
			w.Nodes[1].StatefulSet.ReleaseRevision, w.Nodes[1].StatefulSet.HasReleaseRevision = "3", true
		}, roll: "an upgrade is being applied", planned: true},
		{name: "the primary's pod terminates: the roll waits for its preStop handoff", mutate: func(w *World, _ *Memory) {
			stale(w, 1)
			w.Nodes[0].Terminating = true
		}, roll: "a failover is in flight", planned: true},
		{name: "memory: a primary change is remembered", mutate: func(w *World, m *Memory) { m.Primary = "old:6379" }, planned: true,
			checkMem: func(t *testing.T, d Decision) {
				assert.Equal(t, addr(in, 0), d.Memory.Primary)
				assert.Equal(t, now, d.Memory.PrimarySince)
			}},
		{name: "memory: no primary since", mutate: func(w *World, _ *Memory) {
			w.Nodes[0].Reachable, w.Nodes[0].Err, w.Nodes[0].Repl = false, "refused", valkey.Replication{}
		}, planned: true, roll: "",
			checkMem: func(t *testing.T, d Decision) { assert.Equal(t, now, d.Memory.NoPrimarySince) }},
		{name: "memory: the roll's wait is timed", mutate: func(w *World, _ *Memory) { stale(w, 1); w.Nodes[2].Repl.LinkUp = false },
			roll: "link to the primary is down", planned: true,
			checkMem: func(t *testing.T, d Decision) { assert.Equal(t, now, d.Memory.RollHeldSince) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, m := steadyWorld(), settledMemory()
			if tt.mutate != nil {
				tt.mutate(&w, &m)
			}
			d := Instance(w, m)
			if tt.step == "" {
				assert.Nil(t, d.Step, "step: %v", d.Step)
			} else if assert.NotNil(t, d.Step, "refused: %s, roll: %s", d.Refused, d.Roll) {
				assert.Equal(t, tt.step, d.Step.Kind)
				got := d.Step.Node.Pod
				if tt.step == Reset {
					got = d.Step.Sentinel
				}
				assert.Equal(t, tt.node, got)
				assert.Equal(t, tt.step == Repoint || tt.step == Promote, d.Repair, "a repair runs before the labels")
			}
			if tt.roll == "" {
				assert.Empty(t, d.Roll)
			} else {
				assert.Contains(t, d.Roll, tt.roll)
			}
			if tt.refused == "" {
				assert.Empty(t, d.Refused)
			} else {
				assert.Contains(t, d.Refused, tt.refused)
			}
			assert.Equal(t, tt.planned, d.RollPlanned, "the roll is planned only when no repair is due")
			if tt.checkMem != nil {
				tt.checkMem(t, d)
			}
		})
	}
}

// TestInstanceLabels: the role labels ride along with any step (removal first), never a second disruptive
// step.
func TestInstanceLabels(t *testing.T) {
	w, m := steadyWorld(), settledMemory()
	w.Nodes[0].RoleLabel, w.Nodes[1].RoleLabel, w.Nodes[2].RoleLabel = "", contract.RolePrimary, contract.RoleReplica
	w.Nodes[2].StatefulSet.UpdateRevision = "r2"
	d := Instance(w, m)
	var got []string
	for _, a := range d.Labels() {
		got = append(got, a.Node.Pod+"="+a.Role)
	}
	assert.Equal(t, []string{"vk-1-0=replica", "vk-0-0=primary"}, got)
	if assert.NotNil(t, d.Step) {
		assert.Equal(t, DeletePod, d.Step.Kind)
	}
}
