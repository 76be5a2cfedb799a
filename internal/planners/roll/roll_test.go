package roll

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

func dn(i int, primary, stale bool) DataNode {
	return DataNode{Node: spec.Node{Index: i, Pod: []string{"vk-0-0", "vk-1-0", "vk-2-0"}[i]}, Primary: primary, Stale: stale,
		Ready: true, Reachable: true, LinkUp: !primary}
}

func noPromote(n DataNode) DataNode { n.NeverPromote = true; return n }

// unscheduled is n as a pod the scheduler found no node for: not ready, not reachable.
func unscheduled(n DataNode) DataNode {
	n.Unschedulable, n.Ready, n.Reachable, n.LinkUp = true, false, false, false
	return n
}

func TestPlanData(t *testing.T) {
	tests := []struct {
		name   string
		in     DataInput
		kind   DataStepKind
		pod    string
		target string
		wait   string
	}{
		{"nothing stale", DataInput{Nodes: []DataNode{dn(0, true, false), dn(1, false, false)}}, "", "", "", ""},
		{"replicas first, lowest index", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, true), dn(2, false, true)}, Monitored: true, QuorumOK: true},
			DeletePod, "vk-1-0", "", ""},
		{"replica waits for the other's link", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, true), func() DataNode { n := dn(2, false, false); n.LinkUp = false; return n }()}},
			"", "", "", "vk-2-0's link to the primary is down"},
		{"previous replacement not ready", DataInput{Nodes: []DataNode{dn(0, true, true), func() DataNode { n := dn(1, false, false); n.Ready = false; return n }(), dn(2, false, true)}},
			"", "", "", "vk-1-0 is not ready yet"},
		{"primary last: hand off to the most caught-up replica", DataInput{Nodes: []DataNode{dn(0, true, true), func() DataNode { n := dn(1, false, false); n.LagBytes = 10; return n }(), dn(2, false, false)}, Monitored: true, QuorumOK: true},
			HandOff, "vk-0-0", "vk-2-0", ""},
		{"no handoff without quorum", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false)}, Monitored: true, QuorumOK: false},
			"", "", "", "SENTINEL CKQUORUM fails: no handoff without a quorum"},
		{"frozen during failover", DataInput{Nodes: []DataNode{dn(0, true, false), dn(1, false, true)}, Frozen: true},
			"", "", "", "a failover is in flight or the primary is down"},
		{"handoff deferred after a failure", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false)}, Monitored: true, QuorumOK: true, HandoffDeferred: true},
			"", "", "", "the last primary handoff failed; backing off"},
		{"no handoff when every replica has replica-priority 0", DataInput{Nodes: []DataNode{dn(0, true, true), noPromote(dn(1, false, false)), noPromote(dn(2, false, false))}, Monitored: true, QuorumOK: true},
			"", "", "", NoPromotableReplica},
		{"unmonitored: no FAILOVER TO a replica with replica-priority 0 either", DataInput{Nodes: []DataNode{dn(0, true, true), noPromote(dn(1, false, false))}},
			"", "", "", NoPromotableReplica},
		{"stale replicas with priority 0 are still replaced", DataInput{Nodes: []DataNode{dn(0, true, true), noPromote(dn(1, false, true))}, Monitored: true, QuorumOK: true},
			DeletePod, "vk-1-0", "", ""},
		{"the handoff target skips a replica with replica-priority 0", DataInput{Nodes: []DataNode{dn(0, true, true), noPromote(dn(1, false, false)), func() DataNode { n := dn(2, false, false); n.LagBytes = 10; return n }()}},
			HandOff, "vk-0-0", "vk-2-0", ""},
		{"single node is simply replaced", DataInput{Nodes: []DataNode{dn(0, true, true)}}, DeletePod, "vk-0-0", "", ""},
		{"nothing while an upgrade is half applied, not even a stale replica", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false), dn(2, false, true)}, Monitored: true, QuorumOK: true,
			Settling: "StatefulSets carry release revisions 2 and 3"}, "", "", "", "StatefulSets carry release revisions 2 and 3"},
		{"unmonitored handoff needs no quorum", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false)}}, HandOff, "vk-0-0", "vk-1-0", ""},
		{"a stale pod never scheduled is replaced at once, though it is not ready", DataInput{Nodes: []DataNode{dn(0, true, false), unscheduled(dn(1, false, true)), dn(2, false, false)}, Monitored: true, QuorumOK: true},
			DeletePod, "vk-1-0", "", ""},
		{"... also while the primary is down (a single node that cannot schedule)", DataInput{Nodes: []DataNode{unscheduled(dn(0, false, true))}, Monitored: true, Frozen: true},
			DeletePod, "vk-0-0", "", ""},
		{"... not while an upgrade is half applied", DataInput{Nodes: []DataNode{dn(0, true, false), unscheduled(dn(1, false, true))}, Settling: "StatefulSets carry release revisions 2 and 3"},
			"", "", "", "StatefulSets carry release revisions 2 and 3"},
		{"an unscheduled pod at the current revision is waited for (replacing it changes nothing)", DataInput{Nodes: []DataNode{dn(0, true, true), unscheduled(dn(1, false, false))}},
			"", "", "", "vk-1-0 is not ready yet"},
		{"lagging replica blocks the handoff", DataInput{Nodes: []DataNode{dn(0, true, true), func() DataNode { n := dn(1, false, false); n.LagBytes = 5 << 20; return n }()}},
			"", "", "", "vk-1-0 lags 5242880 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			step, wait := PlanData(tt.in)
			assert.Equal(t, tt.wait, wait)
			if tt.kind == "" {
				assert.Nil(t, step)
				return
			}
			if assert.NotNil(t, step) {
				assert.Equal(t, tt.kind, step.Kind)
				assert.Equal(t, tt.pod, step.Node.Pod)
				if tt.target != "" {
					assert.Equal(t, tt.target, step.Target.Pod)
				}
				assert.False(t, step.Kind == DeletePod && len(tt.in.Nodes) > 1 && nodeIsPrimary(tt.in, step.Node.Index), "never delete the primary of a replicated instance")
			}
		})
	}
}

