package registration

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

func targetInstance(nodes int) spec.Instance {
	in := spec.Instance{Name: "vk", MonitorName: "vk", Port: 6379, SentinelAuth: spec.SecretRef{User: "_sentinel"}}
	for i := 0; i < nodes; i++ {
		in.Nodes = append(in.Nodes, spec.Node{Index: i, Host: []string{"n0", "n1", "n2"}[i]})
	}
	return in
}

func reply(host string, role valkey.Role, replicas int) NodeReply {
	return NodeReply{Host: host, Port: 6379, Addr: host + ":6379", Answered: true, Role: role, Replicas: replicas}
}

func TestNewWanted(t *testing.T) {
	in := targetInstance(3)
	w := NewWanted(in, 5)
	assert.Equal(t, 3, w.Quorum, "no pin: a majority of the Sentinels")
	assert.Equal(t, "_sentinel", w.AuthUser)
	in.Quorum = 2
	assert.Equal(t, 2, NewWanted(in, 5).Quorum, "the instance's pin")
	w.SetPassword("pw")
	h := w.AuthHash
	assert.Len(t, h, 16)
	w.SetPassword("other")
	assert.NotEqual(t, h, w.AuthHash, "another password, another fingerprint")
}

func TestAgreedTarget(t *testing.T) {
	on := func(host string) SentinelState {
		return SentinelState{Reachable: true, Monitors: map[string]valkey.Monitor{"vk": {Host: host, Port: 6379}}}
	}
	for _, tc := range []struct {
		name        string
		sentinels   []SentinelState
		agreed, ask bool
		host        string
	}{
		{"no Sentinel knows it: ask the nodes", []SentinelState{{Reachable: true}}, false, true, ""},
		{"all agree: nothing to ask", []SentinelState{on("n1"), on("n1"), on("n1")}, true, false, "n1"},
		{"a majority agrees, one names another node: ask, keep the majority's", []SentinelState{on("n1"), on("n1"), on("n0")}, true, true, "n1"},
		{"one names a foreign primary: no agreement", []SentinelState{on("n1"), on("n1"), on("evil")}, false, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWanted(targetInstance(3), 3)
			agreed, ask := AgreedTarget(&w, tc.sentinels)
			assert.Equal(t, tc.agreed, agreed)
			assert.Equal(t, tc.ask, ask)
			assert.Equal(t, tc.host, w.PrimaryHost)
		})
	}
}

func TestChoosePrimary(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodes    int
		agreed   string // the Sentinels' agreed primary, "" = none
		replies  []NodeReply
		host     string
		observed bool
		loading  string
	}{
		{"the primary with the most replicas", 3, "", []NodeReply{reply("n0", valkey.RolePrimary, 1), reply("n1", valkey.RolePrimary, 2), reply("n2", valkey.RoleReplica, 0)}, "n1", true, ""},
		{"the first of equals", 3, "", []NodeReply{reply("n0", valkey.RolePrimary, 1), reply("n1", valkey.RolePrimary, 1)}, "n0", true, ""},
		{"a primary without replicas is a target, not observed", 3, "", []NodeReply{reply("n0", valkey.RolePrimary, 0)}, "n0", false, ""},
		{"the only node of a one-node instance is observed", 1, "", []NodeReply{reply("n0", valkey.RolePrimary, 0)}, "n0", true, ""},
		{"a loading primary is never the target", 3, "", []NodeReply{func() NodeReply { r := reply("n0", valkey.RolePrimary, 2); r.Loading = true; return r }(), reply("n1", valkey.RolePrimary, 1)}, "n1", true, "n0:6379"},
		{"nodes that did not answer are skipped", 3, "", []NodeReply{{Host: "n0", Port: 6379, Role: valkey.RolePrimary, Replicas: 2}, reply("n1", valkey.RoleReplica, 0)}, "", false, ""},
		{"agreed: another primary does not move the target", 3, "n1", []NodeReply{reply("n0", valkey.RolePrimary, 2), reply("n1", valkey.RoleReplica, 0)}, "n1", false, ""},
		{"agreed and confirmed by the node itself", 3, "n1", []NodeReply{reply("n0", valkey.RoleReplica, 0), reply("n1", valkey.RolePrimary, 2)}, "n1", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWanted(targetInstance(tc.nodes), 3)
			if tc.agreed != "" {
				w.PrimaryHost, w.PrimaryPort = tc.agreed, 6379
			}
			ChoosePrimary(&w, tc.agreed != "", tc.replies)
			assert.Equal(t, tc.host, w.PrimaryHost)
			assert.Equal(t, tc.observed, w.PrimaryObserved)
			assert.Equal(t, tc.loading, w.PrimaryLoading)
		})
	}
}
