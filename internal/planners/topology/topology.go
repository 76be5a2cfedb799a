// Package topology holds the instance controller's pure decisions: from an Observation of every data node
// and the Sentinels' view, Plan returns which node is the real primary, at most one disruptive repair, and
// the valkey.io/role label changes (docs/design.md, "The instance controller's pass").
//
// Rules: Sentinel's answer is the truth whenever a monitor exists and the controller never targets Sentinel's
// primary; nothing topological happens while a failover is in flight, or while the primary's pod is
// terminating (its preStop hook hands the role off; that pod never carries the primary label); one
// disruptive step per pass.
package topology

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// NodeState is one data node as observed.
type NodeState struct {
	Node spec.Node
	// PodExists/PodReady come from the pod; RoleLabel is its current valkey.io/role label ("" = none).
	PodExists bool
	PodReady  bool
	RoleLabel string
	// PodUID and PodVersion identify the pod object observed (UID, resourceVersion); writes decided from
	// this observation carry them as preconditions.
	PodUID     string
	PodVersion string
	// Terminating is true while the pod is being deleted and its deletion deadline (deletionTimestamp: the
	// request's time plus the grace period) has not passed: its preStop hook may be handing the primary role
	// off. The observer still reads such a node.
	Terminating bool
	// Reachable is true when INFO replication answered; Err says why not.
	Reachable bool
	Err       string
	Repl      valkey.Replication
}

// SentinelView is the Sentinels' opinion about the instance.
type SentinelView struct {
	// Monitored is true when the instance asks for Sentinel and Sentinel info is published for it.
	Monitored bool
	// Asked and Answered count the Sentinels asked and those that replied.
	Asked, Answered int
	// Known is true when a majority of the answering Sentinels know the monitor; PrimaryHost/Port is the
	// address most of them name.
	Known       bool
	PrimaryHost string
	PrimaryPort int
	// FailoverInProgress is true when any Sentinel reports a failover in flight; PrimaryDown when any reports
	// the primary s_down or o_down. Either one freezes topology changes (case S10).
	FailoverInProgress bool
	PrimaryDown        bool
	// Disagree is true when the answering Sentinels that know the monitor name different primaries: a
	// failover's result is still reaching them (the leader of a failover with no other replica to reconfigure
	// switches first, the others a few milliseconds later from its hello). It freezes topology changes too: the
	// majority's primary may be the one just demoted, and repointing the promoted node to it would fight
	// Sentinel.
	Disagree bool
}

// Observation is the input of Plan.
type Observation struct {
	Instance spec.Instance
	Nodes    []NodeState
	Sentinel SentinelView
	// NoPrimaryFor is how long no node has been observed as primary (0 = a primary exists now).
	NoPrimaryFor time.Duration
}

// ActionKind names a change.
type ActionKind string

// The actions the executor knows.
const (
	// Repoint runs REPLICAOF <primary> on Node (disruptive).
	Repoint ActionKind = "repoint"
	// Promote runs REPLICAOF NO ONE on Node (disruptive).
	Promote ActionKind = "promote"
	// Label sets the pod's valkey.io/role to Role, or removes it when Role is "".
	Label ActionKind = "label"
)

// Action is one step of a plan.
type Action struct {
	Kind ActionKind
	Node spec.Node
	// Target is the primary for Repoint.
	Target spec.Node
	// Role is the label value for Label ("" removes the label).
	Role   string
	Reason string
}

// String describes the action for logs and events.
func (a Action) String() string {
	switch a.Kind {
	case Repoint:
		return fmt.Sprintf("repoint %s to %s (%s)", a.Node.Pod, a.Target.Pod, a.Reason)
	case Promote:
		return fmt.Sprintf("promote %s (%s)", a.Node.Pod, a.Reason)
	default:
		return fmt.Sprintf("label %s role=%q (%s)", a.Node.Pod, a.Role, a.Reason)
	}
}

// Disruptive reports whether the action changes replication.
func (a Action) Disruptive() bool { return a.Kind == Repoint || a.Kind == Promote }

// Plan is the output: the primary (nil when unknown), the actions in execution order, and why a repair was
// held back.
type Plan struct {
	Primary *spec.Node
	// PrimaryConfirmed is true when the primary reports role master itself.
	PrimaryConfirmed bool
	Actions          []Action
	Held             string
	// HandingOff is the primary whose pod is terminating (NodeState.Terminating): its preStop hook hands the
	// role off, so no repair runs and no planned handoff starts until it is gone or demoted.
	HandingOff *spec.Node
	// Foreign is the "host:port" the Sentinels name as primary when it is not a node of the instance (a
	// forged hello on a shared quorum causes that); "" otherwise. Then nothing follows it: no repair runs, and the
	// labels follow the nodes' own view (the node that reports role master with the most replicas) until the
	// sentinel controller has restored the monitor.
	Foreign string
}

