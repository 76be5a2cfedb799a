package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/contract"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/nscache"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/registration"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/status"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
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
	// identity that instances grant (sentinel_fleet.go, docs/fleet.md).
	Fleet FleetOptions
	// CopyCredential copies the quorum's _instance credential into F-quorum-auth of the instances of other
	// namespaces (sentinel_credcopy.go; the CLI sets it with --auth).
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
	// copies are the credential copies written (sentinel_credcopy.go)
	copies credentialCopies
	// rollHeldSince is when a planned Sentinel roll started waiting (zero: none waits)
	rollHeldSince time.Time
	// stuckSince is when each Sentinel monitor was first seen stuck on a stale primary
	// (registration.StuckKey -> time; registration.Stuck), kept from pass to pass
	stuckSince map[string]time.Time
	// fleet is this pass's cross-namespace bookkeeping (sentinel_fleet.go)
	fleet fleetPass
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
// controller's pass"): gather the QuorumWorld, plan (pure, the policy included), apply, write status. key is
// the quorum's (the one key of its queue; the pass serves the whole quorum whatever key it is given). It never
// touches the work queue: a served pass asks for the resync (loop.go).
func (c *SentinelController) Reconcile(ctx context.Context, _ types.NamespacedName) (Result, error) {
	w, descs, err := c.gatherQuorum(ctx)
	if err != nil {
		return Result{}, err
	}
	defer c.reported.sweep("")
	w.StuckSince = c.stuckSince
	d := plan.Quorum(w, c.rollHeldSince)
	next := map[string]time.Time{}
	for _, k := range d.Registration.Stuck {
		if since, ok := c.stuckSince[k]; ok {
			next[k] = since
		} else {
			next[k] = w.Now
		}
	}
	c.stuckSince = next
	last, errs := c.applyQuorum(ctx, w, d, descs)
	c.reportQuorum(ctx, w, d, descs)
	if d.RollPlanned && len(errs) == 0 {
		c.rollHeldSince = d.RollHeldSince
	}
	st := plan.QuorumStatus(w, d, last)
	c.metrics.ObserveQuorum(c.key.String(), plan.QuorumGauges(w, d, st.Monitors))
	if err := c.putStatus(ctx, st); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Result{}, fmt.Errorf("sentinel pass: %d error(s), first: %w", len(errs), errs[0])
	}
	return Result{RequeueAfter: c.opts.Resync}, nil
}

// The sentinel controller's gather (docs/design.md, "Gather, plan, apply"): the selected descriptors from the cache
// first (they say which monitors to ask CKQUORUM for), then every Sentinel at once, SENTINEL MASTERS and
// CKQUORUM of each selected monitor in one pipeline, then each selected instance resolved (its _sentinel
// Secret, where its primary is). Only a failed list of the descriptors fails the pass.

