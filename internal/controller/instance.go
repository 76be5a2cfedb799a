// Package controller runs the two controllers of valkey-sentinel-ctl: each pass observes (informer caches,
// INFO on every node, the Sentinels' view), plans with a pure planner (internal/topology,
// internal/registration) and applies the plan through a thin executor, then writes status.
package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/valkey-ha/valkey-ha/internal/registration"
	"github.com/valkey-ha/valkey-ha/internal/roll"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/status"
	"github.com/valkey-ha/valkey-ha/internal/topology"
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
// for correctness after a restart: it only bounds timers and avoids repeated work.
type instanceMemory struct {
	noPrimarySince time.Time
	lastPrimary    string
	subKey         string
	subCancel      context.CancelFunc
	operatorPW     string
	operatorPWAt   time.Time
	// handoffDeferredUntil backs off a primary handoff that failed
	handoffDeferredUntil time.Time
	// handoffPrint fingerprints this pass's view of the replicas (handoffPrint and the Sentinels' lists);
	// handoffRefused holds the print under which no replica could be promoted, so the handoff is retried
	// only once the print differs; noPromoteEvent is the wait reason last reported by an Event.
	handoffPrint   string
	handoffRefused handoffRefusal
	noPromoteEvent string
	aclUsers       []acl.DesiredUser
	aclReadAt      time.Time
	aclApplied     map[string]aclApplied
	// statusPrint fingerprints the last written status without timestamps and offsets
	statusPrint   string
	statusWritten time.Time
	// rollHeldSince is when a planned roll started waiting (zero: none waits)
	rollHeldSince time.Time
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
	mo, ok := obj.(metav1.Object)
	if !ok {
		return ""
	}
	key := mo.GetLabels()[spec.LabelInstance]
	if key == "" {
		if _, isCM := obj.(*corev1.ConfigMap); isCM && strings.HasSuffix(mo.GetName(), "-instance") &&
			mo.GetLabels()[spec.LabelComponent] == spec.ComponentInst {
			key = strings.TrimSuffix(mo.GetName(), "-instance")
		}
	}
	if c.opts.Instance != "" && key != c.opts.Instance {
		return ""
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

// Reconcile runs one pass for instance name: observe, plan, apply, write status. requeue is false when the
// instance no longer exists.
func (c *InstanceController) Reconcile(ctx context.Context, name string) (requeue bool, err error) {
	ns := c.opts.Namespace
	descCM, err := c.cms.ConfigMaps(ns).Get(name + "-instance")
	if apierrors.IsNotFound(err) {
		c.forget(name)
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("get descriptor %s-instance: %w", name, err)
	}
	in, err := spec.ParseInstance([]byte(descCM.Data[spec.InstanceKey]))
	if err == nil {
		err = in.CheckCanonical(descCM.Name, descCM.Namespace, c.opts.ClusterDomain)
	}
	if err != nil {
		c.recorder.Eventf(descCM, corev1.EventTypeWarning, "InvalidDescriptor", "%v", err)
		c.writeInvalid(ctx, descCM, name, err)
		return false, nil // a new descriptor version enqueues us again
	}
	defer c.reported.sweep(name + "/")
	if len(in.Unknown) > 0 {
		msg := "descriptor fields this controller does not know (ignored): " + strings.Join(in.Unknown, ", ")
		if c.reported.changed(name+"/unknown", msg) {
			c.recorder.Event(descCM, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
		}
	}
	mem := c.memory(name)
	obs, sentinelInfo, err := c.observe(ctx, in, mem)
	if err != nil {
		return true, err
	}
	now := time.Now()
	hasPrimary := false
	for _, n := range obs.Nodes {
		if n.Reachable && n.Repl.Role == valkey.RolePrimary {
			hasPrimary = true
		}
	}
	if hasPrimary {
		mem.noPrimarySince = time.Time{}
	} else if mem.noPrimarySince.IsZero() {
		mem.noPrimarySince = now
	}
	if !mem.noPrimarySince.IsZero() {
		obs.NoPrimaryFor = now.Sub(mem.noPrimarySince)
	}
	plan := topology.Build(obs)
	if h := plan.HandingOff; h != nil && c.reported.changed(name+"/handing-off/"+h.Pod, observedPod(obs, *h).PodUID) {
		c.recorder.Eventf(descCM, corev1.EventTypeNormal, "PrimaryHandingOff",
			"primary pod %s is terminating: its preStop hook hands the primary role off; no repair or planned handoff until it is done", h.Pod)
	}
	lastAction, applyErr := c.apply(ctx, in, descCM, obs, plan, mem)
	if plan.Primary != nil && plan.PrimaryConfirmed && mem.lastPrimary != "" && mem.lastPrimary != plan.Primary.Pod {
		c.metrics.FailoversObserved.WithLabelValues(ns + "/" + name).Inc()
		c.recorder.Eventf(descCM, corev1.EventTypeNormal, "PrimaryChanged", "primary moved from %s to %s", mem.lastPrimary, plan.Primary.Pod)
	}
	if plan.Primary != nil && plan.PrimaryConfirmed {
		mem.lastPrimary = plan.Primary.Pod
	}
	if !c.opts.NoSubscribe {
		c.ensureSubscription(name, in, sentinelInfo, mem)
	}
	quorum := valkey.Quorum{Message: "not monitored"}
	if sentinelInfo != nil {
		quorum = c.ckquorum(ctx, in, *sentinelInfo)
	}
	// planned operations, only when the repair took no disruptive step this pass
	rollWait := ""
	rollPlanned := lastAction == "" && applyErr == nil
	if rollPlanned {
		step, why := c.planRoll(in, obs, plan, quorum.OK, mem)
		if step != nil && step.Kind == roll.HandOff {
			step, why = c.gateHandoff(ctx, in, obs, plan, sentinelInfo, mem, step)
		}
		c.reportNoPromotable(descCM, why, mem)
		rollWait = why
		if step != nil {
			lastAction, applyErr = c.applyRoll(ctx, in, descCM, obs, step, sentinelInfo, mem)
		} else if why == "" && sentinelInfo != nil && !obs.Sentinel.FailoverInProgress && !obs.Sentinel.PrimaryDown && !obs.Sentinel.Disagree {
			if target, _ := c.planResetAfterScaleIn(ctx, in, *sentinelInfo, plan); target != "" {
				lastAction, applyErr = c.applyReset(ctx, in, descCM, *sentinelInfo, target)
			}
		}
	}
	if rollPlanned {
		if rollWait == "" {
			mem.rollHeldSince = time.Time{}
		} else if mem.rollHeldSince.IsZero() {
			mem.rollHeldSince = now
		}
	}
	c.observeMetrics(in, obs, plan, sentinelInfo != nil, quorum.OK, mem, now)
	access := c.syncAccess(ctx, in, obs, mem)
	if err := c.writeStatus(ctx, descCM, in, obs, plan, sentinelInfo, lastAction, access, quorum, rollWait, now); err != nil {
		return true, err
	}
	return true, applyErr
}

// observeMetrics sets the instance gauges (metrics.ObserveInstance) from this pass's observation and plan.
func (c *InstanceController) observeMetrics(in spec.Instance, obs topology.Observation, plan topology.Plan, monitored, quorumOK bool,
	mem *instanceMemory, now time.Time) {
	o := metrics.InstanceObservation{Nodes: len(obs.Nodes), Monitored: monitored, QuorumOK: quorumOK}
	if !mem.rollHeldSince.IsZero() {
		o.RollHeld = now.Sub(mem.rollHeldSince)
	}
	var primaryOffset int64
	primaryKnown := false
	for _, n := range obs.Nodes {
		if !n.Reachable {
			continue
		}
		o.Reachable++
		if n.Repl.Role == valkey.RolePrimary {
			o.Primaries++
		}
		if plan.Primary != nil && n.Node.Index == plan.Primary.Index && n.Repl.Role == valkey.RolePrimary {
			primaryOffset, primaryKnown = n.Repl.Offset(), true
		}
	}
	for _, n := range obs.Nodes {
		if !n.Reachable || n.Repl.Role != valkey.RoleReplica {
			continue
		}
		r := metrics.ReplicaLink{Pod: n.Node.Pod,
			LinkUp: n.Repl.LinkUp && plan.Primary != nil && in.SameAddr(*plan.Primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort)}
		if primaryKnown {
			r.LagKnown, r.LagBytes = true, max(primaryOffset-n.Repl.Offset(), 0)
		}
		o.Replicas = append(o.Replicas, r)
	}
	c.metrics.ObserveInstance(in.Namespace+"/"+in.Name, o)
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

func (c *InstanceController) operatorPassword(ctx context.Context, in spec.Instance, mem *instanceMemory) (string, error) {
	if mem.operatorPW != "" && time.Since(mem.operatorPWAt) < time.Minute {
		return mem.operatorPW, nil
	}
	pw, err := kube.ReadSecretKey(ctx, c.cs, in.Namespace, in.SystemSecret, acl.Operator)
	if err != nil {
		return "", err
	}
	mem.operatorPW, mem.operatorPWAt = pw, time.Now()
	return pw, nil
}

// observe gathers pods, INFO replication of every node and the Sentinels' view. A node that does not answer
// is recorded as unreachable; a missing credential is an error (nothing can be observed).
func (c *InstanceController) observe(ctx context.Context, in spec.Instance, mem *instanceMemory) (topology.Observation, *spec.SentinelInfo, error) {
	obs := topology.Observation{Instance: in}
	pw, err := c.operatorPassword(ctx, in, mem)
	if err != nil {
		return obs, nil, err
	}
	opts := valkey.Options{Username: acl.Operator, Password: pw, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
	obs.Nodes = make([]topology.NodeState, len(in.Nodes))
	var wg sync.WaitGroup
	for i, n := range in.Nodes {
		st := &obs.Nodes[i]
		st.Node = n
		pod, err := c.pods.Pods(in.Namespace).Get(n.Pod)
		if err == nil {
			st.PodExists = true
			st.PodUID, st.PodVersion = string(pod.UID), pod.ResourceVersion
			st.PodReady = kube.PodReady(pod)
			st.RoleLabel = pod.Labels[spec.LabelRole]
			// a pod being deleted is still observed until its deletion deadline (its preStop hook may be
			// handing the primary role off: topology treats it as handing off, issue 14)
			st.Terminating = pod.DeletionTimestamp != nil && time.Now().Before(pod.DeletionTimestamp.Time)
			if pod.DeletionTimestamp != nil && !st.Terminating || pod.Status.Phase != corev1.PodRunning {
				st.Err = "pod not running"
				continue
			}
		} else if !apierrors.IsNotFound(err) {
			return obs, nil, fmt.Errorf("get pod %s: %w", n.Pod, err)
		} else {
			st.Err = "pod missing"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := in.Addr(n)
			cl, err := c.pool.get(ctx, addr, opts)
			if err == nil {
				st.Repl, err = cl.InfoReplication(ctx)
				if err != nil {
					c.pool.drop(addr)
				}
			}
			if err != nil {
				st.Err = err.Error()
				return
			}
			st.Reachable = true
		}()
	}
	wg.Wait()

	var si *spec.SentinelInfo
	if in.Monitored() {
		if cm, err := c.cms.ConfigMaps(in.Namespace).Get(in.Name + "-sentinels"); err == nil {
			if parsed, err := spec.ParseSentinelInfo([]byte(cm.Data[spec.SentinelsKey])); err == nil && parsed.MonitorName == in.MonitorName {
				si = &parsed
			}
		}
	}
	if si != nil {
		obs.Sentinel = c.observeSentinels(ctx, in, *si)
	}
	return obs, si, nil
}

// observeSentinels asks every Sentinel for the primary address and the monitor's flags.
func (c *InstanceController) observeSentinels(ctx context.Context, in spec.Instance, si spec.SentinelInfo) topology.SentinelView {
	v := topology.SentinelView{Monitored: true}
	type answer struct {
		found      bool
		host       string
		port       int
		inProgress bool
		down       bool
	}
	answers := make([]answer, len(si.Hosts))
	ok := make([]bool, len(si.Hosts))
	var wg sync.WaitGroup
	for i, addr := range si.Addrs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, in, si))
			if err != nil {
				return
			}
			m, found, err := cl.SentinelMaster(ctx, in.MonitorName)
			if err != nil {
				c.pool.drop(addr)
				return
			}
			ok[i] = true
			if found {
				answers[i] = answer{found: true, host: m.Host, port: m.Port, inProgress: m.FailoverInProgress(),
					down: m.SubjectivelyDown() || m.ObjectivelyDown()}
			}
		}()
	}
	wg.Wait()
	v.Asked = len(si.Hosts)
	count := map[string]int{}
	known := 0
	for i, a := range answers {
		if !ok[i] {
			continue
		}
		v.Answered++
		if !a.found {
			continue
		}
		known++
		count[net.JoinHostPort(a.host, strconv.Itoa(a.port))]++
		v.FailoverInProgress = v.FailoverInProgress || a.inProgress
		v.PrimaryDown = v.PrimaryDown || a.down
	}
	v.Disagree = len(count) > 1
	if known*2 > v.Answered && known > 0 {
		best, n := "", 0
		for addr, k := range count {
			if k > n || (k == n && addr < best) {
				best, n = addr, k
			}
		}
		host, port, _ := net.SplitHostPort(best)
		v.Known, v.PrimaryHost = true, host
		v.PrimaryPort, _ = strconv.Atoi(port)
	}
	return v
}

// apply executes the plan in order and returns a description of the disruptive step taken, if any.
func (c *InstanceController) apply(ctx context.Context, in spec.Instance, descCM *corev1.ConfigMap, obs topology.Observation, plan topology.Plan, mem *instanceMemory) (string, error) {
	var last string
	opts := c.opOptions(in, mem)
	for _, a := range plan.Actions {
		switch a.Kind {
		case topology.Label:
			if err := kube.PatchPodRole(ctx, c.cs, in.Namespace, a.Node.Pod, observedPod(obs, a.Node).PodVersion, a.Role); err != nil {
				return last, err
			}
			c.metrics.LabelPatches.WithLabelValues(in.Namespace + "/" + in.Name).Inc()
			c.log.Info("role label", "instance", in.Name, "pod", a.Node.Pod, "role", a.Role, "reason", a.Reason)
		case topology.Repoint, topology.Promote:
			cl, err := c.pool.get(ctx, in.Addr(a.Node), opts)
			if err != nil {
				return last, err
			}
			if a.Kind == topology.Repoint {
				err = cl.ReplicaOf(ctx, a.Target.Host, in.PortOf(a.Target))
			} else {
				err = cl.PromoteToPrimary(ctx)
			}
			if err != nil {
				c.pool.drop(in.Addr(a.Node))
				c.recorder.Eventf(descCM, corev1.EventTypeWarning, "RepairFailed", "%s: %v", a, err)
				return last, err
			}
			if err := cl.ConfigRewrite(ctx); err != nil {
				c.log.Warn("CONFIG REWRITE after repair failed", "node", a.Node.Pod, "error", err)
			}
			c.metrics.Repairs.WithLabelValues(in.Namespace+"/"+in.Name, string(a.Kind)).Inc()
			c.recorder.Eventf(descCM, corev1.EventTypeNormal, "Repaired", "%s", a)
			c.log.Info("repair", "instance", in.Name, "action", a.String())
			last = a.String()
		}
	}
	return last, nil
}

// observedPod returns the observation of node n (zero when it is not part of obs).
func observedPod(obs topology.Observation, n spec.Node) topology.NodeState {
	for _, st := range obs.Nodes {
		if st.Node.Index == n.Index {
			return st
		}
	}
	return topology.NodeState{}
}

// ensureSubscription keeps one +switch-master subscriber per Sentinel of a monitored instance; each event for
// this monitor enqueues the instance at once, so labels move within one pass of the switch (case S21).
func (c *InstanceController) ensureSubscription(name string, in spec.Instance, si *spec.SentinelInfo, mem *instanceMemory) {
	key := ""
	if si != nil {
		key = in.MonitorName + "|" + strings.Join(si.Addrs(), ",")
	}
	if key == mem.subKey {
		return
	}
	if mem.subCancel != nil {
		mem.subCancel()
		mem.subCancel = nil
	}
	mem.subKey = key
	if si == nil || c.runCtx == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	mem.subCancel = cancel
	for _, addr := range si.Addrs() {
		go func() {
			for ctx.Err() == nil {
				o := c.sentinelOpts(ctx, in, *si)
				o.CommandTimeout = 0
				cl, err := valkey.Dial(ctx, addr, o)
				if err == nil {
					err = cl.SubscribeSwitchPrimary(ctx, func(sp valkey.SwitchPrimary) {
						if sp.Name == in.MonitorName {
							c.log.Info("+switch-master", "instance", name, "from", sp.OldHost, "to", sp.NewHost)
							c.queue.Add(name)
						}
					})
					cl.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
}

func (c *InstanceController) writeInvalid(ctx context.Context, descCM *corev1.ConfigMap, name string, cause error) {
	now := time.Now()
	st := status.Instance{Name: name, State: status.StateFailed, Message: cause.Error(), ObservedAt: now}
	st.Conditions = status.SetCondition(nil, status.Condition{Type: status.Ready, Status: status.False,
		Reason: "InvalidDescriptor", Message: cause.Error()}, now)
	_ = c.putStatus(ctx, descCM, name, st, nil)
}

// writeStatus derives conditions and state from the observation and writes <F>-status (owned by the
// descriptor, so it goes away on uninstall). It also records time-to-ready exactly once per instance, with
// the once-only state kept in an annotation on the status ConfigMap (seed 003, "Measuring time-to-ready").
func (c *InstanceController) writeStatus(ctx context.Context, descCM *corev1.ConfigMap, in spec.Instance, obs topology.Observation,
	plan topology.Plan, si *spec.SentinelInfo, lastAction string, access accessResult, q valkey.Quorum, rollWait string, now time.Time) error {
	prev, prevAnn := c.readStatus(in)
	st := status.Instance{Name: in.Name, Conditions: prev.Conditions, EverReady: prev.EverReady, ObservedAt: now,
		Held: plan.Held, LastAction: lastAction, ControllerBuild: c.opts.Version, Replicas: len(in.Nodes) - 1, Roll: rollWait}
	if lastAction == "" {
		st.LastAction = prev.LastAction
	}
	var primaryOffset int64
	if plan.Primary != nil {
		for _, n := range obs.Nodes {
			if n.Node.Index == plan.Primary.Index && n.Reachable {
				primaryOffset = n.Repl.Offset()
			}
		}
	}
	linksUp := 0
	for _, n := range obs.Nodes {
		ns := status.NodeStatus{Pod: n.Node.Pod, Host: n.Node.Host, Reachable: n.Reachable, Error: n.Err}
		if n.Reachable {
			ns.Role = string(n.Repl.Role)
			ns.Offset = n.Repl.Offset()
			if n.Repl.Role == valkey.RoleReplica {
				ns.LinkUp = n.Repl.LinkUp
				if primaryOffset > 0 {
					ns.LagBytes = primaryOffset - ns.Offset
				}
				if n.PodReady {
					st.ReadyReplicas++
				}
				if n.Repl.LinkUp && plan.Primary != nil && in.SameAddr(*plan.Primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort) {
					linksUp++
					if !n.Repl.SyncInProgress {
						st.SyncedReplicas++
					}
				}
			}
		}
		st.Nodes = append(st.Nodes, ns)
	}
	set := func(t, s, reason, msg string) {
		st.Conditions = status.SetCondition(st.Conditions, status.Condition{Type: t, Status: s, Reason: reason, Message: msg}, now)
	}
	primaryOK := plan.Primary != nil && plan.PrimaryConfirmed
	if primaryOK {
		st.Primary = plan.Primary.Pod
		st.PrimaryAddress = in.Addr(*plan.Primary)
		set(status.PrimaryElected, status.True, "PrimaryConfirmed", plan.Primary.Pod+" reports role master")
	} else {
		set(status.PrimaryElected, status.False, "NoPrimary", plan.Held)
	}
	replOK := primaryOK && linksUp == len(in.Nodes)-1
	if replOK {
		set(status.ReplicationHealthy, status.True, "LinksUp", fmt.Sprintf("%d/%d replica links up", linksUp, len(in.Nodes)-1))
	} else {
		set(status.ReplicationHealthy, status.False, "LinksDown", fmt.Sprintf("%d/%d replica links up", linksUp, len(in.Nodes)-1))
	}
	st.Monitoring.MonitorName = in.MonitorName
	monitoredOK := true
	switch {
	case !in.Monitored():
		set(status.Monitored, status.False, "FailoverModeNone", "failover.mode is None")
		set(status.SentinelQuorumHealthy, status.Unknown, "NotMonitored", "")
	case si == nil:
		monitoredOK = false
		set(status.Monitored, status.False, "NoSentinelSelects", "no Sentinel quorum has registered this instance (check instanceLabels and the quorum's valkeySelector)")
		set(status.SentinelQuorumHealthy, status.Unknown, "NotMonitored", "")
	default:
		st.Monitoring.MonitoredBy = si.SentinelRelease
		st.Monitoring.Sentinels = obs.Sentinel.Answered
		st.Monitoring.Registered = obs.Sentinel.Known
		monitoredOK = obs.Sentinel.Known
		if obs.Sentinel.Known {
			set(status.Monitored, status.True, "Registered", "monitored by "+si.SentinelRelease)
		} else {
			set(status.Monitored, status.False, "NotRegistered", "Sentinels do not know the monitor yet")
		}
		switch {
		case in.Quorum > len(si.Hosts):
			// a configuration error, not a passing outage: failover can never be agreed, so not Ready
			monitoredOK = false
			set(status.SentinelQuorumHealthy, status.False, "QuorumAboveSentinels",
				registration.QuorumWarning(in.MonitorName, in.Quorum, len(si.Hosts))+"; lower sentinel.quorum")
		case q.OK:
			set(status.SentinelQuorumHealthy, status.True, "QuorumOK", q.Message)
		default:
			set(status.SentinelQuorumHealthy, status.False, "NoQuorum", q.Message)
		}
	}
	// serving and converged are separate signals: AccessConverged never feeds Ready (seed 003)
	st.DesiredAccess, st.AppliedAccess = access.desired, access.applied
	if access.converged {
		set(status.AccessConverged, status.True, "Applied", access.message)
	} else {
		set(status.AccessConverged, status.False, "Pending", access.message)
	}
	ready := primaryOK && replOK && monitoredOK
	if ready {
		set(status.Ready, status.True, "Ready", "primary elected, replicas in sync, monitored as requested")
		st.EverReady = true
	} else {
		set(status.Ready, status.False, "NotReady", firstFalse(st.Conditions))
	}
	rc, _ := status.Get(st.Conditions, status.Ready)
	st.State = status.DeriveState(rc, st.EverReady, now)
	st.Message = rc.Message

	// time to ready: "pending" is written first; the sample is observed when it is replaced by a duration
	ann := map[string]string{}
	switch prevAnn {
	case "":
		ann[annTimeToReady] = "pending"
	case "pending":
		if ready {
			d := now.Sub(descCM.CreationTimestamp.Time)
			ann[annTimeToReady] = strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
			if err := c.putStatus(ctx, descCM, in.Name, st, ann); err != nil {
				return err
			}
			c.metrics.TimeToReady.WithLabelValues(in.Engine).Observe(d.Seconds())
			c.recorder.Eventf(descCM, corev1.EventTypeNormal, "Ready", "instance ready %.1fs after creation", d.Seconds())
			return nil
		}
	}
	mem := c.memory(in.Name)
	print := materialPrint(st)
	if len(ann) == 0 && print == mem.statusPrint && now.Sub(mem.statusWritten) < statusRefresh {
		return nil
	}
	if err := c.putStatus(ctx, descCM, in.Name, st, ann); err != nil {
		return err
	}
	mem.statusPrint, mem.statusWritten = print, now
	return nil
}

// statusRefresh bounds how stale observedAt and offsets in the status may get when nothing else changes.
const statusRefresh = 30 * time.Second

// materialPrint is the status without what changes on every pass (timestamps, offsets, lag).
func materialPrint(st status.Instance) string {
	st.ObservedAt = time.Time{}
	nodes := make([]status.NodeStatus, len(st.Nodes))
	for i, n := range st.Nodes {
		n.Offset, n.LagBytes = 0, 0
		nodes[i] = n
	}
	st.Nodes = nodes
	b, _ := json.Marshal(st)
	return string(b)
}

const annTimeToReady = "valkey.io/time-to-ready"

func firstFalse(conds []status.Condition) string {
	for _, c := range conds {
		if c.Type != status.Ready && c.Status == status.False {
			return c.Type + ": " + c.Message
		}
	}
	return ""
}

func (c *InstanceController) ckquorum(ctx context.Context, in spec.Instance, si spec.SentinelInfo) valkey.Quorum {
	for _, addr := range si.Addrs() {
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, in, si))
		if err != nil {
			continue
		}
		q, err := cl.SentinelCKQuorum(ctx, in.MonitorName)
		if err != nil {
			continue
		}
		return q
	}
	return valkey.Quorum{Message: "no Sentinel answered CKQUORUM"}
}

func (c *InstanceController) readStatus(in spec.Instance) (status.Instance, string) {
	var st status.Instance
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(in.Name + "-status")
	if err != nil {
		return st, ""
	}
	_ = json.Unmarshal([]byte(cm.Data[spec.StatusKey]), &st)
	return st, cm.Annotations[annTimeToReady]
}

func (c *InstanceController) putStatus(ctx context.Context, descCM *corev1.ConfigMap, name string, st status.Instance, ann map[string]string) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-status", Namespace: descCM.Namespace,
			Labels: map[string]string{spec.LabelPartOf: spec.PartOfValue, spec.LabelComponent: spec.ComponentStatus,
				spec.LabelInstance: name, "app.kubernetes.io/managed-by": "valkey-sentinel-ctl"},
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(descCM)}},
		Data: map[string]string{spec.StatusKey: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
}
