package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/handoff"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestPrimaryPodTerminatingIsHandingOff (issue 14): the primary's pod gets a deletion timestamp (delete,
// eviction, drain) and its preStop hook hands the role off (internal/podsteps/handoff, the hook's code). The instance
// controller keeps observing the terminating pod: it reports PrimaryHandingOff once, takes the primary label
// off that pod at once, repairs nothing while the hook runs, and labels the promoted replica primary and the
// old primary replica as soon as the handoff is done.
func TestPrimaryPodTerminatingIsHandingOff(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 30 * time.Second}) // the pod update and +switch-master drive it
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })
	testenv.DrainEvents(e.Rec, "")
	stopSampling := sampleLabels(t, e)

	ctx := context.Background()
	pod, err := e.CS.CoreV1().Pods(ns).Get(ctx, "vk-0-0", metav1.GetOptions{})
	require.NoError(t, err)
	deadline := metav1.NewTime(time.Now().Add(30 * time.Second))
	pod.DeletionTimestamp = &deadline
	_, err = e.CS.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	at := time.Now()
	valkeytest.Eventually(t, 2*time.Second, 20*time.Millisecond, "the terminating primary loses its label", func() error {
		if l := e.RoleLabels()["vk-0-0"]; l != "" {
			return fmt.Errorf("vk-0-0 labelled %q", l)
		}
		return nil
	})
	t.Logf("label off the terminating primary %s after the deletion timestamp", time.Since(at).Round(time.Millisecond))
	valkeytest.Eventually(t, 2*time.Second, 20*time.Millisecond, "PrimaryHandingOff reported", func() error {
		if evs := testenv.DrainEvents(e.Rec, "PrimaryHandingOff"); len(evs) != 1 {
			return fmt.Errorf("events %v", evs)
		}
		return nil
	})

	res, err := handoff.Run(ctx, handoff.Config{Primary: e.Top.Nodes[0].Addr(), NodeOptions: e.Top.Options(acl.Operator),
		MonitorName: e.In.MonitorName, Sentinels: testenv.SentinelAddrs(e.Top), SentinelOptions: e.Top.SentinelOptions()})
	require.NoError(t, err)
	done := time.Now()
	var newPort int
	for _, n := range e.Top.Nodes {
		if n.Addr() == res.NewPrimary {
			newPort = n.Port
		}
	}
	require.NotZero(t, newPort, res.NewPrimary)
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "labels follow the handoff", func() error {
		if err := e.LabelsMatchExcept(newPort, "vk-0-0"); err != nil {
			return err
		}
		if l := e.RoleLabels()["vk-0-0"]; l != contract.RoleReplica {
			return fmt.Errorf("the old primary (still terminating, now a replica) labelled %q", l)
		}
		return nil
	})
	t.Logf("labels followed %s after the handoff returned (paused %s)", time.Since(done).Round(time.Millisecond), res.Paused.Round(time.Millisecond))
	assert.Less(t, time.Since(done), 2*time.Second)
	assert.Zero(t, stopSampling(), "never two pods labelled primary")
	assert.Empty(t, testenv.DrainEvents(e.Rec, "Repaired"), "no repair while the primary handed off")
	assert.Empty(t, testenv.DrainEvents(e.Rec, "PrimaryHandingOff"), "reported once")
	r, err := e.Top.Replication(e.Top.Nodes[0])
	require.NoError(t, err)
	assert.Equal(t, valkey.RoleReplica, r.Role)
}

// TestTerminatingPrimaryThatCannotHandOffIsReported: the primary's pod is terminating and its only replica
// has replica-priority 0, so the preStop hook cannot hand off. The kubelet's FailedPreStopHook Event carries
// no hook output, so the instance controller says why in a HandoffUnavailable Warning, and counts it in
// valkey_ha_handoff_unavailable_total (0 before, so the ValkeyHandoffUnavailable alert's increase() sees it).
func TestTerminatingPrimaryThatCannotHandOffIsReported(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 5000, FailoverTimeoutMs: 15000, ExtraServerLines: []string{"replica-priority 0"}})
	e.PublishSentinels()
	m := e.startInstanceController(InstanceOptions{Resync: 30 * time.Second})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })
	const inst = ns + "/vk"
	assert.Equal(t, 0.0, testutil.ToFloat64(m.HandoffUnavailable.WithLabelValues(inst)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.InstanceMonitored.WithLabelValues(inst)), "a quorum published the Sentinel info")
	testenv.DrainEvents(e.Rec, "")
	ctx := context.Background()
	pod, err := e.CS.CoreV1().Pods(ns).Get(ctx, "vk-0-0", metav1.GetOptions{})
	require.NoError(t, err)
	deadline := metav1.NewTime(time.Now().Add(30 * time.Second))
	pod.DeletionTimestamp = &deadline
	_, err = e.CS.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	var evs []string
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "HandoffUnavailable reported", func() error {
		evs = append(evs, testenv.DrainEvents(e.Rec, "HandoffUnavailable")...)
		if len(evs) != 1 {
			return fmt.Errorf("events %v", evs)
		}
		return nil
	})
	t.Log(evs[0])
	assert.Contains(t, evs[0], "priority 0")
	assert.Contains(t, evs[0], "vk-0-0")
	assert.Empty(t, testenv.DrainEvents(e.Rec, "PrimaryHandingOff"))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.HandoffUnavailable.WithLabelValues(inst)), "one terminating primary, counted once")
}
