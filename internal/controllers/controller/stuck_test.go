package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestSentinelStuckOnStalePrimaryRealigned (issue 24, RELIABILITY.md "Found" 4): one of three real Sentinels
// names a replica as the primary at the same config epoch as the two that name the real primary. The loopback
// chaos test reached that state (seed 1838832032100125304): the Sentinel that led a handoff's failover was
// still in reconf-slaves when its promoted replica was killed; the other two failed over back at epoch 2, it
// took epoch 2 from their hello while it still named the old primary (the same address as theirs: no
// switch), then its own failover ended for timeout and it switched to its promoted node at epoch 2. Sentinel
// moves a monitor to a hello's address only with a higher config epoch, so no hello ever moves it (it named
// the dead node for the rest of the round, 60+ s). Here the state is made directly (SENTINEL REMOVE +
// MONITOR at the replica, epoch 0 = the others' epoch 0). Required: the sentinel controller re-registers that
// Sentinel at the primary the majority names and that reports role master, once the state has lasted
// failover-timeout (5 s here), within 12 s; no failover, no change on the other Sentinels. Before the fix the
// Sentinel still named the replica 12 s later.
func TestSentinelStuckOnStalePrimaryRealigned(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true})
	ctx := context.Background()
	_, err := e.CS.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns,
		Labels: testenv.PartOf(map[string]string{contract.LabelSentinel: "q"})}}, metav1.CreateOptions{})
	require.NoError(t, err)
	events := testenv.RecordEvents(t, e.Rec)
	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q", Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	primary, replica := e.Top.Nodes[0], e.Top.Nodes[1]
	name := e.Top.Cfg.MonitorName

	names := func(s *valkeytest.Proc) (int, int64) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		ms, err := s.Client(e.Top.SentinelOptions()).SentinelMasters(cctx)
		if err != nil {
			return 0, -1
		}
		for _, m := range ms {
			if m.Name == name {
				return m.Port, m.ConfigEpoch
			}
		}
		return 0, -1
	}
	stuck := e.Top.Sentinels[2]
	for _, s := range e.Top.Sentinels {
		port, epoch := names(s)
		require.Equal(t, primary.Port, port, "every Sentinel names the primary first")
		require.Zero(t, epoch, "no failover yet: config epoch 0")
	}
	events.Take()
	before := time.Now()

	// the stuck state: the replica named at the others' config epoch. The controller runs every 300 ms and
	// registers a missing monitor at the primary: when its pass falls between REMOVE and MONITOR (CI under
	// load), MONITOR answers "Duplicate master name"; remove and try again.
	cl := stuck.Client(e.Top.SentinelOptions())
	for try := 1; ; try++ {
		require.NoError(t, cl.SentinelRemove(ctx, name))
		err := e.Top.TryRegister(ctx, stuck, replica)
		if err == nil {
			break
		}
		require.Less(t, try, 10, "MONITOR at the replica: %v", err)
		require.ErrorContains(t, err, "Duplicate master name")
	}
	made := time.Now()
	port, epoch := names(stuck)
	require.Equal(t, replica.Port, port, "the stuck Sentinel names the replica")
	require.Zero(t, epoch)

	var realigned time.Duration
	deadline := made.Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if p, _ := names(stuck); p == primary.Port {
			realigned = time.Since(made)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	last, _ := names(stuck)
	t.Logf("stuck Sentinel names %s:%d again after %s (0: not within 12 s; it names port %d)", valkeytest.Host, primary.Port,
		realigned.Round(time.Millisecond), last)
	require.NotZero(t, realigned, "the stuck Sentinel names the primary again within 12 s")
	assert.GreaterOrEqual(t, realigned, 5*time.Second, "only once the state lasted failover-timeout")
	for _, s := range e.Top.Sentinels {
		port, _ := names(s)
		assert.Equal(t, primary.Port, port, "Sentinel %d names the primary", s.Port)
	}
	r, err := primary.Client(e.Top.Options(acl.Operator)).InfoReplication(ctx)
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, r.Role, "no failover: the primary is still primary")
	var unexpected []string
	for _, ev := range testenv.EventsIn(testenv.SentinelEvents(e.Top, name), before, time.Time{}) {
		switch {
		case ev.Sentinel == 2 && (ev.Kind == "-monitor" || ev.Kind == "+monitor"):
		case ev.Kind == "+switch-master" || ev.Kind == testenv.FailoverRequested || ev.Kind == "-monitor" || ev.Kind == "+monitor" || ev.Kind == "+reset-master":
			unexpected = append(unexpected, fmt.Sprint(ev))
		}
	}
	assert.Empty(t, unexpected, "nothing else changed on the Sentinels")
	assert.Equal(t, 1, events.Count("MonitorRealigned"), "one Warning Event names the realignment: %v", events.All())
}
