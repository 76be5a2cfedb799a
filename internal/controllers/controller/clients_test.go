package controller

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// labelledPrimary models the primary Service: a new connection goes to the pod labelled primary.
func (e *env) labelledPrimary() (string, error) {
	procs := e.NodeProcs()
	for pod, role := range e.RoleLabels() {
		if role == contract.RolePrimary {
			return procs[pod].Addr(), nil
		}
	}
	return "", fmt.Errorf("no pod is labelled primary")
}

// startMetricsInstanceController is startInstanceController with the metrics returned.
func (e *env) startMetricsInstanceController() *metrics.Metrics {
	return e.startHeldInstanceController(false)
}

// startHeldInstanceController starts the instance controller; labelsOnly sets the keepDemotedClients knob
// (the figure's baseline: the controller moves the labels but closes no connection).
func (e *env) startHeldInstanceController(labelsOnly bool) *metrics.Metrics {
	m := metrics.New()
	c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 200 * time.Millisecond}, m, e.Rec, quietLog())
	c.keepDemotedClients = labelsOnly
	e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
	return m
}

// nodeOnPort returns the data node listening on port (the one a +switch-master named); the test fails
// when none does.
func (e *env) nodeOnPort(t *testing.T, port int) *valkeytest.Proc {
	for _, n := range e.Top.Nodes {
		if n.Port == port {
			return n
		}
	}
	t.Fatalf("no data node listens on port %d", port)
	return nil
}

// heldClientsOnPrimary adds the application user, starts the instance controller (labelsOnly as in
// startHeldInstanceController), waits until node 0 carries the primary label and returns 10 held clients
// (500 ms timeout) once each has written to node 0 (within 5 s). route, when set, is called after the labels
// settled and gives the clients' dial (default: the labelled primary).
func (e *env) heldClientsOnPrimary(t *testing.T, labelsOnly bool, route func() func(int) (string, error)) (*testenv.HeldClients, *metrics.Metrics) {
	e.PublishSentinels()
	pw := testenv.AddAppUser(t, e.Top)
	m := e.startHeldInstanceController(labelsOnly)
	old := e.Top.Nodes[0]
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(old.Port) })
	dial := func(int) (string, error) { return e.labelledPrimary() }
	if route != nil {
		dial = route()
	}
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 10, User: testenv.AppUser, Password: pw, Timeout: 500 * time.Millisecond, Dial: dial})
	begin := time.Now()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "clients write", func() error { return held.AllWrote(old.Addr(), begin) })
	return held, m
}

// waitReplica waits until p reports role replica and returns when it was first seen so.
func waitReplica(t *testing.T, e *env, p *valkeytest.Proc, timeout time.Duration) time.Time {
	var at time.Time
	valkeytest.Eventually(t, timeout, 5*time.Millisecond, "demoted", func() error {
		r, err := e.Top.Replication(p)
		if err != nil {
			return err
		}
		if r.Role != valkey.RoleReplica {
			return fmt.Errorf("%s is %s", p.Addr(), r.Role)
		}
		at = time.Now()
		return nil
	})
	return at
}

// TestRepairMovesHeldClients (issue 30): clients that reached a stale primary (here an orphan made by
// REPLICAOF NO ONE) hold their connections to it and write. The controller's repair makes it a replica and
// closes their connections, so within 1 s they reconnect through the primary Service (the pod labelled
// primary) and write there; the orphan acknowledges no write after its demotion. Before the fix they got
// READONLY until the end.
func TestRepairMovesHeldClients(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	pw := testenv.AddAppUser(t, e.Top)
	m := e.startMetricsInstanceController()
	primary := e.Top.Nodes[0]
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(primary.Port) })

	orphan := e.Top.Nodes[2]
	require.NoError(t, e.opClient(orphan).PromoteToPrimary(context.Background()))
	dial := func(int) (string, error) { return e.labelledPrimary() }
	first := make([]atomic.Bool, 10)
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 10, User: testenv.AppUser, Password: pw, Dial: func(c int) (string, error) {
		if first[c].CompareAndSwap(false, true) { // the first connection reached the stale primary; later ones go through the Service
			return orphan.Addr(), nil
		}
		return dial(c)
	}})
	at := waitReplica(t, e, orphan, 15*time.Second)
	for end := time.Now().Add(5 * time.Second); held.AllWrote(primary.Addr(), at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	held.Stop()
	s := held.Summarize(at, orphan.Addr(), primary.Addr())
	t.Logf("held clients after the repair: %s", s)
	assert.GreaterOrEqual(t, s.Worst(), time.Duration(0), "every connection reached the primary")
	assert.Less(t, s.Worst(), time.Second, "every connection writes to the primary within 1 s of the repair")
	assert.Zero(t, s.AckedByOld, "no write acknowledged by the repaired node after its demotion")
	assert.GreaterOrEqual(t, testutil.ToFloat64(m.DemotedClientsClosed.WithLabelValues(ns+"/vk")), 10.0)
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "Repaired"))
}

