package controller

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/handoff"
	"github.com/valkey-ha/valkey-ha/internal/kube"
	"github.com/valkey-ha/valkey-ha/internal/roll"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// handoffBackoff is how long a failed primary handoff waits before it is tried again (a handoff refused
// because no replica can be promoted waits for the observation to change instead).
const handoffBackoff = time.Minute

const revisionLabel = "controller-revision-hash"

// stale reports whether a pod's revision differs from its StatefulSet's update revision (OnDelete rolls).
func stale(pod *corev1.Pod, sts *appsv1.StatefulSet) bool {
	if pod == nil || sts == nil || sts.Status.UpdateRevision == "" {
		return false
	}
	return pod.Labels[revisionLabel] != sts.Status.UpdateRevision
}

// planRoll builds the roll input from the observation and returns the next step.
func (c *InstanceController) planRoll(in spec.Instance, obs topology.Observation, plan topology.Plan, quorumOK bool, mem *instanceMemory) (*roll.DataStep, string) {
	ri := roll.DataInput{Monitored: obs.Sentinel.Monitored,
		Frozen:   obs.Sentinel.FailoverInProgress || obs.Sentinel.PrimaryDown || obs.Sentinel.Disagree || plan.HandingOff != nil,
		QuorumOK: quorumOK, HandoffDeferred: time.Now().Before(mem.handoffDeferredUntil)}
	var stss []*appsv1.StatefulSet
	for _, n := range obs.Nodes {
		if sts, err := c.stss.StatefulSets(in.Namespace).Get(n.Node.StatefulSet); err == nil {
			stss = append(stss, sts)
		}
	}
	ri.Settling = checkSettled(stss)
	var primaryOffset int64
	for _, n := range obs.Nodes {
		if plan.Primary != nil && n.Node.Index == plan.Primary.Index && n.Reachable {
			primaryOffset = n.Repl.Offset()
		}
	}
	for _, n := range obs.Nodes {
		pod, _ := c.pods.Pods(in.Namespace).Get(n.Node.Pod)
		sts, _ := c.stss.StatefulSets(in.Namespace).Get(n.Node.StatefulSet)
		dn := roll.DataNode{Node: n.Node, Stale: stale(pod, sts), Ready: n.PodReady, Reachable: n.Reachable,
			Primary: plan.Primary != nil && plan.PrimaryConfirmed && n.Node.Index == plan.Primary.Index}
		if n.Reachable && n.Repl.Role == valkey.RoleReplica {
			dn.LinkUp = n.Repl.LinkUp && plan.Primary != nil && in.SameAddr(*plan.Primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort)
			dn.LagBytes = primaryOffset - n.Repl.Offset()
			dn.NeverPromote = n.Repl.ReplicaPriority == 0
		}
		ri.Nodes = append(ri.Nodes, dn)
	}
	return roll.PlanData(ri)
}

// checkSettled returns why the instance's StatefulSets are not a stable roll target yet, or "": the
// StatefulSet controller must have observed every spec (status.observedGeneration, without which
// status.updateRevision is stale), and every StatefulSet must carry the same valkey.io/release-revision
// (Helm applies them one by one, so during an upgrade some are new and some old).
func checkSettled(stss []*appsv1.StatefulSet) string {
	revs := map[string]bool{}
	for _, s := range stss {
		if s.Status.ObservedGeneration < s.Generation {
			return fmt.Sprintf("StatefulSet %s: generation %d not observed yet", s.Name, s.Generation)
		}
		if r, ok := s.Annotations[spec.AnnotationReleaseRevision]; ok {
			revs[r] = true
		}
	}
	if len(revs) > 1 {
		var l []string
		for r := range revs {
			l = append(l, r)
		}
		sort.Strings(l)
		return fmt.Sprintf("the StatefulSets carry release revisions %s: an upgrade is being applied", strings.Join(l, ", "))
	}
	return ""
}

