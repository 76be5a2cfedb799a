// Package controller runs the two controllers of valkey-sentinel-ctl (docs/design.md). Each pass of either
// one gathers a complete World (gather*.go: informer caches, INFO on every node, each Sentinel's view once),
// hands it to a pure planner that returns at most one disruptive step (internal/plan, which owns the
// precedence and calls internal/topology, internal/roll and internal/registration), lets the policy vet that
// step (plan.Check, plan.CheckQuorum), applies what is left through a thin executor (apply*.go) and writes a
// status document built by a pure function (plan.InstanceStatus, plan.QuorumStatus).
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/contract"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/backup"
	"github.com/valkey-ha/valkey-ha/internal/handoff"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/migrate"
	"github.com/valkey-ha/valkey-ha/internal/nscache"
	"github.com/valkey-ha/valkey-ha/internal/plan"
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
	// Fleet: more namespaces, and the shared mode (fleet.go, docs/fleet.md).
	Fleet FleetOptions
	// Workers caps the parallel passes (0: one lane per instance; see lanes).
	Workers int
	// ObserveTimeout bounds one instance's gather (default 10 s).
	ObserveTimeout time.Duration
	// Migrate, when set, runs a migration from a primary outside the chart (migrate.go).
	Migrate *MigrateOptions
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
	// keepDemotedClients is a test knob, set only by this package's tests: the controller's repair and
	// relabel do not close a demoted node's connections (the "labels only" baseline of the held-clients
	// figure, TestHeldClientsFigure)
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
	aclUsers                 []acl.DesiredUser
	aclRefused               string // the users acl.SplitUsers refused, as refusedSentence says it
	aclReadAt                time.Time
	aclApplied               map[string]aclApplied
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
	// reclose holds, per node index, until when a node whose primary label this controller removed has its
	// application connections closed again at every pass (planReclose)
	reclose map[int]time.Time
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
		state: map[types.NamespacedName]*instanceMemory{},
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
	c.reclose(ctx, desc, w, d.Topology, mem)
	out, applyErr := c.apply(ctx, desc, w, &d, mem)
	var res Result
	if len(mem.reclose) > 0 {
		res.RequeueAfter = recloseEvery // a reclose window is open (label, reclose)
	}
	// one disruptive step per pass, then observe again at once (the same key: never a second, concurrent pass)
	res.Requeue = out.LastAction != ""
	c.report(desc, w, d, mem)
	mem.plan = d.Memory
	if !c.opts.NoSubscribe {
		c.ensureSubscription(ctx, key, in, w.SentinelInfo, mem)
	}
	c.metrics.ObserveInstance(key.String(), plan.InstanceGauges(w, d))
	c.observeBackups(ctx, in, mem)
	out.Access = c.syncAccess(ctx, desc, w, mem)
	if err := c.writeStatus(ctx, desc, w, d, out, mem); err != nil {
		return res, err
	}
	if applyErr != nil {
		return res, applyErr
	}
	return res.resync(c.opts.Resync), nil
}

// The instance controller's gather (docs/design.md, "Gather, plan, apply"): everything one pass decides from, read once
// (pods, StatefulSets and ConfigMaps from the informer caches; INFO replication from every running node and
// each Sentinel's SENTINEL MASTER + REPLICAS in one pipeline, all at once; CKQUORUM from one Sentinel). A part
// that cannot be read is recorded with its error; only a missing credential fails the pass (then nothing can
// be observed).

var (
	// errGone: the descriptor no longer exists (the instance was uninstalled).
	errGone = errors.New("descriptor gone")
	// errInvalid: the descriptor was refused (reported on it and in the status).
	errInvalid = errors.New("descriptor refused")
	// errSuperseded: a +switch-master arrived while the gather still waited for a node (issue 30); the pass
	// decides nothing from the pre-switch observation and the next pass starts at once.
	errSuperseded = errors.New("observation superseded by +switch-master")
)

// descriptor reads and checks the descriptor <name>-instance of the instance of key. A refused one is
// reported (Event, Failed status) and returned with errInvalid.
func (c *InstanceController) descriptor(ctx context.Context, key types.NamespacedName) (*corev1.ConfigMap, spec.Instance, error) {
	name := key.Name
	desc, err := c.cms.ConfigMaps(key.Namespace).Get(contract.Descriptor(name))
	if apierrors.IsNotFound(err) {
		return nil, spec.Instance{}, errGone
	}
	if err != nil {
		return nil, spec.Instance{}, fmt.Errorf("get descriptor %s: %w", contract.Descriptor(name), err)
	}
	in, err := spec.ParseInstance([]byte(desc.Data[contract.KeyInstance]))
	if err == nil {
		err = in.CheckCanonical(desc.Name, desc.Namespace, c.opts.ClusterDomain)
	}
	if err != nil {
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "InvalidDescriptor", "%v", err)
		c.writeInvalid(ctx, desc, name, err)
		return desc, in, errInvalid
	}
	return desc, in, nil
}