// TestRepairWhenClientsCannotBeClosed (issue 30): the repaired node refuses CLIENT KILL (its _operator lacks
// +client|kill, as with an older chart's ACL). The repair still happens at once, and the failure is a
// DemotedClientsNotClosed Event and metric; the clients there get READONLY, never an acknowledgement.
func TestRepairWhenClientsCannotBeClosed(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	pw := testenv.AddAppUser(t, e.Top)
	orphan := e.Top.Nodes[2]
	out, err := orphan.CLI(acl.Operator, e.Top.Passwords[acl.Operator], "ACL", "SETUSER", acl.Operator, "-client|kill")
	require.NoError(t, err, out)
	m := e.startMetricsInstanceController()
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })

	require.NoError(t, e.opClient(orphan).PromoteToPrimary(context.Background()))
	held := testenv.StartHeldClients(t, testenv.HeldOptions{N: 3, User: testenv.AppUser, Password: pw, Dial: testenv.ConnOf(orphan.Addr())})
	start := time.Now()
	at := waitReplica(t, e, orphan, 15*time.Second)
	t.Logf("repaired %s after the orphan appeared", at.Sub(start).Round(time.Millisecond))
	valkeytest.Eventually(t, 5*time.Second, 50*time.Millisecond, "metric", func() error {
		if v := testutil.ToFloat64(m.DemotedClientsNotClosed.WithLabelValues(ns + "/vk")); v < 1 {
			return fmt.Errorf("valkey_ha_demoted_clients_not_closed_total %v", v)
		}
		return nil
	})
	assert.NotEmpty(t, testenv.DrainEvents(e.Rec, "DemotedClientsNotClosed"))
	time.Sleep(100 * time.Millisecond) // a few writes after the demotion
	held.Stop()
	s := held.Summarize(at, orphan.Addr(), e.Top.Nodes[0].Addr())
	assert.Zero(t, s.AckedByOld, "a client left on the demoted node gets errors, never an acknowledgement")
	assert.NotZero(t, s.Errors)
}

// TestPausedPrimaryFailoverMovesHeldClients (issue 30): the primary is paused (SIGSTOP) with ten clients of
// the primary Service writing (500 ms command timeout); Sentinel fails over, the controller relabels, and
// the old primary resumes 1 s after the switch, when Sentinel (or the controller's repair) demotes it and
// closes its normal clients. Every client writes to the new primary within 1 s of the switch (p95: its
// timeout makes it redial the Service, which the relabel points at the new primary), and the old primary
// acknowledges no write after its demotion. Before the fix the relabel waited for the paused node's INFO:
// the pass in flight at the switch until the old primary resumed (or the 3 s command timeout), so every
// client reached the new primary 1.02-1.33 s after the switch (6 runs); now a +switch-master abandons a
// gather still waiting for a node, and a gather stops waiting 250 ms after the Sentinels' primary answered
// (plan.PrimaryAnswered). Writes the old primary acknowledged between its resumption and its demotion are
// reported, not asserted: the bound for those is min-replicas-to-write (see README, "Clients without
// Sentinel").
func TestPausedPrimaryFailoverMovesHeldClients(t *testing.T) {
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"default", nil}, {"min-replicas-to-write", []string{"min-replicas-to-write 1", "min-replicas-max-lag 10"}}} {
		t.Run(tc.name, func(t *testing.T) {
			s, after := pausedPrimaryFailover(t, tc.extra, false)
			assert.GreaterOrEqual(t, s.Worst(), time.Duration(0), "every connection reached the new primary")
			assert.LessOrEqual(t, s.Quantile(0.95), time.Second, "p95 within 1 s of the switch, the old primary still paused")
			assert.Zero(t, after.AckedByOld, "no write acknowledged by the old primary after its demotion")
		})
	}
}

