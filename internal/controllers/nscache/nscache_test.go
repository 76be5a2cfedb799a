package nscache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
)

const sel = "app.kubernetes.io/part-of=valkey-ha"

func cm(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:        map[string]string{"app.kubernetes.io/part-of": "valkey-ha"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm"}}}}
}

func nsObj(name string, l map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

func eventually(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFixedNamespacesNotServedAndUnreadable(t *testing.T) {
	cs := fake.NewClientset(cm("home", "a-instance"), cm("tenant", "b-instance"), cm("locked", "c-instance"), cm("other", "d-instance"))
	f := kubefault.ForbidNamespaces(cs, "configmaps")
	f.Set("locked", true)
	var mu sync.Mutex
	seen := map[string]bool{}
	c := New(cs, Options{Selector: sel, Kinds: []Kind{ConfigMaps}, Namespaces: []string{"home", "tenant", "locked"},
		Handler: cache.ResourceEventHandlerFuncs{AddFunc: func(o any) {
			m := o.(*corev1.ConfigMap)
			mu.Lock()
			seen[m.Namespace+"/"+m.Name] = true
			mu.Unlock()
		}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	require.True(t, c.WaitForSync(ctx), "the own namespace syncs; a locked tenant namespace does not hold it up")
	eventually(t, "tenant synced", func() bool { st, _ := c.State("tenant"); return st.Synced })

	got, err := c.ConfigMaps().ConfigMaps("tenant").Get("b-instance")
	require.NoError(t, err)
	assert.Empty(t, got.ManagedFields, "managedFields are not cached")
	_, err = c.ConfigMaps().ConfigMaps("other").Get("d-instance")
	assert.True(t, apierrors.IsNotFound(err), "a namespace that is not served: not found (%v)", err)
	l, err := c.ConfigMaps().ConfigMaps("other").List(labels.Everything())
	assert.NoError(t, err)
	assert.Empty(t, l)

	eventually(t, "locked reports its error", func() bool { st, _ := c.State("locked"); return st.Err != nil })
	st, served := c.State("locked")
	assert.True(t, served)
	assert.False(t, st.Synced)
	assert.True(t, apierrors.IsForbidden(st.Err), "%v", st.Err)
	_, err = c.ConfigMaps().ConfigMaps("locked").Get("c-instance")
	var ue *UnreadableError
	require.ErrorAs(t, err, &ue, "unreadable is not not-found")
	assert.False(t, apierrors.IsNotFound(err))
	_, err = c.ConfigMaps().ConfigMaps("locked").List(labels.Everything())
	assert.ErrorAs(t, err, &ue)

	all, err := c.ConfigMaps().List(labels.Everything())
	require.NoError(t, err)
	var names []string
	for _, m := range all {
		names = append(names, m.Namespace+"/"+m.Name)
	}
	assert.ElementsMatch(t, []string{"home/a-instance", "tenant/b-instance"}, names, "List spans the readable namespaces")
	mu.Lock()
	assert.True(t, seen["tenant/b-instance"] && seen["home/a-instance"] && !seen["other/d-instance"])
	mu.Unlock()

	f.Set("locked", false)
	eventually(t, "locked recovers", func() bool { st, _ := c.State("locked"); return st.Synced && st.Err == nil })
	_, err = c.ConfigMaps().ConfigMaps("locked").Get("c-instance")
	assert.NoError(t, err)
}

func TestNamespaceSelectorFollowsLabels(t *testing.T) {
	cs := fake.NewClientset(nsObj("home", nil), nsObj("t1", map[string]string{"team": "cache"}), nsObj("t2", nil),
		cm("home", "a-instance"), cm("t1", "b-instance"), cm("t2", "c-instance"))
	nsel, _ := labels.Parse("team=cache")
	removed := make(chan string, 4)
	c := New(cs, Options{Selector: sel, Kinds: []Kind{ConfigMaps}, Namespaces: []string{"home"}, NamespaceSelector: nsel,
		OnRemoved: func(ns string) { removed <- ns }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	require.True(t, c.WaitForSync(ctx))
	known, err := c.SelectionKnown()
	require.True(t, known, "%v", err)
	eventually(t, "t1 served and synced", func() bool { st, ok := c.State("t1"); return ok && st.Synced })
	assert.False(t, c.Serves("t2"))

	t2 := nsObj("t2", map[string]string{"team": "cache"})
	_, err = cs.CoreV1().Namespaces().Update(ctx, t2, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, "t2 selected", func() bool { st, ok := c.State("t2"); return ok && st.Synced })
	_, err = c.ConfigMaps().ConfigMaps("t2").Get("c-instance")
	assert.NoError(t, err)

	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj("t1", map[string]string{"team": "other"}), metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case ns := <-removed:
		assert.Equal(t, "t1", ns)
	case <-time.After(10 * time.Second):
		t.Fatal("t1 not removed")
	}
	_, err = c.ConfigMaps().ConfigMaps("t1").Get("b-instance")
	assert.True(t, apierrors.IsNotFound(err), "a deselected namespace: not found")
	assert.True(t, c.Serves("home"), "the own namespace is always served")
}

func TestNamespaceSelectionUnknownWhileForbidden(t *testing.T) {
	cs := fake.NewClientset(nsObj("home", nil))
	cs.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", nil)
	})
	nsel, _ := labels.Parse("team=cache")
	c := New(cs, Options{Selector: sel, Kinds: []Kind{ConfigMaps}, Namespaces: []string{"home"}, NamespaceSelector: nsel})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	eventually(t, "selection error recorded", func() bool { _, err := c.SelectionKnown(); return err != nil && apierrors.IsForbidden(err) })
	known, _ := c.SelectionKnown()
	assert.False(t, known, "a selection that cannot be listed is unknown, not empty")
}

// TestWaitForNone: a cache that waits for no namespace starts at once even when its own cannot be listed, and
// serves another namespace as soon as that one syncs (the shared instance controller, whose own namespace
// grants it nothing).
func TestWaitForNone(t *testing.T) {
	cs := fake.NewClientset(cm("tenant", "b-instance"))
	kubefault.ForbidNamespaces(cs, "configmaps").Set("home", true)
	c := New(cs, Options{Selector: sel, Kinds: []Kind{ConfigMaps}, Namespaces: []string{"home", "tenant"}, WaitForNone: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	done := make(chan bool, 1)
	go func() { done <- c.WaitForSync(ctx) }()
	select {
	case ok := <-done:
		require.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitForSync waited for the own namespace, which cannot be listed")
	}
	eventually(t, "tenant served", func() bool {
		_, err := c.ConfigMaps().ConfigMaps("tenant").Get("b-instance")
		return err == nil
	})
}
