package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// TestEventRouting: which changes reach which instance's queue (docs/design.md, "Events"): by the
// descriptor's own name, by owner (F-sentinels belongs to F-instance), by the instance label; never the
// controllers' own status writes, a relist with an unchanged resourceVersion, or the instance controller's
// own role-label patch.
func TestEventRouting(t *testing.T) {
	meta := func(name string, l map[string]string, owners ...metav1.OwnerReference) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: l, ResourceVersion: "1", OwnerReferences: owners}
	}
	cm := func(m metav1.ObjectMeta) *corev1.ConfigMap { return &corev1.ConfigMap{ObjectMeta: m} }
	desc := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "vk-instance"}
	for name, tt := range map[string]struct {
		obj  any
		want string
	}{
		"descriptor": {cm(meta("vk-instance", testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentInstance}))), "vk"},
		"a ConfigMap that only ends in -instance": {cm(meta("x-instance", testenv.PartOf(nil))), ""},
		"Sentinel info, by its owner":             {cm(meta("vk-sentinels", testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo}), desc)), "vk"},
		"status: the controller's own write":      {cm(meta("vk-status", testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentStatus, contract.LabelInstance: "vk"}), desc)), ""},
		"data pod":                                {&corev1.Pod{ObjectMeta: meta("vk-0-0", testenv.PartOf(map[string]string{contract.LabelInstance: "vk"}))}, "vk"},
		"a pod of no instance":                    {&corev1.Pod{ObjectMeta: meta("other", testenv.PartOf(nil))}, ""},
	} {
		assert.Equal(t, tt.want, instanceOf(tt.obj), name)
	}

	pod := &corev1.Pod{ObjectMeta: meta("vk-0-0", testenv.PartOf(map[string]string{contract.LabelInstance: "vk"}))}
	relist := pod.DeepCopy()
	assert.True(t, quietUpdate(pod, relist), "same resourceVersion: a relist")
	labelled := pod.DeepCopy()
	labelled.ResourceVersion, labelled.Labels[contract.LabelRole] = "2", contract.RolePrimary
	assert.True(t, quietUpdate(pod, labelled), "only the role label changed: the controller's own patch")
	ready := labelled.DeepCopy()
	ready.ResourceVersion, ready.Status.Conditions = "3", []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	assert.False(t, quietUpdate(labelled, ready), "readiness changed: news")
	deleting := labelled.DeepCopy()
	now := metav1.Now()
	deleting.ResourceVersion, deleting.DeletionTimestamp = "4", &now
	assert.False(t, quietUpdate(labelled, deleting), "deletion started: news")

	sc := &SentinelController{opts: SentinelOptions{Release: "q"}}
	assert.False(t, sc.relevant(cm(meta("q-status", map[string]string{contract.LabelComponent: contract.ComponentStatus}))), "own status")
	assert.False(t, sc.relevant(cm(meta("vk-status", map[string]string{contract.LabelComponent: contract.ComponentStatus}))), "an instance's status")
	assert.False(t, sc.relevant(cm(meta("vk-sentinels", map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelSentinel: "q"}))), "own publish")
	assert.True(t, sc.relevant(cm(meta("vk-sentinels", map[string]string{contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelSentinel: "r"}))), "another quorum's claim")
	assert.True(t, sc.relevant(cm(meta("vk-instance", map[string]string{contract.LabelComponent: contract.ComponentInstance}))), "a descriptor")
	assert.True(t, sc.relevant(cm(meta("q-quorum", map[string]string{contract.LabelComponent: contract.ComponentQuorum}))), "the quorum document")
}

