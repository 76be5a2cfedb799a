package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/status"
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
