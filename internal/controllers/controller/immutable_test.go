package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestMonitorRenameRefusedAtRunTime (issue 26): the chart refuses a changed sentinel.monitorName only when its
// render can see the cluster (lookup); Argo CD and Flux render without one and apply the new descriptor. Here
// the descriptor's monitorName changes under a running quorum (three real Sentinels, the sentinel controller on
// a fake clientset), as such a sync applies it. The controller refuses: for at least 10 passes no Sentinel
// registers the new name and every Sentinel keeps the old monitor (no SENTINEL REMOVE in their logs), the
// published Sentinel info keeps naming the old monitor, the quorum status and one Warning event
// (MonitorRefused) name the value and the fix. Setting the name back clears the refusal. Before, the controller
// registered the new name and removed the old one: clients asking for the old name lost the primary.
func TestMonitorRenameRefusedAtRunTime(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true})
	ctx := context.Background()
	_, err := e.CS.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns,
		Labels: testenv.PartOf(map[string]string{contract.LabelSentinel: "q"})}}, metav1.CreateOptions{})
	require.NoError(t, err)
	events := testenv.RecordEvents(t, e.Rec)
	m := metrics.New()
	passReg := prometheus.NewRegistry()
	passReg.MustRegister(m.ReconcileSeconds)
	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q", Selector: sel, Resync: 300 * time.Millisecond}, m, e.Rec, quietLog())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	old := e.In.MonitorName
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	valkeytest.Eventually(t, 5*time.Second, 100*time.Millisecond, "sentinel info published", func() error {
		_, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
		return err
	})
	audited := len(testenv.Audited(s10Events(e)))
	events.Take()

	setName := func(name string) {
		desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(desc.Data[contract.KeyInstance]), &doc))
		doc["monitorName"] = name
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
	want := MonitorRenameRefusal(old, "renamed")
	setName("renamed")
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "the refusal in the quorum status", func() error {
		if !strings.Contains(quorumStatus(), "sentinel.monitorName: this instance is monitored as") {
			return assert.AnError
		}
		return nil
	})
	from, start := s10Passes(passReg, "sentinel"), time.Now()
	for s10Passes(passReg, "sentinel")-from < 10 || time.Since(start) < 3*time.Second {
		require.Less(t, time.Since(start), 30*time.Second, "too few passes")
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range e.Top.Sentinels {
		_, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, old)
		require.NoError(t, err)
		assert.True(t, found, "%s keeps monitor %s", s.Addr(), old)
		_, found, err = s.Client(valkey.Options{}).SentinelMaster(ctx, "renamed")
		require.NoError(t, err)
		assert.False(t, found, "%s never registered the new name", s.Addr())
	}
	assert.Zero(t, testenv.CountEvents(testenv.Audited(s10Events(e))[audited:])["-monitor"], "no SENTINEL REMOVE of the old monitor")
	info, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, info.Data[contract.KeySentinels], `"monitorName": "`+old+`"`, "the published info still names the old monitor")
	var warnings []string
	for _, ev := range events.Take() {
		if strings.HasPrefix(ev, corev1.EventTypeWarning) {
			warnings = append(warnings, ev)
		}
	}
	require.Len(t, warnings, 1, "one Warning event for the whole refusal: %q", warnings)
	assert.Contains(t, warnings[0], "MonitorRefused")
	assert.Contains(t, warnings[0], want)
	assert.Contains(t, want, "set sentinel.monitorName: "+old)

	setName(old)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "the refusal cleared", func() error {
		if strings.Contains(quorumStatus(), "sentinel.monitorName:") {
			return assert.AnError
		}
		return nil
	})
}

// TestStartRefusedReported (issue 26): a data pod whose start step refused the values (here a changed engine
// on existing data, as valkey-sentinel-ctl bootstrap writes it to the container's termination message; the
// refusal itself is internal/podsteps/bootstrap TestEngineChangeRefusedAtStart) is reported by the instance controller
// with one StartRefused Warning event and the ValuesAccepted condition False, both naming the pod, the value
// and the fix; once the pod starts cleanly the condition is True again.
func TestStartRefusedReported(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	ctx := context.Background()
	events := testenv.RecordEvents(t, e.Rec)
	m := metrics.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.ReconcileSeconds)
	c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 500 * time.Millisecond}, m, e.Rec, quietLog())
	e.Run(func(ctx context.Context) error { return c.Run(ctx, nil) })
	passes := func() uint64 { return s10Passes(reg, "instance") }
	msg := "engine: the RDB file on this node's volume was written by valkey 9.1.2 and engine cannot change (data files are not interchangeable), so redis is not started on it; keep engine: valkey, or install a new release and migrate"
	pod := e.In.Nodes[2].Pod
	setMessage := func(m string) {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		require.NoError(t, err)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "valkey", RestartCount: 3,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: m}}}}
		_, err = e.CS.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	condition := func() (string, string) {
		cm, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-status", metav1.GetOptions{})
		if err != nil {
			return "", ""
		}
		var st struct {
			Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
		}
		if json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st) != nil {
			return "", ""
		}
		for _, c := range st.Conditions {
			if c.Type == "ValuesAccepted" {
				return c.Status, c.Message
			}
		}
		return "", ""
	}
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "ValuesAccepted True", func() error {
		if s, _ := condition(); s != "True" {
			return assert.AnError
		}
		return nil
	})
	events.Take()
	setMessage(contract.StartRefusedPrefix + msg)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "ValuesAccepted False", func() error {
		if s, _ := condition(); s != "False" {
			return assert.AnError
		}
		return nil
	})
	_, got := condition()
	assert.Equal(t, pod+": "+msg, got)
	from := passes()
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "5 more passes", func() error {
		if passes()-from < 5 {
			return assert.AnError
		}
		return nil
	})
	var refused []string
	for _, ev := range events.Take() {
		if strings.Contains(ev, "StartRefused") {
			refused = append(refused, ev)
		}
	}
	require.Len(t, refused, 1, "one event for the refusal, not one per pass: %q", refused)
	assert.Contains(t, refused[0], corev1.EventTypeWarning)
	assert.Contains(t, refused[0], pod+": "+msg)

	setMessage("")
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "ValuesAccepted True again", func() error {
		if s, _ := condition(); s != "True" {
			return assert.AnError
		}
		return nil
	})
}