// PromoteAfter is how long an unmonitored instance must have no primary before the controller promotes
// the best replica (a restarting primary gets this long to come back).
const PromoteAfter = 10 * time.Second

// Build returns the plan for an observation (pure).
func Build(o Observation) Plan {
	var p Plan
	in := o.Instance
	byIndex := map[int]NodeState{}
	for _, n := range o.Nodes {
		byIndex[n.Node.Index] = n
	}
	frozen := o.Sentinel.Monitored && (o.Sentinel.FailoverInProgress || o.Sentinel.PrimaryDown || o.Sentinel.Disagree)
	p.HandingOff = handingOff(o)

	// 1. who is the primary
	if o.Sentinel.Monitored && o.Sentinel.Known {
		if n, ok := in.NodeByAddr(o.Sentinel.PrimaryHost, o.Sentinel.PrimaryPort); ok {
			p.Primary = &n
			st := byIndex[n.Index]
			p.PrimaryConfirmed = st.Reachable && st.Repl.Role == valkey.RolePrimary
		} else {
			p.Foreign = net.JoinHostPort(o.Sentinel.PrimaryHost, strconv.Itoa(o.Sentinel.PrimaryPort))
			p.Held = fmt.Sprintf("Sentinel names %s, which is not a node of this instance: nothing follows it (no repair; "+
				"labels from the nodes' own view) until the sentinel controller restores the monitor", p.Foreign)
			if best, ok := bestClaimedPrimary(o.Nodes); ok && len(best.Repl.Replicas) > 0 {
				n := best.Node
				p.Primary = &n
				p.PrimaryConfirmed = true
			}
		}
	} else if best, ok := bestClaimedPrimary(o.Nodes); ok {
		n := best.Node
		p.Primary = &n
		p.PrimaryConfirmed = true
	}

	// 2. at most one disruptive repair
	switch {
	case p.Foreign != "":
		// held above: no step may depend on an address that is not ours
	case frozen && o.Sentinel.Disagree && !o.Sentinel.FailoverInProgress && !o.Sentinel.PrimaryDown:
		p.Held = "the Sentinels name different primaries (a failover's result is reaching them): no topology change"
	case frozen:
		p.Held = "a failover is in flight or Sentinel sees the primary down: no topology change"
	case p.HandingOff != nil:
		p.Held = fmt.Sprintf("the primary's pod %s is terminating: its preStop hook hands the role off; no topology change", p.HandingOff.Pod)
	case p.Primary != nil && p.PrimaryConfirmed:
		if a, ok := planRepoint(o, *p.Primary); ok {
			p.Actions = append(p.Actions, a)
		}
	case p.Primary == nil && !o.Sentinel.Monitored:
		if a, ok := planPromote(o); ok {
			p.Actions = append(p.Actions, a)
		} else if p.Held == "" {
			p.Held = "no primary; waiting before promoting"
		}
	case p.Primary != nil && !p.PrimaryConfirmed && p.Held == "":
		p.Held = fmt.Sprintf("Sentinel's primary %s does not report role master yet", p.Primary.Pod)
	}

	// 3. labels: the primary label's removals first, so the primary Service never has two endpoints (case S21),
	// then its addition, then the replica labels: kube-proxy applies Service changes at most once per
	// minSyncPeriod (1 s by default), so a replica Service change patched before the addition (the demoted
	// primary's replica label) held the primary Service's new endpoint back that long (issue 30)
	var removals, additions, others []Action
	for _, n := range o.Nodes {
		want := ""
		switch {
		case n.Terminating && n.Reachable && n.Repl.Role == valkey.RoleReplica:
			want = contract.RoleReplica
		case n.Terminating:
			// a terminating primary stops taking writes within its grace period: the label leaves it at once
		case p.Primary != nil && p.PrimaryConfirmed && n.Node.Index == p.Primary.Index:
			want = contract.RolePrimary
		case n.Reachable && n.Repl.Role == valkey.RoleReplica && p.Foreign != "" && !spec.OwnNode(in.NodeAddrs(), n.Repl.PrimaryHost, n.Repl.PrimaryPort):
			// follows an address that is not ours (a forged hello): no Service of the instance routes to it
		case n.Reachable && n.Repl.Role == valkey.RoleReplica:
			want = contract.RoleReplica
		}
		if !n.PodExists || n.RoleLabel == want {
			continue
		}
		a := Action{Kind: Label, Node: n.Node, Role: want, Reason: labelReason(n, want)}
		switch {
		case n.RoleLabel == contract.RolePrimary:
			removals = append(removals, a)
		case want == contract.RolePrimary:
			additions = append(additions, a)
		default:
			others = append(others, a)
		}
	}
	p.Actions = append(p.Actions, removals...)
	p.Actions = append(p.Actions, additions...)
	p.Actions = append(p.Actions, others...)
	return p
}

