package bootstrap

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func node(i int) spec.Node {
	return spec.Node{Index: i, Host: []string{"vk-0-0.vk-0", "vk-1-0.vk-1", "vk-2-0.vk-2"}[i]}
}

func primaryPeer(i int, keys int64) Peer {
	return Peer{Node: node(i), Reachable: true, Keys: keys, Repl: valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 100}}
}

func replicaPeer(i int, keys int64, of string) Peer {
	return Peer{Node: node(i), Reachable: true, Keys: keys, Repl: valkey.Replication{Role: valkey.RoleReplica, PrimaryHost: of, ReplicaReplOffset: 90}}
}

// unseen is every node but self, none of them answering (the peers of a boot that reached none).
func unseen(self int) []Peer {
	var out []Peer
	for i := range 3 {
		if i != self {
			out = append(out, Peer{Node: node(i)})
		}
	}
	return out
}

func names(host string, n int) []SentinelAnswer {
	out := make([]SentinelAnswer, n)
	for i := range out {
		out[i] = SentinelAnswer{Found: true, Host: host, Port: 6379}
	}
	return out
}

const replID = "0123456789abcdef0123456789abcdef01234567"

// seenDown makes every answer flag its primary s_down for ms milliseconds (down-after 5000), no failover running.
func seenDown(answers []SentinelAnswer, ms int) []SentinelAnswer {
	for i := range answers {
		answers[i].Monitor = valkey.Monitor{Flags: []string{"master", "s_down", "o_down"}, DownAfterMs: 5000, FailoverState: "none",
			Fields: map[string]string{"s-down-time": strconv.Itoa(ms)}}
	}
	return answers
}

// seenUp makes every answer see its primary healthy.
func seenUp(answers []SentinelAnswer) []SentinelAnswer {
	for i := range answers {
		answers[i].Monitor = valkey.Monitor{Flags: []string{"master"}, DownAfterMs: 5000, FailoverState: "none"}
	}
	return answers
}

// at is a persisted dataset at offset off of replID.
func at(off int64) Persisted {
	return Persisted{HasData: true, Known: true, ReplID: replID, Offset: off}
}

// booting is a peer whose boot step published p.
func booting(i int, p Persisted) Peer { return Peer{Node: node(i), Booting: true, Persisted: p} }

// listing makes every answer list n replicas.
func listing(answers []SentinelAnswer, n int) []SentinelAnswer {
	for i := range answers {
		answers[i].Replicas = make([]valkey.SentinelReplica, n)
	}
	return answers
}

