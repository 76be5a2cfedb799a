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
	"github.com/valkey-ha/valkey-ha/internal/registration"
	"github.com/valkey-ha/valkey-ha/internal/roll"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/status"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// SentinelOptions configure the sentinel-side controller of one quorum release.
type SentinelOptions struct {
	Namespace string
	// Release is the quorum's fullname S: StatefulSet S, pods S-<i>, headless Service Service.
	Release     string
	StatefulSet string
	Service     string
	Port        int
	// Replicas is the number of Sentinel pods (the quorum default is Replicas/2+1).
	Replicas int
	// ClusterDomain builds the Sentinel FQDNs, and every node host of a selected descriptor must use it
	// (spec.Instance.CheckCanonical; empty skips that check, for tests on loopback).
	ClusterDomain string
	// Selector selects instance descriptors by label; an empty selector matches nothing.
	Selector labels.Selector
	TLS      bool
	Resync   time.Duration
	// DialTimeout / CommandTimeout bound each connection and command (defaults 1 s / 3 s).
	DialTimeout    time.Duration
	CommandTimeout time.Duration
	// TLSCAFile verifies TLS-only Sentinels and nodes (default valkey.DefaultCAFile).
	TLSCAFile string
	// SentinelHosts overrides the Sentinel addresses (host:port, index = pod ordinal); tests on loopback use it.
	SentinelHosts []string
	// AuthPassword, when set, is the password of the quorum's acl.SentinelAdmin user, sent to this quorum's
	// Sentinels (charts/valkey-sentinel auth.enabled; the CLI reads or generates Secret S-auth-admin).
	AuthPassword string
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
	synced  []cache.InformerSynced
	start   func(<-chan struct{})
	queue   workqueue.TypedRateLimitingInterface[string]
	pool    *pool
	mu      sync.Mutex
	applied map[string]map[string]string // sentinel pod -> monitor -> auth hash
	// reported dedupes the Warning events of conditions that last many passes
	reported reportOnce
	// rollHeldSince is when a planned Sentinel roll started waiting (zero: none waits)
	rollHeldSince time.Time
}

// NewSentinelController wires label-filtered informers over the Sentinel pods and this project's ConfigMaps.
func NewSentinelController(cs kubernetes.Interface, o SentinelOptions, m *metrics.Metrics, rec record.EventRecorder, log *slog.Logger) *SentinelController {
	if o.Resync <= 0 {
		o.Resync = 3 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 3 * time.Second
	}
	if o.Port == 0 {
		o.Port = 26379
	}
	if o.TLSCAFile == "" {
		o.TLSCAFile = valkey.DefaultCAFile
	}
	if o.Selector == nil {
		o.Selector = labels.Nothing()
	}
	c := &SentinelController{opts: o, cs: cs, log: log, metrics: m, recorder: rec, pool: newPool(),
		applied: map[string]map[string]string{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sentinel"})}
	podFactory := kube.NewInformerFactory(cs, o.Namespace, spec.LabelSentinel+"="+o.Release, 0)
	cmFactory := kube.NewInformerFactory(cs, o.Namespace, "", 0)
	podInf, cmInf := podFactory.Core().V1().Pods(), cmFactory.Core().V1().ConfigMaps()
	stsInf := podFactory.Apps().V1().StatefulSets()
	c.pods, c.cms, c.stss = podInf.Lister(), cmInf.Lister(), stsInf.Lister()
	c.synced = []cache.InformerSynced{podInf.Informer().HasSynced, cmInf.Informer().HasSynced, stsInf.Informer().HasSynced}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(o.Release) },
		UpdateFunc: func(_, _ any) { c.queue.Add(o.Release) },
		DeleteFunc: func(any) { c.queue.Add(o.Release) },
	}
	_, _ = podInf.Informer().AddEventHandler(h)
	_, _ = cmInf.Informer().AddEventHandler(h)
	_, _ = stsInf.Informer().AddEventHandler(h)
	c.start = func(stop <-chan struct{}) { podFactory.Start(stop); cmFactory.Start(stop) }
	return c
}

