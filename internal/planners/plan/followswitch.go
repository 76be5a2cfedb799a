package plan

import (
	"fmt"
	"net"
	"strconv"

	"github.com/valkey-ha/valkey-ha/internal/planners/topology"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Following a switch the controller did not ask for (docs/design.md, "After a switch"). After a
// plain SENTINEL FAILOVER, or one after a failure, Sentinel reconfigures the old primary only once it has
// watched it report role master for SENTINEL_PUBLISH_PERIOD*4 = 8 s (+convert-to-slave, sentinel.c
// sentinelRefreshInstanceInfo), and a replica it did not reconfigure during the failover only at a later
// INFO round (+fix-slave-config). Until then the old primary takes the writes of every client still connected
// to it, and a new primary with min-replicas-to-write refuses writes (NOREPLICAS) while no replica follows it.
// The controller takes that same step as soon as the switch is settled: REPLICAOF <new primary> on the old
// primary while it reports role master (its application connections are closed after, as at every repair),
// then on each replica that still follows it, one per pass. The policy (switchSettled) lets it run only when
// a strict majority of the Sentinels name the new primary under a config epoch above the one the old primary
// was named under; every other answering Sentinel must name the old primary under an epoch no higher (it has
// not heard the switch yet), and none may report a failover in flight or the primary down.

// Named is a primary the Sentinels' majority named: its address (host normalised, as internal/planners/vote tallies
// it) and the highest config epoch (SENTINEL MASTER config-epoch) a Sentinel naming it reported.
type Named struct {
	Host  string
	Port  int
	Epoch int64
}

// Known reports whether a primary is recorded.
func (n Named) Known() bool { return n.Host != "" }

// String is host:port@epoch.
func (n Named) String() string {
	return fmt.Sprintf("%s@%d", net.JoinHostPort(n.Host, strconv.Itoa(n.Port)), n.Epoch)
}

// rememberNamed updates m.Named (and m.Former at a switch) from the Sentinels' majority in w; nothing when the
// instance is not monitored or the majority's primary was not observed. The epoch is read only from Sentinels
// that report no failover in flight. While m.Former is unknown (no switch seen since this controller
// started) it is read from the Sentinels that have not heard of the switch yet (formerFromSentinels).
func rememberNamed(w World, m *Memory) {
	if !w.Monitored() {
		return
	}
	v := w.Vote()
	if !v.Known() {
		return
	}
	epoch := int64(0)
	for _, s := range w.Sentinels {
		// the leader of a failover names the old primary under the failover's new epoch from +promoted-slave
		// until it switches (sentinel.c: config_epoch = failover_epoch): that epoch belongs to the new primary
		if s.Answered() && s.Found && !s.Monitor.FailoverInProgress() && v.Names(s.Monitor.Host, s.Monitor.Port) {
			epoch = max(epoch, s.Monitor.ConfigEpoch)
		}
	}
	if m.Named.Host == v.Host && m.Named.Port == v.Port {
		m.Named.Epoch = max(m.Named.Epoch, epoch)
	} else {
		if m.Named.Known() {
			m.Former = m.Named
		}
		m.Named = Named{Host: v.Host, Port: v.Port, Epoch: epoch}
	}
	if !m.Former.Known() {
		m.Former = formerFromSentinels(w, m.Named)
	}
}

// formerFromSentinels is the former primary read from the Sentinels that have not heard of the switch to
// named, for a controller that did not see the switch (it started after it, so its memory holds no former
// primary): the one node of the instance that every answering Sentinel not naming named names, under a config
// epoch below named.Epoch, with the highest such epoch. Named{} when every Sentinel names named, when the
// others name different nodes or a node that is not one of the instance's, when one of them names its node
// under an epoch no lower than named.Epoch, does not know the monitor or reports a failover in flight. With
// it the step after a switch (planFollowSwitch, vetted by switchSettled) demotes a primary the Sentinels'
// majority has left even when the switch came while the controller was down (before: left to Sentinel's
// +convert-to-slave, about 9 s after the restart).
func formerFromSentinels(w World, named Named) Named {
	in := w.Instance
	primary, ok := in.NodeByAddr(named.Host, named.Port)
	if !ok {
		return Named{}
	}
	var former Named
	for _, s := range w.Sentinels {
		if !s.Answered() {
			continue
		}
		if !s.Found || s.Monitor.FailoverInProgress() {
			return Named{}
		}
		h, p, e := s.Monitor.Host, s.Monitor.Port, s.Monitor.ConfigEpoch
		n, ok := in.NodeByAddr(h, p)
		switch {
		case ok && n.Index == primary.Index:
			continue
		case !ok || e >= named.Epoch || former.Known() && (former.Host != n.Host || former.Port != p):
			return Named{}
		}
		former = Named{Host: n.Host, Port: p, Epoch: max(former.Epoch, e)}
	}
	return former
}

// planFollowSwitch returns the step Sentinel would take only later after the switch from m.Former to the
// primary of tp: REPLICAOF <primary> on the former primary while it reports role master, else on the first
// replica (by index) that still follows the former primary; nil when none is due, the former primary is not
// a node of the instance, or the primary is not confirmed (it must report role master itself).
func planFollowSwitch(w World, m Memory, tp topology.Plan) *Step {
	if !w.Monitored() || !m.Former.Known() || tp.Primary == nil || !tp.PrimaryConfirmed || tp.Foreign != "" || tp.HandingOff != nil {
		return nil
	}
	former, ok := w.Instance.NodeByAddr(m.Former.Host, m.Former.Port)
	if !ok || former.Index == tp.Primary.Index {
		return nil
	}
	if n := w.Node(former.Index); isPrimary(n) && !n.Terminating {
		return &Step{Kind: Repoint, Node: former, Target: *tp.Primary,
			Reason: fmt.Sprintf("still reports role master after the Sentinels switched to %s (epoch %d > %d): demoted now, not by Sentinel about 8 s later",
				tp.Primary.Pod, m.Named.Epoch, m.Former.Epoch)}
	}
	for _, n := range w.Nodes {
		if n.Node.Index == tp.Primary.Index || n.Terminating || !n.Reachable || n.Repl.Role != valkey.RoleReplica {
			continue
		}
		if w.Instance.SameAddr(former, n.Repl.PrimaryHost, n.Repl.PrimaryPort) {
			return &Step{Kind: Repoint, Node: n.Node, Target: *tp.Primary,
				Reason: fmt.Sprintf("still replicates from the former primary %s after the Sentinels switched to %s", former.Pod, tp.Primary.Pod)}
		}
	}
	return nil
}

// switchSettled says why Repoint s may not run as the step that follows a switch (planFollowSwitch), or ""
// when it may: m.Former is known and is s's node or the primary s's node replicates from; no Sentinel reports
// a failover in flight or its primary down; a strict majority of the Sentinels asked name s.Target under a
// config epoch above m.Former.Epoch; and every other Sentinel that answered names the former primary under an
// epoch no higher than m.Former.Epoch (it has not heard the switch yet). A Sentinel that names anything else,
// or does not know the monitor, refuses the step: the controller is unsure which switch it is.
func switchSettled(w World, m Memory, s Step) string {
	if !m.Former.Known() {
		return "no switch was seen by this controller (the former primary and its config epoch are unknown)"
	}
	in := w.Instance
	former, ok := in.NodeByAddr(m.Former.Host, m.Former.Port)
	if !ok {
		return fmt.Sprintf("the former primary %s is not a node of this instance", m.Former)
	}
	n := w.Node(s.Node.Index)
	follows := n.Reachable && n.Repl.Role == valkey.RoleReplica && in.SameAddr(former, n.Repl.PrimaryHost, n.Repl.PrimaryPort)
	if s.Node.Index != former.Index && !follows {
		return fmt.Sprintf("%s is neither the former primary %s nor a replica of it", s.Node.Pod, former.Pod)
	}
	v := w.SentinelView()
	switch {
	case v.FailoverInProgress:
		return "a Sentinel reports a failover in flight"
	case v.PrimaryDown:
		return "a Sentinel flags the primary down"
	}
	votes := 0
	for _, st := range w.Sentinels {
		if !st.Answered() {
			continue
		}
		if !st.Found {
			return fmt.Sprintf("Sentinel %s does not know monitor %s", st.Addr, in.MonitorName)
		}
		switch h, p, e := st.Monitor.Host, st.Monitor.Port, st.Monitor.ConfigEpoch; {
		case in.SameAddr(s.Target, h, p) && e > m.Former.Epoch:
			votes++
		case in.SameAddr(former, h, p) && e <= m.Former.Epoch:
			// it has not heard of the switch yet: the higher epoch wins when it does
		default:
			return fmt.Sprintf("Sentinel %s names %s under config epoch %d: neither the switch to %s nor the former primary %s",
				st.Addr, net.JoinHostPort(h, strconv.Itoa(p)), e, s.Target.Pod, m.Former)
		}
	}
	if votes*2 <= len(w.Sentinels) {
		return fmt.Sprintf("only %d of %d Sentinels name %s under a config epoch above %d", votes, len(w.Sentinels), s.Target.Pod, m.Former.Epoch)
	}
	return ""
}