// gatherQuorum builds the QuorumWorld of one pass, and the descriptor ConfigMaps by name (owners of what the
// applier publishes, targets of Events).
func (c *SentinelController) gatherQuorum(ctx context.Context) (plan.QuorumWorld, map[string]*corev1.ConfigMap, error) {
	w := plan.QuorumWorld{Release: c.opts.Release, Namespace: c.opts.Namespace, Now: time.Now(), Pods: map[string]plan.PodRef{}}
	c.beginFleetPass()
	q, err := c.quorumDocument()
	if err != nil {
		return w, nil, err
	}
	w.Port, w.TLS = q.Port, q.TLS
	n := len(q.Hosts)
	sts, err := c.stss.StatefulSets(c.opts.Namespace).Get(q.StatefulSet)
	if err == nil {
		w.StatefulSet = &plan.StatefulSet{Name: sts.Name, Generation: sts.Generation, ObservedGeneration: sts.Status.ObservedGeneration,
			UpdateRevision: sts.Status.UpdateRevision}
		if r := sts.Spec.Replicas; r != nil {
			if int(*r) > n {
				w.Warnings = append(w.Warnings, fmt.Sprintf("StatefulSet %s has %d replicas, %s lists %d Sentinels: an upgrade is being applied",
					sts.Name, *r, contract.Quorum(c.opts.Release), n))
			}
			n = min(n, int(*r))
		}
	}
	descs, err := c.selectInstances(&w)
	if err != nil {
		return w, nil, err
	}
	var names []string
	for _, qi := range w.Instances {
		if qi.Refused == "" {
			names = append(names, qi.Instance.MonitorName)
		}
	}
	addrs := q.Addrs(n)
	w.Hosts = q.Hosts[:n]
	w.Sentinels, w.CKQuorum = make([]registration.SentinelState, n), make([]map[string]valkey.Quorum, n)
	var wg sync.WaitGroup
	for i, addr := range addrs {
		pod := contract.SentinelPod(q.StatefulSet, i)
		st := &w.Sentinels[i]
		*st = registration.SentinelState{Pod: pod, Addr: addr, Monitors: map[string]valkey.Monitor{}}
		if p, err := c.pods.Pods(c.opts.Namespace).Get(pod); err == nil {
			st.Ready = kube.PodReady(p)
			w.Pods[pod] = plan.PodRef{UID: string(p.UID), Version: p.ResourceVersion, Stale: stale(p, sts)}
		}
		c.mu.Lock()
		st.AppliedAuth = c.applied[pod]
		c.mu.Unlock()
		wg.Go(func() {
			cl, err := c.pool.get(ctx, addr, c.sentinelOpts(w.TLS))
			if err != nil {
				return
			}
			ms, qs, err := cl.SentinelOverview(ctx, names)
			if err != nil {
				c.pool.drop(addr)
				return
			}
			st.Reachable = true
			for _, m := range ms {
				st.Monitors[m.Name] = m
			}
			w.CKQuorum[i] = qs
		})
	}
	wg.Wait()
	c.refuseNameCollisions(&w)
	for i := range w.Instances {
		if qi := &w.Instances[i]; qi.Refused == "" {
			want, err := c.resolve(ctx, qi.Instance, w.Sentinels)
			if err != nil {
				// reported, not a pass error: a failing pass would back off the whole quorum's reconcile
				qi.Unresolved = err.Error()
			}
			qi.Want = want
		}
	}
	// what this quorum published, in every namespace it can read (a quorum of the same release name in
	// another namespace is not this one)
	published, err := c.cms.List(labels.SelectorFromSet(labels.Set{
		contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelSentinel: c.opts.Release}))
	if err != nil {
		return w, nil, fmt.Errorf("list sentinel info: %w", err)
	}
	for _, cm := range published {
		if c.publishedHere(cm) {
			w.Published = append(w.Published, plan.NamespacedName(c.otherNamespace(cm.Namespace), cm.Name))
		}
	}
	sort.Strings(w.Published)
	w.Derive()
	c.keepUnreadable(ctx, &w)
	return w, descs, nil
}

// quorumDocument reads and checks the quorum document S-quorum from the cache (spec.Quorum).
func (c *SentinelController) quorumDocument() (spec.Quorum, error) {
	name := contract.Quorum(c.opts.Release)
	cm, err := c.cms.ConfigMaps(c.opts.Namespace).Get(name)
	if err != nil {
		return spec.Quorum{}, fmt.Errorf("quorum document %s: %w", name, err)
	}
	q, err := spec.ParseQuorum([]byte(cm.Data[contract.KeyQuorum]))
	if err == nil {
		domain := c.opts.ClusterDomain
		if c.opts.LoopbackSentinels {
			domain = ""
		}
		err = q.CheckCanonical(cm.Name, cm.Namespace, domain)
	}
	if err != nil {
		return q, fmt.Errorf("quorum document %s: %w", name, err)
	}
	return q, nil
}

