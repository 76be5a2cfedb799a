package plan

import (
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/handoff"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// HandoffBackoff is how long a failed planned handoff waits before the roll tries it again (Remember). A
// handoff refused because no replica can be promoted waits for the observation to change instead
// (Memory.HandoffRefused), and one that met a failover in flight is looked at again next pass.
const HandoffBackoff = time.Minute

// HandoffFailure is a planned handoff (a HandOff step) that did not complete, as the applier saw it:
// handoff.ReasonOf of the error ("" when the error carries no reason), the error's text, and when it failed.
type HandoffFailure struct {
	Reason handoff.Reason
	Err    string
	At     time.Time
}

// FailoverOrder returns the Sentinel addresses in the order a planned SENTINEL FAILOVER tries them: last
// first. The Sentinel that leads a failover publishes +switch-master only once every other replica reports
// it replicates from the promoted one (its next 1 s INFO, so about 1 s later), while the other Sentinels
// publish it as soon as the leader's hello reaches them, right after the promotion (Sentinel docs, "Pub/Sub
// messages" and "Configuration propagation"). Clients commonly list Sentinels in ordinal order and
// subscribe to the first one that answers, so asking the last one lets most clients hear of the switch
// about 1 s sooner. The result is never nil; the input is not modified.
func FailoverOrder(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for i := len(addrs) - 1; i >= 0; i-- {
		out = append(out, addrs[i])
	}
	return out
}

// HandoffObstacle returns why the preStop hook of the terminating primary n cannot hand off, as World w
// observed it (the checks the hook makes, handoff.Obstacle), or "": no quorum, or the first Sentinel that
// knows the monitor sees the primary down or lists no replica it may promote while no replica reports
// itself promotable either (the hook waits for the Sentinels' view of a replica whose priority was just
// restored). Unmonitored instances: "" (FAILOVER TO needs no Sentinel). "no Sentinel answered" when no
// Sentinel that knows the monitor listed its replicas.
func HandoffObstacle(w World, n spec.Node) string {
	if !w.Monitored() {
		return ""
	}
	if w.QuorumAsked && !w.Quorum.OK {
		return "no Sentinel quorum (" + w.Quorum.Message + ")"
	}
	for _, s := range w.Sentinels {
		if !s.Answered() || !s.Found || s.ReplicasErr != "" {
			continue
		}
		r, why := handoff.Obstacle(w.Instance.Addr(n), s.Monitor, s.Replicas)
		switch r {
		case handoff.ReasonPrimaryDown:
			return "Sentinel " + s.Addr + ": " + why
		case handoff.ReasonNoGoodReplica:
			for _, o := range w.Nodes {
				if o.Reachable && o.Repl.Role == valkey.RoleReplica && o.Repl.LinkUp && o.Repl.ReplicaPriority > 0 {
					return ""
				}
			}
			return "Sentinel " + s.Addr + ": " + why
		}
		return ""
	}
	return "no Sentinel answered"
}

// rememberHandoff folds a failed handoff into m: refused for want of a promotable replica, it is not retried
// until the view printed in print changes; met a failover in flight, it is looked at again next pass (the
// planner holds still while a failover runs); any other failure backs the roll off for HandoffBackoff after
// the failure (f.At).
func rememberHandoff(m *Memory, f HandoffFailure, print string) {
	switch f.Reason {
	case handoff.ReasonNoGoodReplica:
		m.HandoffRefused = HandoffRefusal{Print: print, Why: "handoff refused: " + f.Err}
	case handoff.ReasonFailoverInFlight:
	default:
		m.HandoffDeferredUntil = f.At.Add(HandoffBackoff)
	}
}
