package prestop

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/handoff"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/testenv"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

// hookFor prepares the files of node i's hook the way the data pod has them: the node-local _prestop user
// (created on node i only, as the bootstrap does through the runtime ACL file), the _probe password and
// sentinels.json naming sentinels (default: the topology's).
func hookFor(t *testing.T, top *valkeytest.Topology, i int, sentinels ...string) Config {
	t.Helper()
	dir := t.TempDir()
	pw := valkeytest.RandomPassword(t)
	require.NoError(t, top.Nodes[i].Client(top.Options(acl.Operator)).ACLSetUser(context.Background(), acl.PreStop, bootstrap.PreStopRules(pw)...))
	require.NoError(t, os.WriteFile(filepath.Join(dir, bootstrap.PreStopPasswordFile), []byte(pw), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, acl.Probe), []byte(top.Passwords[acl.Probe]), 0o600))
	if len(sentinels) == 0 {
		sentinels = testenv.SentinelAddrs(top)
	}
	b, err := json.Marshal(spec.SentinelInfo{MonitorName: top.Cfg.MonitorName, Port: 26379, Hosts: sentinels})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sentinels.json"), b, 0o600))
	var ports []int
	for _, n := range top.Nodes {
		ports = append(ports, n.Port)
	}
	in := testenv.InstanceSpec("ns", "vk", top.Cfg.MonitorName, top.Cfg.Engine, ports, top.Cfg.DownAfterMs, top.Cfg.FailoverTimeoutMs)
	return Config{Instance: in, NodeIndex: i, SentinelsFile: filepath.Join(dir, "sentinels.json"), SecretsDir: dir,
		PasswordFile: filepath.Join(dir, bootstrap.PreStopPasswordFile), Timeout: 20 * time.Second,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
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
			out := Run(context.Background(), cfg)
			require.Equal(t, HandedOff, out.Action, "%+v", out)
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
	out := Run(context.Background(), hookFor(t, top, 0))
	t.Logf("%+v", out)
	assert.Equal(t, Skipped, out.Action)
	assert.Equal(t, string(handoff.ReasonNoGoodReplica), out.Reason)
	assert.Contains(t, out.Detail, "priority 0")
	for _, s := range top.Sentinels {
		assert.NotContains(t, s.Logs(), "+try-failover", "no failover asked of %s", s.Addr())
	}
	start := time.Now()
	_, err := top.Nodes[0].Client(top.Options(acl.Operator)).Do(context.Background(), "SET", "__valkey-ha:after", "1")
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
	out := Run(context.Background(), hookFor(t, top, 1))
	t.Logf("%+v", out)
	assert.Equal(t, NothingToDo, out.Action)
	assert.Less(t, out.Took, 2*time.Second)
}

// TestPreStopSentinelsGone: the Sentinels are gone (a namespace being deleted): the hook gives up within
// its dial timeouts, far below its own bound, so a pod's termination never waits out its grace period.
func TestPreStopSentinelsGone(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: 1, DownAfterMs: 5000})
	gone := []string{fmt.Sprintf("%s:%d", valkeytest.Host, valkeytest.FreePort(t)), fmt.Sprintf("%s:%d", valkeytest.Host, valkeytest.FreePort(t)),
		"sentinel-gone.invalid:26379"}
	cfg := hookFor(t, top, 0, gone...)
	out := Run(context.Background(), cfg)
	t.Logf("%+v", out)
	assert.Equal(t, Skipped, out.Action)
	assert.Equal(t, "NoQuorum", out.Reason)
	assert.Less(t, out.Took, cfg.Timeout/2)
}
