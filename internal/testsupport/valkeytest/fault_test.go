package valkeytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// pingVia dials addr and times one PING (dial and AUTH excluded).
func pingVia(t *testing.T, addr string, timeout time.Duration) (time.Duration, error) {
	ctx := context.Background()
	c, err := valkey.Dial(ctx, addr, valkey.Options{DialTimeout: timeout, CommandTimeout: timeout})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	err = c.Ping(ctx)
	return time.Since(start), err
}

// TestLinkFaults: a Link adds its delay in each direction, a blackhole holds a command until healed (it is
// then answered, not lost), and a cut refuses connections until healed.
func TestLinkFaults(t *testing.T) {
	n := StartServer(t, Default, ServerConfig{})
	l := NewLink(t, n.Addr())

	d, err := pingVia(t, l.Addr(), 2*time.Second)
	require.NoError(t, err)
	assert.Less(t, d, 250*time.Millisecond, "a healthy link adds nothing noticeable (a delayed one adds 300 ms below)")

	l.Delay(150 * time.Millisecond)
	d, err = pingVia(t, l.Addr(), 5*time.Second)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, d, 300*time.Millisecond, "round trip is twice the one-way delay (%s)", l)
	l.Delay(0)

	ctx := context.Background()
	c, err := valkey.Dial(ctx, l.Addr(), valkey.Options{CommandTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ping(ctx))
	l.Blackhole()
	answered := make(chan error, 1)
	go func() { answered <- c.Ping(ctx) }()
	select {
	case err := <-answered:
		t.Fatalf("PING answered through a blackhole: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	l.Heal()
	select {
	case err := <-answered:
		assert.NoError(t, err, "the held PING is delivered once healed")
	case <-time.After(5 * time.Second):
		t.Fatal("PING not answered after Heal")
	}

	l.Cut()
	_, err = pingVia(t, l.Addr(), 500*time.Millisecond)
	assert.Error(t, err, "a cut link refuses connections")
	assert.Error(t, c.Ping(ctx), "a cut link closed the open connection")
	l.Heal()
	_, err = pingVia(t, l.Addr(), 2*time.Second)
	assert.NoError(t, err, "a healed link accepts connections again")
}

// TestProcPause: a paused server answers nothing until resumed; a process left paused by a test is resumed
// by its cleanup (here the subtest's) before anything else happens to it.
func TestProcPause(t *testing.T) {
	n := StartServer(t, Default, ServerConfig{})
	n.Pause()
	require.True(t, n.Paused())
	_, err := pingVia(t, n.Addr(), 300*time.Millisecond)
	assert.Error(t, err, "a paused server does not answer")
	n.Resume()
	_, err = pingVia(t, n.Addr(), 2*time.Second)
	assert.NoError(t, err)

	<-n.PauseFor(300 * time.Millisecond)
	assert.False(t, n.Paused())

	var sub *Proc
	t.Run("left paused", func(t *testing.T) {
		sub = StartServer(t, Default, ServerConfig{})
		sub.Pause()
	})
	assert.False(t, sub.Paused(), "the cleanup resumed it")
	assert.False(t, sub.Running(), "and killed it (a SIGKILL reaches a stopped process too)")
}

// TestFaultLinksKeepSentinelsView: with FaultLinks the replica replicates through its link yet reports the
// primary's real host and port, so Sentinel never reconfigures it (+fix-slave-config), also past
// failover-timeout; a delay on the link makes the replica trail the primary by about that delay.
func TestFaultLinksKeepSentinelsView(t *testing.T) {
	top := StartTopology(t, TopologyConfig{Replicas: 1, Sentinels: 1, FaultLinks: true, FailoverTimeoutMs: 3000})
	primary, replica := top.Nodes[0], top.Nodes[1]
	require.NotNil(t, top.Link(replica, primary))
	require.NotNil(t, top.Link(top.Sentinels[0], replica))
	r, err := top.Replication(replica)
	require.NoError(t, err)
	assert.Equal(t, Host, r.PrimaryHost)
	assert.Equal(t, primary.Port, r.PrimaryPort, "the replica reports the primary's real port")

	top.DelayReplication(400 * time.Millisecond)
	ctx := context.Background()
	pc := primary.Client(top.Options(acl.Operator))
	rc := replica.Client(top.Options(acl.Operator))
	err = pc.Set(ctx, "__valkey-ha:probe", "1", 0)
	require.NoError(t, err)
	written := time.Now()
	pr, err := pc.InfoReplication(ctx)
	require.NoError(t, err)
	Eventually(t, 10*time.Second, 10*time.Millisecond, "replica catches up", func() error {
		rr, err := rc.InfoReplication(ctx)
		if err == nil && rr.ReplicaReplOffset < pr.MasterReplOffset {
			err = fmt.Errorf("replica at %d of %d", rr.ReplicaReplOffset, pr.MasterReplOffset)
		}
		return err
	})
	lag := time.Since(written)
	assert.GreaterOrEqual(t, lag, 350*time.Millisecond, "the write reached the replica only after the delay")
	t.Logf("replication lag through a 400 ms link: %s", lag.Round(time.Millisecond))

	// Sentinel reconfigures a replica with a foreign primary address after failover-timeout (3 s here)
	time.Sleep(5 * time.Second) // an observation window (no +fix-slave-config within it), not a wait
	assert.NotContains(t, top.Sentinels[0].Logs(), "+fix-slave-config", "Sentinel sees a consistent replica")
	reps, err := top.Sentinels[0].Client(valkey.Options{}).SentinelReplicas(ctx, top.Cfg.MonitorName)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	assert.True(t, reps[0].PrimaryLinkUp, "Sentinel sees the link up")
	assert.Equal(t, []string{"slave"}, reps[0].Flags)
	assert.True(t, strings.HasPrefix(top.Link(replica, primary).String(), "127.0.0.1:"))
}
