package handoff

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestRunMovesHeldClients (issue 30): ten plain clients hold a connection to the primary Service and write
// in a loop, two more hold the primary's cached address. A planned handoff demotes the old primary; every
// Service client writes to the new primary within 1 s of the switch, no write is acknowledged by the old
// primary after the switch, and every acknowledged write is on the new primary. The cached-address
// clients, redialling the demoted node, get errors (READONLY), never an acknowledgement. Before the fix
// the Service clients kept their connections to the demoted node and got READONLY until the end.
//
// Two ways: the promotion comes within the pause budget (down-after 5 s: budget 2.5 s), and it comes after
// the budget was spent, so the old primary was demoted before the switch (down-after 1 s: budget 0.5 s).
func TestRunMovesHeldClients(t *testing.T) {
	for _, tc := range []struct {
		name        string
		downAfterMs int
	}{{"promoted-within-pause", 5000}, {"demoted-early", 1000}} {
		t.Run(tc.name, func(t *testing.T) { testRunMovesHeldClients(t, tc.downAfterMs) })
	}
}

func testRunMovesHeldClients(t *testing.T, downAfterMs int) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 2, DownAfterMs: downAfterMs})
	pw := testenv.AddAppUser(t, top)
	old := top.Nodes[0].Addr()
	svc := testenv.NewService(old)
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 10, User: testenv.AppUser, Password: pw, Dial: svc.Dial})
	cached := testenv.StartHeldClients(t, testenv.HeldOptions{N: 2, User: testenv.AppUser, Password: pw, Dial: testenv.ConnOf(old),
		Prefix: "__valkey-ha:cached"})
	begin := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "clients write", func() error { return held.AllWrote(old, begin) })

	sw := testenv.NewSwitchWatcher(t, top)
	type ran struct {
		res Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		cfg := configFor(top)
		cfg.Log = testenv.Log("HANDOFF_TEST_LOG")
		res, err := Run(context.Background(), cfg)
		done <- ran{res, err}
	}()
	at, port, err := sw.WaitSwitch(top.Nodes[0].Port, 20*time.Second)
	require.NoError(t, err)
	newAddr := top.Nodes[1].Addr()
	if port == top.Nodes[2].Port {
		newAddr = top.Nodes[2].Addr()
	}
	svc.Set(newAddr) // the controller relabels on +switch-master
	r := <-done
	require.NoError(t, r.err)
	for end := time.Now().Add(5 * time.Second); held.AllWrote(newAddr, at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond) // measured below: a connection that never reached the new primary fails the test
	}
	time.Sleep(200 * time.Millisecond) // a few more writes of the cached clients after the demotion
	held.Stop()
	cached.Stop()

	s := held.Summarize(at, old, newAddr)
	t.Logf("Service clients after the switch: %s; handoff closed %d connections of %v", s, r.res.Clients.Conns, r.res.Clients.Users)
	assert.NoError(t, r.res.Clients.Err)
	assert.Equal(t, []string{testenv.AppUser}, r.res.Clients.Users, "only the application's connections are closed")
	assert.GreaterOrEqual(t, s.Worst(), time.Duration(0), "every connection reached the new primary")
	assert.Less(t, s.Worst(), time.Second, "every connection writes to the new primary within 1 s of the switch")
	assert.Zero(t, s.AckedByOld, "no write acknowledged by the old primary after the switch")
	cs := cached.Summarize(at, old, newAddr)
	assert.Zero(t, cs.AckedByOld, "a client that keeps the old address gets errors, never an acknowledgement")
	assert.NotZero(t, cs.Errors, "the cached-address clients saw errors")
	nc := top.Nodes[1].Client(top.Options(acl.Operator))
	if newAddr == top.Nodes[2].Addr() {
		nc = top.Nodes[2].Client(top.Options(acl.Operator))
	}
	keys := append(held.AckedKeys(), cached.AckedKeys()...)
	assert.Zero(t, missingKeys(t, nc, keys), "every acknowledged write is on the new primary (of %d)", len(keys))
}

// TestCloseClientsBoundedOnAPausedNode (issue 30): a demoted node that does not answer (a stopped process)
// is never waited on longer than CloseTimeout: CloseClients returns an error instead.
func TestCloseClientsBoundedOnAPausedNode(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1})
	c := top.Nodes[0].Client(top.Options(acl.Operator))
	require.NoError(t, c.Ping(context.Background()))
	top.Nodes[0].Pause()
	t.Cleanup(top.Nodes[0].Resume)
	start := time.Now()
	cl := CloseClients(context.Background(), c)
	took := time.Since(start)
	require.Error(t, cl.Err)
	assert.Less(t, took, CloseTimeout+time.Second, "bounded by CloseTimeout")
	assert.Zero(t, cl.Conns)
}