// selectInstances fills w.Instances with the descriptors this quorum selects, each with why it is refused
// (claimed by another quorum, TLS mismatch, invalid descriptor or one of a newer major version), if it is. A
// descriptor in failover mode None is left out: its monitor may go.
func (c *SentinelController) selectInstances(w *plan.QuorumWorld) (map[string]*corev1.ConfigMap, error) {
	// every namespace the quorum serves and can read (sentinel_fleet.go: one that cannot be read keeps its
	// monitors)
	cms, err := c.cms.List(labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentInstance}))
	if err != nil {
		w.DescriptorsErr = err.Error()
		return nil, fmt.Errorf("list descriptors: %w", err)
	}
	sort.Slice(cms, func(i, j int) bool {
		if cms[i].Namespace != cms[j].Namespace {
			return cms[i].Namespace < cms[j].Namespace
		}
		return cms[i].Name < cms[j].Name
	})
	descs := map[string]*corev1.ConfigMap{}
	for _, cm := range cms {
		if !c.opts.Selector.Matches(labels.Set(cm.Labels)) {
			continue
		}
		ns := c.otherNamespace(cm.Namespace)
		descs[plan.NamespacedName(ns, cm.Name)] = cm
		in, err := spec.ParseInstance([]byte(cm.Data[contract.KeyInstance]))
		if err == nil {
			// the descriptor decides where the _sentinel password goes: only the chart's names and FQDNs
			err = in.CheckCanonical(cm.Name, cm.Namespace, c.opts.ClusterDomain)
		}
		if err != nil {
			w.Instances = append(w.Instances, plan.QuorumInstance{Descriptor: cm.Name, Namespace: ns, Instance: in, Refused: err.Error()})
			continue
		}
		if !in.Monitored() {
			continue
		}
		if ok, why := in.GrantsSentinel(c.opts.Fleet.Identity); !ok {
			c.notGranted(in, why) // positively not this quorum's: like a deselected instance
			continue
		}
		qi := plan.QuorumInstance{Descriptor: cm.Name, Namespace: ns, Instance: in}
		if in.TLS.Enabled != w.TLS {
			qi.Refused = plan.TLSMismatchMessage(in, c.opts.Release, c.opts.Namespace, w.TLS)
		}
		if info, err := c.cms.ConfigMaps(cm.Namespace).Get(qi.SentinelInfoName()); err == nil {
			si, err := spec.ParseSentinelInfo([]byte(info.Data[contract.KeySentinels]))
			switch {
			case err != nil:
			case !si.PublishedBy(c.opts.Namespace, c.opts.Release, cm.Namespace):
				qi.Refused = fmt.Sprintf("already monitored by Sentinel release %q; at most one quorum may monitor an instance", si.Quorum(cm.Namespace))
			case si.MonitorName != "" && si.MonitorName != in.MonitorName:
				// the run-time twin of the chart's render-time guard, which a render without the cluster
				// (Argo CD, Flux, helm template) skips: the info this quorum published names the monitor
				// the instance is registered under
				qi.Refused = MonitorRenameRefusal(si.MonitorName, in.MonitorName)
				qi.KeepMonitor = si.MonitorName
			}
		}
		w.Instances = append(w.Instances, qi)
	}
	return descs, nil
}

// MonitorRenameRefusal is why an instance registered as monitor old is not registered again as monitor
// wanted (its descriptor's sentinel.monitorName changed): the value and the fix, for the MonitorRefused
// Event and the quorum status. The monitor old is kept as it is.
func MonitorRenameRefusal(old, wanted string) string {
	return fmt.Sprintf("sentinel.monitorName: this instance is monitored as %q and the monitor name cannot change (clients ask Sentinel for the primary by that name), so %q is not registered and %q is kept; set sentinel.monitorName: %s, or install a new release and migrate", old, wanted, old, old)
}

