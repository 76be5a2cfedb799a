package cli

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
)

// TestLeaderElectionOneActsAndTheOtherTakesOver runs two controller replicas against one Lease: only one
// runs its reconcile loop at any time, and when the leader stops (its Lease is released once its loop has
// returned, which here takes 3 s) the other one takes over, never before. The follower reports ready (a
// standby), so a Deployment of two replicas can roll.
func TestLeaderElectionOneActsAndTheOtherTakesOver(t *testing.T) {
	cs := fake.NewSimpleClientset()
	var active atomic.Int32
	var overlap atomic.Bool
	started := make(chan string, 4)
	health := map[string]*metrics.Health{"a": {}, "b": {}}
	replica := func(ctx context.Context, id string) error {
		o := CommonOptions{Namespace: "ns", LeaderElect: true, Identity: id}
		return runController(ctx, o, cs, metrics.New(), health[id], "db-controller", func(ctx context.Context) error {
			if active.Add(1) > 1 {
				overlap.Store(true)
			}
			defer active.Add(-1)
			started <- id
			<-ctx.Done()
			time.Sleep(3 * time.Second) // a loop finishing its current step (longer than the 2 s retry period)
			return nil
		})
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = replica(ctxA, "a") }()
	var first string
	select {
	case first = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no replica started leading within 10 s")
	}
	require.Equal(t, "a", first)
	go func() { defer wg.Done(); _ = replica(ctxB, "b") }()

	// b must stay a follower while a holds the Lease (a renews every 2 s; b retries every 2 s).
	select {
	case id := <-started:
		t.Fatalf("%s started leading while a held the Lease", id)
	case <-time.After(5 * time.Second):
	}
	lease, err := cs.CoordinationV1().Leases("ns").Get(context.Background(), "db-controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.Equal(t, "a", *lease.Spec.HolderIdentity)
	assert.True(t, health["b"].Ready(), "the follower b reports ready while a leads")

	cancelA() // a releases the Lease on the way out
	select {
	case id := <-started:
		assert.Equal(t, "b", id)
	case <-time.After(20 * time.Second):
		t.Fatal("b did not take over within 20 s of a's release")
	}
	cancelB()
	wg.Wait()
	assert.False(t, overlap.Load(), "two replicas ran their reconcile loops at the same time")
}
