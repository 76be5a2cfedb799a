package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func testInstance(nodes int) spec.Instance {
	in := spec.Instance{Name: "vk", Namespace: "ns", MonitorName: "vk", FailoverMode: contract.FailoverSentinel, Port: 6379}
	for i := 0; i < nodes; i++ {
		in.Nodes = append(in.Nodes, spec.Node{Index: i, Pod: fmt.Sprintf("vk-%d-0", i), StatefulSet: fmt.Sprintf("vk-%d", i),
			Host: fmt.Sprintf("vk-%d-0.vk-%d.ns.svc.cluster.local", i, i)})
	}
	return in
}

func addr(in spec.Instance, i int) string { return fmt.Sprintf("%s:%d", in.Nodes[i].Host, in.Port) }

// steadyWorld is 1 primary (node 0) + 2 replicas, every pod and StatefulSet observed, three Sentinels that
// all answer, know the monitor, name node 0 and list both replicas healthy, CKQUORUM OK.
func steadyWorld() World {
	in := testInstance(3)
	w := World{Instance: in, Now: now, SentinelInfo: &spec.SentinelInfo{MonitorName: "vk", Hosts: []string{"s0", "s1", "s2"}, Port: 26379},
		Quorum: valkey.Quorum{OK: true, Message: "OK 3 usable Sentinels"}, QuorumAsked: true}
	for i, n := range in.Nodes {
		st := topology.NodeState{Node: n, PodExists: true, PodReady: true, PodUID: "uid", PodVersion: "1", Reachable: true}
		if i == 0 {
			st.Repl = valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 100,
				Replicas: []valkey.ConnectedReplica{{}, {}}}
		} else {
			st.Repl = valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: in.Nodes[0].Host, PrimaryPort: 6379, LinkUp: true,
				ReplicaReplOffset: 100, ReplicaPriority: 100}
		}
		w.Nodes = append(w.Nodes, Node{NodeState: st, Revision: "r1",
			StatefulSet: &StatefulSet{Name: n.StatefulSet, UpdateRevision: "r1"}})
	}
	for _, a := range []string{"s0:26379", "s1:26379", "s2:26379"} {
		w.Sentinels = append(w.Sentinels, Sentinel{Addr: a, Found: true,
			Monitor: valkey.Monitor{Name: "vk", Host: in.Nodes[0].Host, Port: 6379, Flags: []string{"master"}, NumReplicas: 2,
				NumOtherSentinels: 2, FailoverTimeoutMs: 15000},
			Replicas: []valkey.SentinelReplica{
				{Host: in.Nodes[1].Host, Port: 6379, Flags: []string{"slave"}, PrimaryLinkUp: true},
				{Host: in.Nodes[2].Host, Port: 6379, Flags: []string{"slave"}, PrimaryLinkUp: true}}})
	}
	return w
}

func settledMemory() Memory {
	return Memory{Primary: addr(testInstance(3), 0), PrimarySince: now.Add(-time.Hour)}
}

// withGone adds a gone replica (not a node, flagged s_down) to every Sentinel's list.
func withGone(w *World) {
	for i := range w.Sentinels {
		w.Sentinels[i].Replicas = append(w.Sentinels[i].Replicas,
			valkey.SentinelReplica{Host: "old-3-0.old-3.ns.svc.cluster.local", Port: 6379, Flags: []string{"s_down", "slave"}})
	}
}

const gone = "old-3-0.old-3.ns.svc.cluster.local:6379"

