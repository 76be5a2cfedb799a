// Package controller runs the two controllers of valkey-sentinel-ctl (docs/design.md). Each pass of either
// one gathers a complete World (informer caches, INFO on every node, each Sentinel's view once), hands it to
// a pure planner that returns at most one disruptive step (internal/planners/plan, which owns the precedence and
// calls internal/planners/topology, internal/planners/roll and internal/planners/registration), lets the policy vet that step
// (plan.Check, plan.CheckSentinelStep), applies what is left through a thin executor and writes a status document
// built by a pure function (plan.InstanceStatus, plan.SentinelStatus).
//
// The instance controller has one file per phase: instance.go (the controller and its pass, Reconcile),
// instance_gather.go (the World), instance_apply.go (the Decision's writes) and instance_report.go (Events
// and the status document).
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/controllers/nscache"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/migrate"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// InstanceOptions configure the instance (data-side) controller.
type InstanceOptions struct {
	Namespace string
	// Instance limits the controller to one instance (the release fullname); empty = every instance in the
	// namespace.
	Instance string
	// Resync is the polling period of each instance (default 2 s); the +switch-master subscription makes
	// label moves faster than that.
	Resync time.Duration
	// DialTimeout / CommandTimeout bound each connection and command (defaults 1 s / 3 s).
	DialTimeout    time.Duration
	CommandTimeout time.Duration
	// NoSubscribe disables the +switch-master subscription (polling only; benchmarks compare the two).
	NoSubscribe bool
	Version     string
	// TLSCAFile verifies TLS-only nodes and Sentinels (default valkey.DefaultCAFile).
	TLSCAFile string
	// ClusterDomain is the domain every node host of a descriptor must use (spec.Instance.CheckCanonical):
	// a descriptor naming other hosts is refused before any password is sent. Empty skips the host check
	// (tests whose nodes run on loopback); the CLI always sets it.
	ClusterDomain string
	// Fleet: more namespaces, and the shared mode (fleet.go, docs/fleet.md).
	Fleet FleetOptions
	// Workers caps the parallel passes (0: one lane per instance; see lanes).
	Workers int
	// ObserveTimeout bounds one instance's gather (default 10 s).
	ObserveTimeout time.Duration
	// Migrate, when set, runs a migration from a primary outside the chart (migrate.go).
	Migrate *MigrateOptions
	// KeepDemotedClients turns off the controller's closing of a demoted node's application connections
	// (closeClients: after a relabel, a repair, and again during plan.RecloseWindow): the labels move, and a
	// client held on the old primary gets READONLY until it reconnects by itself ("labels only"; flag
	// --close-demoted-clients=false, chart value closeDemotedClients). A handoff still closes the
	// connections of the primary it demotes (handoff.CloseClients). Default false: they are closed.
	KeepDemotedClients bool
}

// InstanceController is the data-side controller.
type InstanceController struct {
	opts     InstanceOptions
	cs       kubernetes.Interface
	log      *slog.Logger
	metrics  *metrics.Metrics
	recorder record.EventRecorder

	pods  corelisters.PodLister
	cms   corelisters.ConfigMapLister
	stss  appslisters.StatefulSetLister
	cache *nscache.Cache
	lanes *lanes
	// switches holds the +switch-master subscriptions (one per Sentinel)
	switches *switchHub
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// loop runs the passes of queue (loop.go); each lane is one of its workers
	loop  *worker
	pool  *pool
	mu    sync.Mutex
	state map[types.NamespacedName]*instanceMemory
	// reported dedupes the Warning events of conditions that last many passes
	reported reportOnce
	// sentinelAuth holds the quorum passwords sent to the Sentinels (sentinelOpts)
	sentinelAuth quorumCredentials
	// resetFallback remembers why SENTINEL RESET last fell back to _instance (resetClient)
	resetFallback fallbackMemory
	// keepDemotedClients: the controller's repair and relabel do not close a demoted node's connections
	// (InstanceOptions.KeepDemotedClients; the "labels only" baseline of the held-clients figures)
	keepDemotedClients bool
}

