package kubefault

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

const ns = "t"

func TestFailReads(t *testing.T) {
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}})
	ctx := context.Background()
	f := FailReads(cs, "secrets", "s", Forbidden)
	Strict(cs) // installed after: the fault still runs first
	_, err := cs.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err, "inactive until switched on")

	f.Set(true)
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{})
	assert.NoError(t, err, "other names are not affected")
	f.Set(false)

	u := FailReads(cs, "secrets", "s", Unavailable)
	u.For(200 * time.Millisecond)
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
	assert.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
	time.Sleep(250 * time.Millisecond)
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
	assert.NoError(t, err, "transient: over after its duration")
	assert.Equal(t, 1, u.Hits())
	assert.Equal(t, 1, f.Hits())
}

func TestStrictPreconditions(t *testing.T) {
	cs := fake.NewClientset()
	Strict(cs)
	ctx := context.Background()
	pods := cs.CoreV1().Pods(ns)
	p, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, p.UID)
	require.NotEmpty(t, p.ResourceVersion)

	// a write from a stale copy conflicts; a fresh one goes through and bumps the resourceVersion
	stale := p.DeepCopy()
	p.Labels = map[string]string{"a": "1"}
	p2, err := pods.Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, p.ResourceVersion, p2.ResourceVersion)
	stale.Labels = map[string]string{"a": "2"}
	_, err = pods.Update(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "%v", err)

	// a JSON patch that tests the resourceVersion applies only to that version
	patch := `[{"op":"test","path":"/metadata/resourceVersion","value":"` + p.ResourceVersion + `"},{"op":"add","path":"/metadata/labels/b","value":"x"}]`
	_, err = pods.Patch(ctx, "p", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	assert.Error(t, err, "the stored version moved on")
	patch = `[{"op":"test","path":"/metadata/resourceVersion","value":"` + p2.ResourceVersion + `"},{"op":"add","path":"/metadata/labels/b","value":"x"}]`
	_, err = pods.Patch(ctx, "p", types.JSONPatchType, []byte(patch), metav1.PatchOptions{})
	assert.NoError(t, err)

	// delete preconditions: the replacement (same name, new UID) is never deleted by the old UID
	require.NoError(t, pods.Delete(ctx, "p", metav1.DeleteOptions{}))
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = pods.Delete(ctx, "p", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	cur, err := pods.Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	err = pods.Delete(ctx, "p", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &p.ResourceVersion}})
	assert.True(t, apierrors.IsConflict(err), "an old resourceVersion conflicts: %v", err)
	require.NoError(t, pods.Delete(ctx, "p", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}}))
}

func TestDelayWatch(t *testing.T) {
	cs := fake.NewClientset()
	DelayWatch(cs, "pods", 300*time.Millisecond)
	ctx := context.Background()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	start := time.Now()
	_, err = cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-w.ResultChan():
		assert.Equal(t, watch.Added, ev.Type)
		assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the event arrives late")
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
}
