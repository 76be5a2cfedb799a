package plan

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/roll"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Decision is the instance planner's output for one pass (docs/design.md, "The instance controller's pass").
type Decision struct {
	// Topology is topology.Build's plan: the real primary, the role-label changes and why a repair waits.
	Topology topology.Plan
	// Step is the one disruptive step to take (a repair, a roll step or a SENTINEL RESET), after the policy;
	// nil when there is none or the policy refused it (Refused says why).
	Step    *Step
	Refused string
	// Repair is true when Step (or the refused step) is the topology's repair: it runs before the labels;
	// a roll step or a reset runs after them, and only when they were applied.
	Repair bool
	// RollPlanned is true when the roll was planned this pass (no repair was due); Roll is why it waits ("":
	// nothing to roll, or a step).
	RollPlanned bool
	Roll        string
	// HandoffPrint fingerprints the view a planned handoff was gated under (roll.CheckHandoffReplicas'
	// inputs); the applier records it with a refusal for want of a promotable replica.
	HandoffPrint string
	// FailoverOrder is, for a HandOff step of a monitored instance, the Sentinels to ask SENTINEL FAILOVER of,
	// in that order (FailoverOrder); nil otherwise (an unmonitored instance hands off with FAILOVER TO
	// Step.Target).
	FailoverOrder []string
	// HandoffObstacle is, while the primary's pod is terminating (Topology.HandingOff), why its preStop hook
	// cannot hand off (HandoffObstacle), "" when nothing observed stops it.
	HandoffObstacle string
	// Reclose are the nodes whose application connections are closed again this pass, before any step
	// (Reclose: their primary label was removed less than RecloseWindow ago); CloseOnRelabel the nodes whose
	// connections are closed right after their label change is applied (CloseOnRelabel).
	Reclose        []int
	CloseOnRelabel []int
	// PrimaryChanged is the primary move this pass confirmed (zero: none).
	PrimaryChanged PrimaryChange
	// Memory is the controller's memory for the next pass, before the applier's Outcome is folded in
	// (Remember).
	Memory Memory
}

// Labels returns the role-label changes of the decision, in execution order (the primary label's removals first:
// the primary Service never has two endpoints, case S21; then its addition, then the replica labels; topology.Build).
func (d Decision) Labels() []topology.Action {
	var out []topology.Action
	for _, a := range d.Topology.Actions {
		if a.Kind == topology.Label {
			out = append(out, a)
		}
	}
	return out
}

// Instance is the instance controller's planner (pure): from the World and the memory of earlier passes it
// returns at most one disruptive step, with the precedence "repair, then the step after a switch
// (planFollowSwitch), before roll before reset" (one disruptive
// step per pass; docs/design.md, "The instance controller's pass"), the label changes, the reasons anything waits and the next
// memory. The step it picks is vetted by Check; a refused step is not replaced by another one this pass.
func Instance(w World, m Memory) Decision {
	d := Decision{Memory: m}
	mem := &d.Memory
	hasPrimary := false
	for _, n := range w.Nodes {
		hasPrimary = hasPrimary || isPrimary(n)
	}
	switch {
	case hasPrimary:
		mem.NoPrimarySince = time.Time{}
	case mem.NoPrimarySince.IsZero():
		mem.NoPrimarySince = w.Now
	}
	noPrimaryFor := w.Now.Sub(mem.NoPrimarySince)
	if mem.NoPrimarySince.IsZero() {
		noPrimaryFor = 0
	}
	tp := topology.Build(w.Observation(noPrimaryFor))
	d.Topology = tp
	if tp.Primary != nil && tp.PrimaryConfirmed {
		mem.LastPrimaryPod = tp.Primary.Pod
	}
	if a := primaryAddr(w, tp); a != mem.Primary {
		mem.Primary, mem.PrimarySince = a, w.Now
	}
	rememberNamed(w, mem)

	var step *Step
	for _, a := range tp.Actions {
		if a.Disruptive() {
			s := Step{Kind: Repoint, Node: a.Node, Target: a.Target, Reason: a.Reason}
			if a.Kind == topology.Promote {
				s.Kind = Promote
			}
			step, d.Repair = &s, true
		}
	}
	if step == nil {
		if s := planFollowSwitch(w, *mem, tp); s != nil {
			step, d.Repair = s, true
		}
	}
	if step == nil {
		d.RollPlanned = true
		step = planRoll(w, &d, tp)
		if d.Roll == "" {
			mem.RollHeldSince = time.Time{}
		} else if mem.RollHeldSince.IsZero() {
			mem.RollHeldSince = w.Now
		}
	}
	if step != nil {
		if why := Check(w, *mem, *step); why != "" {
			d.Refused = why
		} else {
			d.Step = step
		}
	}
	if d.Step != nil && d.Step.Kind == HandOff && w.Monitored() {
		d.FailoverOrder = FailoverOrder(w.SentinelInfo.Addrs())
	}
	if h := tp.HandingOff; h != nil {
		d.HandoffObstacle = HandoffObstacle(w, *h)
	}
	d.Reclose, mem.Reclose = Reclose(w, tp, m.Reclose, w.Now)
	d.CloseOnRelabel = relabelCloses(w, d)
	d.PrimaryChanged = primaryChange(m, *mem)
	return d
}