// gather builds the World of one pass.
func (c *InstanceController) gather(ctx context.Context, in spec.Instance, mem *instanceMemory) (plan.World, error) {
	w := plan.World{Instance: in, Now: time.Now(), Quorum: valkey.Quorum{Message: "not monitored"}}
	pw, err := c.operatorPassword(ctx, in, mem)
	if err != nil {
		return w, err
	}
	opts := valkey.Options{Username: acl.Operator, Password: pw, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
	switched := mem.switchSignal()
	w.Nodes = make([]plan.Node, len(in.Nodes))
	answered := make([]bool, len(in.Nodes)) // w.Nodes[i] holds its INFO answer (or why there is none)
	type reply struct {
		i    int
		repl valkey.Replication
		err  error
	}
	replies := make(chan reply, len(in.Nodes)) // buffered: a node given up on still reports, to nobody
	nctx, cancelNodes := context.WithCancel(ctx)
	defer cancelNodes()
	waiting := 0
	for i, n := range in.Nodes {
		nw := &w.Nodes[i]
		nw.Node = n
		running, err := c.gatherPod(in.Namespace, nw)
		if err != nil {
			return w, err
		}
		if !running {
			answered[i] = true
			continue
		}
		waiting++
		go func() {
			addr := in.Addr(n)
			var r valkey.Replication
			var err error
			// twice when the pooled connection turns out closed by the server: Sentinel closes every normal
			// connection of a node it promotes or reconfigures (CLIENT KILL TYPE normal), and the new
			// primary's answer is what the pass waits for (issue 30)
			for try := 0; try < 2; try++ {
				var cl *valkey.Client
				if cl, err = c.pool.get(nctx, addr, opts); err == nil {
					if r, err = cl.InfoReplication(nctx); err != nil {
						c.pool.drop(addr)
					}
				}
				if !closedByServer(err) {
					break
				}
			}
			replies <- reply{i, r, err}
		}()
	}
	if in.Monitored() {
		w.SentinelInfo, w.SentinelInfoErr = c.sentinelInfo(in)
		w.NamedQuorum = c.namedQuorum(in)
	}
	if w.SentinelInfo != nil {
		c.gatherSentinels(ctx, &w)
	}
	// wait for every node's INFO, except (issue 30): once the Sentinels' agreed primary answered as master
	// (plan.PrimaryAnswered), a node still silent stragglerGrace later is recorded as not answering (a paused
	// old primary would hold the new one's relabel for the whole command timeout); and a +switch-master
	// arriving while a node is still silent abandons the pass (errSuperseded: the next one starts at once,
	// from the new topology). A node given up on has its pooled connection closed (in the background: its
	// command may be stuck).
	giveUp := func(why string) {
		for i := range w.Nodes {
			if !answered[i] {
				w.Nodes[i].Err = why
				c.pool.abandon(in.Addr(w.Nodes[i].Node))
			}
		}
	}
	var grace <-chan time.Time
	for ; waiting > 0; waiting-- {
		if grace == nil && plan.PrimaryAnswered(w, answered) {
			grace = time.After(stragglerGrace)
		}
		select {
		case r := <-replies:
			nw := &w.Nodes[r.i]
			if r.err != nil {
				nw.Err = r.err.Error()
			} else {
				nw.Repl, nw.Reachable = r.repl, true
			}
			answered[r.i] = true
		case <-grace:
			giveUp(fmt.Sprintf("no answer to INFO replication within %s of the Sentinels' primary's", stragglerGrace))
			return w, nil
		case <-switched:
			giveUp("+switch-master arrived before its INFO replication answered")
			return w, errSuperseded
		}
	}
	return w, nil
}

// closedByServer reports an error of a connection the server closed (EOF, reset): a pooled connection
// killed since its last use, worth one fresh dial.
func closedByServer(err error) bool {
	return err != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed))
}

// stragglerGrace is how long a pass waits for a node's INFO once the Sentinels' agreed primary has answered
// as master (plan.PrimaryAnswered): a healthy node answers within milliseconds, a paused or partitioned one
// only at the command timeout.
const stragglerGrace = 250 * time.Millisecond