// Run starts informers and one worker and blocks until ctx ends.
func (c *SentinelController) Run(ctx context.Context, health *metrics.Health) error {
	defer c.queue.ShutDown()
	defer c.pool.close()
	c.start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("sentinel controller: caches did not sync")
	}
	if health != nil {
		health.SetReady(true)
	}
	c.log.Info("sentinel controller started", "namespace", c.opts.Namespace, "release", c.opts.Release, "selector", c.opts.Selector.String())
	c.queue.Add(c.opts.Release)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for {
		key, quit := c.queue.Get()
		if quit {
			return nil
		}
		start := time.Now()
		err := c.Reconcile(ctx)
		c.metrics.ReconcileSeconds.WithLabelValues("sentinel").Observe(time.Since(start).Seconds())
		if err != nil {
			c.metrics.ReconcileErrors.WithLabelValues("sentinel").Inc()
			c.log.Warn("reconcile failed", "error", err)
			c.queue.Done(key)
			c.queue.AddRateLimited(key)
			continue
		}
		c.metrics.ReconcileSucceeded("sentinel", c.opts.Namespace+"/"+c.opts.Release, time.Now())
		c.queue.Done(key)
		c.queue.Forget(key)
		c.queue.AddAfter(key, c.opts.Resync)
	}
}

// sentinelHost returns the FQDN of Sentinel pod i.
func (c *SentinelController) sentinelHost(i int) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc.%s", c.opts.StatefulSet, i, c.opts.Service, c.opts.Namespace, c.opts.ClusterDomain)
}

func (c *SentinelController) sentinelAddrs() []string {
	if len(c.opts.SentinelHosts) > 0 {
		return c.opts.SentinelHosts
	}
	out := make([]string, c.opts.Replicas)
	for i := range out {
		out[i] = net.JoinHostPort(c.sentinelHost(i), strconv.Itoa(c.opts.Port))
	}
	return out
}

// observeSentinels reads SENTINEL MASTERS from every Sentinel pod.
func (c *SentinelController) observeSentinels(ctx context.Context) []registration.SentinelState {
	addrs := c.sentinelAddrs()
	out := make([]registration.SentinelState, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		pod := fmt.Sprintf("%s-%d", c.opts.StatefulSet, i)
		out[i] = registration.SentinelState{Pod: pod, Addr: addr, Monitors: map[string]valkey.Monitor{}}
		if p, err := c.pods.Pods(c.opts.Namespace).Get(pod); err == nil {
			out[i].Ready = kube.PodReady(p)
		} else {
			out[i].Ready = len(c.opts.SentinelHosts) > 0 // tests on loopback may run Sentinels without pods
		}
		c.mu.Lock()
		out[i].AppliedAuth = c.applied[pod]
		c.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.pool.get(ctx, addr, c.sentinelOpts())
			if err != nil {
				return
			}
			ms, err := cl.SentinelMasters(ctx)
			if err != nil {
				c.pool.drop(addr)
				return
			}
			out[i].Reachable = true
			for _, m := range ms {
				out[i].Monitors[m.Name] = m
			}
		}()
	}
	wg.Wait()
	return out
}

type selected struct {
	cm *corev1.ConfigMap
	in spec.Instance
	// refused says why the instance is not registered or changed; its monitor, if any, is kept
	refused string
}

