package kubefault

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Strict makes cs keep the API server's bookkeeping that the plain fake clientset skips (Kubernetes API
// concepts, "Resource versions"; DeleteOptions.preconditions): every created object gets a UID, every write
// a new resourceVersion in the object itself; an update or patch that carries a resourceVersion or UID
// other than the stored one fails with 409 Conflict, as does a delete whose Preconditions (UID,
// ResourceVersion) do not match. Reactors installed with FailReads, before or after, still run first.
func Strict(cs *fake.Clientset) {
	st := &strictTracker{ObjectTracker: cs.Tracker()}
	react := k8stesting.SimpleReactor{Verb: "*", Resource: "*", Reaction: k8stesting.ObjectReaction(st)}
	// in front of the default object reactor (the last one), behind every fault reactor
	n := len(cs.ReactionChain)
	chain := append([]k8stesting.Reactor{}, cs.ReactionChain[:n-1]...)
	cs.ReactionChain = append(append(chain, &react), cs.ReactionChain[n-1:]...)
}

var lastRV atomic.Int64

func nextRV() string { return strconv.FormatInt(lastRV.Add(1), 10) }

type strictTracker struct {
	k8stesting.ObjectTracker
}

func conflict(gvr schema.GroupVersionResource, name, format string, args ...any) error {
	return apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf(format, args...))
}

func (t *strictTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if m.GetUID() == "" {
		m.SetUID(uuid.NewUUID())
	}
	m.SetResourceVersion(nextRV())
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

// checkWrite applies the optimistic-concurrency rules to obj, the object about to replace the stored one.
func (t *strictTracker) checkWrite(gvr schema.GroupVersionResource, obj runtime.Object, ns string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	cur, err := t.Get(gvr, ns, m.GetName())
	if err != nil {
		return err
	}
	cm, err := meta.Accessor(cur)
	if err != nil {
		return err
	}
	if rv := m.GetResourceVersion(); rv != "" && rv != cm.GetResourceVersion() {
		return conflict(gvr, m.GetName(), "the object has been modified; please apply your changes to the latest version and try again (resourceVersion %s, stored %s)", rv, cm.GetResourceVersion())
	}
	switch {
	case m.GetUID() == "":
		m.SetUID(cm.GetUID())
	case m.GetUID() != cm.GetUID():
		return conflict(gvr, m.GetName(), "Precondition failed: UID in object meta: %s, stored UID: %s", m.GetUID(), cm.GetUID())
	}
	m.SetResourceVersion(nextRV())
	return nil
}

func (t *strictTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if err := t.checkWrite(gvr, obj, ns); err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *strictTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if err := t.checkWrite(gvr, obj, ns); err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

func (t *strictTracker) Delete(gvr schema.GroupVersionResource, ns, name string, opts ...metav1.DeleteOptions) error {
	if len(opts) > 1 {
		return errors.New("expected at most one DeleteOptions")
	}
	if len(opts) == 1 && opts[0].Preconditions != nil {
		cur, err := t.Get(gvr, ns, name)
		if err != nil {
			return err
		}
		cm, err := meta.Accessor(cur)
		if err != nil {
			return err
		}
		p := opts[0].Preconditions
		if p.UID != nil && *p.UID != cm.GetUID() {
			return conflict(gvr, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s", *p.UID, cm.GetUID())
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != cm.GetResourceVersion() {
			return conflict(gvr, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", *p.ResourceVersion, cm.GetResourceVersion())
		}
	}
	return t.ObjectTracker.Delete(gvr, ns, name, opts...)
}
