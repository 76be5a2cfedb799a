package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/controllers/nscache"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// SentinelOptions configure the sentinel-side controller of one quorum release. Where the quorum's Sentinels
// are (their hosts, port and TLS) comes from the quorum document the chart publishes (ConfigMap S-quorum,
// spec.Quorum), how many there are from the StatefulSet S.
type SentinelOptions struct {
	Namespace string
	// Release is the quorum's fullname S: StatefulSet S, pods S-<i>, quorum document S-quorum.
	Release string
	// ClusterDomain is the domain of the Sentinels' FQDNs and of every node host of a selected descriptor
	// (spec.Quorum.CheckCanonical, spec.Instance.CheckCanonical; empty skips those host checks, for tests on
	// loopback).
	ClusterDomain string
	// Selector selects instance descriptors by label; an empty selector matches nothing.
	Selector labels.Selector
	Resync   time.Duration
	// DialTimeout / CommandTimeout bound each connection and command (defaults 1 s / 3 s).
	DialTimeout    time.Duration
	CommandTimeout time.Duration
	// TLSCAFile verifies TLS-only Sentinels and nodes (default valkey.DefaultCAFile).
	TLSCAFile string
	// AuthPassword, when set, is the password of the quorum's acl.SentinelAdmin user, sent to this quorum's
	// Sentinels (charts/valkey-sentinel auth.enabled; the CLI reads or generates Secret S-auth-admin).
	AuthPassword string
	// LoopbackSentinels skips the host check of the quorum document (and only that one): tests whose
	// Sentinels run on loopback and that check descriptors against ClusterDomain. The CLI never sets it.
	LoopbackSentinels bool
	// Fleet: the namespaces whose descriptors Selector may select besides Namespace, and the quorum's
	// identity that instances grant (plan.RefuseNameCollisions, plan.NamespaceReadability, docs/fleet.md).
	Fleet FleetOptions
	// CopyCredential copies the quorum's _instance credential into F-quorum-auth of the instances of other
	// namespaces (plan.PlanCopies; the CLI sets it with --auth).
	CopyCredential bool
}

// SentinelController owns the monitor lifecycle of one Sentinel quorum.
type SentinelController struct {
	opts     SentinelOptions
	cs       kubernetes.Interface
	log      *slog.Logger
	metrics  *metrics.Metrics
	recorder record.EventRecorder

	pods    corelisters.PodLister
	cms     corelisters.ConfigMapLister
	stss    appslisters.StatefulSetLister
	cmCache *nscache.Cache
	synced  []cache.InformerSynced
	start   func(<-chan struct{})
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// key is the quorum's (namespace and release): the one key of queue, the label of its metrics
	key types.NamespacedName
	// loop runs the passes of queue (loop.go), one worker
	loop    *worker
	pool    *pool
	mu      sync.Mutex
	applied map[string]map[string]string // sentinel pod -> monitor -> auth hash
	// reported dedupes the Warning events of conditions that last many passes
	reported reportOnce
	// copies are the credential copies written or found equal (plan.CredentialWorld.Written)
	copies credentialCopies
	// rollHeldSince is when a planned Sentinel roll started waiting (zero: none waits)
	rollHeldSince time.Time
	// stuckSince is when each Sentinel monitor was first seen stuck on a stale primary
	// (registration.StuckKey -> time; registration.Stuck), kept from pass to pass
	stuckSince map[string]time.Time
}

// NewSentinelController wires label-filtered informers over the Sentinel pods and this project's ConfigMaps.
func NewSentinelController(cs kubernetes.Interface, o SentinelOptions, m *metrics.Metrics, rec record.EventRecorder, log *slog.Logger) *SentinelController {
	connDefaults(&o.Resync, contract.DefaultSentinelResync, &o.DialTimeout, &o.CommandTimeout, &o.TLSCAFile)
	if o.Selector == nil {
		o.Selector = labels.Nothing()
	}
	c := &SentinelController{opts: o, cs: cs, log: log, metrics: m, recorder: rec, pool: newPool(),
		applied: map[string]map[string]string{},
		key:     types.NamespacedName{Namespace: o.Namespace, Name: o.Release},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "sentinel"})}
	c.loop = &worker{controller: "sentinel", namespace: o.Namespace, queue: c.queue, reconcile: c.Reconcile, metrics: m, log: log}
	podFactory := kube.NewInformerFactory(cs, o.Namespace, contract.LabelSentinel+"="+o.Release, 0)
	podInf := podFactory.Core().V1().Pods()
	stsInf := podFactory.Apps().V1().StatefulSets()
	enqueue := func(obj any) {
		if c.relevant(obj) {
			c.queue.Add(c.key)
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			if !quietUpdate(old, obj) {
				enqueue(obj)
			}
		},
		DeleteFunc: enqueue,
	}
	// descriptors and Sentinel info of every namespace the quorum serves (its own and o.Fleet's)
	c.cmCache = newNamespaceCache(cs, o.Namespace, o.Fleet, []nscache.Kind{nscache.ConfigMaps}, nil, h,
		func(string) { c.queue.Add(c.key) }, log, false)
	c.pods, c.cms, c.stss = podInf.Lister(), c.cmCache.ConfigMaps(), stsInf.Lister()
	c.synced = []cache.InformerSynced{podInf.Informer().HasSynced, stsInf.Informer().HasSynced}
	_, _ = podInf.Informer().AddEventHandler(h)
	_, _ = stsInf.Informer().AddEventHandler(h)
	c.start = func(stop <-chan struct{}) { podFactory.Start(stop) }
	return c
}