// TestClaimsDifferReported (issue 26): the chart refuses a changed persistence.size or storageClass only when
// its render sees the cluster; under Argo CD or Flux the descriptor is applied and the API server refuses the
// StatefulSet update with a message naming no value. Here the data StatefulSets claim 8Gi of class standard
// (fake clientset) and the descriptor asks for 20Gi: the instance controller reports it with one ClaimsDiffer
// Warning event per StatefulSet and the ValuesAccepted condition False, naming the value and the fix; a
// storage class change is reported the same way; a size equal as a quantity (8192Mi) is accepted.
func TestClaimsDifferReported(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	ctx := context.Background()
	events := testenv.RecordEvents(t, e.Rec)
	class := "standard"
	for _, n := range e.In.Nodes {
		_, err := e.CS.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: n.StatefulSet, Namespace: ns, Labels: testenv.PartOf(map[string]string{contract.LabelInstance: "vk"})},
			Spec: appsv1.StatefulSetSpec{VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")}}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	setClaims := func(claims map[string]any) {
		desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(desc.Data[contract.KeyInstance]), &doc))
		doc["persistence"], doc["claims"] = true, claims
		b, _ := json.Marshal(doc)
		desc.Data[contract.KeyInstance] = string(b)
		_, err = e.CS.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	condition := func() (string, string) {
		cm, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-status", metav1.GetOptions{})
		if err != nil {
			return "", ""
		}
		var st struct {
			Conditions []struct{ Type, Status, Message string } `json:"conditions"`
		}
		if json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st) != nil {
			return "", ""
		}
		for _, c := range st.Conditions {
			if c.Type == "ValuesAccepted" {
				return c.Status, c.Message
			}
		}
		return "", ""
	}
	waitFor := func(what, want string, contains ...string) string {
		var msg string
		valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, what, func() error {
			s, m := condition()
			if s != want || len(contains) > 0 && !strings.Contains(m, contains[0]) {
				cm, _ := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-status", metav1.GetOptions{})
				if cm != nil {
					return fmt.Errorf("%s %s: %s", s, m, cm.Data[contract.KeyStatus])
				}
				return assert.AnError
			}
			msg = m
			return nil
		})
		return msg
	}
	setClaims(map[string]any{"size": "8Gi", "storageClass": class})
	e.startInstanceController(InstanceOptions{})
	waitFor("the claims match", "True")
	events.Take()

	setClaims(map[string]any{"size": "20Gi", "storageClass": class})
	msg := waitFor("the size differs", "False")
	want := `persistence.size: StatefulSet vk-0 claims 8Gi per node and a StatefulSet's volumeClaimTemplates cannot change, so 20Gi cannot be applied; keep persistence.size: 8Gi, or grow the volumes first (resize each PVC data-vk-0-0, then delete the StatefulSets with --cascade=orphan and upgrade): see "Growing the volumes" in the chart README`
	assert.Contains(t, msg, want)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "one event per StatefulSet", func() error {
		n := 0
		for _, ev := range events.All() {
			if strings.Contains(ev, "ClaimsDiffer") {
				n++
			}
		}
		if n < len(e.In.Nodes) {
			return assert.AnError
		}
		return nil
	})

	setClaims(map[string]any{"size": "8Gi", "storageClass": "fast"})
	msg = waitFor("the class differs", "False", "persistence.storageClass")
	assert.Contains(t, msg, `persistence.storageClass: StatefulSet vk-0 claims storage class "standard" and a StatefulSet's volumeClaimTemplates cannot change; keep persistence.storageClass: standard`)

	setClaims(map[string]any{"size": "8192Mi", "storageClass": class})
	waitFor("the same size as a quantity", "True")
	n := 0
	for _, ev := range events.All() {
		if strings.Contains(ev, "ClaimsDiffer") && strings.Contains(ev, "persistence.size") {
			n++
		}
	}
	assert.Equal(t, len(e.In.Nodes), n, "one size event per StatefulSet, not one per pass")
}
