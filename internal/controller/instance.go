// Package controller runs the two controllers of valkey-sentinel-ctl (docs/design.md). Each pass of either
// one gathers a complete World (gather*.go: informer caches, INFO on every node, each Sentinel's view once),
// hands it to a pure planner that returns at most one disruptive step (internal/plan, which owns the
// precedence and calls internal/topology, internal/roll and internal/registration), lets the policy vet that
// step (plan.Check, plan.CheckQuorum), applies what is left through a thin executor (apply*.go) and writes a
// status document built by a pure function (plan.InstanceStatus, plan.QuorumStatus).
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
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
}

// InstanceController is the data-side controller.
type InstanceController struct {
	opts     InstanceOptions
	cs       kubernetes.Interface
	log      *slog.Logger
	metrics  *metrics.Metrics
	recorder record.EventRecorder

	pods   corelisters.PodLister
	cms    corelisters.ConfigMapLister
	stss   appslisters.StatefulSetLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
	pool   *pool
	mu     sync.Mutex
	state  map[string]*instanceMemory
	runCtx context.Context
	// reported dedupes the Warning events of conditions that last many passes
	reported reportOnce
	// sentinelAuth holds the quorum passwords sent to the Sentinels (sentinelOpts)
	sentinelAuth quorumCredentials

	startFactories func(stop <-chan struct{})
}

// instanceMemory is what the controller remembers between passes of one instance. Nothing here is needed
// for correctness after a restart: it bounds timers and avoids repeated work.
type instanceMemory struct {
	plan         plan.Memory
	subKey       string
	subCancel    context.CancelFunc
	operatorPW   string
	operatorPWAt time.Time
	aclUsers     []acl.DesiredUser
	aclReadAt    time.Time
	aclApplied   map[string]aclApplied
	// statusPrint fingerprints the last written status without timestamps and offsets
	statusPrint   string
	statusWritten time.Time
}

// NewInstanceController wires informers (label-filtered) and the queue. Call Run to start.
func NewInstanceController(cs kubernetes.Interface, o InstanceOptions, m *metrics.Metrics, rec record.EventRecorder, log *slog.Logger) *InstanceController {
	if o.Resync <= 0 {
		o.Resync = 2 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 3 * time.Second
	}
	if o.TLSCAFile == "" {
		o.TLSCAFile = valkey.DefaultCAFile
	}
	c := &InstanceController{opts: o, cs: cs, log: log, metrics: m, recorder: rec, pool: newPool(),
		state: map[string]*instanceMemory{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "instance"})}
	extra := ""
	if o.Instance != "" {
		extra = spec.LabelInstance + "=" + o.Instance
	}
	// data pods carry valkey.io/instance; ConfigMaps are filtered by part-of only (descriptor, sentinel info)
	podFactory := kube.NewInformerFactory(cs, o.Namespace, extra, 0)
	cmFactory := kube.NewInformerFactory(cs, o.Namespace, "", 0)
	podInf := podFactory.Core().V1().Pods()
	stsInf := podFactory.Apps().V1().StatefulSets()
	cmInf := cmFactory.Core().V1().ConfigMaps()
	c.pods, c.cms, c.stss = podInf.Lister(), cmInf.Lister(), stsInf.Lister()
	c.synced = []cache.InformerSynced{podInf.Informer().HasSynced, cmInf.Informer().HasSynced, stsInf.Informer().HasSynced}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObj,
		UpdateFunc: func(_, obj any) { c.enqueueObj(obj) },
		DeleteFunc: c.enqueueObj,
	}
	_, _ = podInf.Informer().AddEventHandler(h)
	_, _ = cmInf.Informer().AddEventHandler(h)
	_, _ = stsInf.Informer().AddEventHandler(h)
	c.startFactories = func(stop <-chan struct{}) {
		podFactory.Start(stop)
		cmFactory.Start(stop)
	}
	return c
}

// keyOf maps a pod or ConfigMap to its instance name, or "".
func (c *InstanceController) keyOf(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	key := instanceOf(obj)
	if c.opts.Instance != "" && key != c.opts.Instance {
		return ""
	}
	return key
}

// instanceOf maps a data pod, StatefulSet or ConfigMap of this project to its instance: the valkey.io/instance
// label, or for a descriptor its name without -instance.
func instanceOf(obj any) string {
	mo, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	key := mo.GetLabels()[spec.LabelInstance]
	if key == "" {
		if _, isCM := obj.(*corev1.ConfigMap); isCM && strings.HasSuffix(mo.GetName(), spec.InstanceSuffix) &&
			mo.GetLabels()[spec.LabelComponent] == spec.ComponentInst {
			key = strings.TrimSuffix(mo.GetName(), spec.InstanceSuffix)
		}
	}
	return key
}

func (c *InstanceController) enqueueObj(obj any) {
	if k := c.keyOf(obj); k != "" {
		c.queue.Add(k)
	}
}