// pausedPrimaryFailover runs the scenario of TestPausedPrimaryFailoverMovesHeldClients and returns the held
// clients' summary from the switch and from the old primary's demotion.
func pausedPrimaryFailover(t *testing.T, extra []string, labelsOnly bool) (s, after testenv.HeldSummary) {
	e := newEnv(t, valkeytest.TopologyConfig{ExtraServerLines: extra})
	held, _ := e.heldClientsOnPrimary(t, labelsOnly, nil)
	old := e.Top.Nodes[0]

	sw := testenv.NewSwitchWatcher(t, e.Top)
	old.Pause()
	t.Cleanup(old.Resume)
	at, port, err := sw.WaitSwitch(old.Port, 20*time.Second)
	require.NoError(t, err)
	newAddr := e.nodeOnPort(t, port)
	time.Sleep(time.Second) // the old primary stays paused 1 s past the switch
	old.Resume()
	demotedAt := waitReplica(t, e, old, 15*time.Second)
	for end := time.Now().Add(5 * time.Second); held.AllWrote(newAddr.Addr(), at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	held.Stop()
	s = held.Summarize(at, old.Addr(), newAddr.Addr())
	after = held.Summarize(demotedAt, old.Addr(), newAddr.Addr())
	t.Logf("held clients after the switch: %s; old primary demoted %s after the switch, acked by it after its demotion: %d",
		s, demotedAt.Sub(at).Round(time.Millisecond), after.AckedByOld)
	return s, after
}

// TestSentinelFailoverMovesHeldClients (issue 30): SENTINEL FAILOVER of a healthy primary with ten clients of
// the primary Service writing. Sentinel demotes the old primary itself and closes its normal clients; the
// clients that reconnect before the relabel land on it again, and the controller's relabel closes them once
// more, so every client writes to the new primary within 1 s of the switch, and the old primary acknowledges
// no write after its demotion.
func TestSentinelFailoverMovesHeldClients(t *testing.T) {
	s, after := sentinelFailoverHeld(t, false, 0)
	assert.GreaterOrEqual(t, s.Worst(), time.Duration(0), "every connection reached the new primary")
	assert.LessOrEqual(t, s.Quantile(0.95), time.Second, "p95 within 1 s of the switch")
	assert.Zero(t, after.AckedByOld, "no write acknowledged by the old primary after its demotion")
}

// sentinelFailoverHeld runs the scenario of TestSentinelFailoverMovesHeldClients and returns the held
// clients' summary from the switch and from the old primary's demotion. lag > 0 routes the clients through a
// primary Service lagging the labels by lag (laggedRouting).
func sentinelFailoverHeld(t *testing.T, labelsOnly bool, lag time.Duration) (s, after testenv.HeldSummary) {
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	var route func() func(int) (string, error)
	wait := 5 * time.Second
	if lag > 0 {
		route, wait = func() func(int) (string, error) { return startLaggedRouting(t, e, lag).dial }, lag+plan.RecloseWindow+3*time.Second
	}
	held, m := e.heldClientsOnPrimary(t, labelsOnly, route)
	old := e.Top.Nodes[0]

	sw := testenv.NewSwitchWatcher(t, e.Top)
	require.NoError(t, e.Top.Sentinels[0].Client(e.Top.SentinelOptions()).SentinelFailover(context.Background(), e.Top.Cfg.MonitorName))
	at, port, err := sw.WaitSwitch(old.Port, 20*time.Second)
	require.NoError(t, err)
	newNode := e.nodeOnPort(t, port)
	demotedAt := waitReplica(t, e, old, 15*time.Second)
	for end := time.Now().Add(wait); held.AllWrote(newNode.Addr(), at) != nil && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	held.Stop()
	s = held.Summarize(at, old.Addr(), newNode.Addr())
	after = held.Summarize(demotedAt, old.Addr(), newNode.Addr())
	t.Logf("held clients after the switch: %s; old primary demoted %s after the switch; closed by the controller: %v",
		s, demotedAt.Sub(at).Round(time.Millisecond), testutil.ToFloat64(m.DemotedClientsClosed.WithLabelValues(ns+"/vk")))
	return s, after
}

// TestHeldClientsFigure (issue 30, outside CI: VALKEY_HA_HELD_FIGURE=1) prints, per switch kind, the held
// plain clients' time from +switch-master until each writes to the new primary, side by side for "labels
// only" (the controller's keepDemotedClients knob: labels move, no connection is closed by the controller;
// Sentinel still closes normal clients on a node it reconfigures itself) and for the closing the project does.
// The planned handoff's figure is internal/podsteps/handoff's TestRunMovesHeldClients (the handoff itself closes).
func TestHeldClientsFigure(t *testing.T) {
	if os.Getenv("VALKEY_HA_HELD_FIGURE") == "" {
		t.Skip("the figure runs only with VALKEY_HA_HELD_FIGURE=1 (about 2 minutes; its numbers are in BENCHMARKS.md)")
	}
	type row struct {
		kind  string
		modes [2]testenv.HeldSummary
	}
	var rows []row
	for _, k := range []struct {
		name string
		run  func(t *testing.T, labelsOnly bool) testenv.HeldSummary
	}{
		{"SENTINEL FAILOVER", func(t *testing.T, lo bool) testenv.HeldSummary { s, _ := sentinelFailoverHeld(t, lo, 0); return s }},
		{"paused primary (resumed 1 s after)", func(t *testing.T, lo bool) testenv.HeldSummary { s, _ := pausedPrimaryFailover(t, nil, lo); return s }},
	} {
		r := row{kind: k.name}
		for i, lo := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/labelsOnly=%v", k.name, lo), func(t *testing.T) { r.modes[i] = k.run(t, lo) })
		}
		rows = append(rows, r)
	}
	ms := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	t.Logf("%-36s | %-44s | %s", "switch kind", "labels only: median / p95 / worst, errors", "ours: median / p95 / worst, errors")
	for _, r := range rows {
		cell := func(s testenv.HeldSummary) string {
			return fmt.Sprintf("%s / %s / %s, %d errors, %d acked by old", ms(s.Quantile(0.5)), ms(s.Quantile(0.95)), ms(s.Worst()), s.Errors, s.AckedByOld)
		}
		t.Logf("%-36s | %-44s | %s", r.kind, cell(r.modes[0]), cell(r.modes[1]))
	}
}