// selectInstances returns the descriptors this quorum should monitor, plus refusals (claimed by another
// quorum, TLS mismatch, invalid descriptor or one of a newer major version), each with the reason. A
// descriptor in failover mode None is left out: its monitor may go. unowned is not empty when a selected
// descriptor could not be read far enough to tell which monitor it names: then no monitor may be removed.
func (c *SentinelController) selectInstances() (sel []selected, unowned string, err error) {
	cms, err := c.cms.ConfigMaps(c.opts.Namespace).List(labels.SelectorFromSet(labels.Set{spec.LabelComponent: spec.ComponentInst}))
	if err != nil {
		return nil, "", fmt.Errorf("list descriptors: %w", err)
	}
	sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
	for _, cm := range cms {
		if !c.opts.Selector.Matches(labels.Set(cm.Labels)) {
			continue
		}
		in, err := spec.ParseInstance([]byte(cm.Data[spec.InstanceKey]))
		if err == nil {
			// the descriptor decides where the _sentinel password goes: only the chart's names and FQDNs
			err = in.CheckCanonical(cm.Name, cm.Namespace, c.opts.ClusterDomain)
		}
		if err != nil {
			if in.MonitorName == "" && unowned == "" {
				unowned = fmt.Sprintf("descriptor %s cannot be read (%v), so the monitor it owns is unknown", cm.Name, err)
			}
			sel = append(sel, selected{cm: cm, in: in, refused: err.Error()})
			continue
		}
		if !in.Monitored() {
			continue
		}
		s := selected{cm: cm, in: in}
		if in.TLS.Enabled != c.opts.TLS {
			s.refused = fmt.Sprintf("TLS is %v on the instance but %v on this quorum: one Sentinel process cannot speak both", in.TLS.Enabled, c.opts.TLS)
		}
		if info, err := c.cms.ConfigMaps(c.opts.Namespace).Get(in.Name + "-sentinels"); err == nil {
			if si, err := spec.ParseSentinelInfo([]byte(info.Data[spec.SentinelsKey])); err == nil && si.SentinelRelease != c.opts.Release {
				s.refused = fmt.Sprintf("already monitored by Sentinel release %q; at most one quorum may monitor an instance", si.SentinelRelease)
			}
		}
		sel = append(sel, s)
	}
	return sel, unowned, nil
}

// infoName is the name of the Sentinel info ConfigMap of the instance whose descriptor is cm (F-instance ->
// F-sentinels, docs/contract.md); it does not need the descriptor to parse.
func infoName(cm *corev1.ConfigMap) string {
	return strings.TrimSuffix(cm.Name, "-instance") + "-sentinels"
}