// gatherPod fills a node's pod and StatefulSet from the caches and reports whether its server may be asked
// (the pod exists, runs and is not being deleted).
func (c *InstanceController) gatherPod(ns string, nw *plan.Node) (bool, error) {
	if sts, err := c.stss.StatefulSets(ns).Get(nw.Node.StatefulSet); err == nil {
		s := &plan.StatefulSet{Name: sts.Name, Generation: sts.Generation, ObservedGeneration: sts.Status.ObservedGeneration,
			UpdateRevision: sts.Status.UpdateRevision}
		s.ReleaseRevision, s.HasReleaseRevision = sts.Annotations[contract.AnnotationReleaseRevision]
		for _, v := range sts.Spec.VolumeClaimTemplates {
			if v.Name == contract.DataClaim {
				q := v.Spec.Resources.Requests[corev1.ResourceStorage]
				s.Claims = &spec.Claims{Size: q.String(), StorageClass: ptr.Deref(v.Spec.StorageClassName, "")}
			}
		}
		nw.StatefulSet = s
	}
	pod, err := c.pods.Pods(ns).Get(nw.Node.Pod)
	switch {
	case apierrors.IsNotFound(err):
		nw.Err = "pod missing"
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get pod %s: %w", nw.Node.Pod, err)
	}
	nw.PodExists = true
	nw.PodUID, nw.PodVersion = string(pod.UID), pod.ResourceVersion
	nw.PodReady = kube.PodReady(pod)
	nw.RoleLabel = pod.Labels[contract.LabelRole]
	nw.Revision = pod.Labels[revisionLabel]
	restarts := int32(0)
	for _, s := range pod.Status.ContainerStatuses {
		restarts += s.RestartCount
	}
	nw.Identity = fmt.Sprintf("%s/%d", pod.UID, restarts)
	nw.StartRefused = startRefused(pod)
	// a pod being deleted is still observed until its deletion deadline (its preStop hook may be handing
	// the primary role off: topology treats it as handing off, issue 14)
	nw.Terminating = pod.DeletionTimestamp != nil && time.Now().Before(pod.DeletionTimestamp.Time)
	if pod.DeletionTimestamp != nil && !nw.Terminating || pod.Status.Phase != corev1.PodRunning {
		nw.Err = "pod not running"
		return false, nil
	}
	return true, nil
}

// startRefused returns the reason a container of pod last refused to start with the values (its termination
// message after contract.StartRefusedPrefix, current or last state), "" when none did. Init containers count
// too: the restore step (restoreFrom) refuses a corrupt or foreign backup that way.
func startRefused(pod *corev1.Pod) string {
	for _, s := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		for _, t := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
			if t != nil && strings.HasPrefix(t.Message, contract.StartRefusedPrefix) {
				return strings.TrimSpace(strings.TrimPrefix(t.Message, contract.StartRefusedPrefix))
			}
		}
	}
	return ""
}

// sentinelInfo reads <F>-sentinels: nil and "" when none is published, nil and the reason when it is
// published but unusable (it does not parse, or names another monitor).
func (c *InstanceController) sentinelInfo(in spec.Instance) (*spec.SentinelInfo, string) {
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(contract.SentinelInfo(in.Name))
	if apierrors.IsNotFound(err) {
		return nil, ""
	}
	if err != nil {
		return nil, err.Error()
	}
	si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
	switch {
	case err != nil:
		return nil, err.Error()
	case si.MonitorName != in.MonitorName:
		return nil, fmt.Sprintf("%s names monitor %q, the descriptor %q", cm.Name, si.MonitorName, in.MonitorName)
	}
	return &si, ""
}

// gatherSentinels asks every Sentinel, at once, SENTINEL MASTER and SENTINEL REPLICAS in one pipeline, the
// first one CKQUORUM too; when the first does not answer CKQUORUM, the next ones are asked in turn.
func (c *InstanceController) gatherSentinels(ctx context.Context, w *plan.World) {
	si, name := *w.SentinelInfo, w.Instance.MonitorName
	addrs := si.Addrs()
	w.Sentinels = make([]plan.Sentinel, len(addrs))
	quorums := make([]*valkey.Quorum, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		s := &w.Sentinels[i]
		s.Addr = addr
		wg.Go(func() {
			cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, w.Instance, si))
			var v valkey.MonitorView
			if err == nil {
				v, err = cl.SentinelMonitorView(ctx, name, i == 0)
				if err != nil {
					c.pool.drop(addr)
				}
			}
			if err != nil {
				s.Err = err.Error()
				return
			}
			s.Found, s.Monitor, s.Replicas = v.Found, v.Monitor, v.Replicas
			if v.ReplicasErr != nil {
				s.ReplicasErr = v.ReplicasErr.Error()
			}
			if v.QuorumAsked && v.QuorumErr == nil {
				quorums[i] = &v.Quorum
			}
		})
	}
	wg.Wait()
	if quorums[0] != nil {
		w.Quorum, w.QuorumAsked = *quorums[0], true
		return
	}
	w.Quorum = valkey.Quorum{Message: "no Sentinel answered CKQUORUM"}
	for i, addr := range addrs[1:] {
		if !w.Sentinels[i+1].Answered() {
			continue
		}
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, w.Instance, si))
		if err != nil {
			continue
		}
		if q, err := cl.SentinelCKQuorum(ctx, name); err == nil {
			w.Quorum, w.QuorumAsked = q, true
			return
		}
	}
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

// The instance controller's applier (docs/design.md, "Gather, plan, apply"): it executes a Decision as planned and
// decides nothing. A repair runs before the role labels, a roll step or a SENTINEL RESET after them (and
// only when they were applied). Writes carry what was observed as preconditions (a label patch the pod's
// resourceVersion, a pod delete its UID and resourceVersion), so a step decided from a stale cache fails with
// a Conflict instead of hitting a replaced pod.

