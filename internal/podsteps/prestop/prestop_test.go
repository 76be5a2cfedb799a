package prestop_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/handoff"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/prestop"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/prestoptest"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// hookFor is prestoptest.Hook with the hook's log in the test's log.
func hookFor(t *testing.T, top *valkeytest.Topology, i int, sentinels ...string) prestop.Config {
	t.Helper()
	return prestoptest.Hook(t, top, i, slog.New(slog.NewTextHandler(testWriter{t}, nil)), sentinels...)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestPreStopPrimaryHandsOffUnderLatency (issue 14): the hook on the primary, with a Sentinel-aware writer
// and every replication link delayed, hands off to a caught-up replica: 0 acknowledged writes lost, one
// failover, the old primary follows the new one. The outage the writer saw is printed.
func TestPreStopPrimaryHandsOffUnderLatency(t *testing.T) {
	valkeytest.RequireFaults(t)
	for _, delay := range []time.Duration{200 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: true})
			cfg := hookFor(t, top, 0)
			top.DelayReplication(delay)
			perWrite := testenv.StartWriter(t, top, testenv.WriterOptions{Key: "__valkey-ha:prestop", PerWrite: true})
			counter := testenv.StartWriter(t, top, testenv.WriterOptions{First: 2})
			valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "writes acknowledged", func() error {
				if r := perWrite.Result(); r.OK < 50 {
					return fmt.Errorf("%d acknowledged", r.OK)
				}
				return nil
			})
			out := prestop.Run(context.Background(), cfg)
			require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
			require.NotEqual(t, top.Nodes[0].Addr(), out.Result.NewPrimary)
			moved := top.WaitPrimaryMoved(top.Nodes[0].Port, 10*time.Second)
			// writes go on against the new primary for a while, then stop
			since := time.Now()
			valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "writes acknowledged after the handoff", func() error {
				if perWrite.LastOK().Before(since.Add(500 * time.Millisecond)) {
					return fmt.Errorf("last acknowledged %s", perWrite.LastOK())
				}
				return nil
			})
			perWrite.Finish()
			counter.Finish()
			res, cres := perWrite.Result(), counter.Result()
			missing, err := testenv.Missing(context.Background(), top.NodeByPort(moved).Client(top.Options(acl.Operator)), res.Acked)
			require.NoError(t, err)
			lost := 0
			for _, e := range counter.Events() {
				lost += e.Lost
			}
			t.Logf("replication delay %s: hook took %s, writes paused %s, outage %s (per-key writer) / %s (counter writer), %d+%d acknowledged, lost %d+%d",
				delay, out.Took.Round(time.Millisecond), out.Result.Paused.Round(time.Millisecond), res.Longest.Round(time.Millisecond),
				cres.Longest.Round(time.Millisecond), res.OK, cres.OK, len(missing), lost)
			assert.Empty(t, missing, "every acknowledged write is on the new primary")
			assert.Zero(t, lost, "no acknowledged write rolled back")
			r, err := top.Replication(top.Nodes[0])
			require.NoError(t, err)
			assert.Equal(t, valkey.RoleReplica, r.Role, "the old primary is a replica")
			for _, s := range top.Sentinels {
				m, _, err := s.Client(top.SentinelOptions()).SentinelMaster(context.Background(), top.Cfg.MonitorName)
				require.NoError(t, err)
				assert.EqualValues(t, 1, m.ConfigEpoch, "one failover (%s)", s.Addr())
			}
		})
	}
}

