package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestF3ReadErrorsKeepMonitors (issue 12, F3): three real Sentinels and a real instance, the sentinel
// controller on a fake clientset. The instance stays selected throughout while its resolution fails in four
// ways, each for at least 10 passes of the controller:
//
//   - transient: reading the _sentinel Secret fails with 503 for 1.5 s;
//   - forbidden: the read is Forbidden (the two charts' ServiceAccount values drifted);
//   - unknown field: the descriptor gains a field and a minor version this controller does not know, as a
//     newer charts/valkey writes it;
//   - newer major: the descriptor's version is 2.0, which this controller refuses to read.
//
// Audited from the Sentinels' own logs (-monitor is SENTINEL REMOVE, +monitor SENTINEL MONITOR) and from a
// watch on <F>-sentinels: no REMOVE, no re-MONITOR, the Sentinel info is never deleted, and every Sentinel
// still monitors the instance at the end. The failure is reported: in the quorum status while it lasts, and
// with one Warning event per change of reason, not one per pass. A positively deselected instance is still
// removed afterwards (the last phase), so the test would see a REMOVE if one happened.
func TestF3ReadErrorsKeepMonitors(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true})
	transient := kubefault.FailReads(e.CS, "secrets", "vk-sentinel-auth", kubefault.Unavailable)
	forbidden := kubefault.FailReads(e.CS, "secrets", "vk-sentinel-auth", kubefault.Forbidden)
	ctx := context.Background()
	// the quorum status is written only while the Sentinel StatefulSet exists
	_, err := e.CS.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns,
		Labels: testenv.PartOf(map[string]string{contract.LabelSentinel: "q"})}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// every deletion of the Sentinel info, seen by a watch of our own
	var delMu sync.Mutex
	infoDeleted := 0
	wctx, wcancel := context.WithCancel(ctx)
	t.Cleanup(wcancel)
	w, err := e.CS.CoreV1().ConfigMaps(ns).Watch(wctx, metav1.ListOptions{})
	require.NoError(t, err)
	go func() {
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Deleted && cm.Name == "vk-sentinels" {
				delMu.Lock()
				infoDeleted++
				delMu.Unlock()
			}
		}
	}()
	deleted := func() int { delMu.Lock(); defer delMu.Unlock(); return infoDeleted }

	events := testenv.RecordEvents(t, e.Rec) // drained continuously: the shared FakeRecorder never blocks a controller
	takeEvents := events.Take

	m := metrics.New()
	passReg := prometheus.NewRegistry()
	passReg.MustRegister(m.ReconcileSeconds)
	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, m, e.Rec, quietLog())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "sentinel info published", func() error {
		_, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
		return err
	})
	base := testenv.Audited(s10Events(e))
	require.Equal(t, map[string]int{"+monitor": 3}, testenv.CountEvents(base), "registration: one SENTINEL MONITOR per Sentinel")
	takeEvents()

	// passes waits for n more completed passes of the sentinel controller (and at least min time).
	passes := func(what string, n uint64, min time.Duration) {
		from, start := s10Passes(passReg, "sentinel"), time.Now()
		for s10Passes(passReg, "sentinel")-from < n || time.Since(start) < min {
			if time.Since(start) > min+20*time.Second {
				assert.Fail(t, "too few passes", "%s: %d passes in %s (a failing pass backs off)", what,
					s10Passes(passReg, "sentinel")-from, time.Since(start).Round(time.Millisecond))
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	setDescriptor := func(mutate func(map[string]any)) {
		desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(desc.Data[contract.KeyInstance]), &doc))
		mutate(doc)
		b, _ := json.Marshal(doc)
		desc.Data[contract.KeyInstance] = string(b)
		_, err = e.CS.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	quorumStatus := func() string {
		cm, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "q-status", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return cm.Data[contract.KeyStatus]
	}

	type phaseResult struct {
		name                    string
		remove, monitor, delete int
		events                  []string
	}
	var results []phaseResult
	phase := func(name, reported string, start, stop func()) {
		audited := len(testenv.Audited(s10Events(e)))
		del := deleted()
		start()
		if reported != "" {
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(quorumStatus(), reported) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			assert.Contains(t, quorumStatus(), reported, "%s: reported in the quorum status", name)
		}
		passes(name, 10, 3*time.Second)
		stop()
		passes(name+": recovered", 5, time.Second)
		got := testenv.CountEvents(testenv.Audited(s10Events(e))[audited:])
		r := phaseResult{name: name, remove: got["-monitor"], monitor: got["+monitor"], delete: deleted() - del}
		for _, ev := range takeEvents() {
			if strings.HasPrefix(ev, corev1.EventTypeWarning) {
				r.events = append(r.events, ev)
			}
		}
		t.Logf("%s: SENTINEL REMOVE %d, SENTINEL MONITOR %d, <F>-sentinels deleted %d times, warnings %d %q",
			name, r.remove, r.monitor, r.delete, len(r.events), r.events)
		results = append(results, r)
	}

	phase("transient 503 on the _sentinel Secret for 1.5 s", "",
		func() { transient.For(1500 * time.Millisecond) }, func() {})
	phase("Forbidden on the _sentinel Secret", "forbidden",
		func() { forbidden.Set(true) }, func() { forbidden.Set(false) })
	phase("descriptor with an unknown field at version 1.1", "futureField",
		func() {
			setDescriptor(func(d map[string]any) {
				d["version"] = "1.1"
				d["futureField"] = map[string]any{"zone": "a"}
			})
		}, func() {})
	phase("descriptor at version 2.0", "2.0",
		func() { setDescriptor(func(d map[string]any) { d["version"] = "2.0" }) },
		func() {
			setDescriptor(func(d map[string]any) {
				d["version"] = spec.DescriptorVersion
				delete(d, "futureField")
			})
		})
	for _, r := range results {
		assert.Zero(t, r.remove, "%s: no SENTINEL REMOVE", r.name)
		assert.Zero(t, r.monitor, "%s: no SENTINEL MONITOR again (the monitor never went away)", r.name)
		assert.Zero(t, r.delete, "%s: <F>-sentinels never deleted", r.name)
	}
	for _, r := range results[1:] {
		assert.Len(t, r.events, 1, "%s: one Warning event for the whole failure, not one per pass: %q", r.name, r.events)
	}
	for _, s := range e.Top.Sentinels {
		_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, e.In.MonitorName)
		require.NoError(t, err)
		assert.True(t, found, "%s still monitors the instance", s.Addr())
	}

	// positively deselected: removed everywhere (the audit sees REMOVEs when they happen)
	audited := len(testenv.Audited(s10Events(e)))
	desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
	require.NoError(t, err)
	desc.Labels["tier"] = "other"
	_, err = e.CS.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "deselected: removed on every Sentinel", func() error {
		if got := testenv.CountEvents(testenv.Audited(s10Events(e))[audited:])["-monitor"]; got != 3 {
			return fmt.Errorf("%d REMOVEs", got)
		}
		return nil
	})
}
