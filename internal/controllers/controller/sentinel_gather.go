package controller

// The sentinel controller's gather (docs/design.md, "Gather, plan, apply"): the selected descriptors from the
// cache first (they say which monitors to ask CKQUORUM for), then every Sentinel at once, SENTINEL MASTERS and
// CKQUORUM of each selected monitor in one pipeline, then each selected instance resolved (its _sentinel
// Secret, its nodes when the Sentinels do not agree where its primary is), what the quorum published, what it
// can read of its namespaces and its credential copies. It only reads: every decision is the planner's
// (package plan, package registration). Only a failed list of the descriptors fails the pass.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// gathered are the objects a pass read that its applier and report act on: the descriptor ConfigMaps by
// plan.MonitoredInstance.Key (owners of what the applier publishes, targets of Events) and the credential copies
// read, by plan.CredentialCopy.Key (updated with their resourceVersion).
type gathered struct {
	descs  map[string]*corev1.ConfigMap
	copies map[string]*corev1.Secret
}

// gatherSentinels builds the SentinelWorld of one pass and the objects it read.
func (c *SentinelController) gatherSentinels(ctx context.Context) (plan.SentinelWorld, gathered, error) {
	w := plan.SentinelWorld{Release: c.opts.Release, Namespace: c.opts.Namespace, Now: time.Now(), Pods: map[string]plan.PodRef{},
		Revoked: map[string]string{}}
	objs := gathered{copies: map[string]*corev1.Secret{}}
	q, err := c.quorumDocument()
	if err != nil {
		return w, objs, err
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
	objs.descs = descs
	if err != nil {
		return w, objs, err
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
	// which instances to resolve is the planner's decision (a refused one is not resolved)
	plan.RefuseNameCollisions(&w)
	for i := range w.Instances {
		if qi := &w.Instances[i]; qi.Refused == "" {
			want, err := c.resolve(ctx, qi.Instance, w.Sentinels)
			if err != nil {
				// reported, not a pass error: a failing pass would back off the whole quorum's reconcile
				qi.Unresolved, qi.AwaitingSecret = err.Error(), apierrors.IsNotFound(err)
			}
			qi.Want = want
		}
	}
	// what this quorum published, in every namespace it can read (a quorum of the same release name in
	// another namespace is not this one)
	published, err := c.cms.List(labels.SelectorFromSet(labels.Set{
		contract.LabelComponent: contract.ComponentSentinelInfo, contract.LabelSentinel: c.opts.Release}))
	if err != nil {
		return w, objs, fmt.Errorf("list sentinel info: %w", err)
	}
	for _, cm := range published {
		if c.publishedHere(cm) {
			w.Published = append(w.Published, plan.NamespacedName(c.otherNamespace(cm.Namespace), cm.Name))
		}
	}
	sort.Strings(w.Published)
	c.observeNamespaces(&w)
	w.Derive()
	c.observeCopies(ctx, &w, objs)
	return w, objs, nil
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
func (c *SentinelController) selectInstances(w *plan.SentinelWorld) (map[string]*corev1.ConfigMap, error) {
	// every namespace the quorum serves and can read (plan.NamespaceReadability: one that cannot be read keeps its
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
			w.Instances = append(w.Instances, plan.MonitoredInstance{Descriptor: cm.Name, Namespace: ns, Instance: in, Refused: err.Error()})
			continue
		}
		if !in.Monitored() {
			continue
		}
		if ok, why := in.GrantsSentinel(c.opts.Fleet.Identity); !ok {
			if in.MonitorName != "" {
				w.Revoked[in.MonitorName] = why // positively not this quorum's: like a deselected instance
			}
			continue
		}
		qi := plan.MonitoredInstance{Descriptor: cm.Name, Namespace: ns, Instance: in}
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

// resolve reads the _sentinel credential and what registration.AgreedTarget and registration.ChoosePrimary
// decide where to register from: the Sentinels' view, and the data nodes when that does not settle it.
func (c *SentinelController) resolve(ctx context.Context, in spec.Instance, sentinels []registration.SentinelState) (registration.Wanted, error) {
	w := registration.NewWanted(in, len(sentinels))
	pw, err := kube.ReadSecretKey(ctx, c.cs, in.Namespace, in.SentinelAuth.SecretName, in.SentinelAuth.SecretKey)
	if err != nil {
		return w, fmt.Errorf("instance %s: %w", in.Name, err)
	}
	w.SetPassword(pw)
	agreed, ask := registration.AgreedTarget(&w, sentinels)
	if ask {
		registration.ChoosePrimary(&w, agreed, c.askNodes(ctx, in, pw))
	}
	return w, nil
}

// askNodes asks every data node of in, one after the other, INFO replication (and INFO persistence of a
// primary), as the _sentinel user with password pw. A node whose pod is being deleted is not asked; one that
// does not answer is a reply with Answered false.
func (c *SentinelController) askNodes(ctx context.Context, in spec.Instance, pw string) []registration.NodeReply {
	opts := valkey.Options{Username: in.SentinelAuth.User, Password: pw, RESP2: true, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
	out := make([]registration.NodeReply, 0, len(in.Nodes))
	for _, n := range in.Nodes {
		r := registration.NodeReply{Host: n.Host, Port: in.PortOf(n), Addr: in.Addr(n)}
		out = append(out, r)
		if p, err := c.pods.Pods(in.Namespace).Get(n.Pod); err == nil && p.DeletionTimestamp != nil {
			continue
		}
		// a one-off connection: data nodes are only asked before the first registration, so keeping
		// them pooled would cost memory per instance for nothing
		cl, err := valkey.Dial(ctx, in.Addr(n), opts)
		if err != nil {
			continue
		}
		info, err := cl.InfoReplication(ctx)
		loading := err == nil && info.Role == valkey.RolePrimary && stillLoading(ctx, cl)
		cl.Close()
		if err != nil {
			continue
		}
		r.Answered, r.Role, r.Replicas, r.Loading = true, info.Role, len(info.Replicas), loading
		out[len(out)-1] = r
	}
	return out
}

// stillLoading reports whether the node answers INFO persistence with loading:1 (it is loading its data set:
// INFO is one of the commands a loading server serves). Any error reads as not loading, as before this check.
func stillLoading(ctx context.Context, cl *valkey.Client) bool {
	f, err := cl.Info(ctx, "persistence")
	return err == nil && f["loading"] == "1"
}

// observeNamespaces records what the pass can read of the namespaces the quorum serves (w.Namespaces): the
// namespace selection, every served namespace whose cache has not synced (an API error such as Forbidden,
// or not synced yet), and whether each namespace a registered monitor's host names is served.
func (c *SentinelController) observeNamespaces(w *plan.SentinelWorld) {
	rd := plan.NamespaceReadability{Served: map[string]bool{}}
	if known, err := c.cmCache.SelectionKnown(); !known {
		rd.SelectionUnknown = fmt.Sprint(err)
	}
	for _, ns := range c.cmCache.Namespaces() {
		if ns.Synced {
			continue
		}
		why := "its cache has not synced yet"
		if ns.Err != nil {
			why = ns.Err.Error()
		}
		rd.Unreadable = append(rd.Unreadable, plan.UnreadableNamespace{Namespace: ns.Namespace, Why: why})
	}
	for _, s := range w.Sentinels {
		for _, m := range s.Monitors {
			if ns := spec.HostNamespace(m.Host); ns != "" {
				rd.Served[ns] = c.cmCache.Serves(ns)
			}
		}
	}
	w.Namespaces = rd
}

// observeCopies reads, when the controller copies the quorum's credential (SentinelOptions.CopyCredential),
// the quorum's _instance password (only if some instance needs a copy: plan.CopyTargets) and every copy the
// memory does not hold as current (plan.CopyCurrent), into w.Credential and objs.copies.
func (c *SentinelController) observeCopies(ctx context.Context, w *plan.SentinelWorld, objs gathered) {
	if !c.opts.CopyCredential {
		return
	}
	cw := &plan.CredentialWorld{Written: c.copies.snapshot(), Read: map[string]plan.CopyRead{}}
	w.Credential = cw
	if len(plan.CopyTargets(*w)) == 0 {
		return
	}
	secret := contract.QuorumSecret(c.opts.Release, acl.SentinelInstance)
	pw, err := kube.ReadSecretKey(ctx, c.cs, c.opts.Namespace, secret, contract.KeyPassword)
	if err == nil && pw == "" {
		err = fmt.Errorf("secret %s has an empty password", secret)
	}
	if err != nil {
		cw.PasswordErr = err.Error()
		return
	}
	cw.Password = pw
	for _, cp := range plan.WantedCopies(*w) {
		if plan.CopyCurrent(*w, cp) {
			continue
		}
		s, err := c.cs.CoreV1().Secrets(cp.Namespace).Get(ctx, cp.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cw.Read[cp.Key()] = plan.CopyRead{NotFound: true}
		case err != nil:
			cw.Read[cp.Key()] = plan.CopyRead{Err: err.Error()}
		default:
			cw.Read[cp.Key()] = plan.CopyRead{Sum: plan.DataSum(s.Data)}
			objs.copies[cp.Key()] = s
		}
	}
}

// otherNamespace is ns when it is not the quorum's own, else "" (plan.MonitoredInstance.Namespace).
func (c *SentinelController) otherNamespace(ns string) string {
	if ns == c.opts.Namespace {
		return ""
	}
	return ns
}

// publishedHere reports whether Sentinel info cm was published by this quorum (release and namespace; an
// info without sentinelNamespace was published by a quorum of its own namespace).
func (c *SentinelController) publishedHere(cm *corev1.ConfigMap) bool {
	si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
	if err != nil {
		return cm.Namespace == c.opts.Namespace
	}
	return si.PublishedBy(c.opts.Namespace, c.opts.Release, cm.Namespace)
}
