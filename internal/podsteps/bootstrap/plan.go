// Package bootstrap decides, before a data node's server starts, whether it starts as the primary or as a
// replica of whom (docs/design.md, "The boot step"). It runs in every data pod, also when every controller is
// scaled to zero, so a restarted node rejoins as a replica (case S05) and an empty node that Sentinel still
// names primary never wipes its replicas (case S08). With persistence, a cold start is led by the node whose
// disk holds the newest dataset, so no resync throws newer data away (F5): a waiting node publishes what its
// disk holds on its own port (BootServer) so booting peers can compare.
//
// The flow is observe (ask the Sentinels, then the peers) -> PlanBoot (pure) -> act (write the config, or
// request a failover and look again, or wait and look again).
package bootstrap

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/vote"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// SentinelAnswer is one Sentinel's reply to GET-MASTER-ADDR-BY-NAME.
type SentinelAnswer struct {
	Addr string
	// Err is set when the Sentinel could not be asked. Absent is set with it when its address does not
	// resolve (NXDOMAIN): the Sentinel does not exist (its pod is gone; the charts publish not-ready pods),
	// which is not the same as a Sentinel that exists and does not answer.
	Err    error
	Absent bool
	// Found is false when the Sentinel does not know the monitor.
	Found bool
	Host  string
	Port  int
	// TLS is true when the Sentinel speaks TLS.
	TLS bool
	// Replicas is the monitor's replica list (SENTINEL REPLICAS), asked only when Found. ReplicasErr is set
	// when that list could not be read: the replicas are then unknown, not absent.
	Replicas    []valkey.SentinelReplica
	ReplicasErr error
	// Monitor is the Sentinel's own view of the monitor (SENTINEL MASTER: flags s_down, o_down and
	// failover_in_progress, s-down-time, down-after-milliseconds), asked only when Found. MonitorErr is set
	// when it could not be read: whether the Sentinel sees the primary down is then unknown.
	Monitor    valkey.Monitor
	MonitorErr error
}

// Peer is what one other data node reported.
type Peer struct {
	Node spec.Node
	// Reachable is true when the peer's server answered INFO.
	Reachable bool
	Repl      valkey.Replication
	// Keys is the number of keys in the peer's keyspace (INFO keyspace).
	Keys int64
	// Booting is true when the peer's boot step answered instead (it is deciding its role; see BootServer);
	// Persisted is then what its disk holds.
	Booting   bool
	Persisted Persisted
}

// Answered reports whether the peer's server or its boot step answered; a peer that did not is unknown, not
// absent.
func (p Peer) Answered() bool { return p.Reachable || p.Booting }

// Observation is everything PlanBoot needs.
type Observation struct {
	Self spec.Node
	// Port is the instance port; a node's own port wins when set.
	Port int
	// Sentinels is empty when no sentinels.json is mounted (the instance is not monitored).
	Sentinels []SentinelAnswer
	Peers     []Peer
	// Persistence is the descriptor's persistence (a PVC per node). Local is what this node's data
	// directory holds; it is always empty without persistence.
	Persistence bool
	Local       Persisted
	// FailoverRequested is true once this boot asked Sentinel to fail over away from this node: from then on
	// the node never starts as primary on its own: Sentinel may promote a
	// replica at any moment, and a second primary would split the writes (F4).
	FailoverRequested bool
	// FailoverGrace is how long every Sentinel that names this (empty) node primary must have flagged it
	// s_down, with no failover running, before this boot asks for a failover: until then Sentinel's own
	// failover goes first. Zero means the monitor's down-after-milliseconds (5 s when unknown).
	FailoverGrace time.Duration
	// Migrating is true while the instance is installed with migrateFrom; Source is what node 0 learned from
	// the source (the other nodes do not ask it). See planMigrate.
	Migrating bool
	Source    SourceView
}

// Kind is what the node does next.
type Kind string