// Reconcile runs one pass over every selected instance and every Sentinel.
func (c *SentinelController) Reconcile(ctx context.Context) error {
	sentinels := c.observeSentinels(ctx)
	sel, unowned, err := c.selectInstances()
	if err != nil {
		return err
	}
	defer c.reported.sweep("")
	st := status.Quorum{Release: c.opts.Release, ObservedAt: time.Now()}
	for _, s := range sentinels {
		if s.Ready {
			st.ReadySentinel++
		}
		st.Sentinels = append(st.Sentinels, status.SentinelPod{Pod: s.Pod, Host: s.Addr, Ready: s.Ready, Reachable: s.Reachable, Monitors: len(s.Monitors)})
	}
	var wanted []registration.Wanted
	byMonitor := map[string]selected{}
	// keep: monitors of selected instances that did not resolve; keepInfo: Sentinel info of every selected
	// instance. Neither is removed from a partial view (issue 12, F3).
	keep, keepInfo := map[string]string{}, map[string]bool{}
	var errs []error
	mo := metrics.QuorumObservation{Reachable: map[string]bool{}}
	for _, s := range sentinels {
		mo.Reachable[s.Pod] = s.Reachable
	}
	for _, s := range sel {
		keepInfo[infoName(s.cm)] = true
		if len(s.in.Unknown) > 0 {
			msg := fmt.Sprintf("%s: descriptor fields this controller does not know (kept, ignored; a newer charts/valkey wrote them): %s",
				s.cm.Name, strings.Join(s.in.Unknown, ", "))
			st.Warnings = append(st.Warnings, msg)
			if c.reported.changed(s.cm.Name+"/unknown", msg) {
				c.recorder.Event(s.cm, corev1.EventTypeWarning, "DescriptorUnknownFields", msg)
			}
		}
		if s.refused != "" {
			if s.in.MonitorName != "" {
				keep[s.in.MonitorName] = s.refused
			}
			if c.reported.changed(s.cm.Name+"/refused", s.refused) {
				c.recorder.Eventf(s.cm, corev1.EventTypeWarning, "MonitorRefused", "Sentinel release %s: %s", c.opts.Release, s.refused)
			}
			st.Monitors = append(st.Monitors, status.MonitorStatus{Name: s.in.MonitorName, Instance: s.cm.Name, Refused: s.refused})
			mo.Refused = append(mo.Refused, s.cm.Namespace+"/"+strings.TrimSuffix(s.cm.Name, "-instance"))
			continue
		}
		w, err := c.resolve(ctx, s.in, sentinels)
		if err != nil {
			// reported, not a pass error: a failing pass would back off the whole quorum's reconcile
			keep[s.in.MonitorName] = err.Error()
			if c.reported.changed(s.cm.Name+"/resolve", err.Error()) {
				c.recorder.Eventf(s.cm, corev1.EventTypeWarning, "MonitorNotRegistered", "%v; its monitor is kept as it is", err)
			}
			st.Monitors = append(st.Monitors, status.MonitorStatus{Name: s.in.MonitorName, Instance: s.cm.Name, Unresolved: err.Error()})
			mo.Refused = append(mo.Refused, s.cm.Namespace+"/"+strings.TrimSuffix(s.cm.Name, "-instance"))
			continue
		}
		if s.in.Quorum > 0 {
			if msg := registration.QuorumWarning(s.in.MonitorName, s.in.Quorum, len(sentinels)); msg != "" {
				st.Warnings = append(st.Warnings, msg)
			}
		}
		wanted = append(wanted, w)
		byMonitor[s.in.MonitorName] = s
	}
	reg := registration.Build(registration.Observation{Wanted: wanted, Keep: keep, HoldRemovals: unowned, Sentinels: sentinels})
	st.Warnings = append(st.Warnings, reg.Warnings...)
	st.Held = reg.Held
	qw := c.quorumWorld(st.ObservedAt, sentinels, wanted, keep, unowned)
	var applied []registration.Action
	for _, a := range reg.Actions {
		if a.Kind == registration.Remove {
			if why := plan.CheckQuorum(qw, plan.Step{Kind: plan.Remove, Pod: a.Sentinel, Monitor: a.Name, Reason: a.Reason}); why != "" {
				st.Refused = append(st.Refused, why)
				c.reportRefused(ctx, a.Name, why)
				continue
			}
		}
		applied = append(applied, a)
	}
	for _, a := range applied {
		if err := c.applyAction(ctx, a, byMonitor); err != nil {
			errs = append(errs, err)
		} else {
			st.LastAction = fmt.Sprintf("%s %s on %s", a.Kind, a.Name, a.Sentinel)
		}
	}
	// publish Sentinel info for every registered instance; withdraw it for instances we no longer monitor
	hosts := make([]string, 0, len(sentinels))
	for i := range sentinels {
		if len(c.opts.SentinelHosts) > 0 {
			hosts = append(hosts, c.opts.SentinelHosts[i])
		} else {
			hosts = append(hosts, c.sentinelHost(i))
		}
	}
	port := c.opts.Port
	for _, w := range wanted {
		s := byMonitor[w.Instance.MonitorName]
		if err := c.publish(ctx, s, hosts, port); err != nil {
			errs = append(errs, err)
		}
		ms := c.monitorStatus(ctx, s, w, sentinels)
		st.Monitors = append(st.Monitors, ms)
		mo.Monitors = append(mo.Monitors, metrics.MonitorObservation{Name: ms.Name, Registered: ms.Registered, QuorumOK: ms.QuorumOK})
	}
	if err := c.withdraw(ctx, keepInfo); err != nil {
		errs = append(errs, err)
	}
	// quorum-gated Sentinel roll: only in a pass that changed no registration
	for _, ms := range st.Monitors {
		if ms.Refused == "" && ms.Unresolved == "" {
			qw.QuorumOK[ms.Name] = ms.QuorumOK
		}
	}
	if len(reg.Actions) == 0 && len(errs) == 0 {
		if held := heldMonitors(keep, unowned, sentinels); held != "" {
			// a replaced Sentinel comes back empty and could not be given these monitors again
			st.Roll = held
		} else if action, wait, refused, err := c.rollSentinels(ctx, qw); err != nil {
			errs = append(errs, err)
		} else if action != "" {
			st.LastAction = action
		} else {
			st.Roll = wait
			if refused != "" {
				st.Refused = append(st.Refused, refused)
				c.reportRefused(ctx, "", refused)
			}
		}
	}
	if len(reg.Actions) == 0 && len(errs) == 0 {
		if st.Roll == "" {
			c.rollHeldSince = time.Time{}
		} else if c.rollHeldSince.IsZero() {
			c.rollHeldSince = st.ObservedAt
		}
	}
	if !c.rollHeldSince.IsZero() {
		mo.RollHeld = st.ObservedAt.Sub(c.rollHeldSince)
	}
	c.metrics.ObserveQuorum(c.opts.Namespace+"/"+c.opts.Release, mo)
	if err := c.putStatus(ctx, st); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("sentinel pass: %d error(s), first: %w", len(errs), errs[0])
	}
	return nil
}