// instanceMemory is what the controller remembers between passes of one instance. Nothing here is needed
// for correctness after a restart: it bounds timers and avoids repeated work.
type instanceMemory struct {
	plan plan.Memory
	// migration is the last migration message (migrateFrom; migrate.go), "" without one
	migration string
	// migrateObs keeps the migration's connections to the source and node 0 between passes (nil until the
	// first migration pass; closed by forget and when Run ends)
	migrateObs *migrate.Observer
	// switchRetryAt is when a failed migration switch may be tried again; switchBackoff the current wait
	// (MinSwitchBackoff doubling to MaxSwitchBackoff; both zero after a success)
	switchRetryAt time.Time
	switchBackoff time.Duration
	switchFailed  string
	// sub is the +switch-master subscription (nil: none)
	sub *subscription
	// addrs are the node and Sentinel addresses of the last pass (closed in the pool when forgotten)
	nodeAddrs, sentinelAddrs []string
	operatorPW               string
	operatorPWAt             time.Time
	// acl is the <F>-acl Secret as last read (gatherACL), at aclReadAt; re-read when older than aclReread
	acl       plan.ACLSecret
	aclReadAt time.Time
	// statusPrint fingerprints the last written status without timestamps and offsets
	statusPrint   string
	statusWritten time.Time
	// backupListedAt is when the backup pods were last listed; lastBackup the newest backup seen (backups.go)
	backupListedAt time.Time
	lastBackup     backup.Meta
	// switchC is closed (and replaced) at each +switch-master of the monitor (signalSwitch); a gather waiting
	// for a silent node gives up on it (errSuperseded)
	switchMu sync.Mutex
	switchC  chan struct{}
}

// switchSignal returns a channel closed at the next +switch-master of the instance's monitor.
func (m *instanceMemory) switchSignal() <-chan struct{} {
	m.switchMu.Lock()
	defer m.switchMu.Unlock()
	if m.switchC == nil {
		m.switchC = make(chan struct{})
	}
	return m.switchC
}

// signalSwitch closes the channel switchSignal returned (a +switch-master arrived).
func (m *instanceMemory) signalSwitch() {
	m.switchMu.Lock()
	defer m.switchMu.Unlock()
	if m.switchC != nil {
		close(m.switchC)
		m.switchC = nil
	}
}

// NewInstanceController wires informers (label-filtered) and the queue. Call Run to start.
func NewInstanceController(cs kubernetes.Interface, o InstanceOptions, m *metrics.Metrics, rec record.EventRecorder, log *slog.Logger) *InstanceController {
	connDefaults(&o.Resync, contract.DefaultInstanceResync, &o.DialTimeout, &o.CommandTimeout, &o.TLSCAFile)
	if o.ObserveTimeout <= 0 {
		o.ObserveTimeout = 10 * time.Second
	}
	c := &InstanceController{opts: o, cs: cs, log: log, metrics: m, recorder: rec, pool: newPool(),
		keepDemotedClients: o.KeepDemotedClients, state: map[types.NamespacedName]*instanceMemory{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(laneLimiter(),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "instance"})}
	c.loop = &worker{controller: "instance", namespace: o.Namespace, queue: c.queue, reconcile: c.Reconcile,
		observe: c.observePass, metrics: m, log: log}
	extra := map[nscache.Kind]string{}
	if o.Instance != "" {
		// data pods carry valkey.io/instance; ConfigMaps are filtered by part-of only (descriptor, sentinel info)
		extra[nscache.Pods] = contract.LabelInstance + "=" + o.Instance
		extra[nscache.StatefulSets] = contract.LabelInstance + "=" + o.Instance
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueObj,
		UpdateFunc: func(old, obj any) {
			if !quietUpdate(old, obj) {
				c.enqueueObj(obj)
			}
		},
		DeleteFunc: c.enqueueObj,
	}
	// the namespaces this controller serves (its own, and a shared controller's others; fleet.go)
	c.cache = newNamespaceCache(cs, o.Namespace, o.Fleet, []nscache.Kind{nscache.Pods, nscache.ConfigMaps, nscache.StatefulSets}, extra, h,
		c.forgetNamespace, log, !o.Fleet.Identity.IsZero())
	c.pods, c.cms, c.stss = c.cache.Pods(), c.cache.ConfigMaps(), c.cache.StatefulSets()
	return c
}

// keyOf maps a pod or ConfigMap to its instance's work-queue key; false for an object of no instance this
// controller serves.
func (c *InstanceController) keyOf(obj any) (types.NamespacedName, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	name := instanceOf(obj)
	if name == "" || (c.opts.Instance != "" && name != c.opts.Instance) {
		return types.NamespacedName{}, false
	}
	mo, _ := obj.(metav1.Object)
	return types.NamespacedName{Namespace: mo.GetNamespace(), Name: name}, true
}

