package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/roll"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// Handoff timing (seed 000, "Planned operations": poll with a 1 s tick and a 10 s deadline; a shorter tick
// only shortens the write pause, so the monitored handoff polls one Sentinel every 20 ms while writes are
// paused).
const (
	handoffTick     = 200 * time.Millisecond
	handoffPollTick = 20 * time.Millisecond
	handoffDeadline = 10 * time.Second
	// handoffBackoff is how long a timed-out handoff waits before it is tried again.
	handoffBackoff = time.Minute
	// writePause bounds the CLIENT PAUSE WRITE around a monitored handoff in milliseconds; it is lifted as
	// soon as the primary moved.
	writePauseMs = 15000
)

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
	ri := roll.DataInput{Monitored: obs.Sentinel.Monitored, Frozen: obs.Sentinel.FailoverInProgress || obs.Sentinel.PrimaryDown,
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
// FAILOVER must wait (roll.CheckHandoffReplicas), or "".
func (c *InstanceController) checkHandoffReplicas(ctx context.Context, in spec.Instance, si spec.SentinelInfo, plan topology.Plan) string {
	if plan.Primary == nil {
		return "no primary"
	}
	var want []string
	for _, n := range in.Nodes {
		if n.Index != plan.Primary.Index {
			want = append(want, net.JoinHostPort(spec.NormalizeHost(n.Host), strconv.Itoa(in.PortOf(n))))
		}
	}
	views := map[string][]roll.SentinelReplica{}
	for _, addr := range si.Addrs() {
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(si.TLS))
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
			l = append(l, roll.SentinelReplica{Addr: net.JoinHostPort(spec.NormalizeHost(r.Host), strconv.Itoa(r.Port)), Flags: r.Flags, LinkOK: r.PrimaryLinkUp})
		}
		views[addr] = l
	}
	return roll.CheckHandoffReplicas(views, want)
}

// applyRoll executes one roll step.
func (c *InstanceController) applyRoll(ctx context.Context, in spec.Instance, descCM *corev1.ConfigMap, step *roll.DataStep, si *spec.SentinelInfo, mem *instanceMemory) (string, error) {
	switch step.Kind {
	case roll.DeletePod:
		err := c.cs.CoreV1().Pods(in.Namespace).Delete(ctx, step.Node.Pod, metav1.DeleteOptions{})
		if err != nil {
			return "", fmt.Errorf("delete pod %s: %w", step.Node.Pod, err)
		}
		c.pool.drop(in.Addr(step.Node))
		c.recorder.Eventf(descCM, corev1.EventTypeNormal, "RollingPod", "replaced %s: %s", step.Node.Pod, step.Reason)
		c.log.Info("roll: deleted pod", "instance", in.Name, "pod", step.Node.Pod, "reason", step.Reason)
		return "roll: replaced " + step.Node.Pod, nil
	case roll.HandOff:
		var err error
		if si != nil && in.Monitored() {
			err = c.handOffSentinel(ctx, in, step, *si, mem)
		} else {
			err = c.handOffDirect(ctx, in, step, mem)
		}
		if err != nil {
			mem.handoffDeferredUntil = time.Now().Add(handoffBackoff)
			c.recorder.Eventf(descCM, corev1.EventTypeWarning, "RollDeferred", "primary handoff from %s deferred: %v", step.Node.Pod, err)
			return "", err
		}
		c.recorder.Eventf(descCM, corev1.EventTypeNormal, "PrimaryHandedOff", "primary moved off %s before its replacement", step.Node.Pod)
		return "roll: handed the primary off " + step.Node.Pod, nil
	}
	return "", nil
}