// isPrimary reports whether n answered INFO replication with role master.
func isPrimary(n Node) bool { return n.Reachable && n.Repl.Role == valkey.RolePrimary }

// replicaAddr is a SENTINEL REPLICAS entry's address, host normalised.
func replicaAddr(r valkey.SentinelReplica) string {
	return net.JoinHostPort(spec.NormalizeHost(r.Host), strconv.Itoa(r.Port))
}

// primaryAddr is the address of the primary this pass names: the Sentinels' majority when monitored, else
// the confirmed primary ("" when none).
func primaryAddr(w World, tp topology.Plan) string {
	if w.Monitored() {
		if v := w.Vote(); v.Known() {
			return net.JoinHostPort(v.Host, strconv.Itoa(v.Port))
		}
		return ""
	}
	if tp.Primary != nil && tp.PrimaryConfirmed {
		return addrOf(w.Instance, *tp.Primary)
	}
	return ""
}

// addrOf is a node's address with its host normalised (how Sentinel lists replicas, and the policy compares).
func addrOf(in spec.Instance, n spec.Node) string {
	return net.JoinHostPort(spec.NormalizeHost(n.Host), strconv.Itoa(in.PortOf(n)))
}

// planRoll returns the roll step (or a SENTINEL RESET after a scale-in when nothing is to roll), setting
// d.Roll to why the roll waits.
func planRoll(w World, d *Decision, tp topology.Plan) *Step {
	rs, why := roll.PlanData(RollInput(w, d.Memory, tp))
	if rs != nil && rs.Kind == roll.HandOff {
		why = gateHandoff(w, d, tp)
		if why != "" {
			rs = nil
		}
	}
	d.Roll = why
	if rs != nil {
		kind := DeletePod
		if rs.Kind == roll.HandOff {
			kind = HandOff
		}
		return &Step{Kind: kind, Node: rs.Node, Target: rs.Target, Reason: rs.Reason}
	}
	v := w.SentinelView()
	if why != "" || !v.Monitored || v.FailoverInProgress || v.PrimaryDown || v.Disagree {
		return nil
	}
	return planReset(w, tp)
}

// RollInput is the World as roll.PlanData reads it.
func RollInput(w World, m Memory, tp topology.Plan) roll.DataInput {
	v := w.SentinelView()
	ri := roll.DataInput{Monitored: v.Monitored, Frozen: v.FailoverInProgress || v.PrimaryDown || v.Disagree || tp.HandingOff != nil,
		QuorumOK: w.Quorum.OK, HandoffDeferred: w.Now.Before(m.HandoffDeferredUntil), Settling: settling(w)}
	var primaryOffset int64
	for _, n := range w.Nodes {
		if tp.Primary != nil && n.Node.Index == tp.Primary.Index && n.Reachable {
			primaryOffset = n.Repl.Offset()
		}
	}
	for _, n := range w.Nodes {
		dn := roll.DataNode{Node: n.Node, Stale: n.Stale(), Ready: n.PodReady, Reachable: n.Reachable, Unschedulable: n.Unschedulable,
			Primary: tp.Primary != nil && tp.PrimaryConfirmed && n.Node.Index == tp.Primary.Index}
		if n.Reachable && n.Repl.Role == valkey.RoleReplica {
			dn.LinkUp = n.Repl.LinkUp && tp.Primary != nil && w.Instance.SameAddr(*tp.Primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort)
			dn.LagBytes = primaryOffset - n.Repl.Offset()
			dn.NeverPromote = n.Repl.ReplicaPriority == 0
		}
		ri.Nodes = append(ri.Nodes, dn)
	}
	return ri
}

// settling returns why the instance's StatefulSets are not a stable roll target yet, or "": the StatefulSet
// controller must have observed every spec (status.observedGeneration, without which status.updateRevision
// is stale), and every StatefulSet must carry the same valkey.io/release-revision (Helm applies them one by
// one, so during an upgrade some are new and some old).
func settling(w World) string {
	revs := map[string]bool{}
	for _, n := range w.Nodes {
		s := n.StatefulSet
		if s == nil {
			continue
		}
		if s.ObservedGeneration < s.Generation {
			return fmt.Sprintf("StatefulSet %s: generation %d not observed yet", s.Name, s.Generation)
		}
		if s.HasReleaseRevision {
			revs[s.ReleaseRevision] = true
		}
	}
	if len(revs) > 1 {
		l := make([]string, 0, len(revs))
		for r := range revs {
			l = append(l, r)
		}
		sort.Strings(l)
		return fmt.Sprintf("the StatefulSets carry release revisions %s: an upgrade is being applied", strings.Join(l, ", "))
	}
	return ""
}