// The decisions.
const (
	// StartPrimary starts the server with no replicaof.
	StartPrimary Kind = "start-primary"
	// StartReplica starts the server with replicaof PrimaryHost PrimaryPort.
	StartReplica Kind = "start-replica"
	// RequestFailover asks Sentinel to fail over away from this (empty) node, then looks again.
	RequestFailover Kind = "request-failover"
	// Wait looks again after a pause: no primary is known and this node must not become one.
	Wait Kind = "wait"
)

// Decision is the result of PlanBoot.
type Decision struct {
	Kind        Kind
	PrimaryHost string
	PrimaryPort int
	// Reason is a human sentence for the log.
	Reason string
	// Guard is set on StartReplica when this node starts without data: it runs with replica-priority 0 until
	// its first sync completed (firstsync.Run), so Sentinel never promotes it empty.
	Guard bool
	// Migrating is set on node 0's StartReplica of the source of a migration: it authenticates to the source
	// with the migrateFrom credentials instead of the instance's _replication user.
	Migrating bool
}

// PlanBoot decides the role of a starting node:
//
//  1. When Sentinels answer, the address most of them name is the primary. If it is another node, start as
//     its replica, unless this node holds persisted data and that primary answers with none (a full resync
//     would flush this node's data: wait). If it is this node and it has persisted data, start as primary. If
//     it starts empty (no persistence, or no data file), it starts as primary only when Sentinel itself lists
//     no replica and no peer answers as a replica or a primary: a replica that does not answer (paused,
//     partitioned, slow) is unknown, not absent (F4). Otherwise it never starts as an empty primary
//     that would wipe the replicas on resync (case S08) or be a second writable primary: it waits for
//     Sentinel's own failover (the node serves nothing, so Sentinel sees it down after down-after), and
//     requests one only when every Sentinel naming it has flagged it s_down for the grace with no failover
//     running (see holdFailoverRequest). Once a failover was requested, it never starts as primary on its
//     own; while a peer already reports primary, a Sentinel runs a failover or the replica list cannot be
//     read, it waits.
//  2. Otherwise, the peers decide: a peer reporting primary is followed (the highest offset wins when
//     several claim it), unless this node holds persisted data and that primary holds less. With no primary
//     anywhere, a node never promotes itself while a running peer holds data (the controller or Sentinel
//     promotes the best replica, case S07).
//  3. A cold start (no primary, no running peer with data), only when no Sentinel is configured or most of
//     them answered that they do not know the monitor: Sentinels that do not answer may name a primary that
//     does not answer either (F4), so then the node waits. Without persistence, only node 0 starts as
//     primary and the others wait. With persistence, the node with the newest persisted dataset leads (see
//     planColdStart); every peer must have answered, as a server or through its boot step, because a peer that
//     did not may hold the newest data (F5).
//
// A replica that starts without data is guarded (Decision.Guard; see internal/podsteps/firstsync).
func PlanBoot(o Observation) Decision {
	d := planBoot(o)
	if d.Kind == StartReplica && !o.Local.HasData {
		d.Guard = true
	}
	return d
}

// ownNodes returns "host:port" of this node and of every peer (the instance's nodes as the descriptor names
// them; spec.OwnNode).
func ownNodes(o Observation) []string {
	in := spec.Instance{Port: o.Port}
	out := []string{in.Addr(o.Self)}
	for _, p := range o.Peers {
		out = append(out, in.Addr(p.Node))
	}
	return out
}