// handoffBackoff is how long a failed primary handoff waits before it is tried again (a handoff refused
// because no replica can be promoted waits for the observation to change instead).
const handoffBackoff = time.Minute

const revisionLabel = contract.LabelRevision

// rollNoPromotable is the roll's wait reason that gets a HandoffImpossible Event.
const rollNoPromotable = roll.NoPromotableReplica

// apply executes d; it may update d.Memory (a failed handoff backs off). It returns what it did.
func (c *InstanceController) apply(ctx context.Context, desc *corev1.ConfigMap, w plan.World, d *plan.Decision, mem *instanceMemory) (plan.Outcome, error) {
	var out plan.Outcome
	in := w.Instance
	if d.Step != nil && d.Repair {
		if err := c.repair(ctx, desc, in, *d.Step, mem); err != nil {
			return out, err
		}
		out.LastAction = d.Step.String()
	}
	for _, a := range d.Labels() {
		if err := c.label(ctx, desc, in, w, d.Topology, a, mem); err != nil {
			return out, err
		}
	}
	if d.Step == nil || d.Repair {
		return out, nil
	}
	var err error
	switch s := *d.Step; s.Kind {
	case plan.DeletePod:
		out.LastAction, err = c.deletePod(ctx, desc, in, w, s)
	case plan.HandOff:
		out.LastAction, err = c.handOff(ctx, desc, in, w, d, s, mem)
	case plan.Reset:
		out.LastAction, err = c.reset(ctx, desc, in, w, s)
	}
	return out, err
}

// label sets one pod's valkey.io/role as observed (its resourceVersion as precondition).
func (c *InstanceController) label(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, tp topology.Plan,
	a topology.Action, mem *instanceMemory) error {
	if err := kube.PatchPodRole(ctx, c.cs, in.Namespace, a.Node.Pod, w.Node(a.Node.Index).PodVersion, a.Role); err != nil {
		return err
	}
	c.metrics.LabelPatches.WithLabelValues(in.NamespacedName().String()).Inc()
	c.log.Info("role label", "instance", in.Name, "pod", a.Node.Pod, "role", a.Role, "reason", a.Reason)
	if closeOnRelabel(w.Node(a.Node.Index).NodeState, a, tp) {
		// the primary Service no longer selects it: connections that came back to it between its demotion and
		// this patch (a handoff closes them at the demotion), or that a stale primary still serves, now
		// reconnect to the real primary
		c.closeClients(ctx, desc, in, mem, a.Node, "primary label removed")
		if mem.reclose == nil {
			mem.reclose = map[int]time.Time{}
		}
		mem.reclose[a.Node.Index] = time.Now().Add(recloseWindow)
	}
	return nil
}

const (
	// recloseWindow is how long after the primary label left a node its application connections are closed
	// again at every pass: the primary Service's routing lags the label (EndpointSlice, then kube-proxy: 1-2 s
	// measured on the local cluster, BENCHMARKS.md issue 30), and a client that reconnected meanwhile landed on
	// the old node again. Longer would also keep closing the readers the replica Service sends there.
	recloseWindow = 3 * time.Second
	// recloseEvery is the pass interval while a reclose window is open (the resync is 2 s by default).
	recloseEvery = 500 * time.Millisecond
)

// planReclose returns the node indexes whose application connections are closed again this pass, and the
// windows still open after it (nil when none): a node in an open window (until after now) that is reachable,
// not labelled primary and not the topology's primary, and that reports role replica, or role master while
// another node is the confirmed primary (closeOnRelabel's rule). A node that became the primary again, or
// whose window passed, leaves the memory.
func planReclose(w plan.World, tp topology.Plan, until map[int]time.Time, now time.Time) (closeNow []int, open map[int]time.Time) {
	for i, t := range until {
		if !now.Before(t) || (tp.Primary != nil && tp.Primary.Index == i) {
			continue
		}
		n := w.Node(i).NodeState
		if n.RoleLabel == contract.RolePrimary {
			continue
		}
		if open == nil {
			open = map[int]time.Time{}
		}
		open[i] = t
		if !n.Reachable {
			continue
		}
		if n.Repl.Role == valkey.RoleReplica || (n.Repl.Role == valkey.RolePrimary && tp.Primary != nil && tp.PrimaryConfirmed) {
			closeNow = append(closeNow, i)
		}
	}
	slices.Sort(closeNow)
	return closeNow, open
}

// reclose closes again the application connections of the nodes planReclose names (closeClients).
func (c *InstanceController) reclose(ctx context.Context, desc *corev1.ConfigMap, w plan.World, tp topology.Plan, mem *instanceMemory) {
	if len(mem.reclose) == 0 {
		return
	}
	closeNow, open := planReclose(w, tp, mem.reclose, time.Now())
	for _, i := range closeNow {
		c.closeClients(ctx, desc, w.Instance, mem, w.Node(i).Node, "primary label removed recently: the Service's routing may still send clients there")
	}
	mem.reclose = open
}

