package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// publishSentinelProxies publishes <F>-sentinels with one counting proxy (testenv.Proxy) in front of each
// Sentinel, so every command the controller sends a Sentinel is counted on the wire.
func (e *env) publishSentinelProxies() []*testenv.Proxy {
	var hosts []string
	var ps []*testenv.Proxy
	for _, s := range e.Top.Sentinels {
		p := testenv.NewProxy(e.T, s.Addr())
		ps = append(ps, p)
		hosts = append(hosts, p.Addr())
	}
	si := spec.SentinelInfo{MonitorName: e.In.MonitorName, SentinelRelease: "q", Port: 26379, Hosts: hosts}
	b, _ := json.Marshal(si)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-sentinels", Namespace: ns,
			Labels: testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelInstance: "vk", contract.LabelSentinel: "q"})},
		Data: map[string]string{contract.KeySentinels: string(b)}}, metav1.CreateOptions{})
	require.NoError(e.T, err)
	return ps
}

// startCountedInstanceController runs the instance controller with its pass counter on a registry of its
// own and returns a function that reads how many passes it completed.
func (e *env) startCountedInstanceController(o InstanceOptions) (passes func() uint64) {
	o.Namespace, o.Instance = ns, "vk"
	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.ReconcileSeconds)
	c := NewInstanceController(e.CS, o, m, e.Rec, quietLog())
	testenv.Run(e.T, func(ctx context.Context) error { return c.Run(ctx, nil) })
	testenv.RecordEvents(e.T, e.Rec)
	return func() uint64 { return s10Passes(reg, "instance") }
}

// TestSentinelCommandsPerSteadyPass counts (issue 13, "Measure") the Sentinel commands one steady-state pass
// of the instance controller sends for one instance of 1 primary + 2 replicas monitored by 3 Sentinels, on
// the wire (a counting proxy in front of each Sentinel; no +switch-master subscription). One gather asks
// each Sentinel SENTINEL MASTER and SENTINEL REPLICAS once, and one of them SENTINEL CKQUORUM: 7 commands
// (before the gather/plan/apply restructuring: 10, MASTER and REPLICAS being asked again by the scale-in
// check).
func TestSentinelCommandsPerSteadyPass(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	proxies := e.publishSentinelProxies()
	passes := e.startCountedInstanceController(InstanceOptions{Resync: 200 * time.Millisecond, NoSubscribe: true})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "Ready", func() error {
		if c := e.Condition("Ready"); c != "True" {
			return fmt.Errorf("Ready %q", c)
		}
		return nil
	})
	for _, p := range proxies {
		p.Reset()
	}
	p0 := passes()
	start := time.Now()
	valkeytest.Eventually(t, 60*time.Second, 50*time.Millisecond, "20 passes", func() error {
		if n := passes() - p0; n < 20 {
			return fmt.Errorf("%d passes", n)
		}
		return nil
	})
	n := passes() - p0
	counts := testenv.SumCounts(proxies)
	total := 0
	for _, v := range counts {
		total += v
	}
	perPass := float64(total) / float64(n)
	t.Logf("%d steady passes in %s: %d Sentinel commands (%.2f per pass): %s", n, time.Since(start).Round(time.Millisecond),
		total, perPass, testenv.FormatCounts(counts))
	// a pass still running at either end of the window is counted in part: allow one pass's worth
	assert.LessOrEqual(t, float64(total), 7*float64(n+1), "at most 7 Sentinel commands per steady pass: %s", testenv.FormatCounts(counts))
}

// TestPassesPerFailover counts (issue 13, "Measure") the instance controller's passes from +switch-master to
// quiet, with the periodic resync out of the way (1 min): the passes a failover triggers through the
// +switch-master subscription and the informers. The controller's own status writes and label patches must
// not trigger passes of their own (quiet event handling): once the labels moved and the reclose window after the
// old primary's relabel closed, the next 5 s see no pass.
func TestPassesPerFailover(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	passes := e.startCountedInstanceController(InstanceOptions{Resync: time.Minute})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })
	quiet := func(d time.Duration) uint64 {
		t.Helper()
		var last uint64
		var since time.Time
		valkeytest.Eventually(t, 60*time.Second, 50*time.Millisecond, fmt.Sprintf("no pass for %s", d), func() error {
			if n := passes(); n != last || since.IsZero() {
				last, since = n, time.Now()
			}
			if time.Since(since) < d {
				return fmt.Errorf("last pass %s ago", time.Since(since).Round(time.Millisecond))
			}
			return nil
		})
		return last
	}
	quiet(3 * time.Second)
	e.Top.Sentinels[0].WaitSubscribers(1, 5*time.Second) // the controller's SUBSCRIBE reached the Sentinel asked to fail over

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := passes()
	require.NoError(t, e.Top.Sentinels[0].Client(valkey.Options{}).SentinelFailover(ctx, e.In.MonitorName))
	newPort := e.Top.WaitPrimaryMoved(e.Top.Nodes[0].Port, 20*time.Second)
	// The pass that moves the labels is counted when it completes, a moment after its patch: a poll that reads
	// the labels in between must not count it as a pass "after the labels moved". Each poll reads the count
	// before the labels, so the labelling pass completes after the last poll that saw the old labels (c0).
	var c0, atMatch uint64
	valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "labels follow", func() error {
		n := passes()
		if err := e.LabelsMatch(newPort); err != nil {
			c0 = n
			return err
		}
		atMatch = n
		return nil
	})
	labelled := max(atMatch, c0+1)
	valkeytest.Eventually(t, 5*time.Second, 5*time.Millisecond, "the labelling pass completes", func() error {
		if n := passes(); n < labelled {
			return fmt.Errorf("%d passes", n)
		}
		return nil
	})
	after := quiet(5 * time.Second)
	t.Logf("passes per failover: %d until the labels moved, %d in all until 5 s without a pass", labelled-before, after-before)
	// The poll cannot always tell the labelling pass from the one before it: when the old primary is repaired
	// (REPLICAOF to the new one, when Sentinel has not converted it yet) in a pass that completes between two
	// polls, the labelling pass right after it may still be in flight when the labels are seen. So: at most that
	// one pass completes after the labels moved, and no more passes than the failover's own events cause (the
	// Sentinels' +switch-master and at most one repair of the old primary: 4); a pass triggered by the
	// controller's own label patch or status write would add one more, and repeat.
	// The primary label's removal opens a reclose window (plan.RecloseWindow, a pass every recloseEvery: the
	// Service's routing lags the label), whose passes end with it.
	reclose := uint64(plan.RecloseWindow/recloseEvery) + 1
	assert.LessOrEqual(t, after, labelled+1+reclose, "no pass after the labels moved but the one in flight and the reclose window's (none triggered by the controller's own writes)")
	assert.LessOrEqual(t, after-before, 4+reclose, "passes per failover: at most the failover's own events and the reclose window's (none triggered by the controller's own writes)")
}