// Run starts the informers and workers and blocks until ctx ends.
func (c *InstanceController) Run(ctx context.Context, health *metrics.Health) error {
	defer c.queue.ShutDown()
	defer c.pool.close()
	c.runCtx = ctx
	c.startFactories(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("instance controller: caches did not sync")
	}
	if health != nil {
		health.SetReady(true)
	}
	c.log.Info("instance controller started", "namespace", c.opts.Namespace, "instance", c.opts.Instance)
	if c.opts.Instance != "" {
		c.queue.Add(c.opts.Instance)
	} else {
		cms, _ := c.cms.List(labels.SelectorFromSet(labels.Set{spec.LabelComponent: spec.ComponentInst}))
		for _, cm := range cms {
			c.enqueueObj(cm)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.mu.Lock()
	for _, st := range c.state {
		if st.subCancel != nil {
			st.subCancel()
		}
	}
	c.mu.Unlock()
	return nil
}

func (c *InstanceController) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	start := time.Now()
	requeue, err := c.Reconcile(ctx, key)
	c.metrics.ReconcileSeconds.WithLabelValues("instance").Observe(time.Since(start).Seconds())
	if err != nil {
		c.metrics.ReconcileErrors.WithLabelValues("instance").Inc()
		c.log.Warn("reconcile failed", "instance", key, "error", err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	if requeue { // false: the instance is gone and forgotten
		c.metrics.ReconcileSucceeded("instance", c.opts.Namespace+"/"+key, time.Now())
		c.queue.AddAfter(key, c.opts.Resync)
	}
	return true
}

func (c *InstanceController) memory(name string) *instanceMemory {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.state[name]
	if !ok {
		m = &instanceMemory{}
		c.state[name] = m
	}
	return m
}

// Reconcile runs one pass for instance name (docs/design.md, "The instance controller's pass"): gather the
// World, plan (pure, the policy included), apply, write status. requeue is false when the instance no longer
// exists.
func (c *InstanceController) Reconcile(ctx context.Context, name string) (requeue bool, err error) {
	desc, in, err := c.descriptor(name)
	switch {
	case errors.Is(err, errGone):
		c.forget(name)
		return false, nil
	case errors.Is(err, errInvalid):
		return false, nil // reported; a new descriptor version enqueues us again
	case err != nil:
		return true, err
	}
	defer c.reported.sweep(name + "/")
	mem := c.memory(name)
	w, err := c.gather(ctx, in, mem)
	if err != nil {
		return true, err
	}
	d := plan.Instance(w, mem.plan)
	out, applyErr := c.apply(ctx, desc, w, &d, mem)
	c.report(desc, w, d, mem)
	mem.plan = d.Memory
	if !c.opts.NoSubscribe {
		c.ensureSubscription(name, in, w.SentinelInfo, mem)
	}
	c.metrics.ObserveInstance(in.Namespace+"/"+in.Name, plan.InstanceGauges(w, d))
	out.Access = c.syncAccess(ctx, w, mem)
	if err := c.writeStatus(ctx, desc, w, d, out, mem); err != nil {
		return true, err
	}
	return true, applyErr
}

// report sends the Events of conditions that last many passes once per change of reason (the policy's
// refusal, no promotable replica, unknown descriptor fields, a primary handing off in its preStop hook) and
// the one-off PrimaryChanged.
func (c *InstanceController) report(desc *corev1.ConfigMap, w plan.World, d plan.Decision, mem *instanceMemory) {
	name := w.Instance.Name
	if len(w.Instance.Unknown) > 0 {
		msg := "descriptor fields this controller does not know (ignored): " + strings.Join(w.Instance.Unknown, ", ")
		if c.reported.changed(name+"/unknown", msg) {
			c.recorder.Event(desc, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
		}
	}
	if h := d.Topology.HandingOff; h != nil && c.reported.changed(name+"/handing-off/"+h.Pod, w.Node(h.Index).PodUID) {
		c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryHandingOff",
			"primary pod %s is terminating: its preStop hook hands the primary role off; no repair or planned handoff until it is done", h.Pod)
	}
	if d.Refused != "" && c.reported.changed(name+"/refused", d.Refused) {
		c.recorder.Event(desc, corev1.EventTypeWarning, "StepRefused", d.Refused)
		c.log.Info("policy refused a step", "instance", name, "reason", d.Refused)
	}
	if d.Roll == rollNoPromotable && c.reported.changed(name+"/nopromote", d.Roll) {
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "HandoffImpossible", "%s", d.Roll)
	}
	if p := d.Memory.LastPrimaryPod; p != "" && mem.plan.LastPrimaryPod != "" && p != mem.plan.LastPrimaryPod {
		c.metrics.FailoversObserved.WithLabelValues(w.Instance.Namespace + "/" + name).Inc()
		c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryChanged", "primary moved from %s to %s", mem.plan.LastPrimaryPod, p)
	}
}

func (c *InstanceController) forget(name string) {
	c.metrics.ForgetInstance(c.opts.Namespace + "/" + name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.state[name]; ok && st.subCancel != nil {
		st.subCancel()
	}
	delete(c.state, name)
}