// checkHandoffReplicas asks every Sentinel for SENTINEL REPLICAS and returns why a planned SENTINEL
// FAILOVER must wait (roll.CheckHandoffReplicas), or "", and a fingerprint of what the Sentinels listed
// (addresses, flags, priorities), so a refused handoff is retried only once their view changed.
func (c *InstanceController) checkHandoffReplicas(ctx context.Context, in spec.Instance, si spec.SentinelInfo, plan topology.Plan) (string, string) {
	if plan.Primary == nil {
		return "no primary", ""
	}
	var want []string
	for _, n := range in.Nodes {
		if n.Index != plan.Primary.Index {
			want = append(want, net.JoinHostPort(spec.NormalizeHost(n.Host), strconv.Itoa(in.PortOf(n))))
		}
	}
	views := map[string][]roll.SentinelReplica{}
	var print []string
	for _, addr := range si.Addrs() {
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, in, si))
		if err != nil {
			continue
		}
		reps, err := cl.SentinelReplicas(ctx, in.MonitorName)
		if err != nil {
			c.pool.drop(addr)
			continue
		}
		l := make([]roll.SentinelReplica, 0, len(reps))
		for _, r := range reps {
			ra := net.JoinHostPort(spec.NormalizeHost(r.Host), strconv.Itoa(r.Port))
			l = append(l, roll.SentinelReplica{Addr: ra, Flags: r.Flags, LinkOK: r.PrimaryLinkUp})
			print = append(print, fmt.Sprintf("%s:%s:%s:%d", addr, ra, strings.Join(r.Flags, ","), r.Priority))
		}
		views[addr] = l
	}
	sort.Strings(print)
	return roll.CheckHandoffReplicas(views, want), strings.Join(print, " ")
}

// handoffPrint fingerprints what decides whether a replica can be promoted: each node's readiness, role,
// link and replica-priority (not its offset, which moves all the time).
func handoffPrint(obs topology.Observation) string {
	var l []string
	for _, n := range obs.Nodes {
		l = append(l, fmt.Sprintf("%s:%v:%v:%s:%v:%d", n.Node.Pod, n.PodReady, n.Reachable, n.Repl.Role, n.Repl.LinkUp, n.Repl.ReplicaPriority))
	}
	return strings.Join(l, " ")
}

// applyRoll executes one roll step.
// A pod is deleted only as observed (its UID and resourceVersion as preconditions): one replaced or
// changed since fails with a Conflict and the next pass looks again.
func (c *InstanceController) applyRoll(ctx context.Context, in spec.Instance, descCM *corev1.ConfigMap, obs topology.Observation,
	step *roll.DataStep, si *spec.SentinelInfo, mem *instanceMemory) (string, error) {
	switch step.Kind {
	case roll.DeletePod:
		seen := observedPod(obs, step.Node)
		if err := kube.DeletePod(ctx, c.cs, in.Namespace, step.Node.Pod, types.UID(seen.PodUID), seen.PodVersion); err != nil {
			return "", fmt.Errorf("roll: %w", err)
		}
		c.pool.drop(in.Addr(step.Node))
		c.recorder.Eventf(descCM, corev1.EventTypeNormal, "RollingPod", "replaced %s: %s", step.Node.Pod, step.Reason)
		c.log.Info("roll: deleted pod", "instance", in.Name, "pod", step.Node.Pod, "reason", step.Reason)
		return "roll: replaced " + step.Node.Pod, nil
	case roll.HandOff:
		res, err := c.handOff(ctx, in, step, si, mem)
		if err != nil {
			switch handoff.ReasonOf(err) {
			case handoff.ReasonNoGoodReplica:
				// not retried until the observation changes (the print of this pass)
				mem.handoffRefused = handoffRefusal{print: mem.handoffPrint, why: "handoff refused: " + err.Error()}
			case handoff.ReasonFailoverInFlight:
				// look again next pass: the planner holds still while a failover runs
			default:
				mem.handoffDeferredUntil = time.Now().Add(handoffBackoff)
			}
			c.recorder.Eventf(descCM, corev1.EventTypeWarning, "RollDeferred", "primary handoff from %s deferred: %v", step.Node.Pod, err)
			return "", err
		}
		how := fmt.Sprintf("writes paused %s", res.Paused.Round(time.Millisecond))
		if res.DemotedEarly {
			how += ", demoted before the promotion completed (the pause budget ran out)"
		}
		c.recorder.Eventf(descCM, corev1.EventTypeNormal, "PrimaryHandedOff", "primary moved off %s to %s before its replacement (%s)", step.Node.Pod, res.NewPrimary, how)
		return "roll: handed the primary off " + step.Node.Pod, nil
	}
	return "", nil
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

// handOff hands the primary off step.Node with internal/handoff: SENTINEL FAILOVER asked of the Sentinels in
// planFailoverOrder when monitored, FAILOVER TO step.Target otherwise.
func (c *InstanceController) handOff(ctx context.Context, in spec.Instance, step *roll.DataStep, si *spec.SentinelInfo, mem *instanceMemory) (handoff.Result, error) {
	cfg := handoff.Config{Primary: in.Addr(step.Node), NodeOptions: c.opOptions(in, mem),
		Log: c.log.With("instance", in.Name, "pod", step.Node.Pod)}
	if si != nil && in.Monitored() {
		cfg.MonitorName, cfg.Sentinels, cfg.SentinelOptions = in.MonitorName, planFailoverOrder(si.Addrs()), c.sentinelOpts(ctx, in, *si)
	} else {
		cfg.Target = in.Addr(step.Target)
	}
	// the handoff dials its own connections; the pooled one to the old primary is stale afterwards
	defer c.pool.drop(cfg.Primary)
	return handoff.Run(ctx, cfg)
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

// planResetAfterScaleIn gathers each Sentinel's replica list and returns the Sentinel to RESET (if any) so
// removed nodes stop being listed (cases S03, S10, S11).
func (c *InstanceController) planResetAfterScaleIn(ctx context.Context, in spec.Instance, si spec.SentinelInfo, plan topology.Plan) (string, string) {
	if plan.Primary == nil || !plan.PrimaryConfirmed {
		return "", "no confirmed primary"
	}
	live := map[string]bool{}
	for _, n := range in.Nodes {
		if n.Index != plan.Primary.Index {
			live[net.JoinHostPort(spec.NormalizeHost(n.Host), strconv.Itoa(in.PortOf(n)))] = true
		}
	}
	var views []roll.SentinelView
	for _, addr := range si.Addrs() {
		v := roll.SentinelView{Addr: addr}
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, in, si))
		if err != nil {
			return "", addr + " unreachable"
		}
		m, found, err := cl.SentinelMaster(ctx, in.MonitorName)
		if err != nil {
			return "", err.Error()
		}
		v.Known, v.Healthy, v.Peers = found, m.Healthy(), int(m.NumOtherSentinels)
		if found {
			reps, err := cl.SentinelReplicas(ctx, in.MonitorName)
			if err != nil {
				return "", err.Error()
			}
			for _, r := range reps {
				v.Replicas = append(v.Replicas, roll.SentinelReplica{Addr: net.JoinHostPort(spec.NormalizeHost(r.Host), strconv.Itoa(r.Port)),
					Flags: r.Flags, LinkOK: r.PrimaryLinkUp})
			}
		}
		views = append(views, v)
	}
	return roll.PlanReset(views, live)
}

