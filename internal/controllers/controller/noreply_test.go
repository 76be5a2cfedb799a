package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// noReplicasLines is the charts' default for replicas >= 2: the primary refuses writes (NOREPLICAS) until a
// replica acknowledged its stream.
var noReplicasLines = []string{"min-replicas-to-write 1", "min-replicas-max-lag 5"}

// operatorFailover is what one plain SENTINEL FAILOVER (asked by an operator, not the controller's handoff) did
// with ten clients of the primary Service writing: from +switch-master, the held clients' summary, when the new
// primary first acknowledged a write, and when the old primary reported role replica; e, old and new (the
// test's environment, the old and the new primary) and every write attempt, for further checks.
type operatorFailover struct {
	s, afterDemotion testenv.HeldSummary
	writes, demoted  time.Duration
	e                *env
	old, new         *valkeytest.Proc
	held             []testenv.HeldWrite
}

// sentinelFailoverNoReplicas runs a plain SENTINEL FAILOVER (asked of Sentinel 0) with min-replicas-to-write 1
// and the instance controller running; fault, when set, is applied once the clients write and before the
// failover; during, when set, runs from the first +switch-master until it returns, before the old primary's
// demotion is waited for.
func sentinelFailoverNoReplicas(t *testing.T, cfg valkeytest.TopologyConfig, fault func(e *env), during func(e *env, old *valkeytest.Proc)) operatorFailover {
	cfg.ExtraServerLines = append(cfg.ExtraServerLines, noReplicasLines...)
	if cfg.DownAfterMs == 0 {
		cfg.DownAfterMs, cfg.FailoverTimeoutMs = 5000, 15000
	}
	e := newEnv(t, cfg)
	held, _ := e.heldClientsOnPrimary(t, false, nil)
	old := e.Top.Nodes[0]
	sw := testenv.NewSwitchWatcher(t, e.Top)
	if fault != nil {
		fault(e)
	}
	require.NoError(t, e.Top.Sentinels[0].Client(e.Top.SentinelOptions()).SentinelFailover(context.Background(), e.Top.Cfg.MonitorName))
	at, port, err := sw.WaitSwitch(old.Port, 20*time.Second)
	require.NoError(t, err)
	newNode := e.nodeOnPort(t, port)
	if during != nil {
		during(e, old)
	}
	demotedAt := waitReplica(t, e, old, 20*time.Second)
	for end := time.Now().Add(10 * time.Second); held.AllWrote(newNode.Addr(), at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // writes that end after the demotion was seen
	held.Stop()
	if st, err := newNode.CLI(acl.Operator, e.Top.Passwords[acl.Operator], "INFO", "stats"); err == nil {
		for _, l := range strings.Split(st, "\n") {
			if strings.HasPrefix(l, "sync_full") || strings.HasPrefix(l, "sync_partial") {
				t.Logf("new primary %s", strings.TrimSpace(l))
			}
		}
	}
	r := operatorFailover{s: held.Summarize(at, old.Addr(), newNode.Addr()), writes: -1, demoted: demotedAt.Sub(at),
		afterDemotion: held.Summarize(demotedAt, old.Addr(), newNode.Addr()), e: e, old: old, new: newNode, held: held.Writes()}
	for _, w := range held.Writes() {
		if w.OK && w.Addr == newNode.Addr() && !w.End.Before(at) && (r.writes < 0 || w.End.Sub(at) < r.writes) {
			r.writes = w.End.Sub(at)
		}
	}
	t.Logf("SENTINEL FAILOVER with min-replicas-to-write 1: the new primary acknowledged a write %s after the switch, the old primary was a replica %s after it; held clients: %s",
		r.writes.Round(time.Millisecond), r.demoted.Round(time.Millisecond), r.s)
	return r
}

// TestOperatorFailoverWritesWithinASecond (issue 30): a plain SENTINEL FAILOVER (asked by an operator, not the
// controller's handoff) of an instance with min-replicas-to-write 1, the chart's replication settings
// (repl-diskless-sync yes, repl-diskless-sync-delay 0) and ten clients of the primary Service writing. The other
// replica took writes from the old primary that the new one never had, so it resyncs in full; the new primary
// acknowledges writes only once it has, and the old primary becomes a replica as soon as the failover ended.
// With Valkey's default delay of 5 s (the chart before this fix) the new primary's first acknowledged write came
// 5.34 s after the switch and the old primary was a replica 7.37 s after it; with 0, 0.09 s and 1.13 s.
func TestOperatorFailoverWritesWithinASecond(t *testing.T) {
	r := sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{}, nil, nil)
	assert.GreaterOrEqual(t, r.writes, time.Duration(0), "the new primary acknowledged a write")
	assert.Less(t, r.writes, time.Second, "the new primary acknowledges writes within 1 s of the switch")
	assert.GreaterOrEqual(t, r.s.Worst(), time.Duration(0), "every connection reached the new primary")
	assert.Less(t, r.demoted, 3*time.Second, "the old primary is a replica within 3 s of the switch (Sentinel alone: about 8 s)")
	assert.Zero(t, r.afterDemotion.AckedByOld, "no write acknowledged by the old primary after its demotion")
}

// cutSentinel holds every byte between Sentinel i and the data nodes and the other Sentinels (Link.Blackhole;
// Sentinels publish their hellos to each other too): it still answers the controller, but hears no hello, so
// it keeps naming the old primary under the old config epoch.
func cutSentinel(e *env, i int) {
	s := e.Top.Sentinels[i]
	for _, n := range e.Top.Nodes {
		e.Top.Link(s, n).Blackhole()
	}
	for _, o := range e.Top.Sentinels {
		if o != s {
			e.Top.Link(s, o).Blackhole()
			e.Top.Link(o, s).Blackhole()
		}
	}
}

