package plan

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// accessWorld is steadyWorld with an ACL Secret of one valid user, each node with its own pod identity.
func accessWorld() World {
	w := steadyWorld()
	w.Instance.ACLSecret = "vk-acl"
	w.ACL = ACLSecret{Users: []acl.DesiredUser{{Name: "app", Rules: "resetkeys resetchannels nocommands ~* +@all",
		Passwords: []acl.Password{{Hash: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"}}}}}
	for i := range w.Nodes {
		w.Nodes[i].Identity = w.Nodes[i].Node.Pod + "/0"
	}
	return w
}

// revision is the revision PlanAccess plans for w's users.
func revision(t *testing.T, w World) string {
	p, err := acl.BuildSync(w.ACL.Users, nil, w.Now)
	require.NoError(t, err)
	return p.Revision
}

// TestPlanAccess is which nodes the live ACL sync touches in a pass, one row per rule.
func TestPlanAccess(t *testing.T) {
	synced := func(w World) map[string]ACLApplied {
		m := map[string]ACLApplied{}
		for _, n := range w.Nodes {
			m[n.Node.Pod] = ACLApplied{Revision: revision(t, w), Identity: n.Identity, At: now.Add(-time.Minute)}
		}
		return m
	}
	tests := []struct {
		name   string
		mutate func(w *World, m *Memory)
		done   string   // the Access message when nothing is synced ("" = a sync is planned)
		sync   []string // the pods synced
	}{
		{name: "no ACL Secret named", mutate: func(w *World, _ *Memory) { w.Instance.ACLSecret = "" }, done: "no ACL Secret named"},
		{name: "the Secret could not be read", mutate: func(w *World, _ *Memory) { w.ACL = ACLSecret{Err: "read secret vk-acl: forbidden"} },
			done: "read secret vk-acl: forbidden"},
		{name: "first pass: every reachable node", sync: []string{"vk-0-0", "vk-1-0", "vk-2-0"}},
		{name: "an unreachable node is not tried", mutate: func(w *World, _ *Memory) { w.Nodes[1].Reachable = false },
			sync: []string{"vk-0-0", "vk-2-0"}},
		{name: "synced at this revision and identity: nothing", mutate: func(w *World, m *Memory) { m.ACLApplied = synced(*w) }},
		{name: "a pod replaced or restarted is synced again", mutate: func(w *World, m *Memory) {
			m.ACLApplied = synced(*w)
			w.Nodes[2].Identity = "vk-2-0/1"
		}, sync: []string{"vk-2-0"}},
		{name: "the users changed: every node", mutate: func(w *World, m *Memory) {
			m.ACLApplied = synced(*w)
			w.ACL.Users[0].Rules = "resetkeys resetchannels nocommands ~app:* +@read"
		}, sync: []string{"vk-0-0", "vk-1-0", "vk-2-0"}},
		{name: "ACLResync passed: synced again", mutate: func(w *World, m *Memory) {
			m.ACLApplied = synced(*w)
			a := m.ACLApplied["vk-0-0"]
			a.At = now.Add(-ACLResync)
			m.ACLApplied["vk-0-0"] = a
		}, sync: []string{"vk-0-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, m := accessWorld(), settledMemory()
			if tt.mutate != nil {
				tt.mutate(&w, &m)
			}
			p := PlanAccess(w, m)
			if tt.done != "" {
				require.NotNil(t, p.Done)
				assert.Equal(t, tt.done, p.Done.Message)
				assert.Empty(t, p.Sync)
				return
			}
			require.Nil(t, p.Done)
			assert.Equal(t, revision(t, w), p.Revision)
			var pods []string
			for _, n := range p.Sync {
				pods = append(pods, n.Pod)
			}
			assert.Equal(t, tt.sync, pods)
		})
	}
}

// TestAccessResult is the AccessConverged outcome from the plan and the applier's results.
func TestAccessResult(t *testing.T) {
	w := accessWorld()
	rev := revision(t, w)
	p := PlanAccess(w, Memory{})
	ok := []NodeSync{{Pod: "vk-0-0"}, {Pod: "vk-1-0"}, {Pod: "vk-2-0"}}
	tests := []struct {
		name   string
		mutate func(w *World)
		p      AccessPlan
		synced []NodeSync
		want   Access
	}{
		{name: "nothing to sync: the plan's Access", p: AccessPlan{Done: &Access{Converged: true, Message: "no ACL Secret named"}},
			want: Access{Converged: true, Message: "no ACL Secret named"}},
		{name: "every node synced", p: p, synced: ok,
			want: Access{Converged: true, Desired: rev, Applied: rev, Message: "revision " + rev + " applied on 3 node(s)"}},
		{name: "nodes synced earlier count as applied", p: AccessPlan{Revision: rev},
			want: Access{Converged: true, Desired: rev, Applied: rev, Message: "revision " + rev + " applied on 3 node(s)"}},
		{name: "a failed and an unreachable node, in node order", mutate: func(w *World) { w.Nodes[0].Reachable = false }, p: p,
			synced: []NodeSync{{Pod: "vk-1-0"}, {Pod: "vk-2-0", Err: "NOPERM"}},
			want:   Access{Desired: rev, Message: "not applied on: vk-0-0 (unreachable), vk-2-0 (NOPERM)"}},
		{name: "refused users keep it from converging", mutate: func(w *World) { w.ACL.Refused = "vk-acl: 1 user(s) refused" }, p: p, synced: ok,
			want: Access{Desired: rev, Applied: rev, Message: "vk-acl: 1 user(s) refused; revision " + rev + " applied on 3 node(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := accessWorld()
			if tt.mutate != nil {
				tt.mutate(&w)
			}
			assert.Equal(t, tt.want, AccessResult(w, tt.p, tt.synced))
		})
	}
}

func TestRefusedUsers(t *testing.T) {
	assert.Empty(t, RefusedUsers("vk-acl", nil))
	assert.Equal(t, "vk-acl: 2 user(s) refused and not applied (the others are): users.json[0] a: no keys; users.json[2] b: no password",
		RefusedUsers("vk-acl", []acl.RefusedUser{{Index: 0, Name: "a", Reason: "no keys"}, {Index: 2, Name: "b", Reason: "no password"}}))
}