// Run starts informers and one worker and blocks until ctx ends.
func (c *SentinelController) Run(ctx context.Context, health *metrics.Health) error {
	defer c.queue.ShutDown()
	defer c.pool.close()
	c.start(ctx.Done())
	c.cmCache.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) || !c.cmCache.WaitForSync(ctx) {
		return fmt.Errorf("sentinel controller: caches did not sync")
	}
	if health != nil {
		health.SetReady(true)
	}
	c.log.Info("sentinel controller started", "namespace", c.opts.Namespace, "release", c.opts.Release, "selector", c.opts.Selector.String())
	c.queue.Add(c.key)
	stop := context.AfterFunc(ctx, c.queue.ShutDown)
	defer stop()
	c.loop.run(ctx)
	return nil
}

// relevant reports whether a change of obj may change this quorum's pass (docs/design.md, "Events"): not the
// status documents (the controllers' own writes) nor the Sentinel info this quorum published itself; every
// descriptor, the quorum document, the StatefulSet, a Sentinel pod and another quorum's Sentinel info are.
func (c *SentinelController) relevant(obj any) bool {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	mo, ok := obj.(metav1.Object)
	if !ok {
		return true
	}
	l := mo.GetLabels()
	switch l[contract.LabelComponent] {
	case contract.ComponentStatus:
		return false
	case contract.ComponentSentinelInfo:
		return l[contract.LabelSentinel] != c.opts.Release
	}
	return true
}

// Reconcile runs one pass over every selected instance and every Sentinel (docs/design.md, "The sentinel
// controller's pass"): gather the SentinelWorld, plan (pure, the policy included), apply, write status. key is
// the quorum's (the one key of its queue; the pass serves the whole quorum whatever key it is given). It never
// touches the work queue: a served pass asks for the resync (loop.go).
func (c *SentinelController) Reconcile(ctx context.Context, _ types.NamespacedName) (Result, error) {
	w, objs, err := c.gatherSentinels(ctx)
	if err != nil {
		return Result{}, err
	}
	defer c.reported.sweep("")
	w.StuckSince = c.stuckSince
	d := plan.PlanSentinels(w, c.rollHeldSince)
	next := map[string]time.Time{}
	for _, k := range d.Registration.Stuck {
		if since, ok := c.stuckSince[k]; ok {
			next[k] = since
		} else {
			next[k] = w.Now
		}
	}
	c.stuckSince = next
	res := c.applySentinels(ctx, w, d, objs)
	errs := res.errs
	for _, cp := range res.remembered {
		c.copies.remember(cp.Key(), cp.Sum)
	}
	c.reportSentinels(ctx, w, d, objs.descs)
	c.reportCopies(d.Copies, res.copyFailed, objs.descs)
	if d.RollPlanned && len(errs) == 0 {
		c.rollHeldSince = d.RollHeldSince
	}
	st := plan.SentinelStatus(w, d, res.last)
	c.metrics.ObserveQuorum(c.key.String(), plan.SentinelGauges(w, d, st.Monitors))
	if err := c.putStatus(ctx, st); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Result{}, fmt.Errorf("sentinel pass: %d error(s), first: %w", len(errs), errs[0])
	}
	return Result{RequeueAfter: c.opts.Resync}, nil
}

// stale reports whether a pod's revision differs from its StatefulSet's update revision (OnDelete rolls).
func stale(pod *corev1.Pod, sts *appsv1.StatefulSet) bool {
	if pod == nil || sts == nil || sts.Status.UpdateRevision == "" {
		return false
	}
	return pod.Labels[revisionLabel] != sts.Status.UpdateRevision
}

// credentialCopies is the memory of the credential copies written or found equal, by
// plan.CredentialCopy.Key: a pass reads or writes only the copies that are new, changed or due for a recheck
// (plan.CopyCurrent).
type credentialCopies struct {
	mu      sync.Mutex
	written map[string]plan.CopyWritten
}

// snapshot is a copy of the memory for the World of one pass.
func (cc *credentialCopies) snapshot() map[string]plan.CopyWritten {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := make(map[string]plan.CopyWritten, len(cc.written))
	for k, v := range cc.written {
		out[k] = v
	}
	return out
}

// remember records that copy key holds data of digest sum, now.
func (cc *credentialCopies) remember(key, sum string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.written == nil {
		cc.written = map[string]plan.CopyWritten{}
	}
	cc.written[key] = plan.CopyWritten{Sum: sum, At: time.Now()}
}

// sentinelOpts are the options towards this quorum's Sentinels (as acl.SentinelAdmin with AuthPassword).
func (c *SentinelController) sentinelOpts(tls bool) valkey.Options {
	o := valkey.Options{DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.WithTLS(tls, c.opts.TLSCAFile)
	if c.opts.AuthPassword != "" {
		o.Username, o.Password = acl.SentinelAdmin, c.opts.AuthPassword
	}
	return o
}
