// Package roll plans planned operations one step at a time (docs/design.md, "Planned operations"): which data pod
// to replace next and why not yet, when to hand the primary over first, which Sentinel pod to replace under
// the CKQUORUM gate, and which Sentinel to SENTINEL RESET after a scale-in. Everything here is pure; the
// controllers execute at most one step per pass and look again.
package roll

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// DataNode is one data node as the roll planner needs it.
type DataNode struct {
	Node spec.Node
	// Stale is true when the pod's revision differs from its StatefulSet's update revision.
	Stale bool
	// Ready is the pod's readiness; Reachable is true when INFO replication answered.
	Ready     bool
	Reachable bool
	Primary   bool
	// LinkUp and LagBytes describe a replica's link to the primary.
	LinkUp   bool
	LagBytes int64
	// NeverPromote is true for a replica with replica-priority 0 (INFO replication slave_priority): Sentinel
	// never promotes it, and neither does a planned handoff.
	NeverPromote bool
	// Unschedulable is true when the scheduler found no node for the pod: it never ran.
	Unschedulable bool
}

// DataInput is the input of PlanData.
type DataInput struct {
	Nodes []DataNode
	// Monitored is true when Sentinel owns failover for the instance.
	Monitored bool
	// Frozen is true while a failover is in flight or Sentinel sees the primary down.
	Frozen bool
	// QuorumOK is SENTINEL CKQUORUM for the monitor (only read when Monitored).
	QuorumOK bool
	// MaxLagBytes bounds a replica's lag for it to count as caught up (default 1 MiB).
	MaxLagBytes int64
	// HandoffDeferred is true while a failed primary handoff is backing off.
	HandoffDeferred bool
	// Settling, when not empty, says why the StatefulSets are not a stable target yet (an upgrade is still
	// being applied to them one by one, or the StatefulSet controller has not observed a new spec): no step
	// is taken, since a node that looks current now may turn stale a moment later. Rolling the primary's
	// StatefulSet first, while the replicas' are still unchanged, would otherwise hand the primary to a
	// replica that is about to be rolled and hand it over a second time.
	Settling string
}

// DataStepKind is a data-plane step.
type DataStepKind string

// The steps.
const (
	// DeletePod replaces a stale pod (its StatefulSet recreates it at the update revision).
	DeletePod DataStepKind = "delete-pod"
	// HandOff moves the primary away from a stale primary before it is replaced: SENTINEL FAILOVER when
	// monitored, FAILOVER TO <best replica> otherwise.
	HandOff DataStepKind = "hand-off"
)

// NoPromotableReplica is the wait reason when only the primary is stale and every replica has
// replica-priority 0: nothing can take over, so the primary is neither handed off nor replaced, and
// nothing is retried until a replica's priority changes.
const NoPromotableReplica = "no replica may be promoted (replica-priority 0 on every replica): the primary cannot be handed over; set replica-priority > 0 on at least one replica"

// DataStep is the next step, with the node it acts on (and for HandOff the replica to promote when
// unmonitored).
type DataStep struct {
	Kind   DataStepKind
	Node   spec.Node
	Target spec.Node
	Reason string
}

// PlanData returns the next data-plane roll step, or nil and the reason it waits. A stale pod the scheduler
// never placed goes first and at once, whatever the rest of the instance does: it never ran, so replacing it
// disrupts nothing, and an OnDelete StatefulSet would otherwise keep it Pending at the old revision after the
// values that made it unschedulable are fixed. Then replicas go, one at a time, each only while every node is
// ready and every other replica is linked and caught up; then the primary is handed over (never rolled while
// it is primary, unless it is alone) and, once it is a replica, replaced.
func PlanData(in DataInput) (*DataStep, string) {
	if in.MaxLagBytes <= 0 {
		in.MaxLagBytes = 1 << 20
	}
	var stale []DataNode
	var primary *DataNode
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if n.Stale {
			stale = append(stale, *n)
		}
		if n.Primary {
			primary = n
		}
	}
	if in.Settling != "" {
		return nil, in.Settling
	}
	if len(stale) == 0 {
		return nil, ""
	}
	for _, n := range stale {
		if n.Unschedulable {
			return &DataStep{Kind: DeletePod, Node: n.Node, Reason: "stale pod never scheduled: replaced at once"}, ""
		}
	}
	if in.Frozen {
		return nil, "a failover is in flight or the primary is down"
	}
	for _, n := range in.Nodes {
		if !n.Ready || !n.Reachable {
			return nil, fmt.Sprintf("%s is not ready yet", n.Node.Pod)
		}
	}
	if primary == nil {
		return nil, "no primary"
	}
	caughtUp := func(except int) (bool, string) {
		for _, n := range in.Nodes {
			if n.Primary || n.Node.Index == except {
				continue
			}
			if !n.LinkUp {
				return false, fmt.Sprintf("%s's link to the primary is down", n.Node.Pod)
			}
			if n.LagBytes > in.MaxLagBytes {
				return false, fmt.Sprintf("%s lags %d bytes", n.Node.Pod, n.LagBytes)
			}
		}
		return true, ""
	}
	sort.Slice(stale, func(i, j int) bool { return stale[i].Node.Index < stale[j].Node.Index })
	for _, n := range stale {
		if n.Primary {
			continue
		}
		if ok, why := caughtUp(n.Node.Index); !ok {
			return nil, why
		}
		return &DataStep{Kind: DeletePod, Node: n.Node, Reason: "stale replica, every other replica in sync"}, ""
	}
	// only the primary is stale
	if len(in.Nodes) == 1 {
		return &DataStep{Kind: DeletePod, Node: primary.Node, Reason: "single node: nothing to hand over to"}, ""
	}
	best, ok := bestReplica(in.Nodes)
	if !ok {
		return nil, NoPromotableReplica
	}
	if in.HandoffDeferred {
		return nil, "the last primary handoff failed; backing off"
	}
	if ok, why := caughtUp(-1); !ok {
		return nil, why
	}
	if in.Monitored && !in.QuorumOK {
		return nil, "SENTINEL CKQUORUM fails: no handoff without a quorum"
	}
	return &DataStep{Kind: HandOff, Node: primary.Node, Target: best.Node,
		Reason: "stale primary: hand over before replacing it"}, ""
}

