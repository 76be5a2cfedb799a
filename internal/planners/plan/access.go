package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// ACLResync is how often a node's users are synced even when nothing changed: it heals a pod that restarted
// with an older ACL file (Secret volumes update eventually; docs/design.md, "Access").
const ACLResync = 10 * time.Minute

// ACLSecret is the <F>-acl Secret (spec.Instance.ACLSecret) as a pass read it, for the live ACL sync.
type ACLSecret struct {
	// Users are the users acl.SplitUsers accepted.
	Users []acl.DesiredUser
	// Refused says which users acl.SplitUsers refused and why (RefusedUsers), "" when it refused none.
	Refused string
	// Err is why the Secret could not be read or its users parsed ("" = read); then Users and Refused are
	// not to be used.
	Err string
}

// ACLApplied is what the live ACL sync last applied on one node: the users' revision (acl.BuildSync), the
// node's Node.Identity at the time, and when (the World's Now).
type ACLApplied struct {
	Revision string
	Identity string
	At       time.Time
}

// AccessPlan is the live ACL sync of one pass (PlanAccess).
type AccessPlan struct {
	// Done, when not nil, is the pass's Access without any sync: no ACL Secret is named, or it could not be
	// read, or its users could not be built into a revision.
	Done *Access
	// Revision is the desired users' revision (acl.BuildSync of ACLSecret.Users); Users those users.
	Revision string
	Users    []acl.DesiredUser
	// Sync are the reachable nodes to sync this pass, in node order: those whose last sync (Memory.ACLApplied)
	// had another revision, or another pod identity (the pod was replaced or restarted), or is ACLResync old.
	Sync []spec.Node
}

// NodeSync is the applier's result of syncing one node's users at AccessPlan.Revision: Err is why it failed
// ("" = synced).
type NodeSync struct {
	Pod      string
	Revision string
	Err      string
}

// PlanAccess plans the live ACL sync of World w from the memory m: which nodes to sync (AccessPlan.Sync),
// or, when nothing can be synced, the Access to report (AccessPlan.Done). A user that acl.SplitUsers refuses
// (a shape the chart refuses too, such as readwrite without keys) is left out of the users, so a node that has
// it loses it, while every valid user is applied.
func PlanAccess(w World, m Memory) AccessPlan {
	if w.Instance.ACLSecret == "" {
		return AccessPlan{Done: &Access{Converged: true, Message: "no ACL Secret named"}}
	}
	if w.ACL.Err != "" {
		return AccessPlan{Done: &Access{Message: w.ACL.Err}}
	}
	base, err := acl.BuildSync(w.ACL.Users, nil, w.Now)
	if err != nil {
		return AccessPlan{Done: &Access{Message: err.Error()}}
	}
	p := AccessPlan{Revision: base.Revision, Users: w.ACL.Users}
	for _, n := range w.Nodes {
		if !n.Reachable {
			continue
		}
		prev := m.ACLApplied[n.Node.Pod]
		if prev.Revision == base.Revision && prev.Identity == n.Identity && w.Now.Sub(prev.At) < ACLResync {
			continue
		}
		p.Sync = append(p.Sync, n.Node)
	}
	return p
}

// AccessResult is the AccessConverged outcome of a pass from its plan p and the applier's results (one per
// node of p.Sync that was tried): converged when every node is reachable, every sync succeeded and no user
// was refused; otherwise the message names each node not applied on, in node order (unreachable, or the
// sync's error), after the refused users' sentence.
func AccessResult(w World, p AccessPlan, synced []NodeSync) Access {
	if p.Done != nil {
		return *p.Done
	}
	failed := map[string]string{}
	for _, s := range synced {
		if s.Err != "" {
			failed[s.Pod] = s.Err
		}
	}
	res := Access{Converged: true, Desired: p.Revision, Applied: p.Revision}
	var pending []string
	for _, n := range w.Nodes {
		if !n.Reachable {
			pending = append(pending, n.Node.Pod+" (unreachable)")
		} else if why, ok := failed[n.Node.Pod]; ok {
			pending = append(pending, fmt.Sprintf("%s (%s)", n.Node.Pod, why))
		}
	}
	if len(pending) > 0 {
		res.Converged = false
		res.Applied = ""
		res.Message = "not applied on: " + strings.Join(pending, ", ")
	} else {
		res.Message = fmt.Sprintf("revision %s applied on %d node(s)", p.Revision, len(w.Nodes))
	}
	if w.ACL.Refused != "" {
		res.Converged = false
		res.Message = w.ACL.Refused + "; " + res.Message
	}
	return res
}

// RefusedUsers is the status message and Event of the users acl.SplitUsers refused in Secret secret ("" when
// none): each user with why and the fix, and that the others are applied.
func RefusedUsers(secret string, refused []acl.RefusedUser) string {
	if len(refused) == 0 {
		return ""
	}
	var parts []string
	for _, r := range refused {
		parts = append(parts, r.Error())
	}
	return fmt.Sprintf("%s: %d user(s) refused and not applied (the others are): %s", secret, len(refused), strings.Join(parts, "; "))
}

// rememberAccess records in m the nodes the applier synced (synced, Err ""), at their revision, with their
// pod identity in w and w.Now. The map is copied, never changed in place (m may share it with an earlier
// Memory).
func rememberAccess(m *Memory, w World, synced []NodeSync) {
	if len(synced) == 0 {
		return
	}
	next := make(map[string]ACLApplied, len(m.ACLApplied)+len(synced))
	for k, v := range m.ACLApplied {
		next[k] = v
	}
	for _, s := range synced {
		if s.Err != "" {
			continue
		}
		for _, n := range w.Nodes {
			if n.Node.Pod == s.Pod {
				next[s.Pod] = ACLApplied{Revision: s.Revision, Identity: n.Identity, At: w.Now}
			}
		}
	}
	m.ACLApplied = next
}
