// Package plan is the decision layer of both controllers (docs/design.md, "Gather, plan, apply"): a pass
// gathers a World (everything it will decide from, or why a part could not be read), a pure planner turns
// the World and the controller's Memory into at most one disruptive Step plus the label changes and the
// reasons anything waits, the policy (Check, CheckSentinelStep) refuses a step that depends on something the World
// did not observe, and a thin applier in internal/controllers/controller executes what is left. Nothing here does I/O:
// every function is table-tested.
//
// The sub-planners stay in their packages (internal/planners/topology: the real primary, one repair, role labels;
// internal/planners/roll: data and Sentinel rolls, scale-in resets; internal/planners/registration: monitors); this package
// feeds them from the World, owns the precedence between them ("repair before roll before reset, one
// disruptive step per pass") and vets the step it picked.
package plan

import (
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/planners/vote"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// World is what one pass of the instance controller observed, and all that its planner, policy and status
// read (docs/design.md, "The instance controller's pass"). A part that could not be read says so (an Err
// field), never reads as "absent".
type World struct {
	Instance spec.Instance
	// Now is when the gather started.
	Now time.Time
	// Nodes has one entry per descriptor node, in order.
	Nodes []Node
	// SentinelInfo is the published <F>-sentinels of a monitored instance; nil when none is published (or
	// it does not parse, or names another monitor: SentinelInfoErr says which).
	SentinelInfo    *spec.SentinelInfo
	SentinelInfoErr string
	// Sentinels has one entry per SentinelInfo address, in order: each asked SENTINEL MASTER and SENTINEL
	// REPLICAS once.
	Sentinels []Sentinel
	// Quorum is SENTINEL CKQUORUM of the first Sentinel that answered it; QuorumAsked is false when none
	// did (then Quorum.Message says why).
	Quorum      valkey.Quorum
	QuorumAsked bool
	// NamedQuorum is the quorum document of the Sentinel release the descriptor names (sentinelRelease), for
	// the cross-release checks (QuorumMismatches); zero when the instance is not monitored.
	NamedQuorum QuorumSide
	// ACL is the <F>-acl Secret the descriptor names (Instance.ACLSecret; zero when it names none), read last
	// in a pass, after its steps, for the live ACL sync (PlanAccess).
	ACL ACLSecret
}

// Node is one data node: its pod (from the informer cache), its StatefulSet and INFO replication.
type Node struct {
	topology.NodeState
	// Revision is the pod's controller-revision-hash label.
	Revision string
	// Identity changes when the pod is replaced or its containers restart (UID and restart count).
	Identity string
	// StatefulSet is the node's StatefulSet; nil when it does not exist (yet).
	StatefulSet *StatefulSet
	// StartRefused is why the pod's start step last refused the values (its termination message after
	// contract.StartRefusedPrefix, e.g. a changed engine on existing data); "" when it did not.
	StartRefused string
	// Unschedulable is true when the scheduler found no node for the pod (PodScheduled False, Unschedulable):
	// it never ran, holds no data and serves nothing.
	Unschedulable bool
}

// StatefulSet is what the planners need of a data StatefulSet.
type StatefulSet struct {
	Name                           string
	Generation, ObservedGeneration int64
	// UpdateRevision is status.updateRevision; ReleaseRevision the valkey.io/release-revision annotation
	// (HasReleaseRevision false when absent).
	UpdateRevision     string
	ReleaseRevision    string
	HasReleaseRevision bool
	// Claims is its volumeClaimTemplate "data" (storage request and class); nil when it has none.
	Claims *spec.Claims
}

// Stale reports whether the node's pod runs another revision than its StatefulSet's update revision (an
// OnDelete roll replaces it). A node without a StatefulSet or revision is not stale.
func (n Node) Stale() bool {
	return n.PodExists && n.StatefulSet != nil && n.StatefulSet.UpdateRevision != "" && n.Revision != n.StatefulSet.UpdateRevision
}

// Sentinel is one Sentinel's answer about the instance's monitor.
type Sentinel struct {
	Addr string
	// Err is why it did not answer SENTINEL MASTER ("" = it answered).
	Err string
	// Found is false when it answered but does not know the monitor.
	Found   bool
	Monitor valkey.Monitor
	// Replicas is its SENTINEL REPLICAS list; ReplicasErr why it could not be read.
	Replicas    []valkey.SentinelReplica
	ReplicasErr string
}

// Answered reports whether the Sentinel answered SENTINEL MASTER.
func (s Sentinel) Answered() bool { return s.Err == "" }

// Monitored reports whether Sentinel owns failover for the instance: it asks for Sentinel and a quorum
// published its Sentinel info.
func (w World) Monitored() bool { return w.Instance.Monitored() && w.SentinelInfo != nil }

// Vote tallies the primary the Sentinels name (internal/planners/vote).
func (w World) Vote() vote.Tally {
	claims := make([]vote.Claim, len(w.Sentinels))
	for i, s := range w.Sentinels {
		claims[i] = vote.Claim{Answered: s.Answered(), Found: s.Found, Host: s.Monitor.Host, Port: s.Monitor.Port}
	}
	return vote.Count(claims)
}

// SentinelView is the Sentinels' opinion as internal/planners/topology reads it: the majority's primary, and whether
// any Sentinel reports a failover in flight, the primary down, or a different primary.
func (w World) SentinelView() topology.SentinelView {
	v := topology.SentinelView{Monitored: w.Monitored()}
	if !v.Monitored {
		return v
	}
	t := w.Vote()
	v.Asked, v.Answered = t.Asked, t.Answered
	for _, s := range w.Sentinels {
		if s.Answered() && s.Found {
			v.FailoverInProgress = v.FailoverInProgress || s.Monitor.FailoverInProgress()
			v.PrimaryDown = v.PrimaryDown || s.Monitor.SubjectivelyDown() || s.Monitor.ObjectivelyDown()
		}
	}
	v.Disagree = t.Disagree()
	if t.Known() {
		v.Known, v.PrimaryHost, v.PrimaryPort = true, t.Host, t.Port
	}
	return v
}

// Observation is the World as topology.Build reads it; noPrimaryFor comes from the controller's memory.
func (w World) Observation(noPrimaryFor time.Duration) topology.Observation {
	o := topology.Observation{Instance: w.Instance, Sentinel: w.SentinelView(), NoPrimaryFor: noPrimaryFor}
	for _, n := range w.Nodes {
		o.Nodes = append(o.Nodes, n.NodeState)
	}
	return o
}

// Node returns the observation of node index i (zero when out of range).
func (w World) Node(i int) Node {
	for _, n := range w.Nodes {
		if n.Node.Index == i {
			return n
		}
	}
	return Node{}
}

// Memory is what the instance controller remembers between passes of one instance; the planner reads it and
// returns the next one (Decision.Memory). None of it is needed for safety after a restart: it bounds timers,
// avoids repeated work and makes the policy wait after a primary change.
type Memory struct {
	// NoPrimarySince is when no node was first seen as primary (zero: one is).
	NoPrimarySince time.Time
	// Primary is the address of the primary last named (by the Sentinels when monitored, else by the nodes)
	// and PrimarySince when this controller first saw it there: a primary change, or the controller's start.
	Primary      string
	PrimarySince time.Time
	// LastPrimaryPod is the pod last confirmed primary (for the PrimaryChanged event).
	LastPrimaryPod string
	// HandoffDeferredUntil backs off a primary handoff that failed.
	HandoffDeferredUntil time.Time
	// HandoffRefused is the handoff refused for want of a promotable replica, with the print of the view it
	// was refused under: it is retried only once the print differs.
	HandoffRefused HandoffRefusal
	// RollHeldSince is when a planned roll started waiting (zero: none waits).
	RollHeldSince time.Time
	// Named is the primary the Sentinels' majority last named, with the highest config epoch seen for it;
	// Former is the one named before it (unknown until this controller saw a switch). The step after a switch
	// (planFollowSwitch) and its policy (switchSettled) read them.
	Named, Former Named
	// ACLApplied is, per data pod, what the live ACL sync last applied there (PlanAccess reads it, Remember
	// writes it); nil until the first sync.
	ACLApplied map[string]ACLApplied
	// Reclose holds, per node index, until when a node whose primary label this controller removed has its
	// application connections closed again at every pass (Reclose); nil when no window is open.
	Reclose map[int]time.Time
}

// HandoffRefusal is a handoff refused because no replica could be promoted, with the print of the
// observation it was refused under.
type HandoffRefusal struct{ Print, Why string }

// PrimaryAnswered reports whether a pass still waiting for some nodes' INFO already has what the primary
// Service needs: the primary the Sentinels name (SentinelView, as topology.Build reads it: the most named,
// a Sentinel that has not heard of the switch yet or a failover still reconfiguring replicas notwithstanding)
// is a node of the instance, and that node answered (answered[i]: w.Nodes[i] is final) reporting role master. Then the
// nodes still silent are not waited for beyond a short grace: a paused or partitioned old primary would
// otherwise hold the relabel of the new one for the whole command timeout. A node given up on
// is unreachable for that pass: it loses its role label and no repair touches it. False for an unmonitored
// instance (its primary is the nodes' own view: every node is waited for).
func PrimaryAnswered(w World, answered []bool) bool {
	v := w.SentinelView()
	if !v.Monitored || !v.Known {
		return false
	}
	n, ok := w.Instance.NodeByAddr(v.PrimaryHost, v.PrimaryPort)
	if !ok {
		return false
	}
	for i, st := range w.Nodes {
		if st.Node.Index == n.Index {
			return i < len(answered) && answered[i] && st.Reachable && st.Repl.Role == valkey.RolePrimary
		}
	}
	return false
}
