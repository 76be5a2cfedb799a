// Package nscache keeps the controllers' label-filtered informer caches over a set of namespaces that may
// change while they run: a fixed list (the controller's own namespace plus --namespaces) and, with a
// namespace selector, every namespace whose labels match (docs/fleet.md). It says for each namespace whether
// its cache has synced and what its last list or watch failed with, so a controller can tell "not there"
// (a namespace it does not serve: NotFound) from "not readable" (a namespace whose objects it cannot see
// yet or any more: an error), and never mistakes the second for the first: a namespace
// taken for empty while unreadable would cost every monitor of its instances (F3).
//
// List and watch cannot be bound to object names by RBAC, so a namespace is readable only when something
// granted this controller list/watch there (the instance releases of charts/valkey do, per instance).
package nscache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Kind is a kind of object the cache holds.
type Kind string

// The kinds a Cache can hold.
const (
	ConfigMaps   Kind = "configmaps"
	Pods         Kind = "pods"
	StatefulSets Kind = "statefulsets"
)

// Options configure New.
type Options struct {
	// Selector is the label selector of every cached object (e.g. app.kubernetes.io/part-of=valkey-ha);
	// Selectors overrides it per kind.
	Selector  string
	Selectors map[Kind]string
	// Kinds are the kinds cached in every served namespace.
	Kinds []Kind
	// Namespaces are always served. The first is the controller's own: WaitForSync waits for it (unless
	// WaitForNone); the others (tenant namespaces) are served once they sync and never hold up the rest.
	Namespaces []string
	// WaitForNone makes WaitForSync wait for no namespace, the own one included (a shared instance
	// controller: its own namespace need not hold an instance that granted it anything, and may not be
	// readable at all).
	WaitForNone bool
	// NamespaceSelector, when not nil and not empty, also serves every namespace whose labels match it
	// (a cluster-wide namespace informer: RBAC get/list/watch on namespaces).
	NamespaceSelector labels.Selector
	// Handler receives every add, update and delete of every kind in every served namespace.
	Handler cache.ResourceEventHandler
	// OnRemoved is called (outside any lock) when a namespace stops being served; its objects leave the
	// cache without delete events.
	OnRemoved func(namespace string)
	// Log receives list/watch failures (at most one line per namespace and kind per change of error).
	Log *slog.Logger
}

// NamespaceState says how a served namespace's cache stands.
type NamespaceState struct {
	Namespace string
	// Synced is true once every kind's cache has synced; a synced cache keeps serving what it last saw
	// while a later list or watch fails.
	Synced bool
	// Err is the last list or watch failure of any kind (nil once a later one succeeded).
	Err error
	// ErrSince is when Err started.
	ErrSince time.Time
}

// Cache holds the informers of every served namespace.
type Cache struct {
	cs   kubernetes.Interface
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	ctx    context.Context
	spaces map[string]*space
	static map[string]bool
	// selection is the namespace informer (nil without NamespaceSelector).
	selection cache.SharedIndexInformer
	selErr    error
	started   bool
}

// space is one served namespace.
type space struct {
	ns        string
	stop      context.CancelFunc
	informers map[Kind]cache.SharedIndexInformer
	mu        sync.Mutex
	errs      map[Kind]error
	errSince  time.Time
}

// New returns a Cache; Start runs it.
func New(cs kubernetes.Interface, o Options) *Cache {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.NamespaceSelector != nil && o.NamespaceSelector.Empty() {
		o.NamespaceSelector = nil
	}
	c := &Cache{cs: cs, opts: o, log: o.Log, spaces: map[string]*space{}, static: map[string]bool{}}
	for _, ns := range o.Namespaces {
		c.static[ns] = true
	}
	return c
}

// Start starts the informers of the fixed namespaces and the namespace informer; everything stops when ctx
// ends.
func (c *Cache) Start(ctx context.Context) {
	c.mu.Lock()
	c.ctx, c.started = ctx, true
	for ns := range c.static {
		c.addLocked(ns)
	}
	if c.opts.NamespaceSelector != nil {
		c.selection = c.namespaceInformer()
		go c.selection.RunWithContext(ctx)
	}
	c.mu.Unlock()
}