func nodeIsPrimary(in DataInput, idx int) bool {
	for _, n := range in.Nodes {
		if n.Node.Index == idx {
			return n.Primary
		}
	}
	return false
}

func TestPlanSentinel(t *testing.T) {
	knows := map[string]bool{"a": true, "b": true}
	ok := func(p string, stale bool) SentinelPod {
		return SentinelPod{Pod: p, Stale: stale, Ready: true, Knows: knows}
	}
	healthy := func(name string) MonitorGate {
		return MonitorGate{Name: name, QuorumOK: true, FailoverTimeout: 15 * time.Second}
	}
	two := []MonitorGate{healthy("a"), healthy("b")}
	pods := []SentinelPod{ok("s-0", true), ok("s-1", true), ok("s-2", false)}
	with := func(m MonitorGate) []MonitorGate { return []MonitorGate{healthy("a"), m} }
	tests := []struct {
		name     string
		in       SentinelInput
		target   string
		why      string
		reported bool
	}{
		{"first stale pod", SentinelInput{Pods: pods, Monitors: two}, "s-0", "", false},
		{"nothing stale: nothing to wait for", SentinelInput{Pods: []SentinelPod{ok("s-0", false)}, Monitors: with(MonitorGate{Name: "b"})}, "", "", false},
		{"a pod not ready", SentinelInput{Pods: []SentinelPod{ok("s-0", true), {Pod: "s-1"}}, Monitors: two}, "", "s-1 is not ready", false},
		{"a pod lacks a monitor", SentinelInput{Pods: []SentinelPod{ok("s-0", true), {Pod: "s-1", Ready: true, Knows: map[string]bool{"a": true}}}, Monitors: two},
			"", "s-1 has not registered monitor b yet", false},
		{"CKQUORUM fails", SentinelInput{Pods: pods, Monitors: with(MonitorGate{Name: "b", FailoverTimeout: time.Second})}, "", "SENTINEL CKQUORUM fails for monitor b", false},
		{"a failover in flight", SentinelInput{Pods: pods, Monitors: with(MonitorGate{Name: "b", QuorumOK: true, FailingOver: true, Down: true, DownFor: time.Hour})},
			"", "monitor b is failing over", false},
		{"a primary that just went down", SentinelInput{Pods: pods, Monitors: with(MonitorGate{Name: "b", QuorumOK: true, Down: true, DownFor: 2 * time.Second, FailoverTimeout: 15 * time.Second})},
			"", "monitor b's primary went down 2s ago: waiting for Sentinel's failover", false},
		{"a primary down for good does not gate the roll, even without CKQUORUM or on a pod that lacks it",
			SentinelInput{Pods: []SentinelPod{ok("s-0", true), {Pod: "s-1", Ready: true, Knows: map[string]bool{"a": true}}},
				Monitors: with(MonitorGate{Name: "b", Down: true, DownFor: time.Hour, FailoverTimeout: 15 * time.Second})},
			"s-0", "", true},
		{"the healthy monitor still gates", SentinelInput{Pods: pods,
			Monitors: []MonitorGate{{Name: "a", FailoverTimeout: time.Second}, {Name: "b", Down: true, DownFor: time.Hour, FailoverTimeout: time.Second}}},
			"", "SENTINEL CKQUORUM fails for monitor a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, why, notes := PlanSentinel(tt.in)
			assert.Equal(t, tt.target, target)
			assert.Equal(t, tt.why, why)
			if tt.reported {
				require.Len(t, notes, 1)
				assert.Contains(t, notes[0], "monitor b's primary has been down 1h0m0s")
			} else {
				assert.Empty(t, notes)
			}
		})
	}
}