// TestPoolReplacesAClientOnAPasswordChange: the pool is keyed by address and user; asked with another
// password (a rotated Secret) it closes the old client and dials anew, so nothing is stranded.
func TestPoolReplacesAClientOnAPasswordChange(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: -1, Sentinels: -1})
	n := top.Nodes[0]
	ctx := context.Background()
	p := newPool()
	t.Cleanup(p.close)
	o := top.Options("_operator")
	c1, err := p.get(ctx, n.Addr(), o)
	require.NoError(t, err)
	again, err := p.get(ctx, n.Addr(), o)
	require.NoError(t, err)
	assert.Same(t, c1, again, "same address, user and password: the pooled client")
	rotated := o
	rotated.Password = "another-password"
	_, err = p.get(ctx, n.Addr(), rotated)
	require.Error(t, err, "the server refuses the wrong password")
	assert.Equal(t, 0, p.size(), "the client of the old password was closed, none kept for the refused one")
	c2, err := p.get(ctx, n.Addr(), o)
	require.NoError(t, err)
	assert.NotSame(t, c1, c2)
	assert.Error(t, c1.Ping(ctx), "the replaced client is closed")
	require.NoError(t, c2.Ping(ctx))
	assert.Equal(t, 1, p.size())
}

// TestForgetReleasesEverything: when an instance's descriptor is deleted, the instance controller drops its
// memory, stops its +switch-master subscribers (waiting for them), closes its pooled clients and deletes its
// metric series.
func TestForgetReleasesEverything(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	m := metrics.New()
	c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk", Resync: 200 * time.Millisecond}, m, e.Rec, quietLog())
	testenv.Run(t, func(ctx context.Context) error { return c.Run(ctx, nil) })
	testenv.RecordEvents(t, e.Rec)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })
	c.mu.Lock()
	sub := c.state[types.NamespacedName{Namespace: ns, Name: "vk"}].sub
	c.mu.Unlock()
	require.NotNil(t, sub, "subscribed")
	assert.Positive(t, c.pool.size(), "pooled clients")
	assert.Positive(t, testutil.CollectAndCount(m.InstanceNodes))

	require.NoError(t, e.CS.CoreV1().ConfigMaps(ns).Delete(context.Background(), "vk-instance", metav1.DeleteOptions{}))
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "forgotten", func() error {
		c.mu.Lock()
		_, remembered := c.state[types.NamespacedName{Namespace: ns, Name: "vk"}]
		c.mu.Unlock()
		series := testutil.CollectAndCount(m.InstanceNodes) + testutil.CollectAndCount(m.LabelPatches) + testutil.CollectAndCount(m.ReplicaLinkUp)
		if remembered || c.pool.size() != 0 || series != 0 {
			return fmt.Errorf("remembered %v, %d pooled clients, %d series", remembered, c.pool.size(), series)
		}
		return nil
	})
	// the subscribers are the switchHub's (one per Sentinel for every instance): the last registration's
	// stop waited for them
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "the subscribers returned", func() error {
		if n := c.switches.running(); n != 0 {
			return fmt.Errorf("%d subscribers running", n)
		}
		return nil
	})
}