// WaitForSync blocks until the cache of the controller's own namespace (the first of Options.Namespaces)
// and, with a namespace selector, the namespace selection have synced, or ctx ends (false). Other namespaces
// are served once they sync and never block: one tenant namespace that cannot be read must not stop the
// others.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	var synced []cache.InformerSynced
	c.mu.Lock()
	if len(c.opts.Namespaces) > 0 && !c.opts.WaitForNone {
		for _, inf := range c.spaces[c.opts.Namespaces[0]].informers {
			synced = append(synced, inf.HasSynced)
		}
	}
	if c.selection != nil {
		synced = append(synced, c.selection.HasSynced)
	}
	c.mu.Unlock()
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// SelectionKnown reports whether the set of served namespaces is known: always without a namespace
// selector; with one, once the namespace informer has synced and while its last list or watch succeeded.
// While it is not, a namespace missing from the set may still be selected: nothing may be removed for it.
func (c *Cache) SelectionKnown() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.selection == nil {
		return true, nil
	}
	if c.selErr != nil {
		return false, c.selErr
	}
	if !c.selection.HasSynced() {
		return false, errors.New("namespace selection not listed yet")
	}
	return true, nil
}

// Serves reports whether namespace ns is served (fixed or selected).
func (c *Cache) Serves(ns string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.spaces[ns]
	return ok
}

// Namespaces returns the state of every served namespace, sorted by name.
func (c *Cache) Namespaces() []NamespaceState {
	c.mu.Lock()
	spaces := make([]*space, 0, len(c.spaces))
	for _, s := range c.spaces {
		spaces = append(spaces, s)
	}
	c.mu.Unlock()
	out := make([]NamespaceState, 0, len(spaces))
	for _, s := range spaces {
		out = append(out, s.state())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// State returns the state of namespace ns and whether it is served.
func (c *Cache) State(ns string) (NamespaceState, bool) {
	c.mu.Lock()
	s, ok := c.spaces[ns]
	c.mu.Unlock()
	if !ok {
		return NamespaceState{Namespace: ns}, false
	}
	return s.state(), true
}

func (s *space) state() NamespaceState {
	st := NamespaceState{Namespace: s.ns, Synced: true}
	for _, inf := range s.informers {
		st.Synced = st.Synced && inf.HasSynced()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kinds := make([]string, 0, len(s.errs))
	for k := range s.errs {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		st.Err = s.errs[Kind(k)]
		st.ErrSince = s.errSince
		break
	}
	return st
}

// record notes the outcome of a list or watch of kind in s.
func (c *Cache) record(s *space, kind Kind, err error) {
	s.mu.Lock()
	prev := s.errs[kind]
	if err == nil {
		delete(s.errs, kind)
	} else {
		if len(s.errs) == 0 {
			s.errSince = time.Now()
		}
		s.errs[kind] = err
	}
	s.mu.Unlock()
	switch {
	case err != nil && (prev == nil || prev.Error() != err.Error()):
		c.log.Warn("namespace cache: list/watch failed", "namespace", s.ns, "kind", kind, "error", err)
	case err == nil && prev != nil:
		c.log.Info("namespace cache: list/watch works again", "namespace", s.ns, "kind", kind)
	}
}

// addLocked starts serving namespace ns (c.mu held).
func (c *Cache) addLocked(ns string) {
	if _, ok := c.spaces[ns]; ok || !c.started {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s := &space{ns: ns, stop: cancel, informers: map[Kind]cache.SharedIndexInformer{}, errs: map[Kind]error{}}
	for _, k := range c.opts.Kinds {
		inf := c.informer(s, k)
		if c.opts.Handler != nil {
			_, _ = inf.AddEventHandler(c.opts.Handler)
		}
		s.informers[k] = inf
		go inf.RunWithContext(ctx)
	}
	c.spaces[ns] = s
}

// removeLocked stops serving namespace ns (c.mu held); it returns whether it was served.
func (c *Cache) removeLocked(ns string) bool {
	s, ok := c.spaces[ns]
	if !ok || c.static[ns] {
		return false
	}
	s.stop()
	delete(c.spaces, ns)
	return true
}

// stripManagedFields drops metadata.managedFields from cached objects: the controllers never read them,
// and at a few hundred instances they are a good part of the cache's memory.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// informer builds the informer of kind in s, recording each list's and watch's outcome.
func (c *Cache) informer(s *space, kind Kind) cache.SharedIndexInformer {
	sel := c.opts.Selector
	if k, ok := c.opts.Selectors[kind]; ok {
		sel = k
	}
	var lw *cache.ListWatch
	var example runtime.Object
	ns := s.ns
	record := func(err error) { c.record(s, kind, err) }
	switch kind {
	case ConfigMaps:
		lw, example = listWatch(c.cs.CoreV1().ConfigMaps(ns), sel, record), &corev1.ConfigMap{}
	case Pods:
		lw, example = listWatch(c.cs.CoreV1().Pods(ns), sel, record), &corev1.Pod{}
	case StatefulSets:
		lw, example = listWatch(c.cs.AppsV1().StatefulSets(ns), sel, record), &appsv1.StatefulSet{}
	default:
		panic(fmt.Sprintf("nscache: unknown kind %q", kind))
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c.cs), example, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = inf.SetTransform(stripManagedFields)
	// the outcome is recorded (and logged once per change) by the list/watch wrappers
	_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	return inf
}

// namespaceInformer watches the namespaces matching the selector and serves exactly those (plus the fixed
// ones).
func (c *Cache) namespaceInformer() cache.SharedIndexInformer {
	sel := c.opts.NamespaceSelector.String()
	api := c.cs.CoreV1().Namespaces()
	recordSel := func(err error) {
		c.mu.Lock()
		prev := c.selErr
		c.selErr = err
		c.mu.Unlock()
		if err != nil && (prev == nil || prev.Error() != err.Error()) {
			c.log.Warn("namespace selection: list/watch failed", "selector", sel, "error", err)
		}
	}
	lw := listWatch(api, sel, recordSel)
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c.cs), &corev1.Namespace{}, 0, cache.Indexers{})
	_ = inf.SetTransform(stripManagedFields)
	_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	resync := func(any) { c.syncSelection(inf) }
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: resync, UpdateFunc: func(_, o any) { resync(o) }, DeleteFunc: resync})
	return inf
}

