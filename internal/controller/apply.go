package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/handoff"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/roll"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// The instance controller's applier (docs/design.md, "Apply"): it executes a Decision as planned and
// decides nothing. A repair runs before the role labels, a roll step or a SENTINEL RESET after them (and
// only when they were applied). Writes carry what was observed as preconditions (a label patch the pod's
// resourceVersion, a pod delete its UID and resourceVersion), so a step decided from a stale cache fails with
// a Conflict instead of hitting a replaced pod.

// handoffBackoff is how long a failed primary handoff waits before it is tried again (a handoff refused
// because no replica can be promoted waits for the observation to change instead).
const handoffBackoff = time.Minute

const revisionLabel = "controller-revision-hash"

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
		if err := c.label(ctx, in, w, a); err != nil {
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
func (c *InstanceController) label(ctx context.Context, in spec.Instance, w plan.World, a topology.Action) error {
	if err := kube.PatchPodRole(ctx, c.cs, in.Namespace, a.Node.Pod, w.Node(a.Node.Index).PodVersion, a.Role); err != nil {
		return err
	}
	c.metrics.LabelPatches.WithLabelValues(in.Namespace + "/" + in.Name).Inc()
	c.log.Info("role label", "instance", in.Name, "pod", a.Node.Pod, "role", a.Role, "reason", a.Reason)
	return nil
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
	c.metrics.Repairs.WithLabelValues(in.Namespace+"/"+in.Name, string(s.Kind)).Inc()
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
	cfg := handoff.Config{Primary: in.Addr(s.Node), NodeOptions: c.opOptions(in, mem),
		Log: c.log.With("instance", in.Name, "pod", s.Node.Pod)}
	if si := w.SentinelInfo; si != nil && in.Monitored() {
		cfg.MonitorName, cfg.Sentinels, cfg.SentinelOptions = in.MonitorName, planFailoverOrder(si.Addrs()), c.sentinelOpts(ctx, in, *si)
	} else {
		cfg.Target = in.Addr(s.Target)
	}
	// the handoff dials its own connections; the pooled one to the old primary is stale afterwards
	defer c.pool.drop(cfg.Primary)
	res, err := handoff.Run(ctx, cfg)
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

// reset sends SENTINEL RESET <monitor> to one Sentinel.
func (c *InstanceController) reset(ctx context.Context, desc *corev1.ConfigMap, in spec.Instance, w plan.World, s plan.Step) (string, error) {
	cl, err := c.pool.get(ctx, s.Sentinel, c.sentinelOpts(ctx, in, *w.SentinelInfo))
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