func planBoot(o Observation) Decision {
	if o.Migrating {
		if d, ok := planMigrate(o); ok {
			return d
		}
	}
	in := spec.Instance{Port: o.Port}
	peerHasData := false
	for _, p := range o.Peers {
		if p.Reachable && p.Keys > 0 {
			peerHasData = true
		}
	}
	if host, port, votes, ok := sentinelPrimary(o.Sentinels); ok {
		if !spec.OwnNode(ownNodes(o), host, port) {
			// on a quorum shared by tenants, a forged hello makes Sentinel name any address; this
			// node never replicates from it (nor sends it the replication password)
			return Decision{Kind: Wait, Reason: fmt.Sprintf("%d Sentinel(s) name %s:%d as primary, which is not a node of "+
				"this instance: never following it; waiting for the quorum's controller to restore the monitor", votes, host, port)}
		}
		if !in.SameAddr(o.Self, host, port) {
			for _, p := range o.Peers {
				if p.Reachable && in.SameAddr(p.Node, host, port) && p.Keys == 0 && o.Local.HasData {
					return Decision{Kind: Wait, Reason: fmt.Sprintf("%d Sentinel(s) name %s:%d as primary, but it holds "+
						"no data and this node has %s: following it would flush this node's data (full resync); "+
						"waiting for Sentinel or the controller to promote a node with data", votes, host, port, o.Local)}
				}
			}
			return Decision{Kind: StartReplica, PrimaryHost: host, PrimaryPort: port,
				Reason: fmt.Sprintf("%d Sentinel(s) name %s:%d as primary", votes, host, port)}
		}
		if o.Local.HasData {
			return Decision{Kind: StartPrimary,
				Reason: fmt.Sprintf("%d Sentinel(s) name this node primary and it has %s", votes, o.Local)}
		}
		return planNamedEmpty(o, host, port, votes, peerHasData)
	}
	// no Sentinel knows the monitor: ask the peers
	var best *Peer
	for i := range o.Peers {
		p := &o.Peers[i]
		if !p.Reachable || p.Repl.Role != valkey.RolePrimary || p.Node.Index == o.Self.Index {
			continue
		}
		if best == nil || p.Repl.Offset() > best.Repl.Offset() {
			best = p
		}
	}
	if best != nil {
		if less, why := holdsLess(*best, o.Local); less {
			return Decision{Kind: Wait, Reason: fmt.Sprintf("no Sentinel knows the monitor; peer %s reports primary "+
				"but %s, and this node has %s: never following a primary that holds less", best.Node.Host, why, o.Local)}
		}
		return Decision{Kind: StartReplica, PrimaryHost: best.Node.Host, PrimaryPort: in.PortOf(best.Node),
			Reason: fmt.Sprintf("no Sentinel knows the monitor; peer %s reports primary", best.Node.Host)}
	}
	if peerHasData {
		return Decision{Kind: Wait,
			Reason: "no primary anywhere and a peer holds data: waiting for the controller or Sentinel to promote the best replica"}
	}
	if answered, configured := sentinelsAnswering(o.Sentinels); answered < configured/2+1 && configured > 0 {
		return Decision{Kind: Wait, Reason: fmt.Sprintf("no primary answers and only %d of %d Sentinels answered or are gone: "+
			"that no Sentinel knows the monitor is not established (unreachable is not absent, issue 12, F4); "+
			"waiting instead of a cold start", answered, configured)}
	}
	if o.Persistence {
		return planColdStart(o)
	}
	if o.Self.Index == 0 {
		return Decision{Kind: StartPrimary, Reason: "cold start: no primary and no data anywhere; node 0 bootstraps as primary"}
	}
	return Decision{Kind: Wait, Reason: "cold start: waiting for node 0 to become primary"}
}

// sentinelsAnswering counts the Sentinels that answered (named a primary or said they do not know the
// monitor) or do not exist (Absent), out of those configured (the sentinels file).
func sentinelsAnswering(answers []SentinelAnswer) (answered, configured int) {
	for _, a := range answers {
		if a.Err == nil || a.Absent {
			answered++
		}
	}
	return answered, len(answers)
}

// holdsLess reports whether a running primary holds less than this node's persisted dataset: no keys at all,
// or the same replication history (same replication id) at a lower offset.
func holdsLess(p Peer, local Persisted) (bool, string) {
	switch {
	case !local.HasData:
		return false, ""
	case p.Keys == 0:
		return true, "it holds no keys"
	case local.Known && p.Repl.ReplID == local.ReplID && p.Repl.Offset() < local.Offset:
		return true, fmt.Sprintf("its offset %d is behind this node's %d on the same replication id", p.Repl.Offset(), local.Offset)
	}
	return false, ""
}