// resolve reads the _sentinel credential and finds where to register: the address most of our Sentinels name
// (internal/vote), else the data node that reports role primary with the most replicas and is not loading its
// data set (Wanted.PrimaryLoading).
func (c *SentinelController) resolve(ctx context.Context, in spec.Instance, sentinels []registration.SentinelState) (registration.Wanted, error) {
	w := registration.Wanted{Instance: in, AuthUser: in.SentinelAuth.User, Quorum: in.Quorum}
	if w.Quorum == 0 {
		w.Quorum = registration.DefaultQuorum(len(sentinels))
	}
	pw, err := kube.ReadSecretKey(ctx, c.cs, in.Namespace, in.SentinelAuth.SecretName, in.SentinelAuth.SecretKey)
	if err != nil {
		return w, fmt.Errorf("instance %s: %w", in.Name, err)
	}
	w.AuthPass = pw
	sum := sha256.Sum256([]byte(w.AuthUser + "\x00" + pw))
	w.AuthHash = hex.EncodeToString(sum[:8])
	agreed := false
	if h, p, ok := registration.AgreedPrimary(sentinels, in.MonitorName, in.NodeAddrs()); ok && spec.OwnNode(in.NodeAddrs(), h, p) {
		w.PrimaryHost, w.PrimaryPort, agreed = h, p, true
		if !someNamesOther(sentinels, in.MonitorName, h, p) {
			return w, nil
		}
		// a Sentinel names another node: observe the nodes, so that a Sentinel stuck on a stale primary
		// (registration.Stuck) is realigned only to a primary seen as such
	}
	opts := valkey.Options{Username: in.SentinelAuth.User, Password: pw, RESP2: true, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
	bestReplicas := -1
	for _, n := range in.Nodes {
		if p, err := c.pods.Pods(in.Namespace).Get(n.Pod); err == nil && p.DeletionTimestamp != nil {
			continue
		}
		// a one-off connection: data nodes are only asked before the first registration, so keeping
		// them pooled would cost memory per instance for nothing
		cl, err := valkey.Dial(ctx, in.Addr(n), opts)
		if err != nil {
			continue
		}
		r, err := cl.InfoReplication(ctx)
		loading := err == nil && r.Role == valkey.RolePrimary && stillLoading(ctx, cl)
		cl.Close()
		if err != nil {
			continue
		}
		if loading {
			w.PrimaryLoading = in.Addr(n)
			continue
		}
		if r.Role == valkey.RolePrimary && len(r.Replicas) > bestReplicas {
			if agreed {
				// the Sentinels' primary stays the registration target; observed only if it is this node
				if spec.OwnNode([]string{net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort))}, n.Host, in.PortOf(n)) {
					bestReplicas = len(r.Replicas)
				}
				continue
			}
			w.PrimaryHost, w.PrimaryPort, bestReplicas = n.Host, in.PortOf(n), len(r.Replicas)
		}
	}
	// observed, not guessed: a primary with connected replicas, or the only node of a one-node instance
	w.PrimaryObserved = w.PrimaryHost != "" && (bestReplicas > 0 || len(in.Nodes) == 1)
	return w, nil
}

// stillLoading reports whether the node answers INFO persistence with loading:1 (it is loading its data set:
// INFO is one of the commands a loading server serves). Any error reads as not loading, as before this check.
func stillLoading(ctx context.Context, cl *valkey.Client) bool {
	f, err := cl.Info(ctx, "persistence")
	return err == nil && f["loading"] == "1"
}

// someNamesOther reports whether a reachable Sentinel names another address than host:port for monitor.
func someNamesOther(sentinels []registration.SentinelState, monitor, host string, port int) bool {
	agreed := []string{net.JoinHostPort(host, strconv.Itoa(port))}
	for _, s := range sentinels {
		if m, ok := s.Monitors[monitor]; s.Reachable && ok && !spec.OwnNode(agreed, m.Host, m.Port) {
			return true
		}
	}
	return false
}

