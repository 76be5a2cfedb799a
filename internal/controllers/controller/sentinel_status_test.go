package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
)

// The quorum status ConfigMap is created only with its owner (the Sentinel StatefulSet): while the release is
// being uninstalled the controller outlives the StatefulSet by a moment, and a ConfigMap it created then would
// be left behind.
func TestSentinelStatusNeverCreatedWithoutItsOwner(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset()
	c := NewSentinelController(cs, SentinelOptions{Namespace: "ns", Release: "q"}, metrics.New(), &record.FakeRecorder{}, quietLog())
	require.NoError(t, c.putStatus(ctx, status.Quorum{}))
	_, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "q-status", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no StatefulSet: no status ConfigMap (%v)", err)

	sts, err := cs.AppsV1().StatefulSets("ns").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", UID: "u1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.putStatus(ctx, status.Quorum{}))
	cm, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "q-status", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, sts.UID, cm.OwnerReferences[0].UID)

	// the StatefulSet goes first during an uninstall: the existing ConfigMap is updated and keeps its owner
	require.NoError(t, cs.AppsV1().StatefulSets("ns").Delete(ctx, "q", metav1.DeleteOptions{}))
	require.NoError(t, c.putStatus(ctx, status.Quorum{Warnings: []string{"x"}}))
	cm, err = cs.CoreV1().ConfigMaps("ns").Get(ctx, "q-status", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Len(t, cm.OwnerReferences, 1, "still owned, so garbage collection removes it")
}

// Garbage collection can delete the status ConfigMap between the controller's look and its write (found by
// a new user's make demo: after helm uninstall, sentinel-status came back with no owner and stayed). With the
// StatefulSet gone, the write only updates: a ConfigMap that vanished is not created again.
func TestSentinelStatusNotRecreatedWhenCollectedMidWrite(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset()
	c := NewSentinelController(cs, SentinelOptions{Namespace: "ns", Release: "q"}, metrics.New(), &record.FakeRecorder{}, quietLog())
	_, err := cs.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "q-status", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "q", UID: "u1"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	read, collected := false, false
	cs.PrependReactor("*", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if read && !collected { // the garbage collector deletes it right after the controller's first read
			collected = true
			require.NoError(t, cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("configmaps"), "ns", "q-status"))
		}
		read = read || a.GetVerb() == "get"
		return false, nil, nil
	})
	require.NoError(t, c.putStatus(ctx, status.Quorum{Warnings: []string{"x"}}))
	require.True(t, collected, "the ConfigMap was read before the write")
	_, err = cs.CoreV1().ConfigMaps("ns").Get(ctx, "q-status", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "collected mid-write: not created again without an owner (%v)", err)
}