// resolve reads the _sentinel credential and finds where to register: the address most of our Sentinels name,
// else the data node that reports role primary.
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
	if h, p, ok := registration.AgreedPrimary(sentinels, in.MonitorName); ok {
		w.PrimaryHost, w.PrimaryPort = h, p
		return w, nil
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
		cl.Close()
		if err != nil {
			continue
		}
		if r.Role == valkey.RolePrimary && len(r.Replicas) > bestReplicas {
			w.PrimaryHost, w.PrimaryPort, bestReplicas = n.Host, in.PortOf(n), len(r.Replicas)
		}
	}
	return w, nil
}

func (c *SentinelController) applyAction(ctx context.Context, a registration.Action, byMonitor map[string]selected) error {
	cl, err := c.pool.get(ctx, a.Addr, c.sentinelOpts())
	if err != nil {
		return err
	}
	flat := func() []string {
		var kv []string
		for _, p := range a.Pairs {
			kv = append(kv, p[0], p[1])
		}
		return kv
	}
	s := byMonitor[a.Name]
	switch a.Kind {
	case registration.Monitor:
		if err := cl.SentinelMonitor(ctx, a.Name, a.Host, a.Port, a.Quorum); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
		if err := cl.SentinelSet(ctx, a.Name, flat()...); err != nil {
			return err
		}
		c.metrics.Registrations.WithLabelValues(a.Name).Inc()
		if s.cm != nil {
			c.recorder.Eventf(s.cm, corev1.EventTypeNormal, "MonitorRegistered", "SENTINEL MONITOR %s %s %d quorum %d on %s", a.Name, a.Host, a.Port, a.Quorum, a.Sentinel)
		}
	case registration.Set:
		if err := cl.SentinelSet(ctx, a.Name, flat()...); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
	case registration.Remove:
		if err := cl.SentinelRemove(ctx, a.Name); err != nil {
			c.pool.drop(a.Addr)
			return err
		}
		c.metrics.Removals.WithLabelValues(a.Name).Inc()
		c.emitRemoved(ctx, a)
	}
	c.log.Info("sentinel "+string(a.Kind), "monitor", a.Name, "sentinel", a.Sentinel, "reason", a.Reason)
	if a.Kind != registration.Remove {
		c.mu.Lock()
		if c.applied[a.Sentinel] == nil {
			c.applied[a.Sentinel] = map[string]string{}
		}
		c.applied[a.Sentinel][a.Name] = a.AuthHash
		c.mu.Unlock()
	} else {
		c.mu.Lock()
		delete(c.applied[a.Sentinel], a.Name)
		c.mu.Unlock()
	}
	return nil
}

// emitRemoved records a Warning event: removing a monitor silently removes HA (seed 000, Risks).
func (c *SentinelController) emitRemoved(ctx context.Context, a registration.Action) {
	c.eventFor(ctx, a.Name, corev1.EventTypeWarning, "MonitorRemoved", fmt.Sprintf("SENTINEL REMOVE %s on %s: %s", a.Name, a.Sentinel, a.Reason))
}