// TestCloseClientsKeepsSystemConnections (issue 30): CloseClients closes the application's normal
// connections only: the system users' connections and the replication links stay. On every supported
// engine (CLIENT KILL USER ... TYPE normal SKIPME yes).
func TestCloseClientsKeepsSystemConnections(t *testing.T) {
	for _, eng := range valkeytest.Engines {
		t.Run(eng.Name+"-"+eng.Version, func(t *testing.T) { testCloseClientsKeepsSystemConnections(t, eng) })
	}
}

func testCloseClientsKeepsSystemConnections(t *testing.T, eng valkeytest.Engine) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: eng, Replicas: 1, Sentinels: -1})
	pw := testenv.AddAppUser(t, top)
	p := top.Nodes[0]
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 3, User: testenv.AppUser, Password: pw, Dial: testenv.ConnOf(p.Addr())})
	begin := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "clients write", func() error { return held.AllWrote(p.Addr(), begin) })
	probe := p.Client(top.Options(acl.Probe))
	require.NoError(t, probe.Ping(context.Background()))
	op := p.Client(top.Options(acl.Operator))
	probeIDs := func() []int64 {
		list, err := op.ClientList(context.Background(), "normal")
		require.NoError(t, err)
		var ids []int64
		for _, e := range list {
			if e.User == acl.Probe {
				ids = append(ids, e.ID)
			}
		}
		return ids
	}
	before := probeIDs()
	require.NotEmpty(t, before)
	cl := CloseClients(context.Background(), op)
	require.NoError(t, cl.Err)
	assert.GreaterOrEqual(t, cl.Conns, int64(3))
	assert.Equal(t, []string{testenv.AppUser}, cl.Users)
	assert.Equal(t, before, probeIDs(), "the _probe connections stay")
	list, err := op.ClientList(context.Background(), "replica")
	require.NoError(t, err)
	assert.Len(t, list, 1, "the replication link stays")
}

// TestOnPausedRunsWhileWritesWait: Config.OnPaused (where the instance controller takes the primary Service off
// the old primary, issue 30) is called once, while the old primary's writes wait and before any Sentinel
// names the new primary, and Run returns only after it has; with FAILOVER TO it is called once too.
func TestOnPausedRunsWhileWritesWait(t *testing.T) {
	t.Run("monitored", func(t *testing.T) {
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 2, DownAfterMs: 5000})
		old := top.Nodes[0]
		var calls atomic.Int32
		var done atomic.Bool
		var named []string
		var writeErr error
		cfg := configFor(top)
		cfg.OnPaused = func() {
			calls.Add(1)
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			writeErr = old.Client(top.Options(acl.Operator)).Set(ctx, "__valkey-ha:onpaused", "1", 0)
			cancel()
			for _, s := range top.Sentinels {
				host, port, _, err := s.Client(top.SentinelOptions()).SentinelPrimaryAddr(context.Background(), top.Cfg.MonitorName)
				named = append(named, fmt.Sprintf("%s (%v)", net.JoinHostPort(host, strconv.Itoa(port)), err))
			}
			time.Sleep(200 * time.Millisecond)
			done.Store(true)
		}
		res, err := Run(context.Background(), cfg)
		require.NoError(t, err)
		assert.NotEqual(t, old.Addr(), res.NewPrimary)
		assert.Equal(t, int32(1), calls.Load(), "called once")
		assert.True(t, done.Load(), "Run returned only after OnPaused did")
		assert.ErrorIs(t, writeErr, context.DeadlineExceeded, "a write to the old primary waited (paused) while OnPaused ran")
		require.Len(t, named, len(top.Sentinels))
		for i, a := range named {
			assert.Equal(t, old.Addr()+" (<nil>)", a, "Sentinel %d still named the old primary while OnPaused ran", i)
		}
	})
	t.Run("direct", func(t *testing.T) {
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, Sentinels: -1})
		var calls atomic.Int32
		var done atomic.Bool
		cfg := Config{Primary: top.Nodes[0].Addr(), NodeOptions: top.Options(acl.Operator), Target: top.Nodes[1].Addr(),
			OnPaused: func() { calls.Add(1); time.Sleep(200 * time.Millisecond); done.Store(true) }}
		_, err := Run(context.Background(), cfg)
		require.NoError(t, err)
		assert.Equal(t, int32(1), calls.Load())
		assert.True(t, done.Load(), "Run returned only after OnPaused did")
	})
}
