package plan

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// steadySentinels is quorum q (3 Sentinels, all ready and reachable) selecting instance vk, resolved and
// registered everywhere with CKQUORUM OK, its Sentinel info published; nothing stale.
func steadySentinels() SentinelWorld {
	in := testInstance(3)
	w := SentinelWorld{Release: "q", Namespace: "ns", Now: now, Port: 26379, StatefulSet: &StatefulSet{Name: "q", UpdateRevision: "r1"},
		Pods: map[string]PodRef{}, Published: []string{"vk-sentinels"}}
	w.Instances = []MonitoredInstance{{Descriptor: "vk-instance", Instance: in,
		Want: registration.Wanted{Instance: in, Quorum: 2, AuthUser: "_sentinel", AuthPass: "pw", AuthHash: "h",
			PrimaryHost: in.Nodes[0].Host, PrimaryPort: 6379}}}
	for i := 0; i < 3; i++ {
		pod := fmt.Sprintf("q-%d", i)
		w.Pods[pod] = PodRef{UID: "u", Version: "1"}
		w.Hosts = append(w.Hosts, pod+".q-headless.ns.svc.cluster.local")
		w.Sentinels = append(w.Sentinels, registration.SentinelState{Pod: pod, Addr: pod + ":26379", Ready: true, Reachable: true,
			AppliedAuth: map[string]string{"vk": "h"},
			Monitors: map[string]valkey.Monitor{"vk": {Name: "vk", Host: in.Nodes[0].Host, Port: 6379, Quorum: 2, Flags: []string{"master"},
				FailoverTimeoutMs: 15000, Fields: map[string]string{}}}})
		w.CKQuorum = append(w.CKQuorum, map[string]valkey.Quorum{"vk": {OK: true, Message: "OK 3 usable Sentinels"}})
	}
	return w
}

func kinds(d SentinelDecision) []string {
	var out []string
	for _, a := range d.Registration.Actions {
		out = append(out, string(a.Kind)+":"+a.Name+"@"+a.Sentinel)
	}
	return out
}