// planColdStart decides a cold start with persistence: no Sentinel knows the monitor and no peer runs with
// data. Every peer must have answered (its server, or its boot step publishing what its disk holds); then the
// node whose disk holds the newest dataset starts as primary and the others wait for it: a node with data
// before one without, a recorded replication position before none, the higher offset first (offsets keep
// counting across failovers, so the highest one has seen the most of the history; Sentinel picks replicas the
// same way), the lower node index on a tie. With no data anywhere node 0 leads, as without persistence.
func planColdStart(o Observation) Decision {
	var silent []string
	for _, p := range o.Peers {
		if !p.Answered() {
			silent = append(silent, p.Node.Host)
		}
	}
	if len(silent) > 0 {
		return Decision{Kind: Wait, Reason: fmt.Sprintf("cold start with persistence: %s did not answer (neither its "+
			"server nor its boot step), and its disk may hold newer data than this node's %s: waiting "+
			"(unreachable is not absent, issue 12, F5)", strings.Join(silent, ", "), o.Local)}
	}
	type cand struct {
		index int
		host  string
		p     Persisted
	}
	best := cand{o.Self.Index, o.Self.Host, o.Local}
	for _, p := range o.Peers {
		if !p.Booting {
			continue // a running peer without data (or a replica) does not lead a cold start
		}
		c := cand{p.Node.Index, p.Node.Host, p.Persisted}
		if newer(c.p, best.p) || !newer(best.p, c.p) && c.index < best.index {
			best = c
		}
	}
	if !best.p.HasData && best.index != 0 {
		// no data anywhere: node 0 leads, even when it is a running peer
		if o.Self.Index != 0 {
			return Decision{Kind: Wait, Reason: "cold start with persistence: no node holds data; waiting for node 0 to become primary"}
		}
		best = cand{o.Self.Index, o.Self.Host, o.Local}
	}
	if best.index == o.Self.Index {
		return Decision{Kind: StartPrimary, Reason: fmt.Sprintf("cold start with persistence: every peer answered and "+
			"this node holds the newest dataset (%s); it leads", o.Local)}
	}
	return Decision{Kind: Wait, Reason: fmt.Sprintf("cold start with persistence: %s holds the newest dataset (%s); "+
		"waiting for it to start as primary", best.host, best.p)}
}

// newer reports whether dataset a is newer than b: data beats none, a recorded position beats none, then the
// higher offset.
func newer(a, b Persisted) bool {
	switch {
	case a.HasData != b.HasData:
		return a.HasData
	case !a.HasData:
		return false
	case a.Known != b.Known:
		return a.Known
	}
	return a.Known && a.Offset > b.Offset
}

