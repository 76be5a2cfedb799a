package plan

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// The policy for destructive steps (docs/design.md, "The policy"). A planner proposes a step from
// the World; before anything is sent, Check (instance controller) or CheckSentinelStep (sentinel controller) looks
// at the whole World once more and refuses the step when anything it depends on was not observed, or was
// observed in a state in which the step is never safe. A refusal is a reason, not an error: it reaches the
// status document (refused) and one Warning Event per change of reason, and the next pass looks again.
// Every rule is a row of TestCheck / TestCheckSentinelStep.
//
// The planners already wait in most of these states; the policy is the second, independent look that made
// the removal of a monitor whose instance is still selected but did not resolve (F3) and the SENTINEL RESET
// at a partition's heal impossible to repeat: it is written against the step, not against the planner's
// reasoning.

// ResetQuiet is how long after a primary change (or the controller's start) no SENTINEL RESET is sent: twice
// the monitor's failover-timeout, the time Sentinel may still spend reconfiguring replicas and the demoted
// primary after +switch-master (Sentinel docs, "failover-timeout"). While it runs, a Sentinel that was cut off
// may still list the old topology, flagged down.
func ResetQuiet(w World) time.Duration {
	var ft int64
	for _, s := range w.Sentinels {
		if s.Answered() && s.Found {
			ft = max(ft, s.Monitor.FailoverTimeoutMs)
		}
	}
	return 2 * time.Duration(ft) * time.Millisecond
}

// Check returns why step s must not be applied in World w (with the controller's memory m, after this pass's
// update), or "" when it may.
func Check(w World, m Memory, s Step) string {
	if why := ForeignPrimary(w); why != "" {
		return refuse(s, "%s", why)
	}
	if why := handingOff(w); why != "" && s.Kind != Remove && s.Kind != DeleteSentinelPod {
		return refuse(s, "%s", why)
	}
	switch s.Kind {
	case Repoint:
		return checkRepoint(w, m, s)
	case Promote:
		return checkPromote(w, s)
	case HandOff:
		return checkHandOff(w, s)
	case DeletePod:
		return checkDeletePod(w, s)
	case Reset:
		return checkReset(w, m, s)
	}
	return fmt.Sprintf("%s is not a step of the instance controller", s.Kind)
}

func refuse(s Step, format string, a ...any) string {
	return fmt.Sprintf("%s refused: %s", s.Kind, fmt.Sprintf(format, a...))
}

// observed says why node n was not observed ("" when its pod exists and INFO replication answered).
func observed(n Node) string {
	switch {
	case !n.PodExists:
		return n.Node.Pod + "'s pod was not observed"
	case !n.Reachable:
		return fmt.Sprintf("%s was not observed (%s)", n.Node.Pod, n.Err)
	}
	return ""
}

// sentinelsUnseen says why the Sentinels' view is incomplete for a step that needs every Sentinel: one did
// not answer SENTINEL MASTER, or (replicas) SENTINEL REPLICAS, or does not know the monitor.
func sentinelsUnseen(w World, replicas bool) string {
	if len(w.Sentinels) == 0 {
		return "no Sentinel was asked"
	}
	for _, st := range w.Sentinels {
		switch {
		case !st.Answered():
			return fmt.Sprintf("Sentinel %s did not answer (%s)", st.Addr, st.Err)
		case !st.Found:
			return fmt.Sprintf("Sentinel %s does not know monitor %s", st.Addr, w.Instance.MonitorName)
		case replicas && st.ReplicasErr != "":
			return fmt.Sprintf("Sentinel %s did not list its replicas (%s)", st.Addr, st.ReplicasErr)
		}
	}
	return ""
}

// ForeignPrimary says which Sentinel names, for the instance's monitor, a primary that is not one of the
// instance's nodes (spec.OwnNode), or "" when none does. No step of the instance controller's may run then:
// every one of them either targets Sentinel's primary or asks Sentinel to move it, and on a quorum shared by
// tenants such an address is what one tenant's forged hello set. The sentinel controller restores
// the monitor (CheckSentinelStep, RestoreMonitor).
func ForeignPrimary(w World) string {
	if !w.Instance.Monitored() {
		return ""
	}
	own := w.Instance.NodeAddrs()
	for _, st := range w.Sentinels {
		if st.Answered() && st.Found && !spec.OwnNode(own, st.Monitor.Host, st.Monitor.Port) {
			return fmt.Sprintf("Sentinel %s names %s, which is not a node of this instance (a forged hello on a shared quorum?): nothing follows it",
				st.Addr, net.JoinHostPort(st.Monitor.Host, strconv.Itoa(st.Monitor.Port)))
		}
	}
	return ""
}