// TestQuorum is the sentinel controller's planner, one row per case: registration before the Sentinel roll,
// one Sentinel pod at a time, the policy's vetting of REMOVE and of the pod delete, and what is published.
func TestPlanSentinels(t *testing.T) {
	staleAll := func(w *SentinelWorld) {
		for pod, p := range w.Pods {
			p.Stale = true
			w.Pods[pod] = p
		}
	}
	deselect := func(w *SentinelWorld) { w.Instances = nil }
	tests := []struct {
		name     string
		mutate   func(w *SentinelWorld)
		actions  []string
		roll     string // the Sentinel pod to replace ("" none)
		wait     string // substring of RollWait
		refused  string // substring of the first refusal
		planned  bool
		withdraw []string
		publish  int
	}{
		{name: "steady: nothing to do", planned: true, publish: 1},
		{name: "a Sentinel lost the monitor (restarted empty): MONITOR there, no roll this pass", mutate: func(w *SentinelWorld) {
			delete(w.Sentinels[1].Monitors, "vk")
		}, actions: []string{"monitor:vk@q-1"}, publish: 1},
		{name: "deselected: REMOVE everywhere, its Sentinel info withdrawn", mutate: deselect,
			actions: []string{"remove:vk@q-0", "remove:vk@q-1", "remove:vk@q-2"}, withdraw: []string{"vk-sentinels"}},
		{name: "deselected while another Sentinel fails it over: the policy refuses those REMOVEs", mutate: func(w *SentinelWorld) {
			deselect(w)
			m := w.Sentinels[2].Monitors["vk"]
			m.Flags = []string{"master", "failover_in_progress"}
			w.Sentinels[2].Monitors["vk"] = m
		}, refused: "sentinel-remove refused: Sentinel q-2 is failing monitor vk over", withdraw: []string{"vk-sentinels"}},
		{name: "not resolved (Secret unreadable): kept, not removed, Sentinel info kept (F3)", mutate: func(w *SentinelWorld) {
			w.Instances[0].Unresolved = "get secret ns/vk-sentinel-auth: forbidden"
		}, planned: true, wait: "cannot be resolved"},
		{name: "a selected descriptor cannot be read: nothing removed, no Sentinel replaced", mutate: func(w *SentinelWorld) {
			w.Instances = append(w.Instances, MonitoredInstance{Descriptor: "x-instance", Refused: "instance.json: unexpected end of JSON input"})
			w.Sentinels[0].Monitors["old"] = valkey.Monitor{Name: "old", Flags: []string{"master"}}
			staleAll(w)
		}, planned: true, publish: 1, wait: "so the monitor it owns is unknown"},
		{name: "stale Sentinels: the first is replaced", mutate: staleAll, planned: true, roll: "q-0", publish: 1},
		{name: "stale Sentinels, a monitor failing over: the roll waits", mutate: func(w *SentinelWorld) {
			staleAll(w)
			m := w.Sentinels[1].Monitors["vk"]
			m.Flags = []string{"master", "failover_in_progress"}
			w.Sentinels[1].Monitors["vk"] = m
		}, planned: true, wait: "monitor vk is failing over", publish: 1},
		{name: "stale Sentinels, CKQUORUM not OK everywhere: the roll waits", mutate: func(w *SentinelWorld) {
			staleAll(w)
			w.CKQuorum[2]["vk"] = valkey.Quorum{Message: "NOQUORUM 1 usable Sentinels"}
		}, planned: true, wait: "SENTINEL CKQUORUM fails for monitor vk", publish: 1},
		{name: "stale Sentinels, one pod not observed: the roll waits", mutate: func(w *SentinelWorld) {
			staleAll(w)
			delete(w.Pods, "q-0")
		}, planned: true, wait: "q-0 is not ready", publish: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := steadySentinels()
			if tt.mutate != nil {
				tt.mutate(&w)
			}
			w.Derive()
			d := PlanSentinels(w, time.Time{})
			assert.Equal(t, tt.actions, kinds(d))
			if tt.roll == "" {
				assert.Nil(t, d.Roll)
			} else if assert.NotNil(t, d.Roll, "wait: %s, refused: %v", d.RollWait, d.Refused) {
				assert.Equal(t, tt.roll, d.Roll.Pod)
			}
			if tt.wait == "" {
				assert.Empty(t, d.RollWait)
			} else {
				assert.Contains(t, d.RollWait, tt.wait)
			}
			if tt.refused == "" {
				assert.Empty(t, d.Refused)
			} else if assert.NotEmpty(t, d.Refused) {
				assert.Contains(t, d.Refused[0].Why, tt.refused)
			}
			assert.Equal(t, tt.planned, d.RollPlanned)
			assert.Equal(t, tt.withdraw, d.Withdraw)
			assert.Len(t, d.Publish, tt.publish)
			for _, p := range d.Publish {
				assert.Equal(t, spec.SentinelInfo{MonitorName: "vk", SentinelRelease: "q", Port: 26379, Hosts: w.Hosts}, p.Info)
			}
		})
	}
}

// TestSentinelStatus: the quorum status is built from the world and the decision alone.
func TestSentinelStatus(t *testing.T) {
	w := steadySentinels()
	w.Instances = append(w.Instances, MonitoredInstance{Descriptor: "other-instance", Instance: spec.Instance{MonitorName: "other"},
		Refused: "already monitored by Sentinel release \"r\""})
	w.Derive()
	d := PlanSentinels(w, time.Time{})
	st := SentinelStatus(w, d, "")
	assert.Equal(t, 3, st.ReadySentinel)
	if assert.Len(t, st.Monitors, 2) {
		assert.Equal(t, 3, st.Monitors[0].Registered)
		assert.True(t, st.Monitors[0].QuorumOK)
		assert.Equal(t, "already monitored by Sentinel release \"r\"", st.Monitors[1].Refused)
	}
	g := SentinelGauges(w, d, st.Monitors)
	assert.Equal(t, []string{"ns/other"}, g.Refused)
	assert.Len(t, g.Monitors, 1)
}

