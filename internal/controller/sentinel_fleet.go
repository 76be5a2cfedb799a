package controller

// The sentinel controller's side of fleets (issue 17, docs/fleet.md): descriptors of several namespaces,
// the instance's grant, monitor names shared across namespaces, and monitors kept while their namespace
// cannot be read (issue 12, F3).

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/contract"
	"github.com/valkey-ha/valkey-ha/internal/plan"
	"github.com/valkey-ha/valkey-ha/internal/spec"
)

// fleetPass is what one pass learned about grants, for the Events of the removals it plans.
type fleetPass struct {
	// revoked maps a monitor name to why its instance no longer grants this quorum
	revoked map[string]string
}

// otherNamespace is ns when it is not the quorum's own, else "" (plan.QuorumInstance.Namespace).
func (c *SentinelController) otherNamespace(ns string) string {
	if ns == c.opts.Namespace {
		return ""
	}
	return ns
}

func (c *SentinelController) beginFleetPass() { c.fleet = fleetPass{revoked: map[string]string{}} }

// notGranted records that the instance of a selected descriptor grants another quorum (or, in another
// namespace, none): it is treated like a deselected instance, and the Event of its monitor's removal says why.
func (c *SentinelController) notGranted(in spec.Instance, why string) {
	if in.MonitorName != "" {
		c.fleet.revoked[in.MonitorName] = why
	}
}

// removalReason says why the monitor name is removed beyond "no longer selected", or "".
func (c *SentinelController) removalReason(name string) string {
	if why := c.fleet.revoked[name]; why != "" {
		return "grant revoked: " + why
	}
	return ""
}

// refuseNameCollisions refuses all but one of the selected instances that share a monitor name (Sentinel
// knows a monitor by name only; two tenants' releases of the same name have the same default). The one that
// keeps the name is the one whose namespace the registered monitor's host names, else the first by
// namespace/name (w.Instances is sorted so).
func (c *SentinelController) refuseNameCollisions(w *plan.QuorumWorld) {
	byName := map[string][]int{}
	for i, qi := range w.Instances {
		if qi.Refused == "" && qi.Instance.MonitorName != "" {
			byName[qi.Instance.MonitorName] = append(byName[qi.Instance.MonitorName], i)
		}
	}
	for name, idx := range byName {
		if len(idx) < 2 {
			continue
		}
		owner := idx[0]
		registered := ""
		for _, st := range w.Sentinels {
			if m, ok := st.Monitors[name]; ok && st.Reachable {
				registered = spec.HostNamespace(m.Host)
				break
			}
		}
		for _, i := range idx {
			if registered != "" && w.Instances[i].Instance.Namespace == registered {
				owner = i
				break
			}
		}
		o := w.Instances[owner].Instance
		for _, i := range idx {
			if i == owner {
				continue
			}
			w.Instances[i].Refused = fmt.Sprintf("monitor name %q is also used by instance %s/%s of this quorum (Sentinel knows a monitor by name only); set sentinel.monitorName to a name unique across the quorum",
				name, o.Namespace, o.Name)
			w.Instances[i].Collision = true
		}
	}
}

// keepUnreadable keeps (w.Keep) every registered monitor whose instance this pass cannot see because its
// namespace cannot be read (its cache has not synced: Forbidden, an API error) or because the namespace
// selection is unknown: the namespace is read from the monitor's registered host (F-<i>-0.F-<i>.<ns>.svc.
// <domain>). A monitor whose host names no namespace (tests on loopback) holds every removal instead
// (w.Unowned) while any namespace cannot be read. The policy (plan.CheckQuorum) then refuses their REMOVE
// (issue 12, F3). Unreadable namespaces are reported in the quorum status (w.Warnings) and once each by an
// Event.
func (c *SentinelController) keepUnreadable(ctx context.Context, w *plan.QuorumWorld) {
	known, selErr := c.cmCache.SelectionKnown()
	if !known {
		msg := fmt.Sprintf("the namespace selection (namespaceSelector) cannot be read (%v): no monitor of a namespace that may be selected is removed", selErr)
		w.Warnings = append(w.Warnings, msg)
		c.quorumEventOnce(ctx, "selection", corev1.EventTypeWarning, "NamespaceSelectionUnreadable", msg)
	}
	unreadable := map[string]string{}
	for _, ns := range c.cmCache.Namespaces() {
		if ns.Synced {
			continue
		}
		why := "its cache has not synced yet"
		if ns.Err != nil {
			why = ns.Err.Error()
		}
		unreadable[ns.Namespace] = why
		msg := fmt.Sprintf("namespace %s cannot be read (%s): the monitors registered there are kept, none is added", ns.Namespace, why)
		w.Warnings = append(w.Warnings, msg)
		c.quorumEventOnce(ctx, "ns/"+ns.Namespace, corev1.EventTypeWarning, "NamespaceUnreadable", msg)
	}
	if len(unreadable) == 0 && known {
		return
	}
	var names []string
	seen := map[string]bool{}
	for _, s := range w.Sentinels {
		for name, m := range s.Monitors {
			if w.Wanted[name] || seen[name] || w.Keep[name] != "" {
				continue
			}
			seen[name] = true
			ns := spec.HostNamespace(m.Host)
			switch {
			case ns == "":
				names = append(names, name)
			case unreadable[ns] != "":
				w.Keep[name] = fmt.Sprintf("namespace %s cannot be read (%s)", ns, unreadable[ns])
			case !known && !c.cmCache.Serves(ns):
				w.Keep[name] = fmt.Sprintf("namespace %s may be selected: the namespace selection cannot be read", ns)
			}
		}
	}
	if len(names) > 0 && w.Unowned == "" {
		sort.Strings(names)
		var nss []string
		for ns := range unreadable {
			nss = append(nss, ns)
		}
		sort.Strings(nss)
		w.Unowned = fmt.Sprintf("monitors %s name no namespace, and namespaces %s (or the namespace selection) cannot be read",
			strings.Join(names, ", "), strings.Join(nss, ", "))
	}
}

// quorumEventOnce records an Event on the quorum's status ConfigMap once per change of msg under key.
func (c *SentinelController) quorumEventOnce(ctx context.Context, key, eventType, reason, msg string) {
	if !c.reported.changed("quorum/"+key, msg) {
		return
	}
	c.log.Warn(msg)
	ctx, cancel := context.WithTimeout(ctx, c.opts.CommandTimeout)
	defer cancel()
	if cm, err := c.cs.CoreV1().ConfigMaps(c.opts.Namespace).Get(ctx, contract.Status(c.opts.Release), metav1.GetOptions{}); err == nil {
		c.recorder.Event(cm, eventType, reason, msg)
	}
}

// publishedHere reports whether Sentinel info cm was published by this quorum (release and namespace; an
// info without sentinelNamespace was published by a quorum of its own namespace).
func (c *SentinelController) publishedHere(cm *corev1.ConfigMap) bool {
	si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
	if err != nil {
		return cm.Namespace == c.opts.Namespace
	}
	return si.PublishedBy(c.opts.Namespace, c.opts.Release, cm.Namespace)
}