func labelReason(n NodeState, want string) string {
	switch {
	case n.Terminating && want == "":
		return "the pod is terminating (preStop handoff)"
	case want == contract.RolePrimary:
		return "the agreed primary reports role master"
	case want == contract.RoleReplica:
		return "reports role replica"
	case !n.Reachable:
		return "unreachable: " + n.Err
	default:
		return "reports primary but is not the agreed primary"
	}
}

// bestClaimedPrimary picks, among reachable nodes reporting primary, the one with the most connected replicas,
// then the highest offset, then the lowest index.
func bestClaimedPrimary(nodes []NodeState) (NodeState, bool) {
	var claimed []NodeState
	for _, n := range nodes {
		if n.Reachable && n.Repl.Role == valkey.RolePrimary {
			claimed = append(claimed, n)
		}
	}
	if len(claimed) == 0 {
		return NodeState{}, false
	}
	sort.SliceStable(claimed, func(i, j int) bool {
		a, b := claimed[i], claimed[j]
		if len(a.Repl.Replicas) != len(b.Repl.Replicas) {
			return len(a.Repl.Replicas) > len(b.Repl.Replicas)
		}
		if a.Repl.Offset() != b.Repl.Offset() {
			return a.Repl.Offset() > b.Repl.Offset()
		}
		return a.Node.Index < b.Node.Index
	})
	return claimed[0], true
}

// planRepoint returns REPLICAOF <primary> for the first node that reports primary but is not the agreed one
// (the orphan of case S05). When unmonitored it also repoints replicas that follow another node; when
// monitored that is Sentinel's job (+fix-slave-config), so it is left alone. Sentinel's primary is never a
// target.
func planRepoint(o Observation, primary spec.Node) (Action, bool) {
	in := o.Instance
	for _, n := range o.Nodes {
		if !n.Reachable || n.Terminating || n.Node.Index == primary.Index {
			continue
		}
		if n.Repl.Role == valkey.RolePrimary {
			return Action{Kind: Repoint, Node: n.Node, Target: primary,
				Reason: "reports primary but the agreed primary is " + primary.Pod}, true
		}
		if !o.Sentinel.Monitored && n.Repl.Role == valkey.RoleReplica && !in.SameAddr(primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort) {
			return Action{Kind: Repoint, Node: n.Node, Target: primary,
				Reason: fmt.Sprintf("replicates from %s:%d instead of %s", n.Repl.PrimaryHost, n.Repl.PrimaryPort, primary.Pod)}, true
		}
	}
	return Action{}, false
}

// planPromote promotes the reachable replica with the highest offset once an unmonitored instance has had no
// primary for PromoteAfter and a majority of its nodes answer.
func planPromote(o Observation) (Action, bool) {
	if o.NoPrimaryFor < PromoteAfter {
		return Action{}, false
	}
	reachable := 0
	var best *NodeState
	for i := range o.Nodes {
		n := &o.Nodes[i]
		if !n.Reachable {
			continue
		}
		reachable++
		if n.Repl.Role != valkey.RoleReplica || n.Terminating {
			continue
		}
		if best == nil || n.Repl.Offset() > best.Repl.Offset() {
			best = n
		}
	}
	if best == nil || reachable*2 <= len(o.Instance.Nodes) {
		return Action{}, false
	}
	return Action{Kind: Promote, Node: best.Node,
		Reason: fmt.Sprintf("no primary for %s; highest offset %d", o.NoPrimaryFor.Round(time.Second), best.Repl.Offset())}, true
}

// handingOff returns the primary whose pod is terminating, or nil: a terminating node that reports primary,
// or that Sentinel names primary. While its preStop hook runs it is still the primary, and a repair against
// it (or one that moves the role elsewhere) would race the hook's own handoff.
func handingOff(o Observation) *spec.Node {
	for _, n := range o.Nodes {
		if !n.Terminating {
			continue
		}
		named := o.Sentinel.Monitored && o.Sentinel.Known && o.Instance.SameAddr(n.Node, o.Sentinel.PrimaryHost, o.Sentinel.PrimaryPort)
		if named || n.Reachable && n.Repl.Role == valkey.RolePrimary {
			node := n.Node
			return &node
		}
	}
	return nil
}