func TestPlanReset(t *testing.T) {
	live := map[string]bool{"a:1": true}
	rep := func(addr string) SentinelReplica {
		return SentinelReplica{Addr: addr, Flags: []string{"slave"}, LinkOK: true}
	}
	gone := func(addr string) SentinelReplica {
		return SentinelReplica{Addr: addr, Flags: []string{"s_down", "slave", "disconnected"}}
	}
	v := func(addr string, reps ...SentinelReplica) SentinelView {
		return SentinelView{Addr: addr, Known: true, Healthy: true, Peers: 2, Replicas: reps}
	}
	target, _ := PlanReset([]SentinelView{v("s0", rep("a:1")), v("s1", rep("a:1"), gone("b:1")), v("s2", rep("a:1"), gone("b:1"))}, live)
	assert.Equal(t, "s1", target, "one Sentinel at a time, the first that lists a removed replica")
	target, why := PlanReset([]SentinelView{v("s0", rep("a:1")), v("s1"), v("s2", rep("a:1"), gone("b:1"))}, live)
	assert.Empty(t, target)
	assert.Contains(t, why, "rediscovering", "wait for the previous reset to rediscover before the next")
	target, why = PlanReset([]SentinelView{v("s0", rep("b:1")), v("s1", rep("a:1")), v("s2", rep("a:1"))}, live)
	assert.Empty(t, target)
	assert.Equal(t, "s0 lists 0 of 1 replicas (still rediscovering)", why, "a foreign replica does not stand in for a missing node")
	down := v("s0", rep("a:1"), gone("b:1"))
	down.Healthy = false
	target, why = PlanReset([]SentinelView{down, v("s1", rep("a:1"), gone("b:1")), v("s2", rep("a:1"), gone("b:1"))}, live)
	assert.Empty(t, target, "TestCaseS10: never RESET while the primary is down or failing over")
	assert.NotEmpty(t, why)
	lonely := v("s0", rep("a:1"), gone("b:1"))
	lonely.Peers = 0
	target, _ = PlanReset([]SentinelView{lonely, v("s1", rep("a:1")), v("s2", rep("a:1"))}, live)
	assert.Empty(t, target, "never while a Sentinel misses its peers (case S11)")
	target, why = PlanReset([]SentinelView{v("s0", rep("a:1")), v("s1", rep("a:1")), v("s2", rep("a:1"))}, live)
	assert.Empty(t, target, "steady state: zero RESETs")
	assert.Empty(t, why)
	target, why = PlanReset([]SentinelView{v("s0", rep("a:1"), rep("dr:1")), v("s1", rep("a:1"), rep("dr:1")), v("s2", rep("a:1"), rep("dr:1"))}, live)
	assert.Empty(t, target, "TestF6: a live replica that is not a node (DR, migration) is never a reason to RESET")
	assert.Empty(t, why)
	target, _ = PlanReset([]SentinelView{v("s0", rep("a:1"), gone("dr:1")), v("s1", rep("a:1")), v("s2", rep("a:1"))}, live)
	assert.Equal(t, "s0", target, "a foreign replica that is gone (s_down) is forgotten")
	live["a:2"] = true
	target, _ = PlanReset([]SentinelView{v("s0", rep("a:1"), gone("a:2")), v("s1", rep("a:1"), rep("a:2")), v("s2", rep("a:1"), rep("a:2"))}, live)
	assert.Empty(t, target, "a node of the instance that is down is not forgotten: it comes back")
}

func TestCheckHandoffReplicas(t *testing.T) {
	ok := func(addr string) SentinelReplica {
		return SentinelReplica{Addr: addr, Flags: []string{"slave"}, LinkOK: true}
	}
	want := []string{"vk-1:6379", "vk-2:6379"}
	assert.Empty(t, CheckHandoffReplicas(map[string][]SentinelReplica{"s0": {ok("vk-1:6379"), ok("vk-2:6379")}, "s1": {ok("vk-2:6379"), ok("vk-1:6379")}}, want))
	down := ok("vk-2:6379")
	down.Flags = []string{"s_down", "slave"}
	assert.Equal(t, "Sentinel s1 flags replica vk-2:6379 [s_down slave]",
		CheckHandoffReplicas(map[string][]SentinelReplica{"s0": {ok("vk-1:6379"), ok("vk-2:6379")}, "s1": {ok("vk-1:6379"), down}}, want))
	link := ok("vk-1:6379")
	link.LinkOK = false
	assert.Equal(t, "Sentinel s0 sees replica vk-1:6379's link to the primary down",
		CheckHandoffReplicas(map[string][]SentinelReplica{"s0": {link, ok("vk-2:6379")}}, want))
	assert.Equal(t, "Sentinel s0 does not list replica vk-2:6379 yet", CheckHandoffReplicas(map[string][]SentinelReplica{"s0": {ok("vk-1:6379")}}, want))
	assert.Equal(t, "no Sentinel answered SENTINEL REPLICAS", CheckHandoffReplicas(nil, want))
}
