package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestF6ForeignReplicaNoResetLoop (issue 12, F6): a replica attached by hand to the primary (a DR or
// migration replica, not a node of the descriptor) is listed by every Sentinel. With the instance controller
// running, a steady window of 15 s must see no SENTINEL RESET (audited from the Sentinels' own logs,
// +reset-master): the replica is alive, so it is nothing to forget, and a RESET would not make Sentinel
// forget it anyway (it rediscovers it from the primary's INFO at once) while it briefly empties that
// Sentinel's replica list. Once the foreign replica is gone and every Sentinel flags it s_down, each
// Sentinel is reset exactly once (one at a time) and none lists it any more; then it is quiet again.
func TestF6ForeignReplicaNoResetLoop(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	ctx := context.Background()
	primary := e.Top.Nodes[0]
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(primary.Port) })

	aclPath := filepath.Join(t.TempDir(), "users.acl")
	require.NoError(t, writeFile(aclPath, valkeytest.RenderSystemACL(e.Top.Passwords)))
	foreign := valkeytest.StartServer(t, e.Top.Cfg.Engine, valkeytest.ServerConfig{ReplicaOf: primary.Addr(),
		Lines: []string{"aclfile " + aclPath, "masteruser " + acl.Replication, "masterauth " + e.Top.Passwords[acl.Replication]}})
	listed := func(want bool) error {
		for _, s := range e.Top.Sentinels {
			reps, err := s.Client(valkey.Options{}).SentinelReplicas(ctx, e.In.MonitorName)
			if err != nil {
				return err
			}
			has := false
			for _, r := range reps {
				if r.Port == foreign.Port {
					has = true
				}
			}
			if has != want {
				return fmt.Errorf("%s lists the foreign replica: %v (want %v; %d replicas)", s.Addr(), has, want, len(reps))
			}
		}
		return nil
	}
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "every Sentinel lists the foreign replica", func() error { return listed(true) })

	resets := func() int { return testenv.CountEvents(testenv.Audited(s10Events(e)))["+reset-master"] }
	base := resets()
	time.Sleep(15 * time.Second) // the steady window: the controller runs ~50 passes (what is asserted is the count)
	steady := resets() - base
	t.Logf("steady 15 s with a live foreign replica: %d SENTINEL RESET", steady)
	assert.Zero(t, steady, "no SENTINEL RESET for a live replica that is not a descriptor node")
	require.NoError(t, listed(true), "the foreign replica is still listed")

	// gone: Sentinel flags it s_down, then each Sentinel is reset once
	foreign.Kill()
	base = resets()
	valkeytest.Eventually(t, 60*time.Second, 300*time.Millisecond, "no Sentinel lists the dead foreign replica", func() error { return listed(false) })
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	time.Sleep(3 * time.Second) // a few more passes
	gone := resets() - base
	t.Logf("after the foreign replica died: %d SENTINEL RESET", gone)
	assert.Equal(t, len(e.Top.Sentinels), gone, "one RESET per Sentinel once the replica is down")
}
