package plan

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Access is the outcome of one pass's live ACL sync, for the AccessConverged condition.
type Access struct {
	Converged bool
	Desired   string
	Applied   string
	Message   string
}

// Outcome is what the applier did with a Decision: the step taken (LastAction, "" = none), the planned
// handoff that failed (Handoff, nil = none), the nodes whose connections it closed after taking their primary
// label off (Relabelled: node index -> when), each node's ACL sync (ACLSync, one per AccessPlan.Sync node
// tried) and the Access sync's result (AccessResult). Remember folds it into the next pass's Memory.
type Outcome struct {
	LastAction string
	Handoff    *HandoffFailure
	Relabelled map[int]time.Time
	ACLSync    []NodeSync
	Access     Access
}

// Relabel records that the applier took node i's primary label off at t and closed its connections (Relabelled).
func (o *Outcome) Relabel(i int, t time.Time) {
	if o.Relabelled == nil {
		o.Relabelled = map[int]time.Time{}
	}
	o.Relabelled[i] = t
}

// InstanceStatus builds the <F>-status document of one pass (pure; docs/design.md, "Status"): nodes, the
// primary, replication, monitoring and access conditions and the state derived from Ready, from the World,
// the Decision, what the applier did and the previous document (whose conditions keep their transition
// times).
func InstanceStatus(w World, d Decision, o Outcome, prev status.Instance, build string) status.Instance {
	in, tp, now := w.Instance, d.Topology, w.Now
	st := status.Instance{Name: in.Name, Conditions: prev.Conditions, EverReady: prev.EverReady, ObservedAt: now,
		Held: tp.Held, LastAction: o.LastAction, ControllerBuild: build, Replicas: len(in.Nodes) - 1, Roll: d.Roll, Refused: d.Refused}
	if o.LastAction == "" {
		st.LastAction = prev.LastAction
	}
	var primaryOffset int64
	if tp.Primary != nil {
		if n := w.Node(tp.Primary.Index); n.Reachable {
			primaryOffset = n.Repl.Offset()
		}
	}
	primaryOK := tp.Primary != nil && tp.PrimaryConfirmed
	linksUp := 0
	var unready []string // replica pods whose readiness probe fails
	for _, n := range w.Nodes {
		ns := status.NodeStatus{Pod: n.Node.Pod, Host: n.Node.Host, Reachable: n.Reachable, Error: n.Err}
		if n.Reachable {
			ns.Role = string(n.Repl.Role)
			if n.Repl.Role == valkey.RolePrimary && primaryOK && n.Node.Index != tp.Primary.Index {
				ns.Role = status.RoleStalePrimary
			}
			ns.Offset = n.Repl.Offset()
			if n.Repl.Role == valkey.RoleReplica {
				ns.LinkUp = n.Repl.LinkUp
				if primaryOffset > 0 {
					ns.LagBytes = primaryOffset - ns.Offset
				}
				if n.PodReady {
					st.ReadyReplicas++
				} else {
					unready = append(unready, n.Node.Pod)
				}
				if n.Repl.LinkUp && tp.Primary != nil && in.SameAddr(*tp.Primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort) {
					linksUp++
					if !n.Repl.SyncInProgress {
						st.SyncedReplicas++
					}
				}
			}
		}
		st.Nodes = append(st.Nodes, ns)
	}
	set := func(t, s, reason, msg string) {
		st.Conditions = status.SetCondition(st.Conditions, status.Condition{Type: t, Status: s, Reason: reason, Message: msg}, now)
	}
	if primaryOK {
		st.Primary = tp.Primary.Pod
		st.PrimaryAddress = in.Addr(*tp.Primary)
		set(status.PrimaryElected, status.True, "PrimaryConfirmed", tp.Primary.Pod+" reports role master")
	} else {
		set(status.PrimaryElected, status.False, "NoPrimary", noPrimaryMessage(w, tp.Held))
	}
	replOK := primaryOK && linksUp == len(in.Nodes)-1
	if replOK {
		set(status.ReplicationHealthy, status.True, "LinksUp", fmt.Sprintf("%d/%d replica links up", linksUp, len(in.Nodes)-1))
	} else {
		set(status.ReplicationHealthy, status.False, "LinksDown", fmt.Sprintf("%d/%d replica links up", linksUp, len(in.Nodes)-1))
	}
	st.Monitoring.MonitorName = in.MonitorName
	monitoredOK := true
	v := w.SentinelView()
	switch si := w.SentinelInfo; {
	case !in.Monitored():
		set(status.Monitored, status.False, "FailoverModeNone", "failover.mode is None")
		set(status.SentinelQuorumHealthy, status.Unknown, "NotMonitored", "")
	case si == nil && w.SentinelInfoErr != "":
		monitoredOK = false
		set(status.Monitored, status.False, "SentinelInfoUnusable", "the Sentinel info is published but cannot be used: "+w.SentinelInfoErr)
		set(status.SentinelQuorumHealthy, status.Unknown, "NotMonitored", "")
	case si == nil:
		monitoredOK = false
		if ms := QuorumMismatches(in, w.NamedQuorum); len(ms) > 0 {
			// the quorum it names is missing or cannot monitor it: say which and why, naming both releases
			set(status.Monitored, status.False, ms[0].Reason, MismatchMessages(ms))
		} else {
			set(status.Monitored, status.False, "NoSentinelSelects", "no Sentinel quorum has registered this instance (check instanceLabels and the quorum's valkeySelector)")
		}
		set(status.SentinelQuorumHealthy, status.Unknown, "NotMonitored", "")
	default:
		st.Monitoring.MonitoredBy = si.SentinelRelease
		st.Monitoring.Sentinels = v.Answered
		st.Monitoring.Registered = v.Known
		monitoredOK = v.Known
		if v.Known {
			set(status.Monitored, status.True, "Registered", "monitored by "+si.SentinelRelease)
		} else {
			set(status.Monitored, status.False, "NotRegistered", "Sentinels do not know the monitor yet")
		}
		switch {
		case in.Quorum > len(si.Hosts):
			// a configuration error, not a passing outage: failover can never be agreed, so not Ready
			monitoredOK = false
			set(status.SentinelQuorumHealthy, status.False, ReasonQuorumAboveSentinels, QuorumAboveMessage(in, si.SentinelRelease, len(si.Hosts)))
		case w.Quorum.OK:
			set(status.SentinelQuorumHealthy, status.True, "QuorumOK", w.Quorum.Message)
		default:
			set(status.SentinelQuorumHealthy, status.False, "NoQuorum", w.Quorum.Message)
		}
	}
	// the values the running instance cannot take (the run-time twins of the chart's render-time guards,
	// which a render without the cluster skips): a data pod's start step refused them
	var refused []string
	for _, n := range w.Nodes {
		if n.StartRefused != "" {
			refused = append(refused, n.Node.Pod+": "+n.StartRefused)
		}
	}
	claims := ClaimsDiffer(w)
	switch {
	case len(refused) > 0:
		set(status.ValuesAccepted, status.False, "StartRefused", strings.Join(append(refused, claims...), "; "))
	case len(claims) > 0:
		set(status.ValuesAccepted, status.False, "ClaimsDiffer", strings.Join(claims, "; "))
	default:
		set(status.ValuesAccepted, status.True, "Accepted", "no data pod refused the values")
	}
	// serving and converged are separate signals: AccessConverged never feeds Ready (docs/design.md, "Status")
	st.DesiredAccess, st.AppliedAccess = o.Access.Desired, o.Access.Applied
	if o.Access.Converged {
		set(status.AccessConverged, status.True, "Applied", o.Access.Message)
	} else {
		set(status.AccessConverged, status.False, "Pending", o.Access.Message)
	}
	// a replica pod that fails its readiness probe serves no reads (the replicas Service) and counts as
	// disrupted for the PodDisruptionBudget: not Ready, though its replication link is up
	switch {
	case primaryOK && replOK && monitoredOK && len(unready) == 0:
		set(status.Ready, status.True, "Ready", "primary elected, replicas in sync, monitored as requested")
		st.EverReady = true
	case primaryOK && replOK && monitoredOK:
		set(status.Ready, status.False, "NotReady", fmt.Sprintf("ReplicasReady: %d/%d replica pods ready (%s fails its readiness probe: "+
			"the replicas Service sends it no reads and the PodDisruptionBudget counts it out; kubectl describe pod)",
			st.ReadyReplicas, len(in.Nodes)-1, strings.Join(unready, ", ")))
	default:
		set(status.Ready, status.False, "NotReady", firstFalse(st.Conditions))
	}
	rc, _ := status.Get(st.Conditions, status.Ready)
	st.State = status.DeriveState(rc, st.EverReady, now)
	st.Message = rc.Message
	return st
}