// eventFor records an Event on the descriptor of the instance that owns monitor when it still exists, else on
// the quorum's status ConfigMap.
func (c *SentinelController) eventFor(ctx context.Context, monitor, eventType, reason, msg string) {
	cms, _ := c.cms.ConfigMaps(c.opts.Namespace).List(labels.SelectorFromSet(labels.Set{spec.LabelComponent: spec.ComponentInst}))
	for _, cm := range cms {
		if in, err := spec.ParseInstance([]byte(cm.Data[spec.InstanceKey])); monitor != "" && err == nil && in.MonitorName == monitor {
			c.recorder.Event(cm, eventType, reason, msg)
			return
		}
	}
	if cm, err := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, c.opts.Release+"-status", metav1.GetOptions{}); err == nil {
		c.recorder.Event(cm, eventType, reason, msg)
	}
}

func (c *SentinelController) publish(ctx context.Context, s selected, hosts []string, port int) error {
	si := spec.SentinelInfo{MonitorName: s.in.MonitorName, SentinelRelease: c.opts.Release, Port: port, TLS: c.opts.TLS, Hosts: hosts}
	b, _ := json.MarshalIndent(si, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.in.Name + "-sentinels", Namespace: s.in.Namespace,
			Labels: map[string]string{spec.LabelPartOf: spec.PartOfValue, spec.LabelComponent: spec.ComponentSInfo,
				spec.LabelInstance: s.in.Name, spec.LabelSentinel: c.opts.Release, "app.kubernetes.io/managed-by": "valkey-sentinel-ctl"},
			OwnerReferences: []metav1.OwnerReference{kube.OwnerRef(s.cm)}},
		Data: map[string]string{spec.SentinelsKey: string(b)},
	}
	_, err := kube.ApplyConfigMap(ctx, c.cs, cm)
	return err
}

// withdraw deletes Sentinel info this quorum published for instances it no longer monitors, so another
// quorum may claim them and data pods stop asking these Sentinels. keep names the Sentinel info
// ConfigMaps of every selected instance, resolved or not.
func (c *SentinelController) withdraw(ctx context.Context, keep map[string]bool) error {
	cms, err := c.cms.ConfigMaps(c.opts.Namespace).List(labels.SelectorFromSet(labels.Set{
		spec.LabelComponent: spec.ComponentSInfo, spec.LabelSentinel: c.opts.Release}))
	if err != nil {
		return fmt.Errorf("list sentinel info: %w", err)
	}
	for _, cm := range cms {
		if keep[cm.Name] {
			continue
		}
		if err := kube.DeleteConfigMap(ctx, c.cs, cm.Namespace, cm.Name); err != nil {
			return err
		}
	}
	return nil
}

// heldMonitors says why no Sentinel pod may be replaced while a kept monitor (its instance selected but not
// resolved) is registered on one of the Sentinels, or while the owner of a monitor is unknown: the
// replacement starts with an empty config and the controller could not register that monitor on it again.
func heldMonitors(keep map[string]string, unowned string, sentinels []registration.SentinelState) string {
	if unowned != "" {
		return "no Sentinel replaced: " + unowned
	}
	names := make([]string, 0, len(keep))
	for name := range keep {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, s := range sentinels {
			if _, ok := s.Monitors[name]; ok {
				return fmt.Sprintf("no Sentinel replaced while monitor %s cannot be resolved (%s): its replacement could not be given the monitor again", name, keep[name])
			}
		}
	}
	return ""
}