// unsettled says why a monitored instance's Sentinels are in a state in which no step of the controller's
// may run: a failover in flight, the primary down, or the Sentinels naming different primaries.
func unsettled(w World) string {
	v := w.SentinelView()
	switch {
	case v.FailoverInProgress:
		return "a Sentinel reports a failover in flight"
	case v.PrimaryDown:
		return "a Sentinel flags the primary down"
	case v.Disagree:
		return "the Sentinels name different primaries"
	}
	return ""
}

// handingOff names the primary whose pod is terminating (its preStop hook hands the role off), or
// "": no step of the controller's may race that handoff.
func handingOff(w World) string {
	v := w.Vote()
	for _, n := range w.Nodes {
		if n.Terminating && (isPrimary(n) || w.Monitored() && v.Known() && v.Names(n.Node.Host, w.Instance.PortOf(n.Node))) {
			return fmt.Sprintf("the primary's pod %s is terminating: its preStop hook hands the role off", n.Node.Pod)
		}
	}
	return ""
}

// sentinelInfoUnread says why a Sentinel-mode instance's Sentinel info was published but not read.
func sentinelInfoUnread(w World) string {
	if w.Instance.Monitored() && w.SentinelInfoErr != "" {
		return "the Sentinel info was published but could not be read (" + w.SentinelInfoErr + "): who owns failover is unknown"
	}
	return ""
}

// checkRepoint vets REPLICAOF <Target> on Node. When the instance is monitored the target must be the primary
// the Sentinels name and the Sentinels settled; while they still disagree (a switch is reaching them), or when
// Node is a replica (Sentinel's to reconfigure), only as the step that follows a switch (switchSettled).
func checkRepoint(w World, m Memory, s Step) string {
	n, t := w.Node(s.Node.Index), w.Node(s.Target.Index)
	if why := observed(n); why != "" {
		return refuse(s, "%s", why)
	}
	if s.Node.Index == s.Target.Index {
		return refuse(s, "%s would replicate from itself", s.Node.Pod)
	}
	if !isPrimary(t) {
		return refuse(s, "the target %s was not observed as a primary (%s)", s.Target.Pod, orRole(t))
	}
	if why := sentinelInfoUnread(w); why != "" {
		return refuse(s, "%s", why)
	}
	if !w.Monitored() {
		return ""
	}
	v := w.Vote()
	if !v.Known() {
		return refuse(s, "the Sentinels' primary was not observed (%d of %d answered, %d know the monitor)", v.Answered, v.Asked, v.Found)
	}
	if n := w.Node(s.Node.Index); n.Repl.Role == valkey.RoleReplica {
		if why := switchSettled(w, m, s); why != "" {
			return refuse(s, "%s is a replica, Sentinel's to reconfigure, and this is not the step after a switch: %s", s.Node.Pod, why)
		}
	} else if why := unsettled(w); why != "" {
		sv := w.SentinelView()
		if sv.FailoverInProgress || sv.PrimaryDown {
			return refuse(s, "%s", why)
		}
		if after := switchSettled(w, m, s); after != "" {
			return refuse(s, "%s, and this is not the step after a switch: %s", why, after)
		}
	}
	if !v.Names(s.Target.Host, w.Instance.PortOf(s.Target)) {
		return refuse(s, "the Sentinels name %s:%d, not the target %s: never fight Sentinel", v.Host, v.Port, s.Target.Pod)
	}
	return ""
}

func orRole(n Node) string {
	if !n.Reachable {
		return "unreachable: " + n.Err
	}
	return "role " + string(n.Repl.Role)
}

func checkPromote(w World, s Step) string {
	if w.Monitored() {
		return refuse(s, "Sentinel owns failover for %s: the election is Sentinel's", w.Instance.Name)
	}
	if why := sentinelInfoUnread(w); why != "" {
		return refuse(s, "%s", why)
	}
	seen := 0
	for _, n := range w.Nodes {
		if observed(n) == "" {
			seen++
		}
		if isPrimary(n) {
			return refuse(s, "%s reports role master", n.Node.Pod)
		}
	}
	if seen*2 <= len(w.Instance.Nodes) {
		return refuse(s, "only %d of %d nodes were observed: a node not seen may still be primary", seen, len(w.Instance.Nodes))
	}
	n := w.Node(s.Node.Index)
	if observed(n) != "" || n.Repl.Role != valkey.RoleReplica {
		return refuse(s, "%s was not observed as a replica (%s)", s.Node.Pod, orRole(n))
	}
	return ""
}

