package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// The sentinel controller's fleet decisions (docs/fleet.md): monitor names shared by instances of several
// namespaces, and the monitors kept while a namespace, or the namespace selection, cannot be read (an
// instance not seen is not known to be gone: F3). The gather observes; these decide.

// NamespaceReadability is what the sentinel controller's gather could read of the namespaces its quorum
// serves. The zero value is "everything readable".
type NamespaceReadability struct {
	// SelectionUnknown is why the namespace selection (namespaceSelector) cannot be read ("" = known).
	SelectionUnknown string
	// Unreadable are the served namespaces whose cache has not synced, sorted by name, each with why.
	Unreadable []UnreadableNamespace
	// Served maps each namespace a registered monitor's host names (spec.HostNamespace) to whether the
	// quorum serves it (fixed or selected).
	Served map[string]bool
}

// UnreadableNamespace is one served namespace that cannot be read, and why (an API error, or that its cache
// has not synced yet).
type UnreadableNamespace struct {
	Namespace, Why string
}

// RefuseNameCollisions refuses all but one of w's selected instances that share a monitor name (Sentinel
// knows a monitor by name only; two tenants' releases of the same name have the same default), marking them
// Collision. The one that keeps the name is the one whose namespace the registered monitor's host names,
// else the first by namespace/name (w.Instances is sorted so). The gather calls it before resolving: a refused
// instance is not resolved.
func RefuseNameCollisions(w *SentinelWorld) {
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

// NamespaceWarnings are the status warnings of w.Namespaces: the namespace selection and each namespace
// that cannot be read (the same texts as the Warning Events NamespaceSelectionUnreadable and
// NamespaceUnreadable).
func NamespaceWarnings(w SentinelWorld) []string {
	var out []string
	if w.Namespaces.SelectionUnknown != "" {
		out = append(out, SelectionUnreadableMessage(w.Namespaces.SelectionUnknown))
	}
	for _, u := range w.Namespaces.Unreadable {
		out = append(out, NamespaceUnreadableMessage(u))
	}
	return out
}

// SelectionUnreadableMessage is the warning of a namespace selection that cannot be read (why).
func SelectionUnreadableMessage(why string) string {
	return fmt.Sprintf("the namespace selection (namespaceSelector) cannot be read (%s): no monitor of a namespace that may be selected is removed", why)
}

// NamespaceUnreadableMessage is the warning of one served namespace that cannot be read.
func NamespaceUnreadableMessage(u UnreadableNamespace) string {
	return fmt.Sprintf("namespace %s cannot be read (%s): the monitors registered there are kept, none is added", u.Namespace, u.Why)
}

// keepUnreadable keeps (w.Keep) every registered monitor whose instance this pass cannot see because its
// namespace cannot be read or because the namespace selection is unknown: the namespace is read from the
// monitor's registered host (F-<i>-0.F-<i>.<ns>.svc.<domain>). A monitor whose host names no namespace
// (tests on loopback) holds every removal instead (w.Unowned) while any namespace cannot be read. The policy
// (CheckSentinelStep) then refuses their REMOVE and the Sentinel roll waits (F3).
func keepUnreadable(w *SentinelWorld) {
	rd := w.Namespaces
	known := rd.SelectionUnknown == ""
	if len(rd.Unreadable) == 0 && known {
		return
	}
	unreadable := map[string]string{}
	for _, u := range rd.Unreadable {
		unreadable[u.Namespace] = u.Why
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
			case !known && !rd.Served[ns]:
				w.Keep[name] = fmt.Sprintf("namespace %s may be selected: the namespace selection cannot be read", ns)
			}
		}
	}
	if len(names) > 0 && w.Unowned == "" {
		sort.Strings(names)
		nss := make([]string, 0, len(rd.Unreadable))
		for _, u := range rd.Unreadable {
			nss = append(nss, u.Namespace)
		}
		w.Unowned = fmt.Sprintf("monitors %s name no namespace, and namespaces %s (or the namespace selection) cannot be read",
			strings.Join(names, ", "), strings.Join(nss, ", "))
	}
}
