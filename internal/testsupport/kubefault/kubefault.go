// Package kubefault injects Kubernetes-side faults into a fake clientset (k8s.io/client-go/kubernetes/fake)
// for tests of the controllers' glue: a read that fails for a while (an API server hiccup) or for good
// (Forbidden, when two charts' ServiceAccount values drift), and a watch that delivers its events late (a
// stale informer cache). Strict gives the fake clientset the API server's bookkeeping the controllers rely
// on for safe writes: a UID and a resourceVersion on every stored object, resourceVersion conflicts on
// update, and delete preconditions.
//
// Everything here is test code that production never imports; it lives outside a _test.go file so the
// controller tests, the benchmarks and the chaos test share one implementation.
package kubefault

import (
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Fault fails matching requests while it is active. The zero value is not usable; see FailReads.
type Fault struct {
	mu     sync.Mutex
	err    error
	until  time.Time
	always bool
	hits   int
}

// FailReads installs a reactor in front of cs that fails every get and list of resource (plural, e.g.
// "secrets") whose name is name ("" = any name; a list matches only when name is "") with the error made
// by errFor while the returned Fault is active. It starts inactive: call For or Set.
func FailReads(cs *fake.Clientset, resource, name string, errFor func(resource, name string) error) *Fault {
	f := &Fault{err: errFor(resource, name)}
	react := func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch act := a.(type) {
		case k8stesting.GetAction:
			if name != "" && act.GetName() != name {
				return false, nil, nil
			}
		case k8stesting.ListAction:
			if name != "" {
				return false, nil, nil
			}
		default:
			return false, nil, nil
		}
		if !f.active() {
			return false, nil, nil
		}
		f.mu.Lock()
		f.hits++
		f.mu.Unlock()
		return true, nil, f.err
	}
	cs.PrependReactor("get", resource, react)
	cs.PrependReactor("list", resource, react)
	return f
}

// For makes the fault active for d from now (a transient failure).
func (f *Fault) For(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.always, f.until = false, time.Now().Add(d)
}

// Set makes the fault active (true) or inactive (false) until the next call.
func (f *Fault) Set(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.always, f.until = on, time.Time{}
}

// Hits returns how many requests the fault has failed so far.
func (f *Fault) Hits() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

func (f *Fault) active() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.always || time.Now().Before(f.until)
}

// Unavailable is the error of an API server that does not answer for a moment (503, retryable).
func Unavailable(resource, name string) error {
	return apierrors.NewServiceUnavailable(fmt.Sprintf("injected: %s %q unavailable for a moment", resource, name))
}

// Forbidden is the error of an RBAC denial (403): the ServiceAccount may not read the object.
func Forbidden(resource, name string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, errors.New("injected: RBAC denies the read"))
}

// Delay holds back the watch events of one resource, so informers built on the fake clientset see every
// change late: their caches go stale by the delay, as a lagging watch makes them in a real cluster.
type Delay struct {
	mu sync.Mutex
	d  time.Duration
}

// DelayWatch installs a watch reactor in front of cs that delivers every event of resource (plural, e.g.
// "pods") d after it happened, in order. Set changes the delay for events that happen afterwards.
func DelayWatch(cs *fake.Clientset, resource string, d time.Duration) *Delay {
	dl := &Delay{d: d}
	cs.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		return true, newDelayedWatch(w, dl), nil
	})
	return dl
}

// Set changes the delay.
func (dl *Delay) Set(d time.Duration) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.d = d
}

func (dl *Delay) get() time.Duration {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.d
}

type delayedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newDelayedWatch(inner watch.Interface, dl *Delay) *delayedWatch {
	w := &delayedWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	type held struct {
		ev watch.Event
		at time.Time
	}
	queue := make(chan held, 1000)
	go func() {
		defer close(queue)
		for ev := range inner.ResultChan() {
			select {
			case queue <- held{ev: ev, at: time.Now().Add(dl.get())}:
			case <-w.stop:
				return
			}
		}
	}()
	go func() {
		defer close(w.out)
		for h := range queue {
			select {
			case <-time.After(time.Until(h.at)):
			case <-w.stop:
				return
			}
			select {
			case w.out <- h.ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *delayedWatch) Stop() {
	w.once.Do(func() { close(w.stop); w.inner.Stop() })
}

func (w *delayedWatch) ResultChan() <-chan watch.Event { return w.out }

// NamespaceFault fails every list and watch of one resource in the namespaces set on it with Forbidden
// (a grant that was deleted or never rendered: the RBAC of another namespace, docs/fleet.md).
type NamespaceFault struct {
	mu sync.Mutex
	on map[string]bool
}

// ForbidNamespaces installs a NamespaceFault for resource (plural, e.g. "configmaps") in front of cs; it
// starts with no namespace forbidden.
func ForbidNamespaces(cs *fake.Clientset, resource string) *NamespaceFault {
	f := &NamespaceFault{on: map[string]bool{}}
	forbidden := func(a k8stesting.Action) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.on[a.GetNamespace()] {
			return nil
		}
		return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", fmt.Errorf("no grant in namespace %s", a.GetNamespace()))
	}
	cs.PrependReactor("list", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		err := forbidden(a)
		return err != nil, nil, err
	})
	cs.PrependWatchReactor(resource, func(a k8stesting.Action) (bool, watch.Interface, error) {
		err := forbidden(a)
		return err != nil, nil, err
	})
	return f
}

// Set forbids (true) or allows (false) lists and watches in namespace ns.
func (f *NamespaceFault) Set(ns string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on[ns] = on
}
