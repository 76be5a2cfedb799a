package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// TestStaleUnschedulablePodIsReplaced: a bad value (a memory limit no node has) left replica pod vk-1-0
// Pending and unschedulable; the value was fixed, so its StatefulSet has a new revision, but an OnDelete
// StatefulSet never replaces the pod by itself and the roll used to wait for it to be ready ("vk-1-0 is not
// ready yet") forever (fresh user's walk, 2026-12-05). The instance controller now deletes it at once (it never
// ran), and only it: the primary and the other replica are untouched, no failover.
func TestStaleUnschedulablePodIsReplaced(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	e.MarkStale([]string{"vk-1"}, []string{"vk-1-0"}, map[string]string{contract.LabelInstance: "vk"})
	e.Top.Nodes[1].Kill() // it never ran
	ctx := context.Background()
	pod, err := e.Pod("vk-1-0")
	require.NoError(t, err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/1 nodes are available: 1 Insufficient memory."}}}
	_, err = e.CS.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	valkeytest.Eventually(t, 15*time.Second, 100*time.Millisecond, "the unschedulable stale pod deleted", func() error {
		_, err := e.CS.CoreV1().Pods(ns).Get(ctx, "vk-1-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(errors.New("vk-1-0 still exists"), err)
	})
	for _, p := range []string{"vk-0-0", "vk-2-0"} {
		_, err := e.Pod(p)
		assert.NoError(t, err, "%s untouched", p)
	}
	port, err := e.Top.SentinelPrimary()
	require.NoError(t, err)
	assert.Equal(t, e.Top.Nodes[0].Port, port, "no failover")
	assert.Zero(t, e.failovers(t))
}