// TestCheck has one row per refusal of the instance controller's policy, and one row per step kind that
// the steady world allows.
func TestCheck(t *testing.T) {
	in := testInstance(3)
	repoint := Step{Kind: Repoint, Node: in.Nodes[1], Target: in.Nodes[0]}
	promote := Step{Kind: Promote, Node: in.Nodes[1]}
	handoff := Step{Kind: HandOff, Node: in.Nodes[0], Target: in.Nodes[1]}
	deletePod := Step{Kind: DeletePod, Node: in.Nodes[1]}
	reset := Step{Kind: Reset, Sentinel: "s1:26379", For: []string{gone}}
	unmonitored := func(w *World) { w.SentinelInfo, w.Sentinels, w.Instance.FailoverMode = nil, nil, contract.FailoverNone }
	orphan := func(w *World) { // node 1 reports primary (the repoint's subject)
		w.Nodes[1].Repl = valkey.Replication{Role: valkey.RolePrimary}
	}
	noPrimary := func(w *World) { // unmonitored, node 0 is down
		unmonitored(w)
		w.Nodes[0].Reachable, w.Nodes[0].Err, w.Nodes[0].Repl = false, "connection refused", valkey.Replication{}
	}
	tests := []struct {
		name   string
		step   Step
		mutate func(w *World, m *Memory)
		want   string // "" = allowed; else a substring of the refusal
	}{
		// REPLICAOF <primary> (repair)
		{"repoint: allowed", repoint, func(w *World, _ *Memory) { orphan(w) }, ""},
		{"repoint: the node was not observed", repoint, func(w *World, _ *Memory) { w.Nodes[1].Reachable, w.Nodes[1].Err = false, "i/o timeout" },
			"vk-1-0 was not observed (i/o timeout)"},
		{"repoint: the node's pod was not observed", repoint, func(w *World, _ *Memory) { w.Nodes[1].PodExists = false }, "vk-1-0's pod was not observed"},
		{"repoint: to itself", Step{Kind: Repoint, Node: in.Nodes[0], Target: in.Nodes[0]}, nil, "would replicate from itself"},
		{"repoint: the target is not observed as a primary", repoint, func(w *World, _ *Memory) {
			orphan(w)
			w.Nodes[0].Reachable, w.Nodes[0].Err = false, "connection refused"
		}, "the target vk-0-0 was not observed as a primary (unreachable: connection refused)"},
		{"repoint: the Sentinel info is unreadable", repoint, func(w *World, _ *Memory) {
			orphan(w)
			w.SentinelInfo, w.SentinelInfoErr = nil, "sentinels.json: hosts is empty"
		}, "could not be read (sentinels.json: hosts is empty)"},
		{"repoint: the Sentinels' primary was not observed", repoint, func(w *World, _ *Memory) {
			orphan(w)
			for i := range w.Sentinels {
				w.Sentinels[i].Err = "dial: connection refused"
			}
		}, "the Sentinels' primary was not observed (0 of 3 answered"},
		{"repoint: a failover is in flight", repoint, func(w *World, _ *Memory) {
			orphan(w)
			w.Sentinels[2].Monitor.Flags = []string{"master", "failover_in_progress"}
		}, "a Sentinel reports a failover in flight"},
		{"repoint: a Sentinel flags the primary down", repoint, func(w *World, _ *Memory) {
			orphan(w)
			w.Sentinels[2].Monitor.Flags = []string{"master", "s_down"}
		}, "a Sentinel flags the primary down"},
		{"repoint: the Sentinels disagree", repoint, func(w *World, _ *Memory) {
			orphan(w)
			w.Sentinels[2].Monitor.Host = in.Nodes[1].Host
		}, "the Sentinels name different primaries"},
		{"repoint: the Sentinels name another primary than the target", repoint, func(w *World, _ *Memory) {
			orphan(w)
			w.Nodes[2].Repl = valkey.Replication{Role: valkey.RolePrimary}
			for i := range w.Sentinels {
				w.Sentinels[i].Monitor.Host = in.Nodes[2].Host
			}
		}, "not the target vk-0-0: never fight Sentinel"},

		// REPLICAOF NO ONE (promotion of an unmonitored instance)
		{"promote: allowed", promote, func(w *World, _ *Memory) { noPrimary(w) }, ""},
		{"promote: Sentinel owns failover", promote, func(w *World, _ *Memory) {
			w.Nodes[0].Reachable, w.Nodes[0].Repl = false, valkey.Replication{}
		}, "the election is Sentinel's"},
		{"promote: the Sentinel info is unreadable", promote, func(w *World, _ *Memory) {
			noPrimary(w)
			w.Instance.FailoverMode, w.SentinelInfoErr = contract.FailoverSentinel, "sentinels.json: port 0 is not a port"
		}, "who owns failover is unknown"},
		{"promote: a node reports role master", promote, func(w *World, _ *Memory) {
			noPrimary(w)
			w.Nodes[2].Repl = valkey.Replication{Role: valkey.RolePrimary}
		}, "vk-2-0 reports role master"},
		{"promote: a majority of the nodes was not observed", promote, func(w *World, _ *Memory) {
			noPrimary(w)
			w.Nodes[2].Reachable, w.Nodes[2].Err = false, "i/o timeout"
		}, "only 1 of 3 nodes were observed"},
		{"promote: the node is not observed as a replica", Step{Kind: Promote, Node: in.Nodes[0]}, func(w *World, _ *Memory) { noPrimary(w) },
			"vk-0-0 was not observed as a replica (unreachable: connection refused)"},

		// SENTINEL FAILOVER / FAILOVER TO (planned handoff)
		{"handoff: allowed (monitored)", handoff, nil, ""},
		{"handoff: allowed (unmonitored, FAILOVER TO)", handoff, func(w *World, _ *Memory) { unmonitored(w) }, ""},
		{"handoff: the node is not observed as the primary", handoff, func(w *World, _ *Memory) {
			w.Nodes[0].Repl = valkey.Replication{Role: valkey.RoleReplica}
		}, "vk-0-0 was not observed as the primary (role replica)"},
		{"handoff: a replica was not observed", handoff, func(w *World, _ *Memory) { w.Nodes[2].Reachable, w.Nodes[2].Err = false, "i/o timeout" },
			"vk-2-0 was not observed (i/o timeout)"},
		{"handoff: its StatefulSet was not observed", handoff, func(w *World, _ *Memory) { w.Nodes[0].StatefulSet = nil },
			"StatefulSet vk-0 was not observed"},
		{"handoff: the Sentinel info is unreadable", handoff, func(w *World, _ *Memory) {
			w.SentinelInfo, w.SentinelInfoErr = nil, "sentinels.json: monitorName \"\" is invalid"
		}, "who owns failover is unknown"},
		{"handoff: unmonitored, the target is not a linked replica", handoff, func(w *World, _ *Memory) {
			unmonitored(w)
			w.Nodes[1].Repl.LinkUp = false
		}, "the target vk-1-0 was not observed as a linked replica of vk-0-0"},
		{"handoff: a Sentinel did not answer", handoff, func(w *World, _ *Memory) { w.Sentinels[1].Err = "i/o timeout" },
			"Sentinel s1:26379 did not answer (i/o timeout)"},
		{"handoff: a Sentinel does not know the monitor", handoff, func(w *World, _ *Memory) { w.Sentinels[1].Found = false },
			"Sentinel s1:26379 does not know monitor vk"},
		{"handoff: a Sentinel's replica list was not read", handoff, func(w *World, _ *Memory) { w.Sentinels[2].ReplicasErr = "i/o timeout" },
			"Sentinel s2:26379 did not list its replicas (i/o timeout)"},
		{"handoff: a failover is in flight", handoff, func(w *World, _ *Memory) {
			w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
		}, "a Sentinel reports a failover in flight"},
		{"handoff: not every Sentinel names the node", handoff, func(w *World, _ *Memory) {
			for i := range w.Sentinels {
				w.Sentinels[i].Monitor.Host = in.Nodes[1].Host
			}
		}, "not every Sentinel names vk-0-0 as the primary"},
		{"handoff: CKQUORUM was not observed", handoff, func(w *World, _ *Memory) {
			w.QuorumAsked, w.Quorum = false, valkey.Quorum{Message: "no Sentinel answered CKQUORUM"}
		}, "SENTINEL CKQUORUM was not observed OK (no Sentinel answered CKQUORUM)"},
		{"handoff: CKQUORUM fails", handoff, func(w *World, _ *Memory) { w.Quorum = valkey.Quorum{Message: "NOQUORUM 1 usable Sentinels"} },
			"SENTINEL CKQUORUM was not observed OK (NOQUORUM"},

		// pod delete (planned roll)
		{"delete pod: allowed", deletePod, nil, ""},
		{"delete pod: allowed (single node: the primary)", Step{Kind: DeletePod, Node: in.Nodes[0]}, func(w *World, _ *Memory) {
			w.Instance.Nodes, w.Nodes = w.Instance.Nodes[:1], w.Nodes[:1]
		}, ""},
		{"delete pod: the pod was not observed", deletePod, func(w *World, _ *Memory) { w.Nodes[1].PodExists = false }, "vk-1-0's pod was not observed"},
		{"delete pod: its StatefulSet was not observed", deletePod, func(w *World, _ *Memory) { w.Nodes[1].StatefulSet = nil },
			"StatefulSet vk-1 was not observed"},
		{"delete pod: the primary", Step{Kind: DeletePod, Node: in.Nodes[0]}, nil, "a primary is handed off before its pod is replaced"},
		{"delete pod: another node was not observed", deletePod, func(w *World, _ *Memory) { w.Nodes[2].Reachable, w.Nodes[2].Err = false, "EOF" },
			"vk-2-0 was not observed (EOF)"},
		{"delete pod: the Sentinel info is unreadable", deletePod, func(w *World, _ *Memory) {
			w.SentinelInfo, w.SentinelInfoErr = nil, "sentinels.json: unexpected end of JSON input"
		}, "who owns failover is unknown"},
		{"delete pod: most Sentinels did not answer", deletePod, func(w *World, _ *Memory) {
			w.Sentinels[0].Err, w.Sentinels[1].Err = "EOF", "EOF"
		}, "only 1 of 3 Sentinels answered: a failover could be running unseen"},
		{"delete pod: a Sentinel flags the primary down", deletePod, func(w *World, _ *Memory) {
			w.Sentinels[1].Monitor.Flags = []string{"master", "s_down"}
		}, "a Sentinel flags the primary down"},
		{"delete pod: a stale pod never scheduled, while the primary is down and most Sentinels are silent", deletePod, func(w *World, _ *Memory) {
			unscheduledStale(w, 1)
			w.Sentinels[1].Monitor.Flags = []string{"master", "s_down"}
			w.Sentinels[0].Err, w.Sentinels[2].Err = "EOF", "EOF"
			w.Nodes[2].Reachable, w.Nodes[2].Err = false, "EOF"
		}, ""},
		{"delete pod: an unscheduled pod at the current revision is not exempt", deletePod, func(w *World, _ *Memory) {
			unscheduledStale(w, 1)
			w.Nodes[1].Revision = "r1"
			w.Sentinels[1].Monitor.Flags = []string{"master", "s_down"}
		}, "a Sentinel flags the primary down"},

		// SENTINEL RESET (scale-in)
		{"reset: allowed", reset, func(w *World, _ *Memory) { withGone(w) }, ""},
		{"reset: not monitored", reset, func(w *World, _ *Memory) { unmonitored(w) }, "vk is not monitored"},
		{"reset: not one of the instance's Sentinels", Step{Kind: Reset, Sentinel: "other:26379", For: []string{gone}},
			func(w *World, _ *Memory) { withGone(w) }, "other:26379 is not one of the instance's Sentinels"},
		{"reset: a Sentinel did not answer (Found 2: the heal reached one dial of the pass and not another)", reset, func(w *World, _ *Memory) {
			withGone(w)
			w.Sentinels[2].Err = "dial tcp: connection refused"
		}, "Sentinel s2:26379 did not answer"},
		{"reset: a Sentinel's replica list was not read", reset, func(w *World, _ *Memory) {
			withGone(w)
			w.Sentinels[0].ReplicasErr = "i/o timeout"
		}, "Sentinel s0:26379 did not list its replicas"},
		{"reset: a Sentinel does not know the monitor", reset, func(w *World, _ *Memory) {
			withGone(w)
			w.Sentinels[0].Found = false
		}, "does not know monitor vk"},
		{"reset: the Sentinels disagree (Found 2: the cut-off Sentinel still names the old primary)", reset, func(w *World, _ *Memory) {
			w.Sentinels[1].Monitor.Host = in.Nodes[1].Host
			w.Sentinels[1].Replicas = []valkey.SentinelReplica{{Host: in.Nodes[0].Host, Port: 6379, Flags: []string{"s_down", "slave"}}}
		}, "the Sentinels name different primaries"},
		{"reset: a failover is in flight", reset, func(w *World, _ *Memory) {
			withGone(w)
			w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
		}, "a Sentinel reports a failover in flight"},
		{"reset: the Sentinels' primary is not observed as a primary node", reset, func(w *World, _ *Memory) {
			withGone(w)
			w.Nodes[0].Reachable, w.Nodes[0].Err = false, "i/o timeout"
		}, "was not observed as a primary node"},
		{"reset: the primary changed recently", reset, func(w *World, m *Memory) {
			withGone(w)
			m.PrimarySince = now.Add(-20 * time.Second)
		}, "the primary changed (or this controller started) 20s ago, less than twice failover-timeout (30s)"},
		{"reset: the primary was never observed before", reset, func(w *World, m *Memory) {
			withGone(w)
			m.PrimarySince = time.Time{}
		}, "less than twice failover-timeout"},
		{"reset: no gone replica named", Step{Kind: Reset, Sentinel: "s1:26379"}, func(w *World, _ *Memory) { withGone(w) }, "no gone replica named"},
		{"reset: for a node of the instance (Found 2: a node flagged s_down at a heal)", Step{Kind: Reset, Sentinel: "s1:26379", For: []string{addr(in, 2)}},
			func(w *World, _ *Memory) { w.Sentinels[1].Replicas[1].Flags = []string{"s_down", "slave"} }, "vk-2-0.vk-2.ns.svc.cluster.local:6379 is a node of the instance"},
		{"reset: the Sentinel does not flag the replica s_down", reset, func(w *World, _ *Memory) {
			withGone(w)
			w.Sentinels[1].Replicas[2].Flags = []string{"slave"}
		}, "s1:26379 does not list " + gone + " flagged s_down"},

		// any step while the primary's pod is terminating (issue 14: its preStop hook hands the role off)
		{"repoint: the primary's pod is terminating", repoint, func(w *World, _ *Memory) { orphan(w); w.Nodes[0].Terminating = true },
			"the primary's pod vk-0-0 is terminating"},
		{"promote: the primary's pod is terminating", promote, func(w *World, _ *Memory) {
			unmonitored(w)
			w.Nodes[0].Terminating = true
		}, "the primary's pod vk-0-0 is terminating"},
		{"handoff: the primary's pod is terminating", handoff, func(w *World, _ *Memory) { w.Nodes[0].Terminating = true },
			"the primary's pod vk-0-0 is terminating"},
		{"delete pod: the primary's pod is terminating (Sentinel names it, it no longer answers)", deletePod, func(w *World, _ *Memory) {
			w.Nodes[0].Terminating, w.Nodes[0].Reachable, w.Nodes[0].Repl = true, false, valkey.Replication{}
		}, "the primary's pod vk-0-0 is terminating"},
		{"reset: the primary's pod is terminating", reset, func(w *World, _ *Memory) { withGone(w); w.Nodes[0].Terminating = true },
			"the primary's pod vk-0-0 is terminating"},

		// issue 25: a Sentinel names a primary that is not a node (a forged hello on a shared quorum)
		{"TestSecurityForeignPrimary repoint refused", repoint, func(w *World, _ *Memory) { orphan(w); w.Sentinels[1].Monitor.Host = "attacker.tenant-a.svc" },
			"names attacker.tenant-a.svc:6379, which is not a node of this instance"},
		{"TestSecurityForeignPrimary hand-off refused", handoff, func(w *World, _ *Memory) { w.Sentinels[0].Monitor.Port = 7000 },
			"names vk-0-0.vk-0.ns.svc.cluster.local:7000, which is not a node"},
		{"TestSecurityForeignPrimary reset refused", reset, func(w *World, _ *Memory) { withGone(w); w.Sentinels[2].Monitor.Host = "10.0.0.9" },
			"names 10.0.0.9:6379, which is not a node"},

		{"a step of the other controller", Step{Kind: Remove}, nil, "not a step of the instance controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, m := steadyWorld(), settledMemory()
			if tt.mutate != nil {
				tt.mutate(&w, &m)
			}
			got := Check(w, m, tt.step)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
			assert.True(t, strings.HasPrefix(got, string(tt.step.Kind)+" refused: ") || tt.step.Kind == Remove, "refusal names the step: %q", got)
		})
	}
}