// TestPreStopRefusesWithoutHealthyReplica: the only replica has replica-priority 0: the hook hands nothing
// off, says why, leaves writes unpaused, asks no Sentinel for a failover, and returns.
func TestPreStopRefusesWithoutHealthyReplica(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 5000, ExtraServerLines: []string{"replica-priority 0"}})
	out := prestop.Run(context.Background(), hookFor(t, top, 0))
	t.Logf("%+v", out)
	assert.Equal(t, prestop.Skipped, out.Action)
	assert.Equal(t, string(handoff.ReasonNoGoodReplica), out.Reason)
	assert.Contains(t, out.Detail, "priority 0")
	for _, s := range top.Sentinels {
		assert.NotContains(t, s.Logs(), "+try-failover", "no failover asked of %s", s.Addr())
	}
	start := time.Now()
	err := top.Nodes[0].Client(top.Options(acl.Operator)).Set(context.Background(), "__valkey-ha:after", "1", 0)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "writes are not paused")
	r, err := top.Replication(top.Nodes[0])
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, r.Role)
}

// TestPreStopOnReplicaReturns: on a replica the hook does nothing, and does not wait, while no failover
// runs.
func TestPreStopOnReplicaReturns(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 5000})
	out := prestop.Run(context.Background(), hookFor(t, top, 1))
	t.Logf("%+v", out)
	assert.Equal(t, prestop.NothingToDo, out.Action)
	assert.Less(t, out.Took, 2*time.Second)
}

// TestPreStopSentinelsGone: the Sentinels are gone (a namespace being deleted): the hook gives up within
// its dial timeouts, far below its own bound, so a pod's termination never waits out its grace period.
func TestPreStopSentinelsGone(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: 1, DownAfterMs: 5000})
	gone := []string{fmt.Sprintf("%s:%d", valkeytest.Host, valkeytest.FreePort(t)), fmt.Sprintf("%s:%d", valkeytest.Host, valkeytest.FreePort(t)),
		"sentinel-gone.invalid:26379"}
	cfg := hookFor(t, top, 0, gone...)
	out := prestop.Run(context.Background(), cfg)
	t.Logf("%+v", out)
	assert.Equal(t, prestop.Skipped, out.Action)
	assert.Equal(t, "NoQuorum", out.Reason)
	assert.Less(t, out.Took, cfg.Timeout/2)
}

// TestPreStopWaitsForTheSentinelsToSeeAPromotableReplica: the only replica just got its replica-priority
// back (its first-sync guard ran) but the Sentinels still hold the 0 they read up to 10 s ago: the hook waits
// for their view instead of giving up, then hands off.
func TestPreStopWaitsForTheSentinelsToSeeAPromotableReplica(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	ctx := context.Background()
	setPriority := func(p string) {
		t.Helper()
		// the operator may not CONFIG SET; the guard's user may
		_, err := top.Nodes[1].CLI(acl.Operator, top.Passwords[acl.Operator], "ACL", "SETUSER", "prio", "on", ">pw", "+config|set", "+hello")
		require.NoError(t, err)
		out, err := top.Nodes[1].CLI("prio", "pw", "CONFIG", "SET", "replica-priority", p)
		require.NoError(t, err)
		require.Equal(t, "OK", out)
	}
	setPriority("0")
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "the Sentinels see replica-priority 0", func() error {
		for _, s := range top.Sentinels {
			reps, err := s.Client(top.SentinelOptions()).SentinelReplicas(ctx, top.Cfg.MonitorName)
			if err != nil || len(reps) != 1 || reps[0].Priority != 0 {
				return fmt.Errorf("%s: %+v %v", s.Addr(), reps, err)
			}
		}
		return nil
	})
	setPriority("100")
	r, err := top.Replication(top.Nodes[1])
	require.NoError(t, err)
	require.EqualValues(t, 100, r.ReplicaPriority)
	out := prestop.Run(ctx, hookFor(t, top, 0))
	t.Logf("%+v", out)
	require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
	assert.Equal(t, top.Nodes[1].Addr(), out.Result.NewPrimary)
}