// closeOnRelabel reports whether the label change a, planned in tp, takes the primary label off a node whose
// application connections must then be closed: the node was labelled primary and is reachable, and it either
// reports role replica (it was demoted), or still reports role master while tp's confirmed primary is another
// node (a stale primary that Sentinel demotes at its next INFO, up to about a second later: every write it
// acknowledges meanwhile is lost, so its clients are better sent to the real primary at once).
func closeOnRelabel(n topology.NodeState, a topology.Action, tp topology.Plan) bool {
	if a.Kind != topology.Label || a.Role == contract.RolePrimary || n.RoleLabel != contract.RolePrimary || !n.Reachable {
		return false
	}
	switch n.Repl.Role {
	case valkey.RoleReplica:
		return true
	case valkey.RolePrimary:
		return tp.Primary != nil && tp.PrimaryConfirmed && tp.Primary.Index != n.Node.Index
	}
	return false
}

// closeClients closes the application connections of a node observed as a replica (handoff.CloseClients)
// so that clients of the primary Service reconnect to the new primary instead of getting READONLY. A failure
// is an Event (DemotedClientsNotClosed) and a metric, never an error of the pass: it is bounded by
// handoff.CloseTimeout.
func (c *InstanceController) closeClients(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, mem *instanceMemory,
	n spec.Node, why string) {
	if c.keepDemotedClients {
		return
	}
	addr := in.Addr(n)
	key := in.NamespacedName().String()
	cctx, cancel := context.WithTimeout(ctx, handoff.CloseTimeout)
	defer cancel()
	cl, err := c.pool.get(cctx, addr, c.opOptions(in, mem))
	closed := handoff.Closed{Err: err}
	if err == nil {
		closed = handoff.CloseClients(cctx, cl)
	}
	if closed.Err != nil {
		c.pool.drop(addr)
		c.metrics.DemotedClientsNotClosed.WithLabelValues(key).Inc()
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "DemotedClientsNotClosed",
			"%s (%s): could not close its application connections; they get READONLY until they reconnect: %v", n.Pod, why, closed.Err)
		c.log.Warn("could not close a demoted node's client connections", "instance", in.Name, "pod", n.Pod, "why", why, "err", closed.Err)
		return
	}
	c.metrics.DemotedClientsClosed.WithLabelValues(key).Add(float64(closed.Conns))
	if closed.Conns > 0 {
		c.log.Info("closed a demoted node's client connections", "instance", in.Name, "pod", n.Pod, "why", why,
			"connections", closed.Conns, "users", closed.Users)
	}
}

// repair runs REPLICAOF <target> (Repoint) or REPLICAOF NO ONE (Promote) and persists it (CONFIG REWRITE).
func (c *InstanceController) repair(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, s plan.Step, mem *instanceMemory) error {
	addr := in.Addr(s.Node)
	cl, err := c.pool.get(ctx, addr, c.opOptions(in, mem))
	if err != nil {
		return err
	}
	if s.Kind == plan.Repoint {
		err = cl.ReplicaOf(ctx, s.Target.Host, in.PortOf(s.Target))
	} else {
		err = cl.PromoteToPrimary(ctx)
	}
	if err != nil {
		c.pool.drop(addr)
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "RepairFailed", "%s: %v", s, err)
		return err
	}
	if err := cl.ConfigRewrite(ctx); err != nil {
		c.log.Warn("CONFIG REWRITE after repair failed", "node", s.Node.Pod, "error", err)
	}
	if s.Kind == plan.Repoint {
		// a stale primary made a replica: its clients (by a cached address or through the Service before the
		// labels changed) reconnect instead of getting READONLY
		c.closeClients(ctx, desc, in, mem, s.Node, "repointed")
	}
	c.metrics.Repairs.WithLabelValues(in.NamespacedName().String(), string(s.Kind)).Inc()
	c.recorder.Eventf(desc, corev1.EventTypeNormal, "Repaired", "%s", s)
	c.log.Info("repair", "instance", in.Name, "action", s.String())
	return nil
}

// deletePod replaces a stale data pod: deleted only as observed (UID and resourceVersion as preconditions).
func (c *InstanceController) deletePod(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, s plan.Step) (string, error) {
	seen := w.Node(s.Node.Index)
	if err := kube.DeletePod(ctx, c.cs, in.Namespace, s.Node.Pod, types.UID(seen.PodUID), seen.PodVersion); err != nil {
		return "", fmt.Errorf("roll: %w", err)
	}
	c.pool.drop(in.Addr(s.Node))
	c.recorder.Eventf(desc, corev1.EventTypeNormal, "RollingPod", "replaced %s: %s", s.Node.Pod, s.Reason)
	c.log.Info("roll: deleted pod", "instance", in.Name, "pod", s.Node.Pod, "reason", s.Reason)
	return "roll: replaced " + s.Node.Pod, nil
}

