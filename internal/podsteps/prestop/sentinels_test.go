package prestop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/prestop"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// stopPod runs the hook on node 0, then stops its server as the kubelet does after the hook (SIGTERM), all
// under Sentinel-aware writers (before runs right before the hook, during alongside it), and returns the hook's outcome and what the writers saw.
func stopPod(t *testing.T, top *valkeytest.Topology, cfg prestop.Config, before, during func()) (prestop.Outcome, testenv.Outage) {
	var out prestop.Outcome
	o := testenv.MeasureOutage(t, top, top.Nodes[0].Port, 40*time.Second, func() {
		if before != nil {
			before()
		}
		if during != nil {
			go during()
		}
		out = prestop.Run(context.Background(), cfg)
		top.Nodes[0].Stop()
	})
	t.Logf("hook: %s %s %s took %s; %s", out.Action, out.Reason, out.Detail, out.Took.Round(time.Millisecond), o)
	return out, o
}

// writesPaused waits until the primary reports a CLIENT PAUSE WRITE (INFO clients, paused_actions).
func writesPaused(t *testing.T, top *valkeytest.Topology) {
	c := top.Nodes[0].Client(top.Options(acl.Operator))
	valkeytest.Eventually(t, 10*time.Second, 2*time.Millisecond, "writes paused on the primary", func() error {
		info, err := c.Info(context.Background(), "clients")
		if err == nil && !strings.Contains(info["paused_actions"], "write") {
			err = assert.AnError
		}
		return err
	})
}

// TestPreStopAskedSentinelKilledAsWritesPauseAsksTheOthers (issue 24.3): 600 ms of replication lag; the
// Sentinel the hook asks first (the last of the file) is SIGKILLed as the primary's writes pause. The hook
// asks one of the other two, which form a healthy quorum: the primary moves before the pod stops, 0 lost,
// first write on the new primary about as soon as with every Sentinel healthy. Before the fix the hook gave
// up after 5.6 s and never asked the other two: first write on a new primary after 11.2-11.3 s (a
// crash-style failover after the stop).
func TestPreStopAskedSentinelKilledAsWritesPauseAsksTheOthers(t *testing.T) {
	valkeytest.RequireFaults(t)
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: true})
	cfg := hookFor(t, top, 0)
	top.DelayReplication(600 * time.Millisecond)
	asked := top.Sentinels[len(top.Sentinels)-1]
	out, o := stopPod(t, top, cfg, nil, func() { writesPaused(t, top); asked.Kill() })
	require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
	assert.NotEqual(t, asked.Addr(), out.Result.Sentinel, "another Sentinel was asked")
	assert.Zero(t, o.Lost, "no acknowledged write lost")
	assert.Less(t, out.Took, 3*time.Second, "the hook hands off about as fast as with every Sentinel healthy (1.7-1.9 s at 600 ms lag)")
	assert.Less(t, o.FirstOnNew, 5*time.Second, "first write on the new primary within the handoff, not after a crash-style failover")
}

// TestPreStopOneSentinelWithoutQuorumIsNoVeto (issue 24.3): the Sentinel the hook asks first is cut off
// from its two peers, so its CKQUORUM answers NOQUORUM, while the other two are a healthy quorum. One
// Sentinel's NOQUORUM is no veto while a majority says yes: the hook hands off through the healthy ones
// (the cut-off one is not asked), 0 lost. Before the fix the first answer decided: the hook skipped the
// handoff and the stop became a crash-style failover (5.5 s).
func TestPreStopOneSentinelWithoutQuorumIsNoVeto(t *testing.T) {
	valkeytest.RequireFaults(t)
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 3000, FailoverTimeoutMs: 15000, FaultLinks: true})
	ctx := context.Background()
	lone := top.Sentinels[len(top.Sentinels)-1]
	for _, s := range top.Sentinels[:len(top.Sentinels)-1] {
		top.Link(lone, s).Cut()
		top.Link(s, lone).Cut()
	}
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "the cut-off Sentinel answers NOQUORUM", func() error {
		q, err := lone.Client(top.SentinelOptions()).SentinelCKQuorum(ctx, top.Cfg.MonitorName)
		if err == nil && q.OK {
			err = assert.AnError
		}
		return err
	})
	for _, s := range top.Sentinels[:len(top.Sentinels)-1] {
		q, err := s.Client(top.SentinelOptions()).SentinelCKQuorum(ctx, top.Cfg.MonitorName)
		require.NoError(t, err)
		require.True(t, q.OK, "%s: %s", s.Addr(), q.Message)
	}
	out, o := stopPod(t, top, hookFor(t, top, 0), nil, nil)
	require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
	assert.NotEqual(t, lone.Addr(), out.Result.Sentinel, "the Sentinel without quorum was not asked")
	assert.Zero(t, o.Lost, "no acknowledged write lost")
	assert.Less(t, out.Result.Paused, 1500*time.Millisecond, "writes paused as in a healthy handoff")
	assert.Less(t, o.Longest, 4*time.Second, "write outage of a handoff, not of a crash-style failover (the writer may hear of the switch late on a loaded machine)")
}

// TestPreStopFreshlyReplacedSentinelIsNoVeto (issue 24.3): the Sentinel the hook asks first was replaced a
// moment ago (killed, a new one with empty state in its place): it does not know the monitor yet, or it was
// just registered and knows no peer (NOQUORUM). The other two are a healthy quorum: the hook hands off
// through them, 0 lost, writes wait as with every Sentinel healthy.
func TestPreStopFreshlyReplacedSentinelIsNoVeto(t *testing.T) {
	for _, registered := range []bool{false, true} {
		t.Run(map[bool]string{false: "unknown-monitor", true: "just-registered"}[registered], func(t *testing.T) {
			top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
			old := top.Sentinels[len(top.Sentinels)-1]
			old.Kill()
			fresh := valkeytest.StartSentinel(t, top.Cfg.Engine, valkeytest.SentinelConfig{})
			addrs := testenv.SentinelAddrs(top)
			addrs[len(addrs)-1] = fresh.Addr()
			cfg := hookFor(t, top, 0, addrs...)
			var before func()
			noQuorum := true
			if registered {
				before = func() {
					ctx := context.Background()
					top.Register(ctx, fresh, top.Nodes[0])
					q, err := fresh.Client(top.SentinelOptions()).SentinelCKQuorum(ctx, top.Cfg.MonitorName)
					require.NoError(t, err)
					noQuorum = !q.OK // it learns its peers from their hellos within 2 s: rarely before the hook looked
					t.Logf("the fresh Sentinel's CKQUORUM as the hook starts: ok %v, %s", q.OK, q.Message)
				}
			}
			out, o := stopPod(t, top, cfg, before, nil)
			require.Equal(t, prestop.HandedOff, out.Action, "%+v", out)
			if noQuorum {
				assert.NotEqual(t, fresh.Addr(), out.Result.Sentinel, "the replaced Sentinel was not asked")
			}
			assert.Zero(t, o.Lost, "no acknowledged write lost")
			assert.Less(t, out.Result.Paused, 1500*time.Millisecond, "writes paused as in a healthy handoff")
			assert.Less(t, o.Longest, 4*time.Second, "write outage of a handoff, not of a crash-style failover (the writer may hear of the switch late on a loaded machine)")
		})
	}
}
