package kube

import (
	"context"
	"testing"

	"github.com/valkey-ha/valkey-ha/internal/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/valkey-ha/valkey-ha/internal/kubefault"
)

func TestPatchPodRoleSetsAndRemoves(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"keep": "1"}}})
	ctx := context.Background()
	require.NoError(t, PatchPodRole(ctx, cs, "ns", "p", "", contract.RolePrimary))
	p, _ := cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	assert.Equal(t, map[string]string{"keep": "1", contract.LabelRole: "primary"}, p.Labels)
	require.NoError(t, PatchPodRole(ctx, cs, "ns", "p", "", ""))
	p, _ = cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	assert.Equal(t, map[string]string{"keep": "1"}, p.Labels, "an empty role removes the label")
	assert.ErrorContains(t, PatchPodRole(ctx, cs, "ns", "missing", "", "primary"), "patch pod ns/missing")
}

func TestApplyConfigMapWritesOnlyChanges(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Labels: map[string]string{"a": "1"}}, Data: map[string]string{"k": "v"}}
	wrote, err := ApplyConfigMap(ctx, cs, cm)
	require.NoError(t, err)
	assert.True(t, wrote)
	wrote, err = ApplyConfigMap(ctx, cs, cm)
	require.NoError(t, err)
	assert.False(t, wrote, "no write when nothing changed")
	cm2 := cm.DeepCopy()
	cm2.Data["k"] = "v2"
	wrote, err = ApplyConfigMap(ctx, cs, cm2)
	require.NoError(t, err)
	assert.True(t, wrote)
	writes := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			writes++
		}
	}
	assert.Equal(t, 2, writes)
	require.NoError(t, DeleteConfigMap(ctx, cs, "ns", "c"))
	require.NoError(t, DeleteConfigMap(ctx, cs, "ns", "c"), "deleting a missing ConfigMap is not an error")
}

func TestReadSecretKey(t *testing.T) {
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns"}, Data: map[string][]byte{"k": []byte(" pw\n")}})
	v, err := ReadSecretKey(context.Background(), cs, "ns", "s", "k")
	require.NoError(t, err)
	assert.Equal(t, "pw", v)
	_, err = ReadSecretKey(context.Background(), cs, "ns", "s", "nope")
	assert.ErrorContains(t, err, `no key "nope"`)
}

// TestPodWritesCarryTheObservedVersion: a label patch or a delete decided from an observed pod fails with a
// Conflict once the pod changed or was replaced (API server bookkeeping: kubefault.Strict), and goes through
// for the pod as observed.
func TestPodWritesCarryTheObservedVersion(t *testing.T) {
	cs := fake.NewClientset()
	kubefault.Strict(cs)
	ctx := context.Background()
	pods := cs.CoreV1().Pods("ns")
	seen, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pods.Delete(ctx, "p", metav1.DeleteOptions{}))
	now, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	err = PatchPodRole(ctx, cs, "ns", "p", seen.ResourceVersion, contract.RolePrimary)
	assert.True(t, apierrors.IsConflict(err), "patch of a replaced pod: %v", err)
	err = DeletePod(ctx, cs, "ns", "p", seen.UID, seen.ResourceVersion)
	assert.True(t, apierrors.IsConflict(err), "delete of a replaced pod: %v", err)

	require.NoError(t, PatchPodRole(ctx, cs, "ns", "p", now.ResourceVersion, contract.RolePrimary))
	err = DeletePod(ctx, cs, "ns", "p", now.UID, now.ResourceVersion)
	assert.True(t, apierrors.IsConflict(err), "the label patch made a new version: %v", err)
	cur, err := pods.Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, contract.RolePrimary, cur.Labels[contract.LabelRole])
	require.NoError(t, DeletePod(ctx, cs, "ns", "p", cur.UID, cur.ResourceVersion))
}