func (c *SentinelController) monitorStatus(ctx context.Context, s selected, w registration.Wanted, sentinels []registration.SentinelState) status.MonitorStatus {
	ms := status.MonitorStatus{Name: w.Instance.MonitorName, Instance: s.in.Name, Quorum: w.Quorum, QuorumOK: true}
	for _, st := range sentinels {
		m, ok := st.Monitors[w.Instance.MonitorName]
		if !ok || !st.Reachable {
			ms.QuorumOK = false
			continue
		}
		ms.Registered++
		ms.PrimaryAddress = net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
		ms.Replicas = int(m.NumReplicas)
		cl, err := c.pool.get(ctx, st.Addr, c.sentinelOpts())
		if err != nil {
			ms.QuorumOK = false
			continue
		}
		if q, err := cl.SentinelCKQuorum(ctx, w.Instance.MonitorName); err != nil || !q.OK {
			ms.QuorumOK = false
		}
	}
	return ms
}

func (c *SentinelController) putStatus(ctx context.Context, st status.Quorum) error {
	st.ObservedAt = st.ObservedAt.Truncate(30 * time.Second) // rewrite at most every 30 s when nothing changes
	b, _ := json.MarshalIndent(st, "", "  ")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: c.opts.Release + "-status", Namespace: c.opts.Namespace,
			Labels: map[string]string{spec.LabelPartOf: spec.PartOfValue, spec.LabelComponent: spec.ComponentStatus,
				spec.LabelSentinel: c.opts.Release, "app.kubernetes.io/managed-by": "valkey-sentinel-ctl"}},
		Data: map[string]string{spec.StatusKey: string(b)},
	}
	// owned by the Sentinel StatefulSet, so helm uninstall leaves nothing behind
	sts, err := c.cs.AppsV1().StatefulSets(c.opts.Namespace).Get(ctx, c.opts.StatefulSet, metav1.GetOptions{})
	switch {
	case err == nil:
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID}}
	case apierrors.IsNotFound(err):
		// No StatefulSet: the release is being uninstalled (this controller outlives it by a moment) or not
		// applied yet. A ConfigMap created now would have no owner and outlive the release, so only an
		// existing one (which keeps its owner) is updated.
		if _, gerr := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, cm.Name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			return nil
		}
	default:
		return fmt.Errorf("get StatefulSet %s: %w", c.opts.StatefulSet, err)
	}
	_, err = kube.ApplyConfigMap(ctx, c.cs, cm)
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

// rollSentinels deletes at most one stale Sentinel pod (updateStrategy OnDelete), only while every Sentinel
// pod is ready and knows every wanted monitor, CKQUORUM passes for every monitor on every Sentinel and no
// monitored primary is failing over or has just gone down (seed 000, Reconcile flow step 4; case S22). A
// monitor whose primary has been down longer than its failover-timeout does not gate the roll and is
// reported in wait (issue 12).
func (c *SentinelController) rollSentinels(ctx context.Context, qw plan.QuorumWorld) (action, wait, refused string, err error) {
	sts, err := c.stss.StatefulSets(c.opts.Namespace).Get(c.opts.StatefulSet)
	if err != nil {
		return "", "", "", nil // no StatefulSet (yet): nothing to roll
	}
	sentinels := qw.Sentinels
	in := roll.SentinelInput{Monitors: plan.MonitorGates(qw)}
	observed := map[string]*corev1.Pod{}
	for _, s := range sentinels {
		pod, err := c.pods.Pods(c.opts.Namespace).Get(s.Pod)
		if err != nil {
			in.Pods = append(in.Pods, roll.SentinelPod{Pod: s.Pod})
			continue
		}
		observed[s.Pod] = pod
		knows := map[string]bool{}
		if s.Reachable {
			for name := range s.Monitors {
				knows[name] = true
			}
		}
		in.Pods = append(in.Pods, roll.SentinelPod{Pod: s.Pod, Stale: stale(pod, sts), Ready: s.Ready && s.Reachable, Knows: knows})
	}
	target, why, notes := roll.PlanSentinel(in)
	if why != "" {
		notes = append(notes, why)
	}
	if target == "" {
		return "", strings.Join(notes, "; "), "", nil
	}
	if why := plan.CheckQuorum(qw, plan.Step{Kind: plan.DeleteSentinelPod, Pod: target, Reason: "stale"}); why != "" {
		return "", why, why, nil
	}
	for _, n := range notes {
		c.log.Info("sentinel roll", "note", n)
	}
	c.log.Info("sentinel roll: CKQUORUM OK on every monitor, no failover in flight, every pod ready; deleting", "pod", target)
	// only the pod observed: one replaced or changed since fails with a Conflict (a stale cache)
	seen := observed[target]
	if seen == nil {
		return "", "no Sentinel replaced: pod " + target + " was not observed", "", nil
	}
	if err := kube.DeletePod(ctx, c.cs, c.opts.Namespace, target, seen.UID, seen.ResourceVersion); err != nil {
		return "", "", "", fmt.Errorf("sentinel roll: %w", err)
	}
	c.pool.drop(c.addrOf(target))
	if cm, err := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, c.opts.Release+"-status", metav1.GetOptions{}); err == nil {
		c.recorder.Eventf(cm, corev1.EventTypeNormal, "RollingSentinel", "replaced %s with quorum healthy on every monitor", target)
	}
	return "roll: replaced " + target, "", "", nil
}