// handOff hands the primary off s.Node with internal/handoff: SENTINEL FAILOVER asked of the Sentinels in
// planFailoverOrder when monitored, FAILOVER TO s.Target otherwise. A failure backs the roll off (d.Memory):
// for a minute, or, when no replica could be promoted, until the view of the replicas changes.
func (c *InstanceController) handOff(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, d *plan.Decision,
	s plan.Step, mem *instanceMemory) (string, error) {
	cfg := handoff.Config{Primary: in.Addr(s.Node), NodeOptions: c.opOptions(in, mem), Nodes: in.NodeAddrs(),
		Log: c.log.With("instance", in.Name, "pod", s.Node.Pod)}
	if si := w.SentinelInfo; si != nil && in.Monitored() {
		cfg.MonitorName, cfg.Sentinels, cfg.SentinelOptions = in.MonitorName, planFailoverOrder(si.Addrs()), c.sentinelOpts(ctx, in, *si)
	} else {
		cfg.Target = in.Addr(s.Target)
	}
	// the handoff dials its own connections; the pooled one to the old primary is stale afterwards
	defer c.pool.drop(cfg.Primary)
	res, err := handoff.Run(ctx, cfg)
	c.metrics.DemotedClientsClosed.WithLabelValues(in.NamespacedName().String()).Add(float64(res.Clients.Conns))
	if res.Clients.Err != nil {
		c.metrics.DemotedClientsNotClosed.WithLabelValues(in.NamespacedName().String()).Inc()
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "DemotedClientsNotClosed",
			"%s (handed off): could not close its application connections; they get READONLY until they reconnect: %v", s.Node.Pod, res.Clients.Err)
	}
	if err != nil {
		switch handoff.ReasonOf(err) {
		case handoff.ReasonNoGoodReplica:
			// not retried until the observation changes (the print of this pass)
			d.Memory.HandoffRefused = plan.HandoffRefusal{Print: d.HandoffPrint, Why: "handoff refused: " + err.Error()}
		case handoff.ReasonFailoverInFlight:
			// look again next pass: the planner holds still while a failover runs
		default:
			d.Memory.HandoffDeferredUntil = time.Now().Add(handoffBackoff)
		}
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "RollDeferred", "primary handoff from %s deferred: %v", s.Node.Pod, err)
		return "", err
	}
	how := fmt.Sprintf("writes paused %s", res.Paused.Round(time.Millisecond))
	if res.DemotedEarly {
		how += ", demoted before the promotion completed (the pause budget ran out)"
	}
	c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryHandedOff", "primary moved off %s to %s before its replacement (%s)", s.Node.Pod, res.NewPrimary, how)
	return "roll: handed the primary off " + s.Node.Pod, nil
}

// planFailoverOrder returns the Sentinel addresses in the order a planned SENTINEL FAILOVER tries them: last
// first. The Sentinel that leads a failover publishes +switch-master only once every other replica reports
// it replicates from the promoted one (its next 1 s INFO, so about 1 s later), while the other Sentinels
// publish it as soon as the leader's hello reaches them, right after the promotion (Sentinel docs, "Pub/Sub
// messages" and "Configuration propagation"). Clients commonly list Sentinels in ordinal order and
// subscribe to the first one that answers, so asking the last one lets most clients hear of the switch
// about 1 s sooner. The input is not modified.
func planFailoverOrder(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for i := len(addrs) - 1; i >= 0; i-- {
		out = append(out, addrs[i])
	}
	return out
}

// reset sends SENTINEL RESET <monitor> to one Sentinel, as acl.SentinelController (resetClient).
func (c *InstanceController) reset(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, s plan.Step) (string, error) {
	cl, err := c.resetClient(ctx, desc, in, *w.SentinelInfo, s.Sentinel)
	if err != nil {
		return "", err
	}
	if _, err := cl.SentinelReset(ctx, in.MonitorName); err != nil {
		return "", err
	}
	c.recorder.Eventf(desc, corev1.EventTypeNormal, "SentinelReset", "SENTINEL RESET %s on %s: it listed a replica that is gone (%s)",
		in.MonitorName, s.Sentinel, strings.Join(s.For, ", "))
	c.log.Info("SENTINEL RESET after scale-in", "instance", in.Name, "sentinel", s.Sentinel, "gone", s.For)
	return "SENTINEL RESET on " + s.Sentinel, nil
}