// reportQuorum sends the Events of conditions that last many passes once per change of reason: unknown
// descriptor fields, refused and unresolved instances (MonitorRefused, MonitorNotRegistered), and the
// policy's refusals (StepRefused).
func (c *SentinelController) reportQuorum(ctx context.Context, w plan.QuorumWorld, d plan.QuorumDecision, descs map[string]*corev1.ConfigMap) {
	for _, qi := range w.Instances {
		cm := descs[qi.Key()]
		if len(qi.Instance.Unknown) > 0 {
			if msg := plan.UnknownFieldsWarning(qi); c.reported.changed(qi.Key()+"/unknown", msg) {
				c.recorder.Event(cm, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
			}
		}
		if qi.Refused != "" && c.reported.changed(qi.Key()+"/refused", qi.Refused) {
			c.recorder.Eventf(cm, corev1.EventTypeWarning, "MonitorRefused", "Sentinel release %s: %s", c.opts.Release, qi.Refused)
		}
		if qi.Unresolved != "" && c.reported.changed(qi.Key()+"/resolve", qi.Unresolved) {
			c.recorder.Eventf(cm, corev1.EventTypeWarning, "MonitorNotRegistered", "%s; its monitor is kept as it is", qi.Unresolved)
		}
	}
	for _, qi := range w.Instances {
		if !qi.Resolved() {
			continue
		}
		foreign := registration.ForeignPrimaries(w.Sentinels, qi.Instance.MonitorName, qi.Instance.NodeAddrs())
		pods := make([]string, 0, len(foreign))
		for pod := range foreign {
			c.metrics.ForeignPrimaries.WithLabelValues(c.key.String(), qi.Instance.MonitorName).Inc()
			pods = append(pods, pod+" names "+foreign[pod])
		}
		if len(pods) == 0 {
			continue
		}
		sort.Strings(pods)
		msg := fmt.Sprintf("monitor %s: %s, which is not a node of the instance (a forged hello on a shared quorum?); nothing follows it",
			qi.Instance.MonitorName, strings.Join(pods, ", "))
		c.log.Warn("foreign primary", "monitor", qi.Instance.MonitorName, "sentinels", pods)
		if c.reported.changed(qi.Key()+"/foreign", msg) {
			c.recorder.Event(descs[qi.Key()], corev1.EventTypeWarning, "ForeignPrimary", msg)
		}
	}
	c.reportQuorumMismatches(w, descs)
	for _, r := range d.Refused {
		if c.reported.changed("refused/"+r.Step.Monitor+"/"+r.Why, r.Why) {
			c.log.Info("policy refused a step", "step", r.Step.String(), "reason", r.Why)
			c.eventFor(ctx, w, descs, r.Step.Monitor, corev1.EventTypeWarning, "StepRefused", r.Why)
		}
	}
}

// The sentinel controller's applier (docs/design.md, "Gather, plan, apply"): registration actions, then the Sentinel
// info documents (published for every resolved instance, withdrawn for the instances no longer selected),
// then, only when all of that succeeded, the one Sentinel pod the plan replaces.

// applyQuorum executes d and returns the last step it took and the errors it met.
func (c *SentinelController) applyQuorum(ctx context.Context, w plan.QuorumWorld, d plan.QuorumDecision, descs map[string]*corev1.ConfigMap) (string, []error) {
	var last string
	var errs []error
	for _, a := range d.Registration.Actions {
		if err := c.applyAction(ctx, w, a, descs); err != nil {
			errs = append(errs, err)
		} else {
			last = fmt.Sprintf("%s %s on %s", a.Kind, a.Name, a.Sentinel)
		}
	}
	for _, p := range d.Publish {
		if err := c.publish(ctx, descs[p.Descriptor], p.Instance, p.Info); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.copyCredentials(ctx, w, descs)...)
	for _, key := range d.Withdraw {
		ns, name := c.opts.Namespace, key
		if i := strings.IndexByte(key, '/'); i >= 0 {
			ns, name = key[:i], key[i+1:]
		}
		if err := kube.DeleteConfigMap(ctx, c.cs, ns, name); err != nil {
			errs = append(errs, err)
		}
	}
	if d.Roll != nil && len(errs) == 0 {
		if err := c.deleteSentinel(ctx, w, descs, *d.Roll); err != nil {
			errs = append(errs, err)
		} else {
			last = "roll: replaced " + d.Roll.Pod
		}
	}
	return last, errs
}

// applyAction runs one MONITOR (+SET), SET or REMOVE on one Sentinel and records the credentials applied.
// reregister replaces a Sentinel's monitor a.Name with one at a.Host:a.Port (SENTINEL REMOVE, MONITOR, then SET
// of kv, the instance's credentials and settings): the restore of a foreign primary and the realignment of a
// stuck Sentinel. A failed REMOVE or MONITOR drops the pooled connection; errors name the command.
func (c *SentinelController) reregister(ctx context.Context, cl *valkey.Client, a registration.Action, kv []string) error {
	if err := cl.SentinelRemove(ctx, a.Name); err != nil {
		c.pool.drop(a.Addr)
		return err
	}
	if err := cl.SentinelMonitor(ctx, a.Name, a.Host, a.Port, a.Quorum); err != nil {
		c.pool.drop(a.Addr)
		return err
	}
	return cl.SentinelSet(ctx, a.Name, kv...)
}

func (c *SentinelController) applyAction(ctx context.Context, w plan.QuorumWorld, a registration.Action, descs map[string]*corev1.ConfigMap) error {
	cl, err := c.pool.get(ctx, a.Addr, c.sentinelOpts(w.TLS))
	if err != nil {
		return err
	}
	var kv []string
	for _, p := range a.Pairs {
		kv = append(kv, p[0], p[1])
	}
	switch a.Kind {
	case registration.Monitor:
		if err := cl.SentinelMonitor(ctx, a.Name, a.Host, a.Port, a.Quorum); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
		if err := cl.SentinelSet(ctx, a.Name, kv...); err != nil {
			return err
		}
		c.metrics.Registrations.WithLabelValues(a.Name).Inc()
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeNormal, "MonitorRegistered",
			fmt.Sprintf("SENTINEL MONITOR %s %s %d quorum %d on %s", a.Name, a.Host, a.Port, a.Quorum, a.Sentinel))
	case registration.Set:
		if err := cl.SentinelSet(ctx, a.Name, kv...); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
	case registration.Restore:
		// issue 25: the Sentinel names a primary that is not a node of the instance; forget it and register
		// the observed primary again, with the instance's credentials and settings
		if err := c.reregister(ctx, cl, a, kv); err != nil {
			return err
		}
		c.metrics.ForeignRestores.WithLabelValues(c.key.String(), a.Name).Inc()
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeWarning, "ForeignPrimaryRestored",
			fmt.Sprintf("Sentinel %s named %s as the primary of %s, which is not a node of the instance (a forged hello on a shared quorum?); "+
				"re-registered at the observed primary %s:%d (SENTINEL REMOVE + MONITOR)", a.Sentinel, a.From, a.Name, a.Host, a.Port))
	case registration.Realign:
		// issue 24: the Sentinel is stuck on a stale primary (registration.Stuck); forget it and register the
		// primary its peers name again (its next hello from them gives it their config epoch)
		if err := c.reregister(ctx, cl, a, kv); err != nil {
			return err
		}
		c.metrics.Registrations.WithLabelValues(a.Name).Inc()
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeWarning, "MonitorRealigned",
			fmt.Sprintf("Sentinel %s was stuck naming %s as the primary of %s: re-registered at %s:%d (SENTINEL REMOVE + MONITOR): %s",
				a.Sentinel, a.From, a.Name, a.Host, a.Port, a.Reason))
	case registration.Remove:
		if err := cl.SentinelRemove(ctx, a.Name); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
		c.metrics.Removals.WithLabelValues(a.Name).Inc()
		// removing a monitor silently removes failover: always a Warning (docs/design.md, "The sentinel controller's pass")
		msg := fmt.Sprintf("SENTINEL REMOVE %s on %s: %s", a.Name, a.Sentinel, a.Reason)
		if why := c.removalReason(a.Name); why != "" {
			msg += " (" + why + ")"
		}
		c.eventFor(ctx, w, descs, a.Name, corev1.EventTypeWarning, "MonitorRemoved", msg)
	}
	c.log.Info("sentinel "+string(a.Kind), "monitor", a.Name, "sentinel", a.Sentinel, "reason", a.Reason)
	c.mu.Lock()
	defer c.mu.Unlock()
	if a.Kind == registration.Remove {
		delete(c.applied[a.Sentinel], a.Name)
		return nil
	}
	if c.applied[a.Sentinel] == nil {
		c.applied[a.Sentinel] = map[string]string{}
	}
	c.applied[a.Sentinel][a.Name] = a.AuthHash
	return nil
}