func (c *SentinelController) addrOf(pod string) string {
	for i, a := range c.sentinelAddrs() {
		if fmt.Sprintf("%s-%d", c.opts.StatefulSet, i) == pod {
			return a
		}
	}
	return ""
}

// quorumWorld is this pass's observation as the policy (plan.CheckQuorum) reads it; QuorumOK is filled in
// once the monitors' CKQUORUM was read.
func (c *SentinelController) quorumWorld(now time.Time, sentinels []registration.SentinelState, wanted []registration.Wanted,
	keep map[string]string, unowned string) plan.QuorumWorld {
	qw := plan.QuorumWorld{Release: c.opts.Release, Now: now, Sentinels: sentinels, Pods: map[string]plan.PodRef{},
		Wanted: map[string]bool{}, Keep: keep, Unowned: unowned, QuorumOK: map[string]bool{}}
	sts, err := c.stss.StatefulSets(c.opts.Namespace).Get(c.opts.StatefulSet)
	if err == nil {
		qw.StatefulSet = &plan.StatefulSet{Name: sts.Name, Generation: sts.Generation, ObservedGeneration: sts.Status.ObservedGeneration,
			UpdateRevision: sts.Status.UpdateRevision}
	}
	for _, s := range sentinels {
		if pod, err := c.pods.Pods(c.opts.Namespace).Get(s.Pod); err == nil {
			qw.Pods[s.Pod] = plan.PodRef{UID: string(pod.UID), Version: pod.ResourceVersion, Stale: stale(pod, sts)}
		}
	}
	for _, w := range wanted {
		qw.Wanted[w.Instance.MonitorName] = true
	}
	return qw
}

// reportRefused sends one StepRefused Warning Event per change of reason: on the descriptor of the instance
// whose monitor it is, else on the quorum's status ConfigMap.
func (c *SentinelController) reportRefused(ctx context.Context, monitor, why string) {
	if !c.reported.changed("refused/"+monitor+"/"+why, why) {
		return
	}
	c.log.Info("policy refused a step", "reason", why)
	c.eventFor(ctx, monitor, corev1.EventTypeWarning, "StepRefused", why)
}

// stale reports whether a pod's revision differs from its StatefulSet's update revision (OnDelete rolls).
func stale(pod *corev1.Pod, sts *appsv1.StatefulSet) bool {
	if pod == nil || sts == nil || sts.Status.UpdateRevision == "" {
		return false
	}
	return pod.Labels[revisionLabel] != sts.Status.UpdateRevision
}

// sentinelOpts are the options towards this quorum's Sentinels (as acl.SentinelAdmin with AuthPassword).
func (c *SentinelController) sentinelOpts() valkey.Options {
	o := valkey.Options{DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.WithTLS(c.opts.TLS, c.opts.TLSCAFile)
	if c.opts.AuthPassword != "" {
		o.Username, o.Password = acl.SentinelAdmin, c.opts.AuthPassword
	}
	return o
}