// noPrimaryMessage is the PrimaryElected=False message: why topology holds (held), else what each node is
// ("no node reports role master: F-0-0 pod not running: Pending, Unschedulable: ...; F-1-0 role replica").
func noPrimaryMessage(w World, held string) string {
	if held != "" {
		return held
	}
	var nodes []string
	for _, n := range w.Nodes {
		switch {
		case n.Err != "":
			nodes = append(nodes, n.Node.Pod+" "+n.Err)
		case n.Repl.Role != "":
			nodes = append(nodes, n.Node.Pod+" role "+string(n.Repl.Role))
		default:
			nodes = append(nodes, n.Node.Pod+" not observed")
		}
	}
	return "no node reports role master: " + strings.Join(nodes, "; ")
}

// firstFalse is the first condition other than Ready that is False, as "Type: message".
func firstFalse(conds []status.Condition) string {
	for _, c := range conds {
		if c.Type != status.Ready && c.Status == status.False {
			return c.Type + ": " + c.Message
		}
	}
	return ""
}

// InstanceGauges is the instance's metrics observation (metrics.ObserveInstance) of one pass (pure).
func InstanceGauges(w World, d Decision) status.InstanceObservation {
	tp := d.Topology
	o := status.InstanceObservation{Nodes: len(w.Nodes), SentinelFailover: w.Instance.Monitored(), Monitored: w.SentinelInfo != nil,
		QuorumOK: w.Quorum.OK, SentinelsNotWatching: len(SentinelsNotWatching(w))}
	if !d.Memory.RollHeldSince.IsZero() {
		o.RollHeld = w.Now.Sub(d.Memory.RollHeldSince)
	}
	var primaryOffset int64
	primaryKnown := false
	for _, n := range w.Nodes {
		if !n.Reachable {
			continue
		}
		o.Reachable++
		if n.Repl.Role == valkey.RolePrimary {
			o.Primaries++
		}
		if tp.Primary != nil && n.Node.Index == tp.Primary.Index && n.Repl.Role == valkey.RolePrimary {
			primaryOffset, primaryKnown = n.Repl.Offset(), true
		}
	}
	for _, n := range w.Nodes {
		if !n.Reachable || n.Repl.Role != valkey.RoleReplica {
			continue
		}
		r := status.ReplicaLink{Pod: n.Node.Pod,
			LinkUp: n.Repl.LinkUp && tp.Primary != nil && w.Instance.SameAddr(*tp.Primary, n.Repl.PrimaryHost, n.Repl.PrimaryPort)}
		if primaryKnown {
			r.LagKnown, r.LagBytes = true, max(primaryOffset-n.Repl.Offset(), 0)
		}
		o.Replicas = append(o.Replicas, r)
	}
	return o
}