// eventFor records an Event on the descriptor of the instance that owns monitor (a selected one, else any
// descriptor in the namespace: a deselected instance still has one), else on the quorum's status ConfigMap.
func (c *SentinelController) eventFor(ctx context.Context, w plan.QuorumWorld, descs map[string]*corev1.ConfigMap, monitor, eventType, reason, msg string) {
	if monitor != "" {
		for _, qi := range w.Instances {
			if qi.Instance.MonitorName == monitor && descs[qi.Key()] != nil {
				c.recorder.Event(descs[qi.Key()], eventType, reason, msg)
				return
			}
		}
		cms, _ := c.cms.List(labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentInstance}))
		for _, cm := range cms {
			if in, err := spec.ParseInstance([]byte(cm.Data[contract.KeyInstance])); err == nil && in.MonitorName == monitor {
				c.recorder.Event(cm, eventType, reason, msg)
				return
			}
		}
	}
	if cm, err := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, contract.Status(c.opts.Release), metav1.GetOptions{}); err == nil {
		c.recorder.Event(cm, eventType, reason, msg)
	}
}

// publish writes <F>-sentinels, owned by the instance's descriptor.
func (c *SentinelController) publish(ctx context.Context, desc *corev1.ConfigMap, instance string, si spec.SentinelInfo) error {
	b, _ := json.MarshalIndent(si, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.SentinelInfo(instance), Namespace: desc.Namespace,
			Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentSentinelInfo,
				contract.LabelInstance: instance, contract.LabelSentinel: c.opts.Release, contract.LabelManagedBy: contract.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(desc)}},
		Data: map[string]string{contract.KeySentinels: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
}