// resetClient is the client for SENTINEL RESET on the Sentinel at addr: the quorum's acl.SentinelController user
// (Secret <S>-auth-controller), the only one that may RESET. Until the quorum has been upgraded to the version
// that has that user (its Secret does not exist yet, or this Sentinel has not restarted with it and answers
// WRONGPASS), it falls back to acl.SentinelInstance, which may RESET on such a Sentinel and gets NOPERM on an
// upgraded one; the fallback is logged and reported (Event SentinelResetUserFallback) once per change of reason,
// and its end is logged.
func (c *InstanceController) resetClient(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, si spec.SentinelInfo,
	addr string) (*valkey.Client, error) {
	o := c.sentinelOpts(ctx, in, si)
	user, pw, why := c.sentinelAuth.credentialOf(ctx, c.cs, c.log, in, si, c.opts.ClusterDomain, acl.SentinelController)
	if pw != "" {
		co := o
		co.Username, co.Password = user, pw
		cl, err := c.pool.get(ctx, addr, co)
		if err == nil {
			if c.resetFallback.set(in.NamespacedName().String(), "") {
				c.log.Info("SENTINEL RESET as the controllers' user again", "instance", in.Name, "user", user, "sentinel", addr)
			}
			return cl, nil
		}
		if !valkey.IsWrongPass(err) {
			return nil, err
		}
		why = "a Sentinel refused " + user + " (WRONGPASS: it has not restarted since the quorum's upgrade)"
	}
	if o.Username == "" {
		return c.pool.get(ctx, addr, o) // no Sentinel credentials at all (auth off, or not the descriptor's quorum)
	}
	if c.resetFallback.set(in.NamespacedName().String(), why) {
		msg := fmt.Sprintf("SENTINEL RESET as %s, not %s: %s; the quorum's chart upgrade adds that user (its Sentinels restart with it)",
			o.Username, acl.SentinelController, why)
		c.log.Warn("SENTINEL RESET falls back to the instance user", "instance", in.Name, "sentinel", addr, "reason", why)
		c.recorder.Event(desc, corev1.EventTypeWarning, "SentinelResetUserFallback", msg)
	}
	return c.pool.get(ctx, addr, o)
}

// fallbackMemory remembers, per instance (namespace/name, the queue key), why the last SENTINEL RESET could not use acl.SentinelController
// ("" while it could). Unlike reportOnce it is not swept per pass: RESETs are passes apart.
type fallbackMemory struct {
	mu  sync.Mutex
	why map[string]string
}

// set records why for instance and reports whether it changed.
func (f *fallbackMemory) set(instance, why string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why == nil {
		f.why = map[string]string{}
	}
	prev := f.why[instance]
	if why == "" {
		delete(f.why, instance)
	} else {
		f.why[instance] = why
	}
	return prev != why
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

// report sends the Events of conditions that last many passes once per change of reason (the policy's
// refusal, no promotable replica, unknown descriptor fields, a primary handing off in its preStop hook) and
// the one-off PrimaryChanged.
func (c *InstanceController) report(desc *corev1.ConfigMap, w plan.World, d plan.Decision, mem *instanceMemory) {
	name := w.Instance.NamespacedName().String() // the keys of reportOnce: unique across namespaces
	for _, n := range w.Nodes {
		if n.StartRefused != "" && c.reported.changed(name+"/start/"+n.Node.Pod, n.StartRefused) {
			c.recorder.Eventf(desc, corev1.EventTypeWarning, "StartRefused", "%s: %s", n.Node.Pod, n.StartRefused)
		}
	}
	for _, why := range plan.ClaimsDiffer(w) {
		if c.reported.changed(name+"/claims/"+why, why) {
			c.recorder.Event(desc, corev1.EventTypeWarning, "ClaimsDiffer", why)
		}
	}
	c.reportMismatches(desc, w, name)
	if len(w.Instance.Unknown) > 0 {
		msg := "descriptor fields this controller does not know (ignored): " + strings.Join(w.Instance.Unknown, ", ")
		if c.reported.changed(name+"/unknown", msg) {
			c.recorder.Event(desc, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
		}
	}
	if h := d.Topology.HandingOff; h != nil && c.reported.changed(name+"/handing-off/"+h.Pod, w.Node(h.Index).PodUID) {
		if why := handoffObstacle(w, *h); why != "" {
			c.metrics.HandoffUnavailable.WithLabelValues(name).Inc()
			// the hook's own reason is in the pod's log only (the kubelet's FailedPreStopHook Event carries
			// no hook output), so say here what stops it
			c.recorder.Eventf(desc, corev1.EventTypeWarning, "HandoffUnavailable",
				"primary pod %s is terminating but its preStop hook cannot hand off: %s; Sentinel fails over once it sees the primary down (down-after-milliseconds)", h.Pod, why)
		} else {
			c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryHandingOff",
				"primary pod %s is terminating: its preStop hook hands the primary role off; no repair or planned handoff until it is done", h.Pod)
		}
	}
	if d.Refused != "" && c.reported.changed(name+"/refused", d.Refused) {
		c.recorder.Event(desc, corev1.EventTypeWarning, "StepRefused", d.Refused)
		c.log.Info("policy refused a step", "instance", name, "reason", d.Refused)
	}
	if d.Roll == rollNoPromotable && c.reported.changed(name+"/nopromote", d.Roll) {
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "HandoffImpossible", "%s", d.Roll)
	}
	if p := d.Memory.LastPrimaryPod; p != "" && mem.plan.LastPrimaryPod != "" && p != mem.plan.LastPrimaryPod {
		c.metrics.FailoversObserved.WithLabelValues(name).Inc()
		c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryChanged", "primary moved from %s to %s", mem.plan.LastPrimaryPod, p)
	}
}