func TestPlanBoot(t *testing.T) {
	down := Peer{Node: node(2)}
	tests := []struct {
		name string
		obs  Observation
		want Kind
		host string
	}{
		{"sentinel names another node", Observation{Self: node(0), Port: 6379, Peers: unseen(0), Sentinels: names("vk-1-0.vk-1", 3)}, StartReplica, "vk-1-0.vk-1"},
		{"majority of sentinels wins", Observation{Self: node(2), Port: 6379, Peers: unseen(2), Sentinels: append(names("vk-1-0.vk-1", 2), names("vk-0-0.vk-0", 1)...)}, StartReplica, "vk-1-0.vk-1"},
		// issue 25: a forged hello on a shared quorum names an address that is not a node: never followed
		{"TestSecurityBootNeverFollowsAForeignPrimary", Observation{Self: node(1), Port: 6379, Peers: []Peer{primaryPeer(0, 10), replicaPeer(2, 10, "vk-0-0.vk-0")},
			Sentinels: names("attacker.tenant-a.svc", 3)}, Wait, ""},
		{"TestSecurityBootNeverFollowsAForeignPrimary same host other port", Observation{Self: node(1), Port: 6379, Peers: unseen(1),
			Sentinels: []SentinelAnswer{{Found: true, Host: "vk-0-0.vk-0", Port: 7000}, {Found: true, Host: "vk-0-0.vk-0", Port: 7000}}}, Wait, ""},
		// case S05: a restarted old primary rejoins as a replica, even with the controller down
		{"TestCaseS05 restarted old primary follows Sentinel", Observation{Self: node(0), Sentinels: names("vk-2-0.vk-2", 3),
			Peers: []Peer{replicaPeer(1, 10, "vk-2-0.vk-2"), primaryPeer(2, 10)}}, StartReplica, "vk-2-0.vk-2"},
		// case S08: named primary, empty, a replica holds data -> ask for a failover, never start empty
		{"TestCaseS08 empty named primary requests failover", Observation{Self: node(0), Sentinels: seenDown(names("VK-0-0.vk-0.", 3), 6000),
			Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0"), replicaPeer(2, 1000, "vk-0-0.vk-0")}}, RequestFailover, ""},
		// issue 14: asking before Sentinel sees the node down races its cached address (+fix-slave-config,
		// -failover-abort-no-good-slave, 2 x failover-timeout): wait for Sentinel's own failover first
		{"TestLostPrimary empty named primary not yet down for Sentinel: wait", Observation{Self: node(0), Sentinels: seenUp(names("vk-0-0.vk-0", 3)),
			Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0"), replicaPeer(2, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"TestLostPrimary one Sentinel does not see it down: wait", Observation{Self: node(0),
			Sentinels: append(seenDown(names("vk-0-0.vk-0", 2), 9000), seenUp(names("vk-0-0.vk-0", 1))...),
			Peers:     []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"TestLostPrimary down for less than down-after: Sentinel's own failover goes first", Observation{Self: node(0), Sentinels: seenDown(names("vk-0-0.vk-0", 3), 1200),
			Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"TestLostPrimary down for less than a set grace: wait", Observation{Self: node(0), FailoverGrace: 8 * time.Second,
			Sentinels: seenDown(names("vk-0-0.vk-0", 3), 6000), Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"TestLostPrimary a failover runs: wait", Observation{Self: node(0), Sentinels: func() []SentinelAnswer {
			a := seenDown(names("vk-0-0.vk-0", 3), 9000)
			a[1].Monitor.Flags = append(a[1].Monitor.Flags, "failover_in_progress")
			return a
		}(), Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"TestLostPrimary a Sentinel's view unreadable: wait", Observation{Self: node(0), Sentinels: func() []SentinelAnswer {
			a := seenDown(names("vk-0-0.vk-0", 3), 9000)
			a[2].MonitorErr = errors.New("timeout")
			return a
		}(), Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"TestLostPrimary after a request, a running failover means wait", Observation{Self: node(0), FailoverRequested: true, Sentinels: func() []SentinelAnswer {
			a := seenDown(names("vk-0-0.vk-0", 3), 9000)
			a[0].Monitor.FailoverState = "select_slave"
			return a
		}(), Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, Wait, ""},
		{"named primary with persisted data starts primary", Observation{Self: node(0), Local: Persisted{HasData: true}, Sentinels: names("vk-0-0.vk-0", 3),
			Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, StartPrimary, ""},
		{"named primary restarted empty, empty replicas up: hand over, never two primaries", Observation{Self: node(0), Sentinels: seenDown(names("vk-0-0.vk-0", 3), 5000),
			Peers: []Peer{replicaPeer(1, 0, "vk-0-0.vk-0")}}, RequestFailover, ""},
		{"named primary, cold start (replicas still booting, Sentinel lists none)", Observation{Self: node(0), Sentinels: names("vk-0-0.vk-0", 3),
			Peers: []Peer{{Node: node(1)}, {Node: node(2)}}}, StartPrimary, ""},
		// issue 12, F4: unreachable replicas are unknown, not absent
		{"TestF4 named empty primary, replicas unreachable but listed by Sentinel: hand over", Observation{Self: node(0),
			Sentinels: seenDown(listing(names("vk-0-0.vk-0", 3), 2), 7000), Peers: []Peer{{Node: node(1)}, {Node: node(2)}}}, RequestFailover, ""},
		{"TestF4 named empty primary, replica list unreadable: wait", Observation{Self: node(0),
			Sentinels: []SentinelAnswer{{Found: true, Host: "vk-0-0.vk-0", Port: 6379, ReplicasErr: errors.New("timeout")}},
			Peers:     []Peer{{Node: node(1)}, {Node: node(2)}}}, Wait, ""},
		{"TestF4 after a failover request a promoted peer means wait, never start primary", Observation{Self: node(0),
			FailoverRequested: true, Sentinels: names("vk-0-0.vk-0", 3), Peers: []Peer{primaryPeer(1, 0)}}, Wait, ""},
		{"TestF4 after a failover request with nothing visible: keep asking, never start primary", Observation{Self: node(0),
			FailoverRequested: true, Sentinels: seenDown(names("vk-0-0.vk-0", 3), 100), Peers: []Peer{{Node: node(1)}}}, RequestFailover, ""},
		{"TestF4 no Sentinel answers, no peer answers: wait, never a cold start", Observation{Self: node(0),
			Sentinels: []SentinelAnswer{{Err: errors.New("timeout")}, {Err: errors.New("timeout")}, {Found: false}},
			Peers:     []Peer{{Node: node(1)}, {Node: node(2)}}}, Wait, ""},
		{"most Sentinels answer they do not know the monitor: cold start", Observation{Self: node(0),
			Sentinels: []SentinelAnswer{{Err: errors.New("timeout")}, {Found: false}, {Found: false}},
			Peers:     []Peer{{Node: node(1)}, {Node: node(2)}}}, StartPrimary, ""},
		{"every Sentinel is gone (its name does not resolve): cold start", Observation{Self: node(0),
			Sentinels: []SentinelAnswer{{Err: errors.New("no such host"), Absent: true}, {Err: errors.New("no such host"), Absent: true}},
			Peers:     []Peer{{Node: node(1)}, {Node: node(2)}}}, StartPrimary, ""},
		{"sentinels unreachable fall back to peers", Observation{Self: node(0),
			Sentinels: []SentinelAnswer{{Err: errors.New("refused")}, {Found: false}},
			Peers:     []Peer{primaryPeer(1, 5), replicaPeer(2, 5, "vk-1-0.vk-1")}}, StartReplica, "vk-1-0.vk-1"},
		{"split brain among peers: highest offset", Observation{Self: node(0), Peers: []Peer{
			primaryPeer(1, 5), {Node: node(2), Reachable: true, Repl: valkey.Replication{Role: valkey.RolePrimary, MasterReplOffset: 500}}}}, StartReplica, "vk-2-0.vk-2"},
		{"cold start node 0", Observation{Self: node(0), Peers: []Peer{{Node: node(1)}, down}}, StartPrimary, ""},
		{"cold start node 1 never self-promotes", Observation{Self: node(1), Peers: []Peer{{Node: node(0)}, down}}, Wait, ""},
		{"cold start node 1 with empty replica peers waits", Observation{Self: node(1), Peers: []Peer{replicaPeer(2, 0, "vk-0-0.vk-0")}}, Wait, ""},
		// case S07: no primary anywhere but replicas hold data: node 0 restarting empty must not lead
		{"TestCaseS07 no primary, replicas hold data: node 0 waits", Observation{Self: node(0),
			Peers: []Peer{replicaPeer(1, 100, "vk-0-0.vk-0"), replicaPeer(2, 100, "vk-0-0.vk-0")}}, Wait, ""},
		// issue 12, F5: with persistence the newest persisted dataset leads a cold start
		{"TestF5 node 0 with data, a peer silent: wait (its disk may be newer)", Observation{Self: node(0), Persistence: true,
			Local: at(100), Peers: []Peer{booting(1, at(100)), down}}, Wait, ""},
		{"TestF5 node 0 without data, peers booting with data: wait for them", Observation{Self: node(0), Persistence: true,
			Peers: []Peer{booting(1, at(100)), booting(2, at(100))}}, Wait, ""},
		{"TestF5 equal datasets: the lower index leads", Observation{Self: node(1), Persistence: true, Local: at(100),
			Peers: []Peer{booting(0, Persisted{}), booting(2, at(100))}}, StartPrimary, ""},
		{"TestF5 equal datasets: the higher index waits", Observation{Self: node(2), Persistence: true, Local: at(100),
			Peers: []Peer{booting(0, Persisted{}), booting(1, at(100))}}, Wait, ""},
		{"TestF5 the highest offset leads", Observation{Self: node(2), Persistence: true, Local: at(300),
			Peers: []Peer{booting(0, at(200)), booting(1, at(100))}}, StartPrimary, ""},
		{"TestF5 a recorded position beats none", Observation{Self: node(0), Persistence: true, Local: Persisted{HasData: true},
			Peers: []Peer{booting(1, at(1)), booting(2, Persisted{})}}, Wait, ""},
		{"TestF5 no data anywhere, every peer booting: node 0 leads", Observation{Self: node(0), Persistence: true,
			Peers: []Peer{booting(1, Persisted{}), booting(2, Persisted{})}}, StartPrimary, ""},
		{"TestF5 no data anywhere: node 1 waits for node 0", Observation{Self: node(1), Persistence: true,
			Peers: []Peer{booting(0, Persisted{}), booting(2, Persisted{})}}, Wait, ""},
		{"TestF5 never follow an empty running primary with data on disk", Observation{Self: node(1), Persistence: true,
			Local: at(100), Peers: []Peer{primaryPeer(0, 0), booting(2, at(100))}}, Wait, ""},
		{"TestF5 never follow a primary behind on the same history", Observation{Self: node(1), Persistence: true,
			Local: at(500), Peers: []Peer{{Node: node(0), Reachable: true, Keys: 5, Repl: valkey.Replication{Role: valkey.RolePrimary, ReplID: replID, MasterReplOffset: 400}}}}, Wait, ""},
		{"TestF5 follow a primary with data on another history", Observation{Self: node(1), Persistence: true,
			Local: at(500), Peers: []Peer{primaryPeer(0, 5)}}, StartReplica, "vk-0-0.vk-0"},
		{"TestF5 Sentinel names an empty running primary while this node has data: wait", Observation{Self: node(1), Persistence: true,
			Local: at(100), Sentinels: names("vk-0-0.vk-0", 3), Peers: []Peer{primaryPeer(0, 0)}}, Wait, ""},
		{"diskless cold start: node 0 leads while peers are silent", Observation{Self: node(0),
			Peers: []Peer{{Node: node(1)}, down}}, StartPrimary, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.obs.Port = 6379
			d := PlanBoot(tt.obs)
			assert.Equal(t, tt.want, d.Kind, d.Reason)
			if tt.host != "" {
				assert.Equal(t, tt.host, d.PrimaryHost)
				assert.Equal(t, 6379, d.PrimaryPort)
			}
			assert.NotEmpty(t, d.Reason)
		})
	}
}

func TestRenderConfigHasReplicationCredentialsOnEveryRole(t *testing.T) {
	in := spec.Instance{Port: 6379}
	for _, d := range []Decision{{Kind: StartPrimary}, {Kind: StartReplica, PrimaryHost: "p", PrimaryPort: 6379}} {
		text := RenderConfig("port 6379\n", in, spec.Node{Host: "me"}, `pa"ss`, d)
		assert.Contains(t, text, "masteruser _replication\n")
		assert.Contains(t, text, `masterauth "pa\"ss"`)
		assert.Contains(t, text, "replica-announce-ip me\n")
		if d.Kind == StartReplica {
			assert.Contains(t, text, "replicaof p 6379\n")
		} else {
			assert.NotContains(t, text, "replicaof")
		}
	}
}

// guarded is a peer that answers as a replica of of which started empty and never completed a sync, with
// the first-sync guard's replica-priority 0.
func guarded(i int, of string) Peer {
	p := replicaPeer(i, 0, of)
	p.Repl.LinkDownSinceSeconds, p.Repl.ReplicaPriority = -1, 0
	return p
}

// listingNodes makes every answer list the replicas at nodes' hosts (port 6379).
func listingNodes(answers []SentinelAnswer, nodes ...int) []SentinelAnswer {
	for i := range answers {
		answers[i].Replicas = nil
		for _, n := range nodes {
			answers[i].Replicas = append(answers[i].Replicas, valkey.SentinelReplica{Host: node(n).Host, Port: 6379})
		}
	}
	return answers
}

// TestPlanBootFirstSyncGuard (RELIABILITY.md, Found 1): a replica that starts without data is guarded
// (replica-priority 0 until its first sync); one with persisted data is not. When every node restarted empty
// at once, the node the Sentinels name starts as primary instead of asking for a failover that Sentinel
// must refuse (every replica guarded): nothing holds data. A replica with keys, one that synced before, an
// unguarded one, one that does not answer, or a replica Sentinel lists that is not a node keeps the old
// rules (S08, F4, F6).
func TestPlanBootFirstSyncGuard(t *testing.T) {
	d := PlanBoot(Observation{Self: node(1), Port: 6379, Peers: unseen(1), Sentinels: names("vk-0-0.vk-0", 3)})
	assert.Equal(t, StartReplica, d.Kind)
	assert.True(t, d.Guard, "an empty replica is guarded")
	d = PlanBoot(Observation{Self: node(1), Port: 6379, Peers: unseen(1), Sentinels: names("vk-0-0.vk-0", 3), Persistence: true, Local: at(100)})
	assert.Equal(t, StartReplica, d.Kind)
	assert.False(t, d.Guard, "a replica with data from its disk is not")
	d = PlanBoot(Observation{Self: node(0), Port: 6379, Peers: []Peer{{Node: node(1)}, {Node: node(2)}}})
	assert.Equal(t, StartPrimary, d.Kind)
	assert.False(t, d.Guard)

	synced := replicaPeer(2, 0, "vk-0-0.vk-0")
	synced.Repl.LinkDownSinceSeconds, synced.Repl.ReplicaPriority = 12, 0
	unguarded := replicaPeer(2, 0, "vk-0-0.vk-0")
	unguarded.Repl.LinkDownSinceSeconds, unguarded.Repl.ReplicaPriority = -1, 100
	withKeys := guarded(2, "vk-0-0.vk-0")
	withKeys.Keys = 10
	for _, tc := range []struct {
		name  string
		peers []Peer
		sent  []SentinelAnswer
		want  Kind
	}{
		{"every other node guarded and empty: start as primary", []Peer{guarded(1, "vk-0-0.vk-0"), guarded(2, "vk-0-0.vk-0")},
			listingNodes(seenUp(names("vk-0-0.vk-0", 3)), 1, 2), StartPrimary},
		{"one replica synced before (its link dropped): S08 rules", []Peer{guarded(1, "vk-0-0.vk-0"), synced},
			listingNodes(seenUp(names("vk-0-0.vk-0", 3)), 1, 2), Wait},
		{"one replica not guarded: Sentinel may promote it", []Peer{guarded(1, "vk-0-0.vk-0"), unguarded},
			listingNodes(seenUp(names("vk-0-0.vk-0", 3)), 1, 2), Wait},
		{"one replica holds keys", []Peer{guarded(1, "vk-0-0.vk-0"), withKeys},
			listingNodes(seenUp(names("vk-0-0.vk-0", 3)), 1, 2), Wait},
		{"one node does not answer (unknown, F4)", []Peer{guarded(1, "vk-0-0.vk-0"), {Node: node(2)}},
			listingNodes(seenUp(names("vk-0-0.vk-0", 3)), 1, 2), Wait},
		{"Sentinel lists a replica that is not a node (F6)", []Peer{guarded(1, "vk-0-0.vk-0"), guarded(2, "vk-0-0.vk-0")},
			listingNodes(seenUp(names("vk-0-0.vk-0", 3)), 1, 2, 0), Wait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sent[0].Replicas != nil && len(tc.sent[0].Replicas) == 3 {
				for i := range tc.sent {
					tc.sent[i].Replicas[2].Host = "dr-replica.example"
				}
			}
			d := PlanBoot(Observation{Self: node(0), Port: 6379, Sentinels: tc.sent, Peers: tc.peers})
			assert.Equal(t, tc.want, d.Kind, d.Reason)
		})
	}
}

func TestGuardedReplicaConfig(t *testing.T) {
	text := RenderConfig("port 6379\n", spec.Instance{Port: 6379}, spec.Node{Host: "me"}, "pw", Decision{Kind: StartReplica, PrimaryHost: "p", PrimaryPort: 6379, Guard: true})
	assert.Contains(t, text, "\nreplica-priority 0\n", "a guarded replica starts unpromotable")
	text = RenderConfig("port 6379\n", spec.Instance{Port: 6379}, spec.Node{Host: "me"}, "pw", Decision{Kind: StartReplica, PrimaryHost: "p", PrimaryPort: 6379})
	assert.NotContains(t, text, "replica-priority")
}
