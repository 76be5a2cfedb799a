package bootstrap

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
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

func names(host string, n int) []SentinelAnswer {
	out := make([]SentinelAnswer, n)
	for i := range out {
		out[i] = SentinelAnswer{Found: true, Host: host, Port: 6379}
	}
	return out
}

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
		{"sentinel names another node", Observation{Self: node(0), Sentinels: names("vk-1-0.vk-1", 3)}, StartReplica, "vk-1-0.vk-1"},
		{"majority of sentinels wins", Observation{Self: node(2), Sentinels: append(names("vk-1-0.vk-1", 2), names("vk-0-0.vk-0", 1)...)}, StartReplica, "vk-1-0.vk-1"},
		// case S05: a restarted old primary rejoins as a replica, even with the controller down
		{"TestCaseS05 restarted old primary follows Sentinel", Observation{Self: node(0), Sentinels: names("vk-2-0.vk-2", 3),
			Peers: []Peer{replicaPeer(1, 10, "vk-2-0.vk-2"), primaryPeer(2, 10)}}, StartReplica, "vk-2-0.vk-2"},
		// case S08: named primary, empty, a replica holds data -> ask for a failover, never start empty
		{"TestCaseS08 empty named primary requests failover", Observation{Self: node(0), Sentinels: names("VK-0-0.vk-0.", 3),
			Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0"), replicaPeer(2, 1000, "vk-0-0.vk-0")}}, RequestFailover, ""},
		{"named primary with persisted data starts primary", Observation{Self: node(0), LocalData: true, Sentinels: names("vk-0-0.vk-0", 3),
			Peers: []Peer{replicaPeer(1, 1000, "vk-0-0.vk-0")}}, StartPrimary, ""},
		{"named primary restarted empty, empty replicas up: hand over, never two primaries", Observation{Self: node(0), Sentinels: names("vk-0-0.vk-0", 3),
			Peers: []Peer{replicaPeer(1, 0, "vk-0-0.vk-0")}}, RequestFailover, ""},
		{"named primary, cold start (replicas still booting, Sentinel lists none)", Observation{Self: node(0), Sentinels: names("vk-0-0.vk-0", 3),
			Peers: []Peer{{Node: node(1)}, {Node: node(2)}}}, StartPrimary, ""},
		// issue 12, F4: unreachable replicas are unknown, not absent
		{"TestF4 named empty primary, replicas unreachable but listed by Sentinel: hand over", Observation{Self: node(0),
			Sentinels: listing(names("vk-0-0.vk-0", 3), 2), Peers: []Peer{{Node: node(1)}, {Node: node(2)}}}, RequestFailover, ""},
		{"TestF4 named empty primary, replica list unreadable: wait", Observation{Self: node(0),
			Sentinels: []SentinelAnswer{{Found: true, Host: "vk-0-0.vk-0", Port: 6379, ReplicasErr: errors.New("timeout")}},
			Peers:     []Peer{{Node: node(1)}, {Node: node(2)}}}, Wait, ""},
		{"TestF4 after a failover request a promoted peer means wait, never start primary", Observation{Self: node(0),
			FailoverRequested: true, Sentinels: names("vk-0-0.vk-0", 3), Peers: []Peer{primaryPeer(1, 0)}}, Wait, ""},
		{"TestF4 after a failover request with nothing visible: keep asking, never start primary", Observation{Self: node(0),
			FailoverRequested: true, Sentinels: names("vk-0-0.vk-0", 3), Peers: []Peer{{Node: node(1)}}}, RequestFailover, ""},
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
		{"full restart from disks: node 0 with data, peers still booting", Observation{Self: node(0), LocalData: true,
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