func (c *InstanceController) applyReset(ctx context.Context, in spec.Instance, descCM *corev1.ConfigMap, si spec.SentinelInfo, addr string) (string, error) {
	cl, err := c.pool.get(ctx, addr, c.sentinelOpts(ctx, in, si))
	if err != nil {
		return "", err
	}
	if _, err := cl.SentinelReset(ctx, in.MonitorName); err != nil {
		return "", err
	}
	c.recorder.Eventf(descCM, corev1.EventTypeNormal, "SentinelReset", "SENTINEL RESET %s on %s: it listed a replica that is gone", in.MonitorName, addr)
	c.log.Info("SENTINEL RESET after scale-in", "instance", in.Name, "sentinel", addr)
	return "SENTINEL RESET on " + addr, nil
}

// handoffRefusal is a handoff refused because no replica could be promoted, with the print of the
// observation it was refused under.
type handoffRefusal struct{ print, why string }

// gateHandoff holds a planned handoff back while a Sentinel does not list every replica as a healthy one
// (checkHandoffReplicas), and while the view of the replicas is the one under which the last handoff was
// refused for want of a promotable replica.
func (c *InstanceController) gateHandoff(ctx context.Context, in spec.Instance, obs topology.Observation, plan topology.Plan,
	si *spec.SentinelInfo, mem *instanceMemory, step *roll.DataStep) (*roll.DataStep, string) {
	print, wait := handoffPrint(obs), ""
	if si != nil && in.Monitored() {
		var views string
		wait, views = c.checkHandoffReplicas(ctx, in, *si, plan)
		print += " " + views
	}
	mem.handoffPrint = print
	switch {
	case wait != "":
		return nil, wait
	case mem.handoffRefused.why != "" && mem.handoffRefused.print == print:
		return nil, mem.handoffRefused.why
	}
	mem.handoffRefused = handoffRefusal{}
	return step, ""
}

// reportNoPromotable sends one Warning Event when the roll starts waiting because no replica may be
// promoted, not one per pass.
func (c *InstanceController) reportNoPromotable(descCM *corev1.ConfigMap, why string, mem *instanceMemory) {
	if why != roll.NoPromotableReplica {
		mem.noPromoteEvent = ""
		return
	}
	if mem.noPromoteEvent != why {
		mem.noPromoteEvent = why
		c.recorder.Eventf(descCM, corev1.EventTypeWarning, "HandoffImpossible", "%s", why)
	}
}