// bestReplica returns the promotable replica with the least lag (lowest index on a tie); ok is false when
// no replica may be promoted.
func bestReplica(nodes []DataNode) (DataNode, bool) {
	var best DataNode
	found := false
	for _, n := range nodes {
		if n.Primary || n.NeverPromote {
			continue
		}
		if !found || n.LagBytes < best.LagBytes || (n.LagBytes == best.LagBytes && n.Node.Index < best.Node.Index) {
			best, found = n, true
		}
	}
	return best, found
}

// SentinelPod is one Sentinel pod as the Sentinel roll planner needs it.
type SentinelPod struct {
	Pod   string
	Stale bool
	Ready bool
	// Knows lists the monitors it reports (SENTINEL MASTERS).
	Knows map[string]bool
}

// MonitorGate is one monitor of the quorum as every Sentinel reports it, for the Sentinel roll gate.
type MonitorGate struct {
	Name string
	// FailingOver is true when any Sentinel reports a failover in progress; Down when any flags the primary
	// s_down or o_down; DownFor is the longest time any reports it s_down (s-down-time).
	FailingOver bool
	Down        bool
	DownFor     time.Duration
	// FailoverTimeout is the monitor's failover-timeout.
	FailoverTimeout time.Duration
	// QuorumOK is SENTINEL CKQUORUM OK on every Sentinel.
	QuorumOK bool
}

// LongDown reports a primary that has been down longer than its failover-timeout without a failover in
// flight: Sentinel has tried (a failover starts within about down-after of o_down) and could not, and will
// retry only after twice failover-timeout (Sentinel docs, "failover-timeout"). Such a monitor does not gate a
// Sentinel roll: no failover of it is there to protect, and waiting for it would block the roll of every
// other instance for as long as it stays dead.
func (m MonitorGate) LongDown() bool {
	return m.Down && !m.FailingOver && m.DownFor >= m.FailoverTimeout
}

// SentinelInput is the input of PlanSentinel.
type SentinelInput struct {
	Pods     []SentinelPod
	Monitors []MonitorGate
}

// PlanSentinel returns the Sentinel pod to delete next, or "" and why not (docs/design.md, "Planned operations"):
// one at a time, only while every pod is ready, no monitor is failing over or has just gone down, and every
// other monitor is known to every pod and passes CKQUORUM everywhere. A monitor whose primary has been down
// longer than its failover-timeout (with no failover in flight) does not gate the roll; notes names those
// monitors, for status.
func PlanSentinel(in SentinelInput) (target, why string, notes []string) {
	gated := map[string]bool{}
	for _, m := range in.Monitors {
		if m.LongDown() {
			notes = append(notes, fmt.Sprintf("monitor %s's primary has been down %s with no failover in flight: the Sentinel roll does not wait for it",
				m.Name, m.DownFor.Round(time.Second)))
			continue
		}
		gated[m.Name] = true
	}
	var stale []string
	for _, p := range in.Pods {
		if p.Stale {
			stale = append(stale, p.Pod)
		}
	}
	if len(stale) == 0 {
		return "", "", notes
	}
	for _, p := range in.Pods {
		if !p.Ready {
			return "", p.Pod + " is not ready", notes
		}
		for _, m := range in.Monitors {
			if gated[m.Name] && !p.Knows[m.Name] {
				return "", fmt.Sprintf("%s has not registered monitor %s yet", p.Pod, m.Name), notes
			}
		}
	}
	for _, m := range in.Monitors {
		switch {
		case m.FailingOver:
			return "", fmt.Sprintf("monitor %s is failing over", m.Name), notes
		case m.Down && gated[m.Name]:
			return "", fmt.Sprintf("monitor %s's primary went down %s ago: waiting for Sentinel's failover", m.Name, m.DownFor.Round(time.Second)), notes
		case gated[m.Name] && !m.QuorumOK:
			return "", fmt.Sprintf("SENTINEL CKQUORUM fails for monitor %s", m.Name), notes
		}
	}
	sort.Strings(stale)
	return stale[0], "", notes
}