// TestQuorumEventsOnChangeOnly: the Warning events of conditions that last many passes (MonitorRefused,
// MonitorNotRegistered, DescriptorUnknownFields, StepRefused) are sent once per change of reason, not once
// per pass, and again when the condition comes back after it was gone.
func TestQuorumEventsOnChangeOnly(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	c := &SentinelController{opts: SentinelOptions{Release: "q"}, recorder: rec, log: quietLog(), cs: fake.NewClientset()}
	desc := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vk-instance", Namespace: "ns"}}
	descs := map[string]*corev1.ConfigMap{"vk-instance": desc}
	w := plan.SentinelWorld{Release: "q", Instances: []plan.MonitoredInstance{
		{Descriptor: "vk-instance", Instance: spec.Instance{MonitorName: "vk", Unknown: []string{"zone"}}, Unresolved: "get secret: forbidden"}}}
	d := plan.SentinelDecision{Refused: []plan.Refusal{{Step: plan.Step{Kind: plan.Remove, Monitor: "vk"}, Why: "sentinel-remove refused: x"}}}
	pass := func(w plan.SentinelWorld, d plan.SentinelDecision) []string {
		c.reportSentinels(context.Background(), w, d, descs)
		c.reported.sweep("")
		return testenv.DrainEvents(rec, "")
	}
	first := pass(w, d)
	assert.Len(t, first, 3, "MonitorNotRegistered, DescriptorUnknownFields, StepRefused: %v", first)
	for i := 0; i < 5; i++ {
		assert.Empty(t, pass(w, d), "pass %d: the same reasons again", i)
	}
	changed := w
	changed.Instances = []plan.MonitoredInstance{{Descriptor: "vk-instance", Instance: spec.Instance{MonitorName: "vk", Unknown: []string{"zone"}},
		Unresolved: "get secret: the server is currently unable to handle the request"}}
	assert.Len(t, pass(changed, d), 1, "a new reason: one event")
	refused := w
	refused.Instances = []plan.MonitoredInstance{{Descriptor: "vk-instance", Instance: spec.Instance{MonitorName: "vk"}, Refused: "TLS mismatch"}}
	assert.Equal(t, []string{"Warning MonitorRefused Sentinel release q: TLS mismatch"}, pass(refused, plan.SentinelDecision{}))
	assert.Empty(t, pass(refused, plan.SentinelDecision{}))
	assert.Len(t, pass(w, d), 3, "the earlier conditions came back after they were gone: reported again")
}

// TestNewInstanceAwaitsItsSecretQuietly: right after an install the quorum's controller may read the descriptor
// before the instance's credentials Job created its _sentinel Secret (NotFound): that is a Normal
// MonitorAwaitingCredentials, not a Warning, for credentialsGrace after the descriptor was created; past it, or for
// any other error, the Warning MonitorNotRegistered as before.
func TestNewInstanceAwaitsItsSecretQuietly(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	c := &SentinelController{opts: SentinelOptions{Release: "q"}, recorder: rec, log: quietLog(), cs: fake.NewClientset()}
	_, err := kube.ReadSecretKey(t.Context(), c.cs, "ns", "vk-auth-sentinel", "password")
	require.Error(t, err)
	missing := plan.MonitoredInstance{Descriptor: "vk-instance", Instance: spec.Instance{MonitorName: "vk"},
		Unresolved: err.Error(), AwaitingSecret: apierrors.IsNotFound(err)}
	require.True(t, missing.AwaitingSecret, "the gather's classification: %v", err)
	pass := func(created time.Time, qi plan.MonitoredInstance) []string {
		desc := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vk-instance", Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}}
		c.reportSentinels(t.Context(), plan.SentinelWorld{Release: "q", Instances: []plan.MonitoredInstance{qi}}, plan.SentinelDecision{},
			map[string]*corev1.ConfigMap{"vk-instance": desc})
		c.reported.sweep("")
		return testenv.DrainEvents(rec, "")
	}
	got := pass(time.Now().Add(-10*time.Second), missing)
	require.Len(t, got, 1)
	assert.True(t, strings.HasPrefix(got[0], "Normal MonitorAwaitingCredentials "), got[0])
	assert.Contains(t, got[0], "credentials Job")
	assert.Empty(t, pass(time.Now().Add(-20*time.Second), missing), "the same reason: no second event")
	got = pass(time.Now().Add(-credentialsGrace-time.Second), missing)
	require.Len(t, got, 1, "past the grace the missing Secret is a Warning")
	assert.True(t, strings.HasPrefix(got[0], "Warning MonitorNotRegistered "), got[0])
	forbidden := missing
	forbidden.Unresolved, forbidden.AwaitingSecret = "instance vk: get secret ns/vk-auth-sentinel: forbidden", false
	got = pass(time.Now(), forbidden)
	require.Len(t, got, 1)
	assert.True(t, strings.HasPrefix(got[0], "Warning MonitorNotRegistered "), "any other error is a Warning at once: %s", got[0])
}
