package controller

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// replacement is a pod replaced (deleted and created anew under the same name, with a new UID) at the
// worst moment: right before the controller's first write (verb) to it reaches the API server, so the
// controller acts on what it observed before the replacement.
type replacement struct {
	uid  types.UID
	done chan struct{}
	err  error // what the controller's write did to the replacement (nil: it hit it)
}

// replaceBefore installs the replacement of pod before the first verb ("delete", "patch") on it. The new
// pod is the old one changed by mutate, with a new UID and resourceVersion.
func replaceBefore(t *testing.T, cs *fake.Clientset, verb, pod string, mutate func(*corev1.Pod)) *replacement {
	r := &replacement{uid: types.UID("replaced-" + pod), done: make(chan struct{})}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	var once sync.Once
	cs.PrependReactor(verb, "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		named, ok := a.(interface{ GetName() string })
		if !ok || named.GetName() != pod {
			return false, nil, nil
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return false, nil, nil
		}
		// the chain runs under the clientset's lock: use the tracker, not the clientset
		tr := cs.Tracker()
		obj, err := tr.Get(gvr, ns, pod)
		require.NoError(t, err)
		np := obj.(*corev1.Pod).DeepCopy()
		require.NoError(t, tr.Delete(gvr, ns, pod))
		np.UID, np.ResourceVersion = r.uid, "900000000"
		mutate(np)
		require.NoError(t, tr.Create(gvr, np, ns))
		// the rest of the chain (kubefault.Strict, then the object reactor) applies the write
		defer close(r.done)
		for _, next := range cs.ReactionChain[1:] {
			if !next.Handles(a) {
				continue
			}
			if handled, ret, err := next.React(a); handled {
				r.err = err
				return true, ret, err
			}
		}
		r.err = fmt.Errorf("no reactor handled %s", verb)
		return true, nil, r.err
	})
	return r
}

func (r *replacement) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(d):
		t.Fatal("the controller never wrote to the pod")
	}
}

// TestStaleCacheRollNeverDeletesAReplacedPod (issue 12): the planned roll decides to replace the stale
// replica vk-1-0, but the pod is replaced (at the update revision) before the delete reaches the API
// server. The delete carries the observed UID and resourceVersion as preconditions, so it fails with a
// Conflict instead of restarting the new pod; the next pass sees the new pod at the update revision.
func TestStaleCacheRollNeverDeletesAReplacedPod(t *testing.T) {
	cs := fake.NewClientset()
	kubefault.Strict(cs)
	e := newEnvOn(t, valkeytest.TopologyConfig{}, cs)
	e.PublishSentinels()
	e.MarkStale([]string{"vk-1"}, []string{"vk-1-0"}, map[string]string{contract.LabelInstance: "vk"})
	r := replaceBefore(t, cs, "delete", "vk-1-0", func(p *corev1.Pod) { p.Labels[revisionLabel] = "r2" })
	e.startInstanceController(InstanceOptions{Resync: 200 * time.Millisecond})
	r.wait(t, 20*time.Second)

	assert.True(t, apierrors.IsConflict(r.err), "the delete decided on the old pod must fail with a Conflict, got %v", r.err)
	p, err := cs.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ns, "vk-1-0")
	require.NoError(t, err, "the replacement pod was deleted")
	assert.Equal(t, r.uid, p.(*corev1.Pod).UID)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "roll done", func() error {
		return e.AllAtRevision([]string{"vk-1-0"}, "r2")
	})
}

// TestStaleCacheNeverLabelsAReplacedPod (issue 12): the controller decides to label vk-0-0 primary, but the
// pod is replaced by a new, still Pending pod before the patch reaches the API server. The patch carries
// the observed resourceVersion, so it fails with a Conflict: a Pending pod is never labelled primary (the
// primary Service would send writes to it); the next pass sees the new pod and leaves it unlabelled.
func TestStaleCacheNeverLabelsAReplacedPod(t *testing.T) {
	cs := fake.NewClientset()
	kubefault.Strict(cs)
	e := newEnvOn(t, valkeytest.TopologyConfig{}, cs)
	e.PublishSentinels()
	r := replaceBefore(t, cs, "patch", "vk-0-0", func(p *corev1.Pod) {
		p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	})
	e.startInstanceController(InstanceOptions{Resync: 200 * time.Millisecond})
	r.wait(t, 20*time.Second)

	assert.True(t, apierrors.IsConflict(r.err), "the label patch decided on the old pod must fail with a Conflict, got %v", r.err)
	assert.Empty(t, e.RoleLabels()["vk-0-0"], "the replacement pod must not carry the label decided for the old one")
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "a pass saw the replacement", func() error {
		doc := e.StatusDoc()
		nodes, _ := doc["nodes"].([]any)
		if len(nodes) == 0 || !strings.HasPrefix(fmt.Sprint(nodes[0].(map[string]any)["error"]), "pod not running: Pending") {
			return fmt.Errorf("nodes: %v", doc["nodes"])
		}
		return nil
	})
	assert.Empty(t, e.RoleLabels()["vk-0-0"], "a Pending pod is never labelled")
}
