package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestInstanceStatusReadyNeedsEveryReplicaPodReady (walk leftover): an instance whose replica pod fails its
// readiness probe (the replicas Service sends it no reads, the PodDisruptionBudget counts it out) is not
// Ready even though its replication link is up; the Ready message names the count. Before: state Ready with
// "replicas=2 ready=1".
func TestInstanceStatusReadyNeedsEveryReplicaPodReady(t *testing.T) {
	for _, tc := range []struct {
		name     string
		notReady []int
		state    string
		message  string
	}{
		{name: "every replica pod ready", state: status.StateReady, message: "primary elected, replicas in sync"},
		{name: "one replica pod not ready", notReady: []int{2}, state: status.StateDegraded,
			message: "ReplicasReady: 1/2 replica pods ready (vk-2-0 fails its readiness probe"},
		{name: "the primary's pod not ready: not a replica, Ready as before", notReady: []int{0}, state: status.StateReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, m := steadyWorld(), settledMemory()
			for _, i := range tc.notReady {
				w.Nodes[i].PodReady = false
			}
			st := InstanceStatus(w, Instance(w, m), Outcome{}, status.Instance{EverReady: true}, "test")
			assert.Equal(t, tc.state, st.State, st.Message)
			assert.Contains(t, st.Message, tc.message)
			rc, _ := status.Get(st.Conditions, status.Ready)
			assert.Equal(t, map[bool]string{true: status.True, false: status.False}[tc.state == status.StateReady], rc.Status)
		})
	}
}

// TestNoPrimaryMessageSaysWhy (fresh user's walk: PrimaryElected=False carried an empty message while every pod
// was Pending): topology's held reason when it has one, else each node's error or role.
func TestNoPrimaryMessageSaysWhy(t *testing.T) {
	node := func(pod, err string, role valkey.Role) Node {
		var n Node
		n.Node.Pod, n.Err, n.Repl.Role = pod, err, role
		return n
	}
	w := World{Nodes: []Node{node("db-0-0", "pod not running: Pending, Unschedulable: 0/1 nodes are available: 1 Insufficient cpu.", ""),
		node("db-1-0", "", valkey.RoleReplica), node("db-2-0", "", "")}}
	assert.Equal(t, "no node reports role master: db-0-0 pod not running: Pending, Unschedulable: 0/1 nodes are available: "+
		"1 Insufficient cpu.; db-1-0 role replica; db-2-0 not observed", noPrimaryMessage(w, ""))
	assert.Equal(t, "a failover is in flight", noPrimaryMessage(w, "a failover is in flight"))
}
