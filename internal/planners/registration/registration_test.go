package registration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func wanted(name string) Wanted {
	return Wanted{Instance: spec.Instance{MonitorName: name, Port: 6379, SentinelConfig: map[string]string{
		"down-after-milliseconds": "5000", "auth-pass": "smuggled"},
		Nodes: []spec.Node{{Index: 0, Host: name + "-0-0.x"}, {Index: 1, Host: name + "-1-0.x"}}},
		Quorum: 2, AuthUser: "_sentinel", AuthPass: "pw", AuthHash: "h1", PrimaryHost: name + "-0-0.x", PrimaryPort: 6379}
}

func mon(name string, quorum int, downAfter string, flags ...string) valkey.Monitor {
	if len(flags) == 0 {
		flags = []string{"master"}
	}
	return valkey.Monitor{Name: name, Host: name + "-0-0.x", Port: 6379, Quorum: quorum, Flags: flags,
		Fields: map[string]string{"down-after-milliseconds": downAfter}}
}

func sentinel(pod string, applied map[string]string, ms ...valkey.Monitor) SentinelState {
	s := SentinelState{Pod: pod, Addr: pod + ":26379", Ready: true, Reachable: true, Monitors: map[string]valkey.Monitor{}, AppliedAuth: applied}
	for _, m := range ms {
		s.Monitors[m.Name] = m
	}
	return s
}

func summary(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		out = append(out, string(a.Kind)+" "+a.Name+"@"+a.Sentinel)
	}
	return out
}

func TestBuild(t *testing.T) {
	applied := map[string]string{"a": "h1"}
	tests := []struct {
		name string
		obs  Observation
		want []string
		held []string
	}{
		{"register on every reachable Sentinel lacking it",
			Observation{Wanted: []Wanted{wanted("a")}, Sentinels: []SentinelState{
				sentinel("s-0", nil), sentinel("s-1", applied, mon("a", 2, "5000")), {Pod: "s-2", Ready: false}}},
			[]string{"monitor a@s-0"}, nil},
		{"issue 24: a running Sentinel that is not ready (its readiness waits for these very monitors) is registered too",
			Observation{Wanted: []Wanted{wanted("a")}, Sentinels: []SentinelState{
				sentinel("s-0", applied, mon("a", 2, "5000")), {Pod: "s-1", Addr: "s-1:26379", Reachable: true, Monitors: map[string]valkey.Monitor{}}}},
			[]string{"monitor a@s-1"}, nil},
		{"idempotent when everything matches",
			Observation{Wanted: []Wanted{wanted("a")}, Sentinels: []SentinelState{sentinel("s-0", applied, mon("a", 2, "5000"))}},
			nil, nil},
		{"changed quorum or key is SET, not re-monitored",
			Observation{Wanted: []Wanted{wanted("a")}, Sentinels: []SentinelState{sentinel("s-0", applied, mon("a", 3, "1000"))}},
			[]string{"set a@s-0"}, nil},
		{"credentials re-applied after a controller restart",
			Observation{Wanted: []Wanted{wanted("a")}, Sentinels: []SentinelState{sentinel("s-0", nil, mon("a", 2, "5000"))}},
			[]string{"set a@s-0"}, nil},
		{"de-selected monitor is removed everywhere",
			Observation{Sentinels: []SentinelState{sentinel("s-0", nil, mon("b", 2, "5000")), sentinel("s-1", nil, mon("b", 2, "5000"))}},
			[]string{"remove b@s-0", "remove b@s-1"}, nil},
		{"TestCaseS10 never remove while the primary is down or failing over",
			Observation{Sentinels: []SentinelState{sentinel("s-0", nil, mon("b", 2, "5000", "master", "s_down")),
				sentinel("s-1", nil, mon("b", 2, "5000", "master", "failover_in_progress"))}},
			nil, []string{"b"}},
		{"TestF3 a selected instance that did not resolve keeps its monitor",
			Observation{Keep: map[string]string{"b": "get secret: forbidden"}, Sentinels: []SentinelState{sentinel("s-0", nil, mon("b", 2, "5000"))}},
			nil, []string{"b"}},
		{"TestF3 no removal while a selected descriptor's monitor is unknown",
			Observation{HoldRemovals: "descriptor x-instance unreadable", Sentinels: []SentinelState{sentinel("s-0", nil, mon("b", 2, "5000"))}},
			nil, []string{"b"}},
		{"no primary known: held",
			Observation{Wanted: []Wanted{{Instance: spec.Instance{MonitorName: "c"}, Quorum: 2}}, Sentinels: []SentinelState{sentinel("s-0", nil)}},
			nil, []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(tt.obs)
			assert.Equal(t, tt.want, summary(p))
			for _, h := range tt.held {
				assert.Contains(t, p.Held, h)
			}
			for _, a := range p.Actions {
				for _, kv := range a.Pairs {
					assert.NotEqual(t, "smuggled", kv[1], "reserved keys from sentinel.config are never applied")
				}
			}
		})
	}
}

