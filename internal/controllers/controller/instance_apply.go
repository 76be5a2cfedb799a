package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/handoff"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// The instance controller's applier (docs/design.md, "Gather, plan, apply"): it executes a Decision as planned and
// decides nothing. A repair runs before the role labels, a roll step or a SENTINEL RESET after them (and
// only when they were applied). Writes carry what was observed as preconditions (a label patch the pod's
// resourceVersion, a pod delete its UID and resourceVersion), so a step decided from a stale cache fails with
// a Conflict instead of hitting a replaced pod.

// apply executes d's repair, role labels and roll step or SENTINEL RESET, and returns what it did (the step
// taken, a failed handoff) for plan.Remember and the status; the live ACL sync is applyAccess.
func (c *InstanceController) apply(ctx context.Context, desc *corev1.ConfigMap, w plan.World, d plan.Decision, mem *instanceMemory) (plan.Outcome, error) {
	var out plan.Outcome
	in := w.Instance
	if d.Step != nil && d.Repair {
		if err := c.repair(ctx, desc, in, *d.Step, mem); err != nil {
			return out, err
		}
		out.LastAction = d.Step.String()
	}
	for _, a := range d.Labels() {
		if err := c.label(ctx, desc, in, w, a, mem); err != nil {
			return out, err
		}
		if slices.Contains(d.CloseOnRelabel, a.Node.Index) {
			// the primary Service no longer selects it: connections that came back to it between its demotion
			// and this patch (a handoff closes them at the demotion), or that a stale primary still serves,
			// now reconnect to the real primary
			c.closeClients(ctx, desc, in, mem, a.Node, "primary label removed")
			out.Relabel(a.Node.Index, time.Now())
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
		out.LastAction, out.Handoff, err = c.handOff(ctx, desc, in, w, d, s, mem, &out)
	case plan.Reset:
		out.LastAction, err = c.reset(ctx, desc, in, w, s)
	}
	return out, err
}

// label sets one pod's valkey.io/role as observed (its resourceVersion as precondition).
func (c *InstanceController) label(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, a topology.Action,
	mem *instanceMemory) error {
	if err := kube.PatchPodRole(ctx, c.cs, in.Namespace, a.Node.Pod, w.Node(a.Node.Index).PodVersion, a.Role); err != nil {
		return err
	}
	c.metrics.LabelPatches.WithLabelValues(in.NamespacedName().String()).Inc()
	c.log.Info("role label", "instance", in.Name, "pod", a.Node.Pod, "role", a.Role, "reason", a.Reason)
	return nil
}

// recloseEvery is the pass interval while a reclose window is open (plan.RecloseWindow; the resync is 2 s by
// default).
const recloseEvery = 500 * time.Millisecond

// reclose closes again the application connections of the nodes the planner names (plan.Reclose,
// closeClients).
func (c *InstanceController) reclose(ctx context.Context, desc *corev1.ConfigMap, w plan.World, d plan.Decision, mem *instanceMemory) {
	for _, i := range d.Reclose {
		c.closeClients(ctx, desc, w.Instance, mem, w.Node(i).Node, "primary label removed recently: the Service's routing may still send clients there")
	}
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

// handOff hands the primary off s.Node with internal/podsteps/handoff: SENTINEL FAILOVER asked of the Sentinels in
// d.FailoverOrder when the planner set it, FAILOVER TO s.Target otherwise. A failure is returned with the
// HandoffFailure that plan.Remember folds into the memory (the roll backs off). The primary's label, taken off
// while its writes wait (unlabelPaused), is recorded in out (Relabelled: its connections are closed again for
// plan.RecloseWindow).
func (c *InstanceController) handOff(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, d plan.Decision,
	s plan.Step, mem *instanceMemory, out *plan.Outcome) (string, *plan.HandoffFailure, error) {
	cfg := handoff.Config{Primary: in.Addr(s.Node), NodeOptions: c.opOptions(in, mem), Nodes: in.NodeAddrs(),
		Log: c.log.With("instance", in.Name, "pod", s.Node.Pod)}
	if d.FailoverOrder != nil {
		cfg.MonitorName, cfg.Sentinels, cfg.SentinelOptions = in.MonitorName, d.FailoverOrder, c.sentinelOpts(ctx, in, *w.SentinelInfo)
	} else {
		cfg.Target = in.Addr(s.Target)
	}
	var unlabelled time.Time
	if w.Node(s.Node.Index).RoleLabel == contract.RolePrimary {
		cfg.OnPaused = func() {
			if c.unlabelPaused(ctx, desc, in, w, s.Node, mem) {
				unlabelled = time.Now()
			}
		}
	}
	// the handoff dials its own connections; the pooled one to the old primary is stale afterwards
	defer c.pool.drop(cfg.Primary)
	res, err := handoff.Run(ctx, cfg)
	if !unlabelled.IsZero() { // Run has returned: OnPaused is done
		out.Relabel(s.Node.Index, unlabelled)
	}
	c.metrics.DemotedClientsClosed.WithLabelValues(in.NamespacedName().String()).Add(float64(res.Clients.Conns))
	if res.Clients.Err != nil {
		c.metrics.DemotedClientsNotClosed.WithLabelValues(in.NamespacedName().String()).Inc()
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "DemotedClientsNotClosed",
			"%s (handed off): could not close its application connections; they get READONLY until they reconnect: %v", s.Node.Pod, res.Clients.Err)
	}
	if err != nil {
		f := &plan.HandoffFailure{Reason: handoff.ReasonOf(err), Err: err.Error(), At: time.Now()}
		c.recorder.Eventf(desc, corev1.EventTypeWarning, "RollDeferred", "primary handoff from %s deferred: %v", s.Node.Pod, err)
		return "", f, err
	}
	how := fmt.Sprintf("writes paused %s", res.Paused.Round(time.Millisecond))
	if res.DemotedEarly {
		how += ", demoted before the promotion completed (the pause budget ran out)"
	}
	c.recorder.Eventf(desc, corev1.EventTypeNormal, "PrimaryHandedOff", "primary moved off %s to %s before its replacement (%s)", s.Node.Pod, res.NewPrimary, how)
	return "roll: handed the primary off " + s.Node.Pod, nil, nil
}

// unlabelPaused removes the primary role label from the pod of a primary whose writes a handoff has just paused
// (handoff.Config.OnPaused; label, so the pod as observed: its resourceVersion as precondition). The primary Service thus
// loses its endpoint during the failover rather than right after the switch, so the new primary's endpoint is the
// Service's only change after it: kube-proxy applies changes at most once per minSyncPeriod (1 s by default), and
// the second of two changes a few milliseconds apart waited that long (issue 30). No write is refused for it: the
// old primary's writes wait, and a client dialling the Service meanwhile is refused and redials. A failure is
// logged and costs only that gain (false); the pass after the handoff sets every label as observed (on a handoff that
// did not complete, the label back on the old primary).
func (c *InstanceController) unlabelPaused(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, n spec.Node,
	mem *instanceMemory) bool {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	a := topology.Action{Kind: topology.Label, Node: n, Reason: "writes paused for the handoff"}
	if err := c.label(pctx, desc, in, w, a, mem); err != nil {
		c.log.Warn("handoff: could not take the primary Service off the paused primary; it moves after the switch", "instance", in.Name,
			"pod", n.Pod, "err", err)
		return false
	}
	return true
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

// aclBudget bounds one node's ACL sync (docs/design.md, "Access").
const aclBudget = 5 * time.Second

// applyAccess syncs the users of p live on each node of p.Sync (ACL SETUSER each desired user, ACL DELUSER
// the extras; syncNode), each bounded by aclBudget. A node whose sync fails has its pooled connection
// dropped. It returns one plan.NodeSync per node, in p.Sync's order (nil when p syncs none); it never fails
// the pass and never affects readiness.
func (c *InstanceController) applyAccess(ctx context.Context, w plan.World, p plan.AccessPlan, mem *instanceMemory) []plan.NodeSync {
	if len(p.Sync) == 0 {
		return nil
	}
	in := w.Instance
	opts := c.opOptions(in, mem)
	opts.CommandTimeout = aclBudget
	out := make([]plan.NodeSync, 0, len(p.Sync))
	for _, n := range p.Sync {
		addr := in.Addr(n)
		if err := c.syncNode(ctx, addr, opts, p.Users, w.Now); err != nil {
			out = append(out, plan.NodeSync{Pod: n.Pod, Revision: p.Revision, Err: err.Error()})
			c.pool.drop(addr)
			continue
		}
		out = append(out, plan.NodeSync{Pod: n.Pod, Revision: p.Revision})
		c.log.Info("ACL synced", "instance", in.Name, "pod", n.Pod, "revision", p.Revision, "users", len(p.Users))
	}
	return out
}

// syncNode applies users on the node at addr: ACL LIST (acl.ObserveNode), then the difference
// (acl.BuildNodeSync, acl.ApplySync), closing the sessions of revoked passwords; errors are the first
// command's that failed.
func (c *InstanceController) syncNode(ctx context.Context, addr string, opts valkey.Options, users []acl.DesiredUser, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, aclBudget)
	defer cancel()
	cl, err := c.pool.get(ctx, addr, opts)
	if err != nil {
		return err
	}
	node, err := acl.ObserveNode(ctx, cl, users)
	if err != nil {
		return err
	}
	sync, err := acl.BuildNodeSync(users, node, now)
	if err != nil {
		return err
	}
	if err := acl.ApplySync(ctx, cl, sync); err != nil {
		return err
	}
	if len(sync.Kill) > 0 {
		c.log.Info("closed the sessions of revoked passwords", "node", addr, "users", sync.Kill)
	}
	return nil
}