// instanceOf routes an object to its instance (docs/design.md, "Events"): a descriptor is the instance's own
// object (F-instance); an object owned by a descriptor (F-sentinels) goes to its owner; a data pod or
// StatefulSet carries valkey.io/instance. Status ConfigMaps are the controllers' own writes: they route
// nowhere, so writing one never triggers a pass.
func instanceOf(obj any) string {
	mo, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	l := mo.GetLabels()
	switch l[contract.LabelComponent] {
	case contract.ComponentStatus:
		return ""
	case contract.ComponentInstance:
		if f, ok := contract.InstanceOf(mo.GetName()); ok {
			return f
		}
	}
	for _, ref := range mo.GetOwnerReferences() {
		if ref.Kind == "ConfigMap" {
			if f, ok := contract.InstanceOf(ref.Name); ok {
				return f
			}
		}
	}
	return l[contract.LabelInstance]
}

// quietUpdate reports an update that is no news: the same resourceVersion (a relist), or a pod whose only
// change is its valkey.io/role label (the instance controller's own patch).
func quietUpdate(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return false
	}
	if rv := o.GetResourceVersion(); rv != "" && rv == n.GetResourceVersion() {
		return true // the API server bumps resourceVersion on every change
	}
	if equality.Semantic.DeepEqual(old, obj) {
		return true // no resourceVersion (a fake clientset) and nothing changed
	}
	op, ok1 := old.(*corev1.Pod)
	np, ok2 := obj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return false
	}
	strip := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		p.ResourceVersion, p.ManagedFields = "", nil
		delete(p.Labels, contract.LabelRole)
		return p
	}
	return equality.Semantic.DeepEqual(strip(op), strip(np))
}

func (c *InstanceController) enqueueObj(obj any) {
	if k, ok := c.keyOf(obj); ok {
		c.queue.Add(k)
	}
}

// Run starts the informers and workers and blocks until ctx ends.
func (c *InstanceController) Run(ctx context.Context, health *metrics.Health) error {
	defer c.queue.ShutDown()
	defer c.pool.close()
	defer c.closeMigrations()
	c.switches = newSwitchHub(c.log)
	c.cache.Start(ctx)
	if !c.cache.WaitForSync(ctx) {
		return fmt.Errorf("instance controller: caches did not sync")
	}
	if health != nil {
		health.SetReady(true)
	}
	c.log.Info("instance controller started", "namespace", c.opts.Namespace, "instance", c.opts.Instance,
		"namespaces", c.opts.Fleet.Namespaces, "sharedIdentity", c.opts.Fleet.Identity.String())
	if c.opts.Instance != "" {
		c.queue.Add(types.NamespacedName{Namespace: c.opts.Namespace, Name: c.opts.Instance})
	} else {
		cms, _ := c.cms.List(labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentInstance}))
		for _, cm := range cms {
			c.enqueueObj(cm)
		}
	}
	c.lanes = &lanes{max: c.opts.Workers, run: func() { c.loop.run(ctx) }}
	c.growLanes()
	<-ctx.Done()
	c.queue.ShutDown()
	c.lanes.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.state {
		st.sub.stop()
	}
	return nil
}

func (c *InstanceController) memory(key types.NamespacedName) *instanceMemory {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.state[key]
	if !ok {
		m = &instanceMemory{}
		c.state[key] = m
		defer func() { go c.growLanes() }()
	}
	return m
}

