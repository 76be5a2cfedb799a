package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestNoResetWhenAPartitionHeals reproduces RELIABILITY.md "Found" 2 on loopback with real Sentinels: the
// primary P0 and Sentinel C are cut off from the two replicas, the other Sentinels A and B, and the
// controller (every Sentinel-to-node, Sentinel-to-Sentinel and replication link of the partition is cut; the
// controller reaches C through a testenv.Proxy, and P0's pod reads as not running, as it does for a
// controller on the majority's side). A and B fail over to a replica, R; C still names P0 and flags the
// replicas, R included, s_down. The partition then heals, the controller's link to C a moment before the
// rest: its next dial to C fails, the one after succeeds (testenv.Proxy.HealAfter(1)) - a partition healing
// between two dials of one pass, as it did in both cluster runs.
//
// Before the gather/plan/apply restructuring the instance controller asked the Sentinels twice per pass: the
// first read missed C (no disagreement seen), the scale-in check's second read found C listing R, the
// current primary, as a replica flagged s_down, which it took for a replica that is gone: SENTINEL RESET on
// C right at the heal (case S10 forbids a reset around a primary change). Now one gather asks each Sentinel
// once, and the policy refuses a reset while a Sentinel did not answer, the Sentinels disagree, the primary
// changed within twice failover-timeout, or the listed replica is a node of the instance. Audited from the
// Sentinels' own logs (+reset-master): none from the partition until 15 s after the heal.
func TestNoResetWhenAPartitionHeals(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 2000, FailoverTimeoutMs: 5000, FaultLinks: true})
	top := e.Top
	p0, c := top.Nodes[0], top.Sentinels[2]
	toC := testenv.NewProxy(t, c.Addr())
	hosts := []string{top.Sentinels[0].Addr(), top.Sentinels[1].Addr(), toC.Addr()}
	b, _ := json.Marshal(spec.SentinelInfo{MonitorName: e.In.MonitorName, SentinelRelease: "q", Port: 26379, Hosts: hosts})
	_, err := e.CS.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-sentinels", Namespace: ns,
			Labels: testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelInstance: "vk", contract.LabelSentinel: "q"})},
		Data: map[string]string{contract.KeySentinels: string(b)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// no +switch-master subscription: its dials to C would take the proxy's one refusal
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond, NoSubscribe: true})
	events := testenv.RecordEvents(t, e.Rec)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(p0.Port) })
	resets := func() []testenv.SentinelEvent {
		var out []testenv.SentinelEvent
		for _, ev := range testenv.SentinelEvents(top, e.In.MonitorName) {
			if ev.Kind == "+reset-master" {
				out = append(out, ev)
			}
		}
		return out
	}
	require.Empty(t, resets(), "no RESET before the partition")

	// the partition: {P0, C} | {R1, R2, A, B, the controller}
	minority := map[*valkeytest.Proc]bool{p0: true, c: true}
	var cut []*valkeytest.Link
	for _, from := range append(append([]*valkeytest.Proc{}, top.Nodes...), top.Sentinels...) {
		for _, to := range append(append([]*valkeytest.Proc{}, top.Nodes...), top.Sentinels...) {
			if l := top.Link(from, to); l != nil && minority[from] != minority[to] {
				l.Cut()
				cut = append(cut, l)
			}
		}
	}
	toC.Cut()
	setPodPhase(t, e, "vk-0-0", corev1.PodUnknown)
	cut0 := time.Now()
	t.Logf("partitioned: %d links cut", len(cut))

	// A and B fail over to a replica R; C keeps P0 and flags R down
	var r int
	valkeytest.Eventually(t, 30*time.Second, 100*time.Millisecond, "A and B name a new primary, their failover over", func() error {
		for _, s := range top.Sentinels[:2] {
			m, found, err := s.Client(valkey.Options{}).SentinelMaster(context.Background(), e.In.MonitorName)
			if err != nil || !found || m.Port == p0.Port || !m.Healthy() {
				return fmt.Errorf("%s names %d, flags %v (%v)", s.Addr(), m.Port, m.Flags, err)
			}
			r = m.Port
		}
		return nil
	})
	valkeytest.Eventually(t, 30*time.Second, 100*time.Millisecond, "C names P0 and flags R s_down", func() error {
		cl := c.Client(valkey.Options{})
		_, port, _, err := cl.SentinelPrimaryAddr(context.Background(), e.In.MonitorName)
		if err != nil || port != p0.Port {
			return fmt.Errorf("C names %d (%v)", port, err)
		}
		reps, err := cl.SentinelReplicas(context.Background(), e.In.MonitorName)
		if err != nil {
			return err
		}
		for _, rep := range reps {
			if rep.Port == r && rep.HasFlag("s_down") {
				return nil
			}
		}
		return fmt.Errorf("C lists %v", reps)
	})
	t.Logf("after %s: A and B name port %d, C names P0 (port %d) and flags %d s_down", time.Since(cut0).Round(time.Millisecond), r, p0.Port, r)
	require.Empty(t, resets(), "no RESET during the partition")

	// the heal: the controller's link to C first (one more refused dial), everything else 2 s later
	toC.HealAfter(1)
	heal := time.Now()
	refusedBefore := toC.Refused()
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "the controller's dial to C was refused once more", func() error {
		if toC.Refused() == refusedBefore {
			return fmt.Errorf("no dial yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second) // the fault: the other links heal 2 s after the controller's link to C
	for _, l := range cut {
		l.Heal()
	}
	setPodPhase(t, e, "vk-0-0", corev1.PodRunning)
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "every Sentinel names R", func() error {
		p, err := top.SentinelPrimary()
		if err == nil && p != r {
			err = fmt.Errorf("Sentinels name %d", p)
		}
		return err
	})
	time.Sleep(15 * time.Second) // the window in which the reset came: ~50 passes of the controller
	got := resets()
	var refused []string
	for _, ev := range events.All() {
		if testenv.HasReason(ev, "StepRefused") || testenv.HasReason(ev, "SentinelReset") {
			refused = append(refused, ev)
		}
	}
	t.Logf("after the heal (%s): %d SENTINEL RESET %v; controller events: %v", time.Since(heal).Round(time.Millisecond), len(got), got, refused)
	assert.Empty(t, got, "no SENTINEL RESET when a partition of the primary heals")
}

// setPodPhase sets a pod's status.phase (Running / Unknown) in the fake clientset.
func setPodPhase(t *testing.T, e *env, name string, phase corev1.PodPhase) {
	t.Helper()
	p, err := e.CS.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase = phase
	_, err = e.CS.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}