// deleteSentinel replaces one Sentinel pod as observed (UID and resourceVersion as preconditions: one
// replaced or changed since fails with a Conflict).
func (c *SentinelController) deleteSentinel(ctx context.Context, w plan.QuorumWorld, descs map[string]*corev1.ConfigMap, s plan.Step) error {
	seen := w.Pods[s.Pod]
	c.log.Info("sentinel roll: deleting", "pod", s.Pod, "reason", s.Reason)
	if err := kube.DeletePod(ctx, c.cs, c.opts.Namespace, s.Pod, types.UID(seen.UID), seen.Version); err != nil {
		return fmt.Errorf("sentinel roll: %w", err)
	}
	for _, st := range w.Sentinels {
		if st.Pod == s.Pod {
			c.pool.drop(st.Addr)
		}
	}
	c.eventFor(ctx, w, descs, "", corev1.EventTypeNormal, "RollingSentinel", fmt.Sprintf("replaced %s with quorum healthy on every monitor", s.Pod))
	return nil
}

func (c *SentinelController) putStatus(ctx context.Context, st status.Quorum) error {
	st.ObservedAt = st.ObservedAt.Truncate(30 * time.Second) // rewrite at most every 30 s when nothing changes
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: contract.Status(c.opts.Release), Namespace: c.opts.Namespace,
			Labels: map[string]string{contract.LabelPartOf: contract.PartOf, contract.LabelComponent: contract.ComponentStatus,
				contract.LabelSentinel: c.opts.Release, contract.LabelManagedBy: contract.ManagedBy}},
		Data: map[string]string{contract.KeyStatus: string(b)},
	}
	// owned by the Sentinel StatefulSet, so helm uninstall leaves nothing behind
	stsName := contract.SentinelStatefulSet(c.opts.Release)
	sts, err := c.cs.AppsV1().StatefulSets(c.opts.Namespace).Get(ctx, stsName, metav1.GetOptions{})
	switch {
	case err == nil:
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID}}
		_, err = kube.ApplyConfigMap(ctx, c.cs, cm)
	case apierrors.IsNotFound(err):
		// No StatefulSet: the release is being uninstalled (this controller outlives it by a moment) or not
		// applied yet. A ConfigMap created now would have no owner and outlive the release, so only an
		// existing one (which keeps its owner) is updated; one garbage collection deletes meanwhile stays gone.
		_, err = kube.UpdateConfigMap(ctx, c.cs, cm)
	default:
		return fmt.Errorf("get StatefulSet %s: %w", stsName, err)
	}
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

// stale reports whether a pod's revision differs from its StatefulSet's update revision (OnDelete rolls).
func stale(pod *corev1.Pod, sts *appsv1.StatefulSet) bool {
	if pod == nil || sts == nil || sts.Status.UpdateRevision == "" {
		return false
	}
	return pod.Labels[revisionLabel] != sts.Status.UpdateRevision
}

// sentinelOpts are the options towards this quorum's Sentinels (as acl.SentinelAdmin with AuthPassword).
func (c *SentinelController) sentinelOpts(tls bool) valkey.Options {
	o := valkey.Options{DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.WithTLS(tls, c.opts.TLSCAFile)
	if c.opts.AuthPassword != "" {
		o.Username, o.Password = acl.SentinelAdmin, c.opts.AuthPassword
	}
	return o
}