// TestLoadingPrimaryHeldUntilLoaded: the only node reporting role master is still loading its data set (a
// restore, a restart with a large RDB): no MONITOR, and the held reason names it and says why.
func TestLoadingPrimaryHeldUntilLoaded(t *testing.T) {
	w := Wanted{Instance: spec.Instance{MonitorName: "c"}, Quorum: 2, PrimaryLoading: "c-0-0.x:6379"}
	p := Build(Observation{Wanted: []Wanted{w}, Sentinels: []SentinelState{sentinel("s-0", nil)}})
	assert.Empty(t, p.Actions)
	assert.Contains(t, p.Held["c"], "c-0-0.x:6379 reports role master but is still loading its data set")
}

func TestMonitorCarriesCredentialsAndSortedKeys(t *testing.T) {
	w := wanted("a")
	w.Instance.SentinelConfig["failover-timeout"] = "15000"
	p := Build(Observation{Wanted: []Wanted{w}, Sentinels: []SentinelState{sentinel("s-0", nil)}})
	assert.Len(t, p.Actions, 1)
	assert.Equal(t, [][2]string{{"auth-user", "_sentinel"}, {"auth-pass", "pw"}, {"down-after-milliseconds", "5000"}, {"failover-timeout", "15000"}}, p.Actions[0].Pairs)
	assert.Contains(t, p.Warnings[0], "auth-pass")
}

func TestQuorum(t *testing.T) {
	assert.Equal(t, 2, DefaultQuorum(3))
	assert.Equal(t, 3, DefaultQuorum(5))
	assert.Equal(t, 3, DefaultQuorum(4))
	assert.Empty(t, QuorumWarning("a", 2, 3))
	assert.NotEmpty(t, QuorumWarning("a", 4, 3))
	assert.NotEmpty(t, QuorumWarning("a", 2, 4))
	assert.NotEmpty(t, QuorumWarning("a", 1, 3))
}

func TestAgreedPrimary(t *testing.T) {
	m1 := mon("a", 2, "5000")
	m2 := m1
	m2.Host = "a-1-0.x"
	nodes := wanted("a").Instance.NodeAddrs()
	h, _, ok := AgreedPrimary([]SentinelState{sentinel("s-0", nil, m2), sentinel("s-1", nil, m1), sentinel("s-2", nil, m2)}, "a", nodes)
	assert.True(t, ok)
	assert.Equal(t, "a-1-0.x", h)
	_, _, ok = AgreedPrimary([]SentinelState{sentinel("s-0", nil)}, "a", nodes)
	assert.False(t, ok)
	// issue 25: one Sentinel naming a foreign primary makes the Sentinels' view no source of truth, even a
	// majority's (the quorum controller re-registered a hijacked address on a Sentinel that lost the monitor)
	evil := m1
	evil.Host = "attacker.tenant-a.svc"
	_, _, ok = AgreedPrimary([]SentinelState{sentinel("s-0", nil, evil), sentinel("s-1", nil, evil), sentinel("s-2", nil)}, "a", nodes)
	assert.False(t, ok, "a hijacked address is never agreed")
	_, _, ok = AgreedPrimary([]SentinelState{sentinel("s-0", nil, evil), sentinel("s-1", nil, m1), sentinel("s-2", nil, m1)}, "a", nodes)
	assert.False(t, ok)
	assert.Equal(t, map[string]string{"s-0": "attacker.tenant-a.svc:6379"},
		ForeignPrimaries([]SentinelState{sentinel("s-0", nil, evil), sentinel("s-1", nil, m1)}, "a", nodes))
}