// SentinelView is one Sentinel's knowledge of a monitor, for scale-in resets.
type SentinelView struct {
	Addr string
	// Known is false when the Sentinel does not know the monitor.
	Known bool
	// Healthy is the monitor's Healthy() (not down, no failover in flight).
	Healthy bool
	// Peers is num-other-sentinels; Replicas the replica entries it lists (SENTINEL REPLICAS).
	Peers    int
	Replicas []SentinelReplica
}

// PlanReset returns the Sentinel to SENTINEL RESET after a scale-in: the first one that lists a stale
// replica, but only while every Sentinel knows the monitor, sees all its peers, reports it healthy, and no
// Sentinel is still rediscovering after an earlier reset (cases S03, S10, S11). live is the set of replica
// addresses (host:port) that should be listed.
//
// A listed replica is stale when it is not live and the Sentinel flags it s_down: a node removed by a
// scale-in (it is gone, so Sentinel flags it s_down within down-after-milliseconds) or any other replica
// that is gone. A replica the Sentinel still reaches is never stale, whatever its name (a DR or migration
// replica attached by hand; F6): RESET would not make Sentinel forget it, since Sentinel
// rediscovers every replica the primary's INFO lists at once, so resetting for it would only empty that
// Sentinel's replica list again and again.
func PlanReset(views []SentinelView, live map[string]bool) (string, string) {
	target := ""
	for _, v := range views {
		if !v.Known {
			return "", v.Addr + " does not know the monitor"
		}
		if !v.Healthy {
			return "", "the primary is down or failing over"
		}
		if v.Peers != len(views)-1 {
			return "", fmt.Sprintf("%s sees %d of %d peers", v.Addr, v.Peers, len(views)-1)
		}
		stale, listed := len(Gone(v, live)) > 0, 0
		for _, r := range v.Replicas {
			if live[r.Addr] {
				listed++
			}
		}
		if !stale && listed < len(live) {
			return "", fmt.Sprintf("%s lists %d of %d replicas (still rediscovering)", v.Addr, listed, len(live))
		}
		if stale && target == "" {
			target = v.Addr
		}
	}
	return target, ""
}

// Gone returns the replicas v lists that are gone: not live, and flagged s_down by that Sentinel (the rule of
// PlanReset), in the order listed.
func Gone(v SentinelView, live map[string]bool) []string {
	var out []string
	for _, r := range v.Replicas {
		if !live[r.Addr] && r.HasFlag("s_down") {
			out = append(out, r.Addr)
		}
	}
	return out
}

// SentinelReplica is one replica entry of SENTINEL REPLICAS as one Sentinel lists it.
type SentinelReplica struct {
	Addr  string // host:port as Sentinel names it (normalized)
	Flags []string
	// LinkOK is master-link-status ok.
	LinkOK bool
}

// HasFlag reports whether the entry carries the flag (s_down, disconnected, ...).
func (r SentinelReplica) HasFlag(f string) bool { return slices.Contains(r.Flags, f) }

// CheckHandoffReplicas returns why a planned SENTINEL FAILOVER must wait ("" = go): every Sentinel that
// answered (views maps its address to its list) must list every replica in want with the flags exactly
// "slave" and its link to the primary ok. After a failover Sentinel reconfigures only the replicas it does
// not consider down and ends the failover without them, so a replica it still flags s_down (a pod replaced
// a moment ago: Sentinel reconnects to it only every few seconds) would stay behind on the demoted primary
// until Sentinel's own +fix-slave-config, tens of seconds later (Sentinel docs, "Replicas reconfiguration").
// With no view at all it waits too.
func CheckHandoffReplicas(views map[string][]SentinelReplica, want []string) string {
	if len(views) == 0 {
		return "no Sentinel answered SENTINEL REPLICAS"
	}
	addrs := make([]string, 0, len(views))
	for a := range views {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		listed := map[string]SentinelReplica{}
		for _, r := range views[a] {
			listed[r.Addr] = r
		}
		for _, w := range want {
			r, ok := listed[w]
			switch {
			case !ok:
				return fmt.Sprintf("Sentinel %s does not list replica %s yet", a, w)
			case len(r.Flags) != 1 || r.Flags[0] != "slave":
				return fmt.Sprintf("Sentinel %s flags replica %s %v", a, w, r.Flags)
			case !r.LinkOK:
				return fmt.Sprintf("Sentinel %s sees replica %s's link to the primary down", a, w)
			}
		}
	}
	return ""
}