// statusRefresh bounds how stale observedAt and offsets in the status may get when nothing else changes.
const statusRefresh = 30 * time.Second

const annTimeToReady = contract.AnnotationTimeToReady

// writeStatus writes <F>-status (owned by the descriptor, so it goes away on uninstall) from
// plan.InstanceStatus, when it changed materially or statusRefresh passed. It also records time-to-ready
// exactly once per instance, with the once-only state kept in an annotation on the status ConfigMap (seed
// 003, "Measuring time-to-ready"): "pending" is written first, the sample is observed when it is replaced by
// a duration.
func (c *InstanceController) writeStatus(ctx context.Context, desc *corev1.ConfigMap, w plan.World, d plan.Decision, out plan.Outcome, mem *instanceMemory) error {
	prev, prevAnn := c.readStatus(w.Instance)
	st := plan.InstanceStatus(w, d, out, prev, c.opts.Version)
	st.Migration = mem.migration
	st.LastBackup = backupStatus(mem.lastBackup)
	ann := map[string]string{}
	switch prevAnn {
	case "":
		ann[annTimeToReady] = "pending"
	case "pending":
		if rc, _ := status.Get(st.Conditions, status.Ready); rc.Status == status.True {
			dur := w.Now.Sub(desc.CreationTimestamp.Time)
			ann[annTimeToReady] = strconv.FormatFloat(dur.Seconds(), 'f', 1, 64)
			if err := c.putStatus(ctx, desc, w.Instance.Name, st, ann); err != nil {
				return err
			}
			c.metrics.TimeToReady.WithLabelValues(w.Instance.Engine).Observe(dur.Seconds())
			c.recorder.Eventf(desc, corev1.EventTypeNormal, "Ready", "instance ready %.1fs after creation", dur.Seconds())
			return nil
		}
	}
	print := materialPrint(st)
	if len(ann) == 0 && print == mem.statusPrint && w.Now.Sub(mem.statusWritten) < statusRefresh {
		return nil
	}
	if err := c.putStatus(ctx, desc, w.Instance.Name, st, ann); err != nil {
		return err
	}
	mem.statusPrint, mem.statusWritten = print, w.Now
	return nil
}

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

func (c *InstanceController) writeInvalid(ctx context.Context, desc *corev1.ConfigMap, name string, cause error) {
	now := time.Now()
	st := status.Instance{Name: name, State: status.StateFailed, Message: cause.Error(), ObservedAt: now}
	st.Conditions = status.SetCondition(nil, status.Condition{Type: status.Ready, Status: status.False,
		Reason: "InvalidDescriptor", Message: cause.Error()}, now)
	_ = c.putStatus(ctx, desc, name, st, nil)
}

// readStatus returns the previous status document (from the cache) and its time-to-ready annotation.
func (c *InstanceController) readStatus(in spec.Instance) (status.Instance, string) {
	var st status.Instance
	cm, err := c.cms.ConfigMaps(in.Namespace).Get(contract.Status(in.Name))
	if err != nil {
		return st, ""
	}
	_ = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st)
	return st, cm.Annotations[annTimeToReady]
}

func (c *InstanceController) putStatus(ctx context.Context, desc *corev1.ConfigMap, name string, st status.Instance, ann map[string]string) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.Status(name), Namespace: desc.Namespace,
			Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentStatus,
				contract.LabelInstance: name, contract.LabelManagedBy: contract.ManagedBy},
			Annotations:     ann,
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(desc)}},
		Data: map[string]string{contract.KeyStatus: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
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

// handoffObstacle returns why the preStop hook of the terminating primary n cannot hand off, as this pass
// observed it (the checks the hook makes, handoff.Obstacle), or "": no quorum, or the first Sentinel that
// knows the monitor sees the primary down or lists no replica it may promote while no replica reports
// itself promotable either (the hook waits for the Sentinels' view of a replica whose priority was just
// restored). Unmonitored instances: "" (FAILOVER TO needs no Sentinel).
func handoffObstacle(w plan.World, n spec.Node) string {
	if !w.Monitored() {
		return ""
	}
	if w.QuorumAsked && !w.Quorum.OK {
		return "no Sentinel quorum (" + w.Quorum.Message + ")"
	}
	for _, s := range w.Sentinels {
		if !s.Answered() || !s.Found || s.ReplicasErr != "" {
			continue
		}
		r, why := handoff.Obstacle(w.Instance.Addr(n), s.Monitor, s.Replicas)
		switch r {
		case handoff.ReasonPrimaryDown:
			return "Sentinel " + s.Addr + ": " + why
		case handoff.ReasonNoGoodReplica:
			for _, o := range w.Nodes {
				if o.Reachable && o.Repl.Role == valkey.RoleReplica && o.Repl.LinkUp && o.Repl.ReplicaPriority > 0 {
					return ""
				}
			}
			return "Sentinel " + s.Addr + ": " + why
		}
		return ""
	}
	return "no Sentinel answered"
}