func sentinelWorld() SentinelWorld {
	w := SentinelWorld{Release: "q", Now: now, StatefulSet: &StatefulSet{Name: "q", UpdateRevision: "r2"}, Pods: map[string]PodRef{},
		Wanted: map[string]bool{"vk": true}, Keep: map[string]string{}, QuorumOK: map[string]bool{"vk": true}}
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("q-%d", i)
		w.Pods[pod] = PodRef{UID: "u" + pod, Version: "1", Stale: true}
		w.Sentinels = append(w.Sentinels, registration.SentinelState{Pod: pod, Addr: pod + ":26379", Ready: true, Reachable: true,
			Monitors: map[string]valkey.Monitor{
				"vk":  {Name: "vk", Flags: []string{"master"}, FailoverTimeoutMs: 15000},
				"old": {Name: "old", Flags: []string{"master"}, FailoverTimeoutMs: 15000}}})
	}
	return w
}

// TestCheckSentinelStep has one row per refusal of the sentinel controller's policy (SENTINEL REMOVE and Sentinel
// pod deletes), and one row per step kind that the steady world allows.
func TestCheckSentinelStep(t *testing.T) {
	remove := Step{Kind: Remove, Pod: "q-1", Monitor: "old", Reason: "instance no longer selected"}
	deletePod := Step{Kind: DeleteSentinelPod, Pod: "q-0"}
	flag := func(w *SentinelWorld, pod int, name string, fields map[string]string, flags ...string) {
		m := w.Sentinels[pod].Monitors[name]
		m.Flags, m.Fields = flags, fields
		w.Sentinels[pod].Monitors[name] = m
	}
	tests := []struct {
		name   string
		step   Step
		mutate func(w *SentinelWorld)
		want   string
	}{
		{"remove: allowed", remove, nil, ""},
		{"remove: the descriptors could not be listed", remove, func(w *SentinelWorld) { w.DescriptorsErr = "the server is currently unable to handle the request" },
			"the instance descriptors could not be listed"},
		{"remove: a selected descriptor's monitor is unknown (F3)", remove, func(w *SentinelWorld) {
			w.Unowned = "descriptor x-instance cannot be read (instance.json: unexpected end of JSON input), so the monitor it owns is unknown"
		}, "so the monitor it owns is unknown"},
		{"remove: the monitor is wanted", Step{Kind: Remove, Pod: "q-1", Monitor: "vk"}, nil, "monitor vk belongs to a selected instance"},
		{"remove: the monitor's instance did not resolve (F3)", remove, func(w *SentinelWorld) { w.Keep["old"] = "get secret ns/old-sentinel-auth: forbidden" },
			"did not resolve (get secret ns/old-sentinel-auth: forbidden)"},
		{"remove: the Sentinel was not observed", remove, func(w *SentinelWorld) { w.Sentinels[1].Reachable = false }, "Sentinel q-1 was not observed"},
		{"remove: the Sentinel does not list the monitor", Step{Kind: Remove, Pod: "q-1", Monitor: "gone"}, nil, "Sentinel q-1 does not list monitor gone"},
		{"remove: its primary is down on that Sentinel", remove, func(w *SentinelWorld) { flag(w, 1, "old", nil, "master", "s_down") },
			"reports monitor old's primary down or failing over"},
		{"remove: another Sentinel is failing it over", remove, func(w *SentinelWorld) { flag(w, 2, "old", nil, "master", "failover_in_progress") },
			"Sentinel q-2 is failing monitor old over"},

		{"Sentinel pod delete: allowed", deletePod, nil, ""},
		{"Sentinel pod delete: allowed past a monitor down for good", deletePod, func(w *SentinelWorld) {
			for i := range w.Sentinels {
				flag(w, i, "vk", map[string]string{"s-down-time": "60000"}, "master", "s_down", "o_down")
			}
			w.QuorumOK["vk"] = false
		}, ""},
		{"Sentinel pod delete: the StatefulSet was not observed", deletePod, func(w *SentinelWorld) { w.StatefulSet = nil }, "the Sentinel StatefulSet was not observed"},
		{"Sentinel pod delete: the pod was not observed", deletePod, func(w *SentinelWorld) { delete(w.Pods, "q-0") }, "pod q-0 was not observed"},
		{"Sentinel pod delete: the descriptors could not be listed", deletePod, func(w *SentinelWorld) { w.DescriptorsErr = "timeout" }, "could not be listed (timeout)"},
		{"Sentinel pod delete: a selected descriptor's monitor is unknown", deletePod, func(w *SentinelWorld) { w.Unowned = "descriptor x cannot be read" },
			"descriptor x cannot be read"},
		{"Sentinel pod delete: a Sentinel is not ready", deletePod, func(w *SentinelWorld) { w.Sentinels[2].Ready = false }, "Sentinel q-2 was not observed ready"},
		{"Sentinel pod delete: a Sentinel was not reached", deletePod, func(w *SentinelWorld) { w.Sentinels[1].Reachable = false }, "Sentinel q-1 was not observed ready"},
		{"Sentinel pod delete: a kept monitor is registered", deletePod, func(w *SentinelWorld) { w.Keep["old"] = "Forbidden" },
			"monitor old did not resolve (Forbidden): a replacement could not be given it again"},
		{"Sentinel pod delete: a monitor is failing over", deletePod, func(w *SentinelWorld) { flag(w, 2, "vk", nil, "master", "failover_in_progress") },
			"monitor vk is failing over"},
		{"Sentinel pod delete: a monitor's primary just went down", deletePod, func(w *SentinelWorld) {
			flag(w, 0, "vk", map[string]string{"s-down-time": "1200"}, "master", "s_down")
		}, "monitor vk's primary is down (1.2s)"},
		{"Sentinel pod delete: CKQUORUM not observed OK", deletePod, func(w *SentinelWorld) { w.QuorumOK["vk"] = false },
			"SENTINEL CKQUORUM was not observed OK for monitor vk"},

		{"a step of the other controller", Step{Kind: Reset}, nil, "not a step of the sentinel controller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := sentinelWorld()
			if tt.mutate != nil {
				tt.mutate(&w)
			}
			got := CheckSentinelStep(w, tt.step)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
		})
	}
}

// unscheduledStale makes node i a pod of an older revision that the scheduler found no node for.
func unscheduledStale(w *World, i int) {
	n := &w.Nodes[i]
	n.Unschedulable, n.PodReady, n.Reachable, n.Err, n.Revision = true, false, false, "pod not running: Pending", "r0"
}