// TestClosedByServer: a pooled connection that the server closed (CLIENT KILL TYPE normal, as Sentinel sends
// to a node it promotes) reads as closedByServer, so the gather dials once more instead of recording the new
// primary unreachable (seen in 1 of 14 paused-primary runs: the pass then waited for the paused old primary);
// a refused or timed-out command does not.
func TestClosedByServer(t *testing.T) {
	p := valkeytest.StartServer(t, valkeytest.Default, valkeytest.ServerConfig{})
	ctx := context.Background()
	held := p.Client(valkey.Options{})
	_, err := held.InfoReplication(ctx)
	require.NoError(t, err)
	killer := p.Client(valkey.Options{})
	out, err := p.CLI("", "", "CLIENT", "KILL", "TYPE", "normal")
	require.NoError(t, err, out)
	_, err = held.InfoReplication(ctx)
	require.Error(t, err)
	assert.True(t, closedByServer(err), "killed connection: %v", err)
	_, err = killer.InfoReplication(ctx) // killed too (its own CLIENT KILL was from valkey-cli)
	assert.True(t, closedByServer(err), "killed connection: %v", err)
	fresh := p.Client(valkey.Options{})
	_, err = fresh.Info(ctx, "no-such-section")
	assert.False(t, closedByServer(err))
	assert.False(t, closedByServer(context.DeadlineExceeded))
	assert.False(t, closedByServer(nil))
}

// laggedRouting models a primary Service whose routing lags the role labels (the EndpointSlice, then
// kube-proxy: 1-2 s on the local cluster): dial returns the pod that was labelled
// primary lag ago.
type laggedRouting struct {
	mu      sync.Mutex
	lag     time.Duration
	samples []routeSample // oldest first, one per 20 ms
}

type routeSample struct {
	at   time.Time
	addr string
}

// startLaggedRouting samples e.labelledPrimary every 20 ms until the test ends and returns once dial has a
// sample at least lag old.
func startLaggedRouting(t *testing.T, e *env, lag time.Duration) *laggedRouting {
	r := &laggedRouting{lag: lag}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if addr, err := e.labelledPrimary(); err == nil {
				r.mu.Lock()
				r.samples = append(r.samples, routeSample{time.Now(), addr})
				r.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	valkeytest.Eventually(t, lag+5*time.Second, 20*time.Millisecond, "a routing sample "+lag.String()+" old", func() error {
		_, err := r.dial(0)
		return err
	})
	return r
}

// dial returns the newest sample taken at least lag ago.
func (r *laggedRouting) dial(int) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := time.Now().Add(-r.lag)
	for i := len(r.samples) - 1; i >= 0; i-- {
		if !r.samples[i].at.After(cut) {
			return r.samples[i].addr, nil
		}
	}
	return "", fmt.Errorf("no routing sample %s old yet", r.lag)
}

// TestHeldClientsFollowALaggingService (issue 30): SENTINEL FAILOVER with ten clients of a primary Service
// whose routing lags the labels by 1.5 s (kube-proxy on the local cluster lagged 1-2 s). The clients closed
// at the demotion and at the relabel reconnect, are routed to the old node again and get READONLY there; the
// controller closes its application connections again at every pass for plan.RecloseWindow after the relabel, so
// every client reaches the new primary within the lag plus a few passes, and the old node acknowledges no
// write after its demotion. Before the reclose they stayed on the old node until the end (never).
func TestHeldClientsFollowALaggingService(t *testing.T) {
	const lag = 1500 * time.Millisecond
	s, after := sentinelFailoverHeld(t, false, lag)
	t.Logf("held clients behind a %s routing lag after the switch: %s", lag, s)
	assert.GreaterOrEqual(t, s.Worst(), time.Duration(0), "every connection reached the new primary")
	assert.LessOrEqual(t, s.Worst(), lag+plan.RecloseWindow, "every connection within the lag and the reclose window")
	assert.Zero(t, after.AckedByOld, "no write acknowledged by the old primary after its demotion")
}
