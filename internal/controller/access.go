package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/contract"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
)

// aclResync is how often a node is synced even when nothing changed: it heals a pod that restarted with an
// older ACL file (Secret volumes update eventually; docs/design.md, "Access").
const aclResync = 10 * time.Minute

// aclBudget bounds one node's sync (docs/design.md, "Access").
const aclBudget = 5 * time.Second

type aclApplied struct {
	revision string
	identity string
	at       time.Time
}

// syncAccess applies the users of the <F>-acl Secret live on every reachable node (ACL SETUSER each desired
// user, ACL DELUSER the extras) when the effective rules changed, the pod was replaced or restarted, or
// aclResync passed. It never affects readiness: failures only make AccessConverged false. A user that
// acl.SplitUsers refuses (a shape the chart refuses too, such as readwrite without keys) is left out, so it
// has no access (it is deleted from a node that has it), while every valid user is applied; the refusal is a
// Warning Event UsersRefused on desc, once per change, and AccessConverged false with the same sentence.
func (c *InstanceController) syncAccess(ctx context.Context, desc *corev1.ConfigMap, w plan.World, mem *instanceMemory) plan.Access {
	in, now := w.Instance, w.Now
	if in.ACLSecret == "" {
		return plan.Access{Converged: true, Message: "no ACL Secret named"}
	}
	if mem.aclUsers == nil || now.Sub(mem.aclReadAt) > 5*time.Second {
		s, err := c.cs.CoreV1().Secrets(in.Namespace).Get(ctx, in.ACLSecret, metav1.GetOptions{})
		if err != nil {
			return plan.Access{Message: fmt.Sprintf("read secret %s: %v", in.ACLSecret, err)}
		}
		users, refused, err := acl.SplitUsers(s.Data[contract.KeyUsers])
		if err != nil {
			return plan.Access{Message: err.Error()}
		}
		mem.aclUsers, mem.aclRefused, mem.aclReadAt = users, refusedSentence(in.ACLSecret, refused), now
	}
	if c.reported.changed(in.NamespacedName().String()+"/users-refused", mem.aclRefused) && mem.aclRefused != "" {
		c.recorder.Event(desc, corev1.EventTypeWarning, "UsersRefused", mem.aclRefused)
		c.log.Info("users refused", "instance", in.Name, "why", mem.aclRefused)
	}
	base, err := acl.BuildSync(mem.aclUsers, nil, now)
	if err != nil {
		return plan.Access{Message: err.Error()}
	}
	res := plan.Access{Converged: true, Desired: base.Revision, Applied: base.Revision}
	if mem.aclApplied == nil {
		mem.aclApplied = map[string]aclApplied{}
	}
	opts := c.opOptions(in, mem)
	opts.CommandTimeout = aclBudget
	var pending []string
	for _, n := range w.Nodes {
		if !n.Reachable {
			pending = append(pending, n.Node.Pod+" (unreachable)")
			continue
		}
		id := n.Identity
		prev := mem.aclApplied[n.Node.Pod]
		if prev.revision == base.Revision && prev.identity == id && now.Sub(prev.at) < aclResync {
			continue
		}
		if err := c.syncNode(ctx, in.Addr(n.Node), opts, mem.aclUsers, now); err != nil {
			pending = append(pending, fmt.Sprintf("%s (%v)", n.Node.Pod, err))
			c.pool.drop(in.Addr(n.Node))
			continue
		}
		mem.aclApplied[n.Node.Pod] = aclApplied{revision: base.Revision, identity: id, at: now}
		c.log.Info("ACL synced", "instance", in.Name, "pod", n.Node.Pod, "revision", base.Revision, "users", len(mem.aclUsers))
	}
	if len(pending) > 0 {
		res.Converged = false
		res.Applied = ""
		res.Message = "not applied on: " + strings.Join(pending, ", ")
	} else {
		res.Message = fmt.Sprintf("revision %s applied on %d node(s)", base.Revision, len(w.Nodes))
	}
	if mem.aclRefused != "" {
		res.Converged = false
		res.Message = mem.aclRefused + "; " + res.Message
	}
	return res
}

// refusedSentence is the status message and Event of the users SplitUsers refused ("" when none): each user
// with why and the fix, and that the others are applied.
func refusedSentence(secret string, refused []acl.RefusedUser) string {
	if len(refused) == 0 {
		return ""
	}
	var parts []string
	for _, r := range refused {
		parts = append(parts, r.Error())
	}
	return fmt.Sprintf("%s: %d user(s) refused and not applied (the others are): %s", secret, len(refused), strings.Join(parts, "; "))
}

func (c *InstanceController) syncNode(ctx context.Context, addr string, opts valkey.Options, users []acl.DesiredUser, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, aclBudget)
	defer cancel()
	cl, err := c.pool.get(ctx, addr, opts)
	if err != nil {
		return err
	}
	node, err := acl.ObserveNode(ctx, cl, users)
	if err != nil {
		return err
	}
	plan, err := acl.BuildNodeSync(users, node, now)
	if err != nil {
		return err
	}
	if err := acl.ApplySync(ctx, cl, plan); err != nil {
		return err
	}
	if len(plan.Kill) > 0 {
		c.log.Info("closed the sessions of revoked passwords", "node", addr, "users", plan.Kill)
	}
	return nil
}