// TestQuorumAcrossNamespaces (issue 17): an instance of another namespace than the quorum's is published with
// the quorum's namespace, its Sentinel info and descriptor are keyed namespace/name, the Sentinel info of an
// instance the quorum no longer selects in another namespace is withdrawn by that key, and an instance refused
// for sharing another's monitor name neither wants nor keeps that monitor.
func TestQuorumAcrossNamespaces(t *testing.T) {
	w := steadySentinels()
	w.Instances[0].Namespace = "t1"
	w.Published = []string{"t1/vk-sentinels", "t2/gone-sentinels", "vk-sentinels"}
	w.Derive()
	d := PlanSentinels(w, time.Time{})
	assert.Equal(t, "t1/vk-instance", d.Publish[0].Descriptor)
	assert.Equal(t, "ns", d.Publish[0].Info.SentinelNamespace, "the quorum's namespace in the instance's Sentinel info")
	assert.Equal(t, []string{"t2/gone-sentinels", "vk-sentinels"}, d.Withdraw, "t1/vk-sentinels is the selected instance's")
	assert.Equal(t, "t1/vk", MonitorStatuses(w)[0].Instance)

	local := steadySentinels()
	local.Derive()
	assert.Empty(t, PlanSentinels(local, time.Time{}).Publish[0].Info.SentinelNamespace, "an instance of the quorum's own namespace")

	twin := MonitoredInstance{Descriptor: "vk-instance", Namespace: "t2", Instance: w.Instances[0].Instance, Refused: "monitor name vk is also used", Collision: true}
	w.Instances = append(w.Instances, twin)
	w.Derive()
	assert.True(t, w.Wanted["vk"])
	assert.NotContains(t, w.Keep, "vk", "a collision's loser keeps nothing: its Keep would hold every Sentinel roll")
}