// planNamedEmpty decides for a node that the Sentinels name primary and that starts without data.
func planNamedEmpty(o Observation, host string, port, votes int, peerHasData bool) Decision {
	named := fmt.Sprintf("%d Sentinel(s) name this node primary but it starts empty", votes)
	for _, p := range o.Peers {
		if p.Reachable && p.Repl.Role == valkey.RolePrimary && p.Node.Index != o.Self.Index {
			return Decision{Kind: Wait, Reason: fmt.Sprintf("%s while peer %s already reports primary: a failover is "+
				"running; waiting for Sentinel to name the new primary", named, p.Node.Host)}
		}
	}
	if who, running := failoverRunning(o.Sentinels, host, port); running {
		return Decision{Kind: Wait, Reason: fmt.Sprintf("%s while Sentinel %s runs a failover: waiting for it to "+
			"name the new primary", named, who)}
	}
	if o.FailoverRequested {
		return Decision{Kind: RequestFailover, Reason: named + "; a failover was requested: waiting for Sentinel " +
			"to promote a replica (never starting as primary after asking)"}
	}
	if why, ok := onlyGuardedReplicas(o, host, port); ok {
		return Decision{Kind: StartPrimary, Reason: named + "; " + why}
	}
	listed, known := sentinelReplicas(o.Sentinels, host, port)
	var why string
	switch {
	case peerHasData:
		why = " while replicas are up and hold data (case S08)"
	case replicaReachable(o.Peers):
		// starting as primary would leave a second writable primary until Sentinel demotes it
		why = " while replicas are up"
	case listed > 0:
		why = fmt.Sprintf("; no replica answers but Sentinel lists %d: they may hold data (unreachable is not "+
			"absent, issue 12, F4)", listed)
	case !known:
		return Decision{Kind: Wait, Reason: named + "; no replica answers and SENTINEL REPLICAS could not be read " +
			"on every Sentinel that names it: the replicas are unknown, not absent (issue 12, F4)"}
	default:
		return Decision{Kind: StartPrimary, Reason: named + " and Sentinel lists no replica: nothing to protect (cold start)"}
	}
	if hold := holdFailoverRequest(o, host, port); hold != "" {
		return Decision{Kind: Wait, Reason: named + why + "; " + hold}
	}
	return Decision{Kind: RequestFailover, Reason: named + why + ": Sentinel's own failover did not come"}
}

// failoverRunning reports whether a Sentinel naming host:port reports a failover in progress for the
// monitor, and names the first one.
func failoverRunning(answers []SentinelAnswer, host string, port int) (string, bool) {
	for _, a := range answers {
		if namesAddr(a, host, port) && a.MonitorErr == nil && a.Monitor.FailoverInProgress() {
			return a.Addr, true
		}
	}
	return "", false
}

// holdFailoverRequest returns why this boot must not ask for a failover yet, or "". A request goes out only
// once every Sentinel that names this node flags it s_down, for at least the grace (the monitor's
// down-after-milliseconds unless set), with no failover running: Sentinel then had its chance to fail over on
// its own.
//
// Asking earlier (to cut the 24 s a lost primary pod would cost) races Sentinel itself: the replacement
// pod comes back under the same hostname with a new IP while Sentinel still holds the old one (it re-resolves
// only when it reconnects) and still trusts the primary (not s_down, fresh INFO). Every replica INFO then
// shows a "different" primary, so Sentinel sends +fix-slave-config, whose transaction ends with CLIENT KILL
// TYPE normal and pubsub: every Sentinel's links to the replicas drop. The forced failover finds no connected
// replica (-failover-abort-no-good-slave), and the aborted attempt stops that Sentinel from starting its own
// failover for 2 x failover-timeout (valkey src/sentinel.c: sentinelRefreshInstanceInfo,
// sentinelSendReplicaOf, sentinelSelectReplica, sentinelStartFailoverIfNeeded). Once the primary is s_down,
// Sentinel no longer "fixes" replicas towards it.
func holdFailoverRequest(o Observation, host string, port int) string {
	var shortest time.Duration = -1
	grace := o.FailoverGrace
	for _, a := range o.Sentinels {
		if !namesAddr(a, host, port) {
			continue
		}
		if a.MonitorErr != nil {
			return fmt.Sprintf("Sentinel %s's view of the monitor could not be read (%v): waiting for Sentinel's "+
				"own failover instead of racing it", a.Addr, a.MonitorErr)
		}
		if !a.Monitor.SubjectivelyDown() {
			return fmt.Sprintf("Sentinel %s does not see this node down yet: it fails over on its own after "+
				"down-after-milliseconds, and a request before that races its cached address of this node "+
				"(+fix-slave-config, -failover-abort-no-good-slave, then 2 x failover-timeout)", a.Addr)
		}
		down := time.Duration(0)
		if ms, err := strconv.ParseInt(a.Monitor.Fields["s-down-time"], 10, 64); err == nil {
			down = time.Duration(ms) * time.Millisecond
		}
		if shortest < 0 || down < shortest {
			shortest = down
		}
		if o.FailoverGrace <= 0 && time.Duration(a.Monitor.DownAfterMs)*time.Millisecond > grace {
			grace = time.Duration(a.Monitor.DownAfterMs) * time.Millisecond
		}
	}
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if shortest < 0 {
		return "no Sentinel that names this node answered: waiting"
	}
	if shortest < grace {
		return fmt.Sprintf("Sentinels see this node down for %s: waiting until %s for their own failover before asking",
			shortest.Round(time.Millisecond), grace)
	}
	return ""
}