// opOptions are the options of the _operator user towards the instance's nodes.
func (c *InstanceController) opOptions(in spec.Instance, mem *instanceMemory) valkey.Options {
	return valkey.Options{Username: acl.Operator, Password: mem.operatorPW, DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.
		WithTLS(in.TLS.Enabled, c.opts.TLSCAFile)
}

// sentinelOpts are the options towards the Sentinels (no credentials).
func (c *InstanceController) sentinelOpts(tls bool) valkey.Options {
	return valkey.Options{DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout}.WithTLS(tls, c.opts.TLSCAFile)
}

// handOffSentinel pauses writes on the primary, waits until every replica has its offset (so no acknowledged
// write is lost), asks Sentinel to fail over, and polls GET-MASTER-ADDR-BY-NAME until the primary moved. The
// pause is always lifted.
//
// The failover is asked of the last Sentinel that answers (see planFailoverOrder); the leader's own
// GET-MASTER-ADDR-BY-NAME names the promoted replica as soon as it saw the promotion (Sentinel docs,
// "Sentinel API": the address is the promoted replica's once the failover reached reconf-slaves), which is
// when the old primary is demoted and the pause lifted.
func (c *InstanceController) handOffSentinel(ctx context.Context, in spec.Instance, step *roll.DataStep, si spec.SentinelInfo, mem *instanceMemory) error {
	pc, err := c.pool.get(ctx, in.Addr(step.Node), c.opOptions(in, mem))
	if err != nil {
		return err
	}
	if _, err := pc.Do(ctx, "CLIENT", "PAUSE", strconv.Itoa(writePauseMs), "WRITE"); err != nil {
		return err
	}
	defer func() { _, _ = pc.Do(context.WithoutCancel(ctx), "CLIENT", "UNPAUSE") }()
	// WAIT makes the replicas acknowledge now (REPLCONF GETACK) instead of at their next 1 s ACK
	if n, err := pc.Do(ctx, "WAIT", strconv.Itoa(len(in.Nodes)-1), "2000"); err != nil || n != int64(len(in.Nodes)-1) {
		if err := waitReplicasCaughtUp(ctx, pc, len(in.Nodes)-1); err != nil {
			return err
		}
	}
	var sc *valkey.Client
	for _, addr := range planFailoverOrder(si.Addrs()) {
		if sc, err = c.pool.get(ctx, addr, c.sentinelOpts(si.TLS)); err == nil {
			if err = sc.SentinelFailover(ctx, in.MonitorName); err == nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	c.log.Info("roll: SENTINEL FAILOVER", "instance", in.Name, "from", step.Node.Pod)
	deadline := time.Now().Add(handoffDeadline)
	for time.Now().Before(deadline) {
		host, port, found, err := sc.SentinelPrimaryAddr(ctx, in.MonitorName)
		if err == nil && found && !in.SameAddr(step.Node, host, port) {
			// Demote the old primary before the pause is lifted: clients that have not heard +switch-master
			// yet would otherwise write to it and have those acknowledged writes dropped when Sentinel
			// demotes it. REPLICAOF towards Sentinel's new primary agrees with Sentinel, so it never fights it.
			if err := pc.ReplicaOf(ctx, host, port); err != nil {
				return fmt.Errorf("demote %s after the handoff: %w", step.Node.Pod, err)
			}
			// The leader publishes +switch-master only at +failover-end, about 1 s after the other
			// Sentinels (it waits for the remaining replicas' next INFO). Closing its Pub/Sub clients makes
			// clients subscribed to it reconnect and ask GET-MASTER-ADDR-BY-NAME, which it already answers
			// with the new primary: the same nudge Sentinel gives clients of a reconfigured server (CLIENT
			// KILL TYPE pubsub). Best effort: a client that misses it still hears +switch-master.
			if _, err := sc.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
				c.log.Info("roll: could not close the failover leader's Pub/Sub clients", "instance", in.Name, "err", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(handoffPollTick):
		}
	}
	return fmt.Errorf("Sentinel did not move the primary within %s", handoffDeadline)
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

// handOffDirect uses FAILOVER TO on an unmonitored primary: the server pauses writes, waits for the target to
// catch up and swaps roles itself (Valkey docs, "FAILOVER"). The remaining replicas are repointed by the repair
// rule on the next passes.
func (c *InstanceController) handOffDirect(ctx context.Context, in spec.Instance, step *roll.DataStep, mem *instanceMemory) error {
	pc, err := c.pool.get(ctx, in.Addr(step.Node), c.opOptions(in, mem))
	if err != nil {
		return err
	}
	if _, err := pc.Do(ctx, "FAILOVER", "TO", step.Target.Host, strconv.Itoa(in.PortOf(step.Target)), "TIMEOUT", strconv.Itoa(int(handoffDeadline/time.Millisecond))); err != nil {
		return err
	}
	deadline := time.Now().Add(handoffDeadline + 2*time.Second)
	for time.Now().Before(deadline) {
		r, err := pc.InfoReplication(ctx)
		if err == nil && r.Role == valkey.RoleReplica {
			return nil
		}
		if err == nil && r.FailoverState == "no-failover" && r.Role == valkey.RolePrimary && time.Until(deadline) < handoffDeadline {
			return errors.New("FAILOVER aborted: the primary is still primary")
		}
		time.Sleep(handoffTick)
	}
	return fmt.Errorf("FAILOVER TO %s did not complete within %s", step.Target.Pod, handoffDeadline)
}

// waitReplicasCaughtUp polls the primary's INFO replication until every one of want replicas acknowledged
// the primary's offset.
func waitReplicasCaughtUp(ctx context.Context, pc *valkey.Client, want int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := pc.InfoReplication(ctx)
		if err != nil {
			return err
		}
		n := 0
		for _, rep := range r.Replicas {
			if rep.State == "online" && rep.Offset >= r.MasterReplOffset {
				n++
			}
		}
		if n >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d replicas caught up with offset %d", n, want, r.MasterReplOffset)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
		cl, err := c.pool.get(ctx, addr, c.sentinelOpts(si.TLS))
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
	cl, err := c.pool.get(ctx, addr, c.sentinelOpts(si.TLS))
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
