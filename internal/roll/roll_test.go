package roll

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/spec"
)

func dn(i int, primary, stale bool) DataNode {
	return DataNode{Node: spec.Node{Index: i, Pod: []string{"vk-0-0", "vk-1-0", "vk-2-0"}[i]}, Primary: primary, Stale: stale,
		Ready: true, Reachable: true, LinkUp: !primary}
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
		{"handoff deferred after a timeout", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false)}, Monitored: true, QuorumOK: true, HandoffDeferred: true},
			"", "", "", "the last primary handoff timed out; backing off"},
		{"single node is simply replaced", DataInput{Nodes: []DataNode{dn(0, true, true)}}, DeletePod, "vk-0-0", "", ""},
		{"nothing while an upgrade is half applied, not even a stale replica", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false), dn(2, false, true)}, Monitored: true, QuorumOK: true,
			Settling: "StatefulSets carry release revisions 2 and 3"}, "", "", "", "StatefulSets carry release revisions 2 and 3"},
		{"unmonitored handoff needs no quorum", DataInput{Nodes: []DataNode{dn(0, true, true), dn(1, false, false)}}, HandOff, "vk-0-0", "vk-1-0", ""},
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
	ok := func(p string, stale bool) SentinelPod {
		return SentinelPod{Pod: p, Stale: stale, Ready: true, KnowsAll: true}
	}
	pod, why := PlanSentinel(SentinelInput{Pods: []SentinelPod{ok("s-0", true), ok("s-1", true), ok("s-2", false)}, QuorumOK: true, Healthy: true})
	assert.Equal(t, "s-0", pod, why)
	_, why = PlanSentinel(SentinelInput{Pods: []SentinelPod{ok("s-0", true), {Pod: "s-1", Ready: false}}, QuorumOK: true, Healthy: true})
	assert.Equal(t, "s-1 is not ready", why)
	_, why = PlanSentinel(SentinelInput{Pods: []SentinelPod{ok("s-0", true), {Pod: "s-1", Ready: true}}, QuorumOK: true, Healthy: true})
	assert.Equal(t, "s-1 has not registered every monitor yet", why)
	_, why = PlanSentinel(SentinelInput{Pods: []SentinelPod{ok("s-0", true)}, QuorumOK: false, Healthy: true})
	assert.Contains(t, why, "CKQUORUM")
	_, why = PlanSentinel(SentinelInput{Pods: []SentinelPod{ok("s-0", true)}, QuorumOK: true, Healthy: false})
	assert.Contains(t, why, "failing over")
	pod, why = PlanSentinel(SentinelInput{Pods: []SentinelPod{ok("s-0", false)}, QuorumOK: false})
	assert.Empty(t, pod)
	assert.Empty(t, why, "nothing stale: nothing to wait for")
}

func TestPlanReset(t *testing.T) {
	live := map[string]bool{"a:1": true}
	rep := func(addr string) SentinelReplica { return SentinelReplica{Addr: addr, Flags: []string{"slave"}, LinkOK: true} }
	gone := func(addr string) SentinelReplica { return SentinelReplica{Addr: addr, Flags: []string{"s_down", "slave", "disconnected"}} }
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