// TestStepAfterSwitchWithASentinelUninformed (issue 30): after a plain SENTINEL FAILOVER one Sentinel, cut off
// from the data nodes, still names the old primary under the old config epoch (the Sentinels disagree, which
// freezes every other repair). Two of three name the new primary under a higher epoch and none reports a
// failover in flight, so the controller demotes the old primary at once (plan.switchSettled) instead of
// leaving it to Sentinel's +convert-to-slave. Before: demoted by Sentinel 10.1-10.2 s after the switch (3 runs); after:
// 1.13-1.14 s.
func TestStepAfterSwitchWithASentinelUninformed(t *testing.T) {
	valkeytest.RequireFaults(t)
	r := sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{FaultLinks: true}, func(e *env) { cutSentinel(e, 2) }, nil)
	assert.Less(t, r.demoted, 3*time.Second, "the old primary is demoted by the controller, not by Sentinel about 8 s later")
	assert.Zero(t, r.afterDemotion.AckedByOld, "no write acknowledged by the old primary after its demotion")
}

// TestStepAfterSwitchUnderFaults (issue 30): the same plain SENTINEL FAILOVER with a Sentinel paused (SIGSTOP)
// from before it until the end, and with 100 ms of latency on every link (replication, Sentinel to node,
// Sentinel to Sentinel). Every connection reaches the new primary, the old primary is a replica within 5 s of
// the switch (Sentinel alone: about 8 s) and acknowledges no write after its demotion. Measured (loopback, 2
// cores shared with other builds, 4 runs): paused Sentinel, first write on the new primary 0.7-2.2 s and the
// demotion 1.3-2.1 s after the switch (a pass waits for the paused Sentinel's reply); 100 ms links, 0.67-0.73 s
// and 1.25-1.39 s.
func TestStepAfterSwitchUnderFaults(t *testing.T) {
	valkeytest.RequireFaults(t)
	for _, tc := range []struct {
		name  string
		fault func(e *env)
	}{
		{"a Sentinel paused", func(e *env) { e.Top.Sentinels[2].Pause(); t.Cleanup(e.Top.Sentinels[2].Resume) }},
		{"100 ms on every link", func(e *env) {
			for _, from := range append(append([]*valkeytest.Proc{}, e.Top.Nodes...), e.Top.Sentinels...) {
				for _, to := range append(append([]*valkeytest.Proc{}, e.Top.Nodes...), e.Top.Sentinels...) {
					if l := e.Top.Link(from, to); l != nil {
						l.Delay(100 * time.Millisecond)
					}
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{FaultLinks: true}, tc.fault, nil)
			assert.GreaterOrEqual(t, r.s.Worst(), time.Duration(0), "every connection reached the new primary")
			assert.Less(t, r.demoted, 5*time.Second, "the old primary is a replica well before Sentinel's +convert-to-slave (about 8 s)")
			assert.Zero(t, r.afterDemotion.AckedByOld, "no write acknowledged by the old primary after its demotion")
		})
	}
}

// TestStepAfterSwitchWaitsForTheFailover (issue 30): the step after a switch never runs while a failover is in
// flight. With a replication delay of 5 s (Valkey's default, set here to hold the failover open) the leader of
// a plain SENTINEL FAILOVER waits for the other replica's full resync before it ends the failover, while the two
// other Sentinels already name the new primary under the higher epoch. Meanwhile the old primary must stay as
// it is (no Repaired event, role master); once the leader ended the failover the controller demotes it.
func TestStepAfterSwitchWaitsForTheFailover(t *testing.T) {
	t.Parallel() // timer-bound (the 5 s delay): runs beside the other long tests (make unit time)
	var checked, failedReads int
	// a read that fails (EOF or a reset from the leader or the old primary: seen at load 6 on 2026-12-04) checks
	// nothing and is retried; more than 20 of them fail the test
	readFailed := func(what string, err error) bool {
		if err == nil {
			return false
		}
		if failedReads++; failedReads > 20 {
			require.NoError(t, err, "%s: more than 20 failed reads", what)
		}
		t.Logf("%s (retried): %v", what, err)
		return true
	}
	r := sentinelFailoverNoReplicas(t, valkeytest.TopologyConfig{ExtraServerLines: []string{"repl-diskless-sync-delay 5"}}, nil,
		func(e *env, old *valkeytest.Proc) {
			leader := e.Top.Sentinels[0].Client(e.Top.SentinelOptions())
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				m, _, err := leader.SentinelMaster(context.Background(), e.Top.Cfg.MonitorName)
				if readFailed("SENTINEL MASTER on the leader", err) {
					continue
				}
				if !m.FailoverInProgress() {
					return
				}
				rp, err := e.Top.Replication(old)
				if readFailed("INFO replication on the old primary", err) {
					continue
				}
				require.Equal(t, valkey.RolePrimary, rp.Role, "the old primary was touched while the leader's failover was in flight")
				require.Empty(t, testenv.DrainEvents(e.Rec, "Repaired"), "a repair while the leader's failover was in flight")
				checked++
			}
			t.Fatal("the leader's failover did not end within 20 s")
		})
	t.Logf("checked %d times while the leader's failover was in flight", checked)
	assert.Greater(t, checked, 10, "the failover was in flight for a while after the first +switch-master")
	assert.Zero(t, r.afterDemotion.AckedByOld, "no write acknowledged by the old primary after its demotion")
}