func checkHandOff(w World, s Step) string {
	if p := w.Node(s.Node.Index); !isPrimary(p) {
		return refuse(s, "%s was not observed as the primary (%s)", s.Node.Pod, orRole(p))
	}
	if w.Node(s.Node.Index).StatefulSet == nil {
		return refuse(s, "StatefulSet %s was not observed", s.Node.StatefulSet)
	}
	for _, n := range w.Nodes {
		if why := observed(n); why != "" {
			return refuse(s, "%s", why)
		}
	}
	if why := sentinelInfoUnread(w); why != "" {
		return refuse(s, "%s", why)
	}
	if !w.Monitored() {
		t := w.Node(s.Target.Index)
		if t.Repl.Role != valkey.RoleReplica || !t.Repl.LinkUp || !w.Instance.SameAddr(s.Node, t.Repl.PrimaryHost, t.Repl.PrimaryPort) {
			return refuse(s, "the target %s was not observed as a linked replica of %s", s.Target.Pod, s.Node.Pod)
		}
		return ""
	}
	if why := sentinelsUnseen(w, true); why != "" {
		return refuse(s, "%s", why)
	}
	if why := unsettled(w); why != "" {
		return refuse(s, "%s", why)
	}
	if v := w.Vote(); !v.Unanimous() || !v.Names(s.Node.Host, w.Instance.PortOf(s.Node)) {
		return refuse(s, "not every Sentinel names %s as the primary", s.Node.Pod)
	}
	if !w.QuorumAsked || !w.Quorum.OK {
		return refuse(s, "SENTINEL CKQUORUM was not observed OK (%s)", w.Quorum.Message)
	}
	return ""
}

func checkDeletePod(w World, s Step) string {
	n := w.Node(s.Node.Index)
	if !n.PodExists {
		return refuse(s, "%s's pod was not observed", s.Node.Pod)
	}
	if n.StatefulSet == nil {
		return refuse(s, "StatefulSet %s was not observed", s.Node.StatefulSet)
	}
	if n.Stale() && n.Unschedulable {
		return "" // it never ran: replacing it disrupts nothing, whatever else is observed (roll.PlanData)
	}
	if len(w.Nodes) > 1 && isPrimary(n) {
		return refuse(s, "%s reports role master: a primary is handed off before its pod is replaced", s.Node.Pod)
	}
	for _, o := range w.Nodes {
		if o.Node.Index == s.Node.Index {
			continue
		}
		if why := observed(o); why != "" {
			return refuse(s, "%s", why)
		}
	}
	if why := sentinelInfoUnread(w); why != "" {
		return refuse(s, "%s", why)
	}
	if !w.Monitored() {
		return ""
	}
	if v := w.Vote(); v.Answered*2 <= v.Asked {
		return refuse(s, "only %d of %d Sentinels answered: a failover could be running unseen", v.Answered, v.Asked)
	}
	if why := unsettled(w); why != "" {
		return refuse(s, "%s", why)
	}
	return ""
}

// nodeAddrs returns every descriptor node's address (host normalised:port).
func nodeAddrs(in spec.Instance) map[string]bool {
	out := map[string]bool{}
	for _, n := range in.Nodes {
		out[net.JoinHostPort(spec.NormalizeHost(n.Host), strconv.Itoa(in.PortOf(n)))] = true
	}
	return out
}

func checkReset(w World, m Memory, s Step) string {
	if !w.Monitored() {
		return refuse(s, "%s is not monitored", w.Instance.Name)
	}
	var target *Sentinel
	for i := range w.Sentinels {
		if w.Sentinels[i].Addr == s.Sentinel {
			target = &w.Sentinels[i]
		}
	}
	if target == nil {
		return refuse(s, "%s is not one of the instance's Sentinels", s.Sentinel)
	}
	if why := sentinelsUnseen(w, true); why != "" {
		return refuse(s, "%s", why)
	}
	if why := unsettled(w); why != "" {
		return refuse(s, "%s", why)
	}
	v := w.Vote()
	if !v.Unanimous() {
		return refuse(s, "not every Sentinel names the same primary")
	}
	p, ok := w.Instance.NodeByAddr(v.Host, v.Port)
	if !ok || !isPrimary(w.Node(p.Index)) {
		return refuse(s, "the Sentinels' primary %s:%d was not observed as a primary node", v.Host, v.Port)
	}
	quiet := ResetQuiet(w)
	if m.PrimarySince.IsZero() || w.Now.Sub(m.PrimarySince) < quiet {
		return refuse(s, "the primary changed (or this controller started) %s ago, less than twice failover-timeout (%s): a Sentinel may still list the old topology",
			w.Now.Sub(m.PrimarySince).Round(time.Second), quiet)
	}
	if len(s.For) == 0 {
		return refuse(s, "no gone replica named")
	}
	nodes := nodeAddrs(w.Instance)
	listed := map[string]valkey.SentinelReplica{}
	for _, r := range target.Replicas {
		listed[replicaAddr(r)] = r
	}
	for _, a := range s.For {
		if nodes[a] {
			return refuse(s, "%s is a node of the instance: a node is never forgotten, whatever a Sentinel flags it", a)
		}
		if r, ok := listed[a]; !ok || !r.HasFlag("s_down") {
			return refuse(s, "%s does not list %s flagged s_down", s.Sentinel, a)
		}
	}
	return ""
}