// TestPreStopClosesApplicationConnections (issue 30): the hook, as the node-local _prestop user, closes the
// demoted primary's application connections (its rules include +client|kill), so clients of the primary
// Service reconnect to the new primary.
func TestPreStopClosesApplicationConnections(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	cfg := hookFor(t, top, 0)
	pw := testenv.AddAppUser(t, top)
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 3, User: testenv.AppUser, Password: pw, Dial: testenv.ConnOf(top.Nodes[0].Addr())})
	begin := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "clients write", func() error { return held.AllWrote(top.Nodes[0].Addr(), begin) })
	out := prestop.Run(context.Background(), cfg)
	require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
	require.NoError(t, out.Result.Clients.Err)
	assert.Equal(t, []string{testenv.AppUser}, out.Result.Clients.Users)
	assert.GreaterOrEqual(t, out.Result.Clients.Conns, int64(3))
}

// TestPreStopReplicasResyncPartiallyAfterTheHandoff: the old primary sends its replicas a replication PING
// every repl-ping-replica-period even while its writes are paused, and one sent after the promoted replica
// left it (until Sentinel sees the promotion at its next INFO, about 1 s, and the hook demotes it) puts the
// other replica 14 bytes past the new primary's history: its PSYNC is refused, it resyncs in full, and with
// min-replicas-to-write the new primary refuses writes (NOREPLICAS) meanwhile (e2e
// TestPrimaryPodDeleteAndEvictHandOff: 3.5-6.9 s without acknowledged writes in about a third of the rounds).
// With a 1 s period a PING falls in that window nearly every time; the hook holds the PINGs while writes are
// paused (handoff.Config.HoldPings), so every replica, the old primary included, continues with a partial
// resync, and the old primary's period is set back afterwards.
func TestPreStopReplicasResyncPartiallyAfterTheHandoff(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000,
		ExtraServerLines: []string{"repl-ping-replica-period 1"}})
	cfg := hookFor(t, top, 0)
	cfg.ServerConfigFile = filepath.Join(t.TempDir(), "valkey.conf")
	require.NoError(t, os.WriteFile(cfg.ServerConfigFile, []byte("port 6379\nrepl-ping-replica-period 1\n"), 0o600))
	ctx := context.Background()
	op := top.Options(acl.Operator)
	for i := 0; i < 100; i++ {
		require.NoError(t, top.Nodes[0].Client(op).Set(ctx, fmt.Sprintf("__valkey-ha:k%d", i), "v", 0))
	}
	out := prestop.Run(ctx, cfg)
	require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
	moved := top.WaitPrimaryMoved(top.Nodes[0].Port, 10*time.Second)
	primary := top.NodeByPort(moved)
	// every other node, the old primary included, follows the new primary with its link up
	valkeytest.Eventually(t, 15*time.Second, 50*time.Millisecond, "every replica's link to the new primary is up", func() error {
		for _, n := range top.Nodes {
			if n == primary {
				continue
			}
			r, err := top.Replication(n)
			if err != nil {
				return err
			}
			if r.Role != valkey.RoleReplica || r.PrimaryPort != moved || !r.LinkUp {
				return fmt.Errorf("%s: %+v", n.Addr(), r)
			}
		}
		return nil
	})
	stats, err := primary.Client(op).Info(ctx, "stats")
	require.NoError(t, err)
	t.Logf("new primary %s: sync_full %s, sync_partial_ok %s, sync_partial_err %s; hook took %s, writes paused %s", primary.Addr(),
		stats["sync_full"], stats["sync_partial_ok"], stats["sync_partial_err"], out.Took.Round(time.Millisecond), out.Result.Paused.Round(time.Millisecond))
	assert.Equal(t, "0", stats["sync_partial_err"], "a replica's PSYNC was refused: it was ahead of the promoted replica's history")
	assert.Equal(t, "0", stats["sync_full"], "a replica resynced in full after the handoff")
	period, err := top.Nodes[0].CLI(acl.Operator, top.Passwords[acl.Operator], "CONFIG", "GET", "repl-ping-replica-period")
	require.NoError(t, err)
	assert.Contains(t, period, "\n1", "the old primary's repl-ping-replica-period is set back: %q", period)
}