// Reconcile runs one pass for the instance of key (a key without a namespace is in the controller's own
// namespace) (docs/design.md, "The instance controller's pass"): gather the World, plan (pure, the policy
// included), apply, write status. It never touches the work queue: the Result says when the loop takes the
// instance up again (loop.go), the zero Result when the instance no longer exists or is not this
// controller's to serve (fleet.go).
func (c *InstanceController) Reconcile(ctx context.Context, key types.NamespacedName) (Result, error) {
	if key.Namespace == "" {
		key.Namespace = c.opts.Namespace
	}
	desc, in, err := c.descriptor(ctx, key)
	switch {
	case errors.Is(err, errGone):
		c.forget(key)
		return Result{}, nil
	case errors.Is(err, errInvalid):
		return Result{}, nil // reported; a new descriptor version enqueues us again
	case err != nil:
		return Result{}, err
	}
	if ok, why := c.servesInstance(in); !ok {
		c.standDown(desc, key, why)
		return Result{}, nil // a new descriptor version enqueues us again
	}
	defer c.reported.sweep(key.String() + "/")
	mem := c.memory(key)
	gctx, cancel := c.observeContext(ctx)
	w, err := c.gather(gctx, in, mem)
	cancel()
	if errors.Is(err, errSuperseded) {
		c.log.Info("pass abandoned: +switch-master arrived while a node had not answered INFO; observing again", "instance", key.String())
		return Result{Requeue: true}.resync(c.opts.Resync), nil
	}
	if err != nil {
		return Result{}, err
	}
	mem.nodeAddrs, mem.sentinelAddrs = addrs(w)
	if c.migrating(ctx, key, desc, in, mem) {
		// no topology step, label or roll while node 0 follows the source (migrate.go)
		if err := c.writeStatus(ctx, desc, w, plan.Decision{Memory: mem.plan}, plan.Outcome{}, mem); err != nil {
			return Result{}, err
		}
		return Result{}.resync(c.opts.Resync), nil
	}
	d := plan.Instance(w, mem.plan)
	c.reclose(ctx, desc, w, d, mem)
	out, applyErr := c.apply(ctx, desc, w, d, mem)
	c.report(desc, w, d)
	if !c.opts.NoSubscribe {
		c.ensureSubscription(ctx, key, in, w.SentinelInfo, mem)
	}
	c.metrics.ObserveInstance(key.String(), plan.InstanceGauges(w, d))
	c.observeBackups(ctx, in, mem)
	// the live ACL sync comes last, as its own gather, plan and apply: a slow Secret read or node sync never
	// delays a label or a step
	w.ACL = c.gatherACL(ctx, in, w.Now, mem)
	c.reportUsers(desc, w)
	access := plan.PlanAccess(w, mem.plan)
	out.ACLSync = c.applyAccess(ctx, w, access, mem)
	out.Access = plan.AccessResult(w, access, out.ACLSync)
	mem.plan = plan.Remember(w, d, out)
	var res Result
	if len(mem.plan.Reclose) > 0 {
		res.RequeueAfter = recloseEvery // a reclose window is open (plan.Reclose)
	}
	// one disruptive step per pass, then observe again at once (the same key: never a second, concurrent pass)
	res.Requeue = out.LastAction != ""
	if err := c.writeStatus(ctx, desc, w, d, out, mem); err != nil {
		return res, err
	}
	if applyErr != nil {
		return res, applyErr
	}
	return res.resync(c.opts.Resync), nil
}

// opOptions are the options of the _operator user towards the instance's nodes.
func (c *InstanceController) opOptions(in spec.Instance, mem *instanceMemory) valkey.Options {
	return valkey.Options{Username: acl.Operator, Password: mem.operatorPW, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
}

// sentinelOpts are the options towards the Sentinels of si: the quorum's _instance user with the password of
// Secret <S>-auth-instance (read by name; see sentinelAuth) when si is the quorum the descriptor names
// (spec.SentinelInfo.CheckCanonical), no credentials otherwise.
func (c *InstanceController) sentinelOpts(ctx context.Context, in spec.Instance, si spec.SentinelInfo) valkey.Options {
	o := valkey.Options{DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.WithTLS(si.TLS, c.opts.TLSCAFile)
	o.Username, o.Password = c.sentinelAuth.credential(ctx, c.cs, c.log, in, si, c.opts.ClusterDomain)
	return o
}

// addrs are the node and Sentinel addresses a World was gathered from.
func addrs(w plan.World) (nodes, sentinels []string) {
	for _, n := range w.Instance.Nodes {
		nodes = append(nodes, w.Instance.Addr(n))
	}
	for _, s := range w.Sentinels {
		sentinels = append(sentinels, s.Addr)
	}
	return nodes, sentinels
}

// forget drops everything the controller holds for an instance that no longer exists: its memory, its
// subscription (waiting for its goroutines), its pooled clients (its Sentinels' only when no other
// instance uses them) and its metric series.
func (c *InstanceController) forget(key types.NamespacedName) {
	c.metrics.ForgetInstance(key.String())
	c.resetFallback.set(key.String(), "")
	c.mu.Lock()
	st, ok := c.state[key]
	delete(c.state, key)
	inUse := map[string]bool{}
	for _, other := range c.state {
		for _, a := range other.sentinelAddrs {
			inUse[a] = true
		}
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	st.sub.stop()
	if st.migrateObs != nil {
		st.migrateObs.Close()
	}
	for _, a := range st.nodeAddrs {
		c.pool.drop(a)
	}
	for _, a := range st.sentinelAddrs {
		if !inUse[a] {
			c.pool.drop(a)
		}
	}
}