// namesAddr reports whether the Sentinel answered and names host:port primary.
func namesAddr(a SentinelAnswer, host string, port int) bool {
	return a.Err == nil && a.Found && spec.NormalizeHost(a.Host) == host && a.Port == port
}

// sentinelReplicas returns the most replicas any Sentinel naming host:port lists for the monitor; known is
// false when one of those Sentinels could not list them.
func sentinelReplicas(answers []SentinelAnswer, host string, port int) (listed int, known bool) {
	known = true
	for _, a := range answers {
		if !namesAddr(a, host, port) {
			continue
		}
		if a.ReplicasErr != nil {
			known = false
			continue
		}
		listed = max(listed, len(a.Replicas))
	}
	return listed, known
}

// replicaReachable reports whether any peer answers as a replica.
func replicaReachable(peers []Peer) bool {
	for _, p := range peers {
		if p.Reachable && p.Repl.Role == valkey.RoleReplica {
			return true
		}
	}
	return false
}

// sentinelPrimary returns the address named by the most Sentinels that know the monitor (internal/planners/vote:
// hosts normalised, ties broken by the address so the result is deterministic).
func sentinelPrimary(answers []SentinelAnswer) (host string, port int, votes int, ok bool) {
	claims := make([]vote.Claim, len(answers))
	for i, a := range answers {
		claims[i] = vote.Claim{Answered: a.Err == nil, Found: a.Found, Host: a.Host, Port: a.Port}
	}
	t := vote.Count(claims)
	return t.Host, t.Port, t.Votes, t.Leader()
}

// onlyGuardedReplicas reports whether every other node answers as a replica that started empty and never
// completed a sync (replica-priority 0 from the first-sync guard, master_link_down_since_seconds -1, no
// keys), and every replica the Sentinels naming host:port list is one of them. Then nothing holds data and
// Sentinel can promote none of them: the named node starts as primary (they sync from it), instead of
// asking for a failover that NOGOODSLAVE refuses for as long as it waits (every node of the instance
// restarted at once without persistence).
func onlyGuardedReplicas(o Observation, host string, port int) (string, bool) {
	in := spec.Instance{Port: o.Port}
	var nodes []spec.Node
	for _, p := range o.Peers {
		if p.Node.Index == o.Self.Index {
			continue
		}
		if !p.Reachable || p.Repl.Role != valkey.RoleReplica || !p.Repl.NeverSynced() || p.Repl.ReplicaPriority != 0 || p.Keys != 0 {
			return "", false
		}
		nodes = append(nodes, p.Node)
	}
	if len(nodes) == 0 {
		return "", false
	}
	for _, a := range o.Sentinels {
		if !namesAddr(a, host, port) {
			continue
		}
		if a.ReplicasErr != nil {
			return "", false
		}
		for _, r := range a.Replicas {
			known := false
			for _, n := range nodes {
				if in.SameAddr(n, spec.NormalizeHost(r.Host), r.Port) {
					known = true
				}
			}
			if !known {
				return "", false // a replica that is not a node of this instance may hold data (F6)
			}
		}
	}
	return fmt.Sprintf("every other node (%d) answers as a replica that started empty and never completed a sync "+
		"(first-sync guard, replica-priority 0) and Sentinel lists no other: nothing to protect, and Sentinel can "+
		"promote none of them", len(nodes)), true
}
