package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// monitors returns the monitor names every Sentinel of f knows (an error when they differ).
func (f *fleet) monitors() (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out map[string]bool
	for _, s := range f.sentinels {
		ms, err := s.Client(valkey.Options{}).SentinelMasters(ctx)
		if err != nil {
			return nil, err
		}
		got := map[string]bool{}
		for _, m := range ms {
			got[m.Name] = true
		}
		if out != nil && fmt.Sprint(out) != fmt.Sprint(got) {
			return nil, fmt.Errorf("Sentinels disagree: %v vs %v", out, got)
		}
		out = got
	}
	return out, nil
}

func (f *fleet) waitMonitors(want ...string) {
	f.t.Helper()
	valkeytest.Eventually(f.t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("monitors %v", want), func() error {
		got, err := f.monitors()
		if err != nil {
			return err
		}
		w := map[string]bool{}
		for _, n := range want {
			w[n] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(w) {
			return fmt.Errorf("monitors %v, want %v", got, w)
		}
		return nil
	})
}

func (f *fleet) sentinelController(fo FleetOptions, rec record.EventRecorder) *SentinelController {
	sel, _ := labels.Parse("tier=cache")
	return NewSentinelController(f.cs, SentinelOptions{Namespace: "platform", Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond, Fleet: fo}, metrics.New(), rec, quietLog())
}

// setGrant rewrites instance i's descriptor with grant g (nil: none, a descriptor before 1.1).
func (f *fleet) setGrant(i int, g *spec.ServiceAccountRef) {
	in := f.insts[i].in
	in.SentinelGrant = g
	b, _ := json.Marshal(in)
	cms := f.cs.CoreV1().ConfigMaps(in.Namespace)
	cm, err := cms.Get(context.Background(), in.Name+"-instance", metav1.GetOptions{})
	require.NoError(f.t, err)
	cm.Data[contract.KeyInstance] = string(b)
	_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.insts[i].in = in
}

// TestCrossNamespaceQuorum (issue 17): a quorum in namespace platform selects instances of t1 and t2 by
// label; it monitors exactly those whose release grants it (sentinelGrant), publishes their F-sentinels in
// their namespaces, and removes a monitor only when positively told: the grant revoked (with an Event that
// says so) or the namespace deselected. A namespace whose ConfigMaps cannot be listed (Forbidden) when the
// controller starts keeps every monitor (issue 12, F3) and is reported.
func TestCrossNamespaceQuorum(t *testing.T) {
	q := spec.ServiceAccountRef{Namespace: "platform", Name: "q-controller"}
	other := spec.ServiceAccountRef{Namespace: "platform", Name: "other-controller"}
	// vk0 (t1) and vk1 (t2) grant q; vk2 (t2) grants no one (a chart before 1.1); vk3 (t1) grants another quorum
	f := startFleet(t, []string{"t1", "t2", "t2", "t1"}, false, func(i int, in *spec.Instance) {
		switch i {
		case 0, 1:
			in.SentinelGrant = &q
		case 3:
			in.SentinelGrant = &other
		}
	})
	fb := kubefault.ForbidNamespaces(f.cs, "configmaps")
	// the quorum's StatefulSet owns its status ConfigMap; its quorum document says where the Sentinels are
	_, err := f.cs.AppsV1().StatefulSets("platform").Create(context.Background(), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "platform"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var hosts []string
	for _, s := range f.sentinels {
		hosts = append(hosts, s.Addr())
	}
	testenv.PublishQuorum(t, f.cs, "platform", "q", hosts, false)
	rec := record.NewFakeRecorder(1000)
	ctx, cancel := context.WithCancel(context.Background())
	c := f.sentinelController(FleetOptions{Namespaces: []string{"t1", "t2"}, Identity: q}, rec)
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)

	f.waitMonitors("vk0", "vk1")
	for _, i := range []int{0, 1} {
		in := f.insts[i].in
		// published after the registrations of the same pass: the monitors may be seen first
		var cm *corev1.ConfigMap
		valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "F-sentinels published in the instance's namespace", func() (err error) {
			cm, err = f.cs.CoreV1().ConfigMaps(in.Namespace).Get(ctx, in.Name+"-sentinels", metav1.GetOptions{})
			return err
		})
		si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
		require.NoError(t, err)
		assert.Equal(t, "platform", si.SentinelNamespace)
		assert.True(t, si.PublishedBy("platform", "q", in.Namespace))
	}
	for _, i := range []int{2, 3} {
		in := f.insts[i].in
		_, err := f.cs.CoreV1().ConfigMaps(in.Namespace).Get(ctx, in.Name+"-sentinels", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s does not grant q: nothing published", in.Name)
	}

	// revoked: vk1 now grants another quorum
	f.setGrant(1, &other)
	f.waitMonitors("vk0")
	removed := testenv.DrainEvents(rec, "MonitorRemoved")
	require.NotEmpty(t, removed)
	assert.Contains(t, strings.Join(removed, "\n"), "grant revoked", "the Event says why")
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "vk1-sentinels withdrawn", func() error {
		_, err := f.cs.CoreV1().ConfigMaps("t2").Get(ctx, "vk1-sentinels", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	f.setGrant(1, &q)
	f.waitMonitors("vk0", "vk1")

	// restart while t1 cannot be read: vk0's monitor is kept, nothing is removed, the status says why
	stop()
	fb.Set("t1", true)
	ctx, cancel = context.WithCancel(context.Background())
	c = f.sentinelController(FleetOptions{Namespaces: []string{"t1", "t2"}, Identity: q}, rec)
	done = make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	stop = func() { cancel(); <-done }
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "status reports t1", func() error {
		cm, err := f.cs.CoreV1().ConfigMaps("platform").Get(ctx, "q-status", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var st status.Quorum
		_ = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st)
		if !strings.Contains(strings.Join(st.Warnings, "\n"), "namespace t1 cannot be read") {
			return fmt.Errorf("warnings %v", st.Warnings)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // several passes
	got, err := f.monitors()
	require.NoError(t, err)
	assert.True(t, got["vk0"] && got["vk1"], "a namespace that cannot be read keeps its monitors (F3): %v", got)
	fb.Set("t1", false)

	// deselected: the quorum no longer serves t1
	stop()
	ctx, cancel = context.WithCancel(context.Background())
	c = f.sentinelController(FleetOptions{Namespaces: []string{"t2"}, Identity: q}, rec)
	done = make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	stop = func() { cancel(); <-done }
	f.waitMonitors("vk1")
	assert.NotEmpty(t, testenv.DrainEvents(rec, "MonitorRemoved"))
}

// TestKeepUnreadableByHostNamespace (issue 17, F3): the namespace of a registered monitor is read from its
// host (F-<i>-0.F-<i>.<ns>.svc.<domain>): a monitor of a namespace that cannot be read is kept, one of a
// readable namespace that nothing selects is not, and a monitor whose host names no namespace holds every
// removal while a namespace cannot be read.
func TestKeepUnreadableByHostNamespace(t *testing.T) {
	cs := fake.NewClientset()
	fb := kubefault.ForbidNamespaces(cs, "configmaps")
	fb.Set("t1", true)
	sel, _ := labels.Parse("tier=cache")
	c := NewSentinelController(cs, SentinelOptions{Namespace: "platform", Release: "q", Selector: sel,
		Fleet: FleetOptions{Namespaces: []string{"t1", "t2"}}}, metrics.New(), record.NewFakeRecorder(100), quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.cmCache.Start(ctx)
	require.True(t, c.cmCache.WaitForSync(ctx))
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "t2 synced, t1 failing", func() error {
		st1, _ := c.cmCache.State("t1")
		st2, _ := c.cmCache.State("t2")
		if !st2.Synced || st1.Err == nil {
			return fmt.Errorf("t1 %+v t2 %+v", st1, st2)
		}
		return nil
	})
	mon := func(host string) valkey.Monitor { return valkey.Monitor{Host: host, Port: 6379} }
	world := func() *plan.SentinelWorld {
		w := &plan.SentinelWorld{Namespace: "platform", Sentinels: []registration.SentinelState{{Pod: "q-0", Reachable: true, Monitors: map[string]valkey.Monitor{
			"a":  mon("a-0-0.a-0.t1.svc.cluster.local"),
			"b":  mon("b-0-0.b-0.t2.svc.cluster.local"),
			"lo": mon("localhost"),
		}}}}
		c.observeNamespaces(w)
		w.Derive()
		return w
	}
	w := world()
	assert.Contains(t, w.Keep["a"], "namespace t1 cannot be read", "the unreadable namespace's monitor is kept")
	assert.NotContains(t, w.Keep, "b", "a readable namespace that selects nothing: its monitor may go")
	assert.Contains(t, w.Unowned, "lo", "a host without namespace holds removals while a namespace cannot be read")
	assert.Contains(t, strings.Join(plan.PlanSentinels(*w, time.Time{}).Warnings, "\n"), "namespace t1 cannot be read")
	assert.NotEmpty(t, plan.CheckSentinelStep(*w, plan.Step{Kind: plan.Remove, Pod: "q-0", Monitor: "a"}), "the policy refuses the REMOVE")

	fb.Set("t1", false)
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "t1 synced", func() error {
		if st, _ := c.cmCache.State("t1"); !st.Synced {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	w = world()
	assert.Empty(t, w.Keep)
	assert.Empty(t, w.Unowned, "everything readable: removals follow the selection again")
}