// syncSelection serves the fixed namespaces plus every namespace the selector matches now.
func (c *Cache) syncSelection(inf cache.SharedIndexInformer) {
	want := map[string]bool{}
	for _, o := range inf.GetStore().List() {
		if n, ok := o.(*corev1.Namespace); ok && c.opts.NamespaceSelector.Matches(labels.Set(n.Labels)) && n.DeletionTimestamp == nil {
			want[n.Name] = true
		}
	}
	var removed []string
	c.mu.Lock()
	for ns := range want {
		c.addLocked(ns)
	}
	for ns := range c.spaces {
		if !want[ns] && c.removeLocked(ns) {
			removed = append(removed, ns)
		}
	}
	c.mu.Unlock()
	sort.Strings(removed)
	for _, ns := range removed {
		c.log.Info("namespace no longer selected", "namespace", ns)
		if c.opts.OnRemoved != nil {
			c.opts.OnRemoved(ns)
		}
	}
}

// indexer returns the cache of kind in ns, or an error: NotFound when ns is not served, a plain error while
// it has not synced.
func (c *Cache) indexer(kind Kind, ns string) (cache.Indexer, error) {
	c.mu.Lock()
	s, ok := c.spaces[ns]
	c.mu.Unlock()
	gr := schema.GroupResource{Resource: string(kind)}
	if kind == StatefulSets {
		gr.Group = "apps"
	}
	if !ok {
		return nil, apierrors.NewNotFound(gr, "namespace "+ns+" (not served)")
	}
	inf, ok := s.informers[kind]
	if !ok {
		return nil, fmt.Errorf("nscache: %s are not cached", kind)
	}
	if !inf.HasSynced() {
		st := s.state()
		if st.Err != nil {
			return nil, &UnreadableError{Namespace: ns, Err: st.Err}
		}
		return nil, &UnreadableError{Namespace: ns, Err: errors.New("cache not synced yet")}
	}
	return inf.GetIndexer(), nil
}

// UnreadableError is returned for a served namespace whose cache has not synced: its objects are unknown,
// not absent.
type UnreadableError struct {
	Namespace string
	Err       error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("namespace %s cannot be read: %v", e.Namespace, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// served returns the served namespaces, sorted.
func (c *Cache) served() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.spaces))
	for ns := range c.spaces {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// listAll lists kind in every served, synced namespace (unsynced ones are skipped: State tells them).
func listAll[T any](c *Cache, kind Kind, sel labels.Selector, mk func(cache.Indexer) ([]T, error)) ([]T, error) {
	var out []T
	for _, ns := range c.served() {
		idx, err := c.indexer(kind, ns)
		if err != nil {
			continue
		}
		items, err := mk(idx)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// listerWatcher is a typed client's List and Watch (ConfigMaps, pods, StatefulSets, namespaces).
type listerWatcher[L runtime.Object] interface {
	List(ctx context.Context, o metav1.ListOptions) (L, error)
	Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
}

// listWatch lists and watches api with label selector sel, and tells record the outcome of every list
// and every watch it opens (nil: it worked).
func listWatch[L runtime.Object](api listerWatcher[L], sel string, record func(error)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			l, err := api.List(ctx, o)
			record(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			w, err := api.Watch(ctx, o)
			record(err)
			return w, err
		}}
}