// TestSecurityQuorumRestoresForeignPrimary: a Sentinel naming a primary that is not a node of the instance
// (issue 25) gets SENTINEL REMOVE + MONITOR at the primary observed this pass, vetted by CheckSentinelStep: never at
// a guess, never during a failover.
func TestSecurityQuorumRestoresForeignPrimary(t *testing.T) {
	hijack := func(w *SentinelWorld, pods ...int) {
		for _, i := range pods {
			m := w.Sentinels[i].Monitors["vk"]
			m.Host, m.Port = "attacker.tenant-a.svc", 7000
			w.Sentinels[i].Monitors["vk"] = m
		}
		w.Instances[0].Want.PrimaryObserved = true
		w.Derive()
	}
	w := steadySentinels()
	hijack(&w, 0, 1, 2)
	d := PlanSentinels(w, time.Time{})
	assert.Equal(t, []string{"restore:vk@q-0", "restore:vk@q-1", "restore:vk@q-2"}, kinds(d))
	assert.Empty(t, d.Refused)
	assert.Nil(t, d.Roll, "no Sentinel roll in a pass that restores")

	restore := Step{Kind: RestoreMonitor, Pod: "q-0", Monitor: "vk", Sentinel: "vk-0-0.vk-0.ns.svc.cluster.local:6379"}
	tests := []struct {
		name   string
		step   Step
		mutate func(w *SentinelWorld)
		want   string
	}{
		{"allowed", restore, nil, ""},
		{"the target is not a node", Step{Kind: RestoreMonitor, Pod: "q-0", Monitor: "vk", Sentinel: "attacker.tenant-a.svc:7000"}, nil,
			"is not a node of instance vk-instance"},
		{"the target was not observed as primary", restore, func(w *SentinelWorld) { w.Instances[0].Want.PrimaryObserved = false },
			"was not observed as the primary"},
		{"the observed primary is another node", Step{Kind: RestoreMonitor, Pod: "q-0", Monitor: "vk", Sentinel: "vk-1-0.vk-1.ns.svc.cluster.local:6379"}, nil,
			"was not observed as the primary"},
		{"the Sentinel was not observed", restore, func(w *SentinelWorld) { w.Sentinels[0].Reachable = false }, "Sentinel q-0 was not observed"},
		{"the Sentinel names a node", Step{Kind: RestoreMonitor, Pod: "q-0", Monitor: "vk", Sentinel: restore.Sentinel}, func(w *SentinelWorld) {
			w.Sentinels[0].Monitors["vk"] = steadySentinels().Sentinels[0].Monitors["vk"]
		}, "nothing to restore"},
		{"a failover runs", restore, func(w *SentinelWorld) {
			m := w.Sentinels[2].Monitors["vk"]
			m.Flags = []string{"master", "failover_in_progress"}
			w.Sentinels[2].Monitors["vk"] = m
		}, "Sentinel q-2 is failing monitor vk over"},
		{"the descriptors could not be listed", restore, func(w *SentinelWorld) { w.DescriptorsErr = "timeout" }, "could not be listed"},
		{"not a selected instance's monitor", Step{Kind: RestoreMonitor, Pod: "q-0", Monitor: "other", Sentinel: restore.Sentinel}, nil,
			"belongs to no selected instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := steadySentinels()
			hijack(&w, 0, 1, 2)
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

// TestQuorumRealignsAStuckSentinel (issue 24, RELIABILITY.md "Found" 4): a Sentinel that names another node
// than the healthy majority at their config epoch is re-registered (REMOVE + MONITOR) at the observed primary
// once that lasted failover-timeout, vetted by CheckSentinelStep (RealignMonitor): never while a failover runs, never
// at a primary not observed this pass.
func TestQuorumRealignsAStuckSentinel(t *testing.T) {
	stick := func(w *SentinelWorld) {
		m := w.Sentinels[2].Monitors["vk"]
		m.Host = "vk-1-0.vk-1.ns.svc.cluster.local"
		w.Sentinels[2].Monitors["vk"] = m
		w.Instances[0].Want.PrimaryObserved = true
		w.Derive()
	}
	w := steadySentinels()
	stick(&w)
	d := PlanSentinels(w, time.Time{})
	assert.Empty(t, kinds(d), "first seen: held")
	assert.Equal(t, []string{"q-2/vk"}, d.Registration.Stuck)
	w.StuckSince = map[string]time.Time{"q-2/vk": w.Now.Add(-time.Hour)}
	d = PlanSentinels(w, time.Time{})
	assert.Equal(t, []string{"realign:vk@q-2"}, kinds(d))
	assert.Empty(t, d.Refused)

	realign := Step{Kind: RealignMonitor, Pod: "q-2", Monitor: "vk", Sentinel: "vk-0-0.vk-0.ns.svc.cluster.local:6379"}
	tests := []struct {
		name   string
		step   Step
		mutate func(w *SentinelWorld)
		want   string
	}{
		{"allowed", realign, nil, ""},
		{"the target was not observed as primary", realign, func(w *SentinelWorld) { w.Instances[0].Want.PrimaryObserved = false },
			"was not observed as the primary"},
		{"the target is not the observed primary", Step{Kind: RealignMonitor, Pod: "q-2", Monitor: "vk", Sentinel: "vk-1-0.vk-1.ns.svc.cluster.local:6379"}, nil,
			"was not observed as the primary"},
		{"a failover runs", realign, func(w *SentinelWorld) {
			m := w.Sentinels[0].Monitors["vk"]
			m.Flags = []string{"master", "failover_in_progress"}
			w.Sentinels[0].Monitors["vk"] = m
		}, "is not stuck"},
		{"the Sentinel agrees", Step{Kind: RealignMonitor, Pod: "q-0", Monitor: "vk", Sentinel: realign.Sentinel}, nil, "is not stuck"},
		{"the Sentinel was not observed", realign, func(w *SentinelWorld) { w.Sentinels[2].Reachable = false }, "is not stuck"},
		{"the descriptors could not be listed", realign, func(w *SentinelWorld) { w.DescriptorsErr = "timeout" }, "could not be listed"},
		{"not a selected instance's monitor", Step{Kind: RealignMonitor, Pod: "q-2", Monitor: "other", Sentinel: realign.Sentinel}, nil,
			"belongs to no selected instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := steadySentinels()
			stick(&w)
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