// ClaimsDiffer lists, one line per data StatefulSet, how its volume claim differs from the one the descriptor
// asks for (persistence.size, persistence.storageClass, persistence on or off), naming the value and the fix:
// the run-time twin of the chart's render-time guard (valkey.validateClaims), which a render without the
// cluster (Argo CD, Flux, helm template) skips. The API server refuses such a StatefulSet update with a
// message naming no value; the StatefulSet keeps its claims. Sizes compare as quantities ("1024Mi" = "1Gi").
// A descriptor before 1.2 (no claims field, persistence on) asks for nothing checkable: nothing is listed.
func ClaimsDiffer(w World) []string {
	const how = "see \"Growing the volumes\" in the chart README"
	want := w.Instance.Claims
	var out []string
	for _, n := range w.Nodes {
		sts := n.StatefulSet
		if sts == nil {
			continue
		}
		have := sts.Claims
		switch {
		case want == nil && have != nil && !w.Instance.Persistence:
			out = append(out, fmt.Sprintf("persistence: StatefulSet %s has claims of its own, and a StatefulSet's volumeClaimTemplates cannot change; to turn persistence off or move to persistence.existingClaims, delete the StatefulSets with --cascade=orphan first (the pods keep running), %s", sts.Name, how))
		case want != nil && have == nil:
			out = append(out, fmt.Sprintf("persistence: StatefulSet %s has no claims of its own (persistence off, or persistence.existingClaims), and a StatefulSet's volumeClaimTemplates cannot change; delete the StatefulSets with --cascade=orphan before this upgrade (the pods keep running), %s", sts.Name, how))
		case want == nil || have == nil:
		case !sameQuantity(want.Size, have.Size):
			out = append(out, fmt.Sprintf("persistence.size: StatefulSet %s claims %s per node and a StatefulSet's volumeClaimTemplates cannot change, so %s cannot be applied; keep persistence.size: %s, or grow the volumes first (resize each PVC %s, then delete the StatefulSets with --cascade=orphan and upgrade): %s", sts.Name, have.Size, want.Size, have.Size, contract.Claim(n.Node.Pod), how))
		case want.StorageClass != have.StorageClass:
			keep := "leave persistence.storageClass empty"
			if have.StorageClass != "" {
				keep = "keep persistence.storageClass: " + have.StorageClass
			}
			out = append(out, fmt.Sprintf("persistence.storageClass: StatefulSet %s claims storage class %q and a StatefulSet's volumeClaimTemplates cannot change; %s (moving to another class means migrating the data to a new release)", sts.Name, have.StorageClass, keep))
		}
	}
	return out
}

// sameQuantity compares two Kubernetes quantities by value, and as strings when either does not parse.
func sameQuantity(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return qa.Cmp(qb) == 0
}