// TestSecurityForeignPrimaryRestored: a Sentinel that names a primary that is not a node of the instance
// gets a Restore at the observed primary, never a SET over the foreign address; without an observed primary
// it is held, never guessed (issue 25).
func TestSecurityForeignPrimaryRestored(t *testing.T) {
	applied := map[string]string{"a": "h1"}
	evil := mon("a", 2, "5000")
	evil.Host, evil.Port = "attacker.tenant-a.svc", 7000
	w := wanted("a")
	w.PrimaryObserved = true
	p := Build(Observation{Wanted: []Wanted{w}, Sentinels: []SentinelState{
		sentinel("s-0", applied, evil), sentinel("s-1", applied, mon("a", 2, "5000")), sentinel("s-2", nil)}})
	assert.Equal(t, []string{"restore a@s-0", "monitor a@s-2"}, summary(p))
	r := p.Actions[0]
	assert.Equal(t, "a-0-0.x", r.Host)
	assert.Equal(t, "attacker.tenant-a.svc:7000", r.From)
	assert.Equal(t, [2]string{"auth-user", "_sentinel"}, r.Pairs[0], "the restore sets the credentials again")

	w.PrimaryObserved = false
	p = Build(Observation{Wanted: []Wanted{w}, Sentinels: []SentinelState{sentinel("s-0", applied, evil)}})
	assert.Empty(t, p.Actions)
	assert.Contains(t, p.Held["a"], "never guessed")
}

// TestStuckSentinelRealigned: a Sentinel that names another node of the instance than a healthy strict
// majority, at a config epoch no newer than theirs, with no failover running anywhere, is stuck (Sentinel's
// hellos never move it: RELIABILITY.md "Found" 4); it is re-registered (Realign) only once that lasted
// failover-timeout, and never while anything could still move it on its own.
func TestStuckSentinelRealigned(t *testing.T) {
	applied := map[string]string{"a": "h1"}
	at := func(epoch int64, flags ...string) valkey.Monitor {
		m := mon("a", 2, "5000", flags...)
		m.ConfigEpoch, m.FailoverTimeoutMs = epoch, 15000
		return m
	}
	stale := func(epoch int64, flags ...string) valkey.Monitor {
		m := at(epoch, flags...)
		m.Host = "a-1-0.x"
		return m
	}
	w := wanted("a")
	w.PrimaryObserved = true
	now := time.Unix(1000, 0)
	long := map[string]time.Time{"s-2/a": now.Add(-16 * time.Second)}
	short := map[string]time.Time{"s-2/a": now.Add(-14 * time.Second)}
	tests := []struct {
		name      string
		w         Wanted
		sentinels []SentinelState
		since     map[string]time.Time
		want      []string
		stuck     bool
	}{
		{"stuck for failover-timeout: realigned", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2))}, long, []string{"realign a@s-2"}, true},
		{"an older epoch that hellos did not fix either: realigned", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(1))}, long, []string{"realign a@s-2"}, true},
		{"first seen: held", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2))}, nil, nil, true},
		{"not yet failover-timeout: held", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2))}, short, nil, true},
		{"a newer epoch: its hellos move the others", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(3))}, long, nil, false},
		{"it runs a failover", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2, "master", "failover_in_progress"))}, long, nil, false},
		{"a peer runs a failover", w, []SentinelState{sentinel("s-0", applied, at(2, "master", "failover_in_progress")), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2))}, long, nil, false},
		{"the majority's primary is down on one of them", w, []SentinelState{sentinel("s-0", applied, at(2, "s_down", "master")), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2))}, long, nil, false},
		{"the majority disagrees on the epoch", w, []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(1)),
			sentinel("s-2", applied, stale(1))}, long, nil, false},
		{"no strict majority (one names it, one unreachable)", w, []SentinelState{sentinel("s-0", applied, at(2)), {Pod: "s-1"},
			sentinel("s-2", applied, stale(2))}, long, nil, false},
		{"the primary was not observed", wanted("a"), []SentinelState{sentinel("s-0", applied, at(2)), sentinel("s-1", applied, at(2)),
			sentinel("s-2", applied, stale(2))}, long, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(Observation{Wanted: []Wanted{tt.w}, Sentinels: tt.sentinels, Now: now, StuckSince: tt.since})
			assert.Equal(t, tt.want, summary(p))
			if tt.stuck {
				assert.Equal(t, []string{"s-2/a"}, p.Stuck)
			} else {
				assert.Empty(t, p.Stuck)
			}
			if len(tt.want) > 0 {
				a := p.Actions[0]
				assert.Equal(t, "a-0-0.x", a.Host)
				assert.Equal(t, "a-1-0.x:6379", a.From)
				assert.Equal(t, [2]string{"auth-user", "_sentinel"}, a.Pairs[0], "the realignment sets the credentials again")
			} else if tt.stuck {
				assert.Contains(t, p.Held["a"], "re-registered if it lasts failover-timeout")
			}
		})
	}
}