// gateHandoff holds a planned handoff back while a Sentinel does not list every replica as a healthy one
// (roll.CheckHandoffReplicas), and while the view of the replicas is the one under which the last handoff
// was refused for want of a promotable replica. It records the view's print in d.
func gateHandoff(w World, d *Decision, tp topology.Plan) string {
	print := handoffPrint(w)
	wait := ""
	if w.Monitored() {
		views, sentinels := handoffViews(w, tp)
		wait = roll.CheckHandoffReplicas(views, replicaAddrs(w.Instance, tp))
		print += " " + sentinels
	}
	d.HandoffPrint = print
	switch {
	case wait != "":
		return wait
	case d.Memory.HandoffRefused.Why != "" && d.Memory.HandoffRefused.Print == print:
		return d.Memory.HandoffRefused.Why
	}
	d.Memory.HandoffRefused = HandoffRefusal{}
	return ""
}

// handoffPrint fingerprints what decides whether a replica can be promoted: each node's readiness, role,
// link and replica-priority (not its offset, which moves all the time).
func handoffPrint(w World) string {
	var l []string
	for _, n := range w.Nodes {
		l = append(l, fmt.Sprintf("%s:%v:%v:%s:%v:%d", n.Node.Pod, n.PodReady, n.Reachable, n.Repl.Role, n.Repl.LinkUp, n.Repl.ReplicaPriority))
	}
	return strings.Join(l, " ")
}

// replicaAddrs returns the normalised addresses of every node but the primary.
func replicaAddrs(in spec.Instance, tp topology.Plan) []string {
	var out []string
	for _, n := range in.Nodes {
		if tp.Primary == nil || n.Index != tp.Primary.Index {
			out = append(out, addrOf(in, n))
		}
	}
	return out
}

// handoffViews returns each answering Sentinel's replica list (SENTINEL REPLICAS) for the handoff gate, and
// a print of what they listed (addresses, flags, priorities).
func handoffViews(w World, tp topology.Plan) (map[string][]roll.SentinelReplica, string) {
	views := map[string][]roll.SentinelReplica{}
	var print []string
	if tp.Primary == nil {
		return views, ""
	}
	for _, s := range w.Sentinels {
		if !s.Answered() || s.ReplicasErr != "" {
			continue
		}
		l := make([]roll.SentinelReplica, 0, len(s.Replicas))
		for _, r := range s.Replicas {
			ra := replicaAddr(r)
			l = append(l, roll.SentinelReplica{Addr: ra, Flags: r.Flags, LinkOK: r.PrimaryLinkUp})
			print = append(print, fmt.Sprintf("%s:%s:%s:%d", s.Addr, ra, strings.Join(r.Flags, ","), r.Priority))
		}
		views[s.Addr] = l
	}
	sort.Strings(print)
	return views, strings.Join(print, " ")
}

// planReset returns the SENTINEL RESET that makes a Sentinel forget replicas that are gone after a
// scale-in (roll.PlanReset; cases S03, S10, S11), or nil. Every Sentinel must have answered.
func planReset(w World, tp topology.Plan) *Step {
	if tp.Primary == nil || !tp.PrimaryConfirmed {
		return nil
	}
	live := map[string]bool{}
	for _, a := range replicaAddrs(w.Instance, tp) {
		live[a] = true
	}
	views := make([]roll.SentinelView, 0, len(w.Sentinels))
	for _, s := range w.Sentinels {
		if !s.Answered() || (s.Found && s.ReplicasErr != "") {
			return nil
		}
		v := roll.SentinelView{Addr: s.Addr, Known: s.Found, Healthy: s.Monitor.Healthy(), Peers: int(s.Monitor.NumOtherSentinels)}
		for _, r := range s.Replicas {
			v.Replicas = append(v.Replicas, roll.SentinelReplica{Addr: replicaAddr(r), Flags: r.Flags, LinkOK: r.PrimaryLinkUp})
		}
		views = append(views, v)
	}
	target, _ := roll.PlanReset(views, live)
	if target == "" {
		return nil
	}
	for _, v := range views {
		if v.Addr == target {
			return &Step{Kind: Reset, Sentinel: target, For: roll.Gone(v, live), Reason: "it lists a replica that is gone"}
		}
	}
	return nil
}
