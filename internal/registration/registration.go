// Package registration holds the sentinel controller's pure decisions about monitors (docs/design.md, "The
// sentinel controller's pass"): which Sentinel lacks which monitor, which per-monitor keys
// differ, and which monitors no longer match the selector. It never resets or removes a monitor whose primary
// is down or being failed over (case S10), nor one whose instance is still selected but could not be
// resolved (issue 12, F3): a monitor goes only when its instance is positively gone, deselected or in
// failover mode None.
package registration

import (
	"fmt"
	"net"
	"sort"
	"strconv"

	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/vote"
)

// Wanted is one instance this quorum should monitor, resolved by the controller.
type Wanted struct {
	Instance spec.Instance
	// Quorum is the quorum to register (the instance's pin, or Sentinels/2+1).
	Quorum int
	// AuthUser and AuthPass are the _sentinel credentials; AuthHash fingerprints them.
	AuthUser, AuthPass, AuthHash string
	// PrimaryHost/Port is where to register: the node most of our Sentinels already name, else the data
	// node that reports role primary with the most connected replicas; always a node of the instance
	// (spec.OwnNode). Empty means "not known yet".
	PrimaryHost string
	PrimaryPort int
	// PrimaryObserved is true when PrimaryHost/Port reported role master itself this pass, with connected
	// replicas (or as the instance's only node): what a Restore needs (never a guess from Sentinel).
	PrimaryObserved bool
}

// SentinelState is one Sentinel pod as observed.
type SentinelState struct {
	Pod  string
	Addr string
	// Ready is the pod's readiness (registration does not wait for it: a Sentinel is ready only once it holds
	// its peers' monitors); Reachable is true when SENTINEL MASTERS answered.
	Ready     bool
	Reachable bool
	Monitors  map[string]valkey.Monitor
	// AppliedAuth maps a monitor name to the AuthHash last applied on this Sentinel (controller memory).
	AppliedAuth map[string]string
}

// Observation is the input of Build.
type Observation struct {
	Wanted []Wanted
	// Keep maps the monitor names of instances that are still selected but could not be resolved this pass
	// (descriptor refused or unreadable, _sentinel Secret unreadable) to the reason: their monitors are
	// left as they are, never removed (issue 12, F3).
	Keep map[string]string
	// HoldRemovals, when not empty, says why no monitor may be removed this pass: a selected descriptor
	// could not be read far enough to know which monitor it owns.
	HoldRemovals string
	Sentinels    []SentinelState
}

// ActionKind names a registration change.
type ActionKind string

// The actions.
const (
	Monitor ActionKind = "monitor" // SENTINEL MONITOR name host port quorum, then SET of Pairs
	Set     ActionKind = "set"     // SENTINEL SET name Pairs...
	Remove  ActionKind = "remove"  // SENTINEL REMOVE name
	// Restore is SENTINEL REMOVE name, MONITOR name host port quorum and SET of Pairs on a Sentinel that names,
	// in From, a primary that is not a node of the instance (issue 25: a forged hello on a shared quorum).
	Restore ActionKind = "restore"
)

// Action is one command (or MONITOR+SET) on one Sentinel.
type Action struct {
	Kind     ActionKind
	Sentinel string // pod name
	Addr     string
	Name     string
	Host     string
	Port     int
	Quorum   int
	Pairs    [][2]string
	AuthHash string
	// From is the foreign primary ("host:port") a Restore replaces.
	From   string
	Reason string
}

// Plan is the output of Build.
type Plan struct {
	Actions []Action
	// Held lists monitors whose change waits, with the reason.
	Held map[string]string
	// Warnings are configuration warnings to report (reserved keys, quorum pins out of range).
	Warnings []string
}

// DefaultQuorum is the quorum for n Sentinels when the instance pins none: a strict majority.
func DefaultQuorum(n int) int { return n/2 + 1 }

// QuorumWarning returns a warning when a pinned quorum exceeds the Sentinel count or is at most half of it
// (docs/design.md, "The sentinel controller's pass"), else "".
func QuorumWarning(name string, quorum, sentinels int) string {
	switch {
	case quorum > sentinels:
		return fmt.Sprintf("%s: quorum %d exceeds the %d Sentinels: failures are never agreed", name, quorum, sentinels)
	case quorum*2 <= sentinels:
		return fmt.Sprintf("%s: quorum %d is at most half of %d Sentinels: a minority can declare the primary down", name, quorum, sentinels)
	}
	return ""
}

// settableKeys maps SENTINEL SET keys to the SENTINEL MASTERS field that shows the current value.
var settableKeys = map[string]string{
	"down-after-milliseconds": "down-after-milliseconds",
	"failover-timeout":        "failover-timeout",
	"parallel-syncs":          "parallel-syncs",
}

// Build returns the registration plan (pure).
func Build(o Observation) Plan {
	p := Plan{Held: map[string]string{}}
	wanted := map[string]Wanted{}
	names := make([]string, 0, len(o.Wanted))
	for _, w := range o.Wanted {
		wanted[w.Instance.MonitorName] = w
		names = append(names, w.Instance.MonitorName)
	}
	sort.Strings(names)
	for _, name := range names {
		w := wanted[name]
		pairs, skipped := w.Instance.SentinelSetPairs()
		for _, k := range skipped {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: sentinel.config key %q is owned by the controller and was skipped", name, k))
		}
		for _, s := range o.Sentinels {
			// Reachable, ready or not: a Sentinel that came back empty is unready until it holds the
			// monitors its peers hold (charts/valkey-sentinel vs.readinessScript, issue 24), so waiting for
			// its readiness would never register them.
			if !s.Reachable {
				continue
			}
			m, has := s.Monitors[name]
			if !has {
				if w.PrimaryHost == "" {
					p.Held[name] = "no primary known yet to register"
					continue
				}
				all := append([][2]string{{"auth-user", w.AuthUser}, {"auth-pass", w.AuthPass}}, pairs...)
				p.Actions = append(p.Actions, Action{Kind: Monitor, Sentinel: s.Pod, Addr: s.Addr, Name: name,
					Host: w.PrimaryHost, Port: w.PrimaryPort, Quorum: w.Quorum, Pairs: all, AuthHash: w.AuthHash,
					Reason: "monitor missing on this Sentinel"})
				continue
			}
			if !spec.OwnNode(w.Instance.NodeAddrs(), m.Host, m.Port) {
				from := net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
				if !w.PrimaryObserved || w.PrimaryHost == "" {
					p.Held[name] = fmt.Sprintf("%s names %s, which is not a node of the instance, and no node was observed as "+
						"primary with connected replicas: not restored (the real primary is never guessed)", s.Pod, from)
					continue
				}
				all := append([][2]string{{"auth-user", w.AuthUser}, {"auth-pass", w.AuthPass}}, pairs...)
				p.Actions = append(p.Actions, Action{Kind: Restore, Sentinel: s.Pod, Addr: s.Addr, Name: name,
					Host: w.PrimaryHost, Port: w.PrimaryPort, Quorum: w.Quorum, Pairs: all, AuthHash: w.AuthHash, From: from,
					Reason: fmt.Sprintf("names %s, which is not a node of the instance; the observed primary is %s",
						from, net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort)))})
				continue
			}
			var diff [][2]string
			if m.Quorum != w.Quorum {
				diff = append(diff, [2]string{"quorum", strconv.Itoa(w.Quorum)})
			}
			for _, kv := range pairs {
				if field, ok := settableKeys[kv[0]]; ok && m.Fields[field] == kv[1] {
					continue
				}
				if _, ok := settableKeys[kv[0]]; !ok && s.AppliedAuth[name] == w.AuthHash {
					continue // keys MASTERS does not show are applied with the credentials
				}
				diff = append(diff, kv)
			}
			if s.AppliedAuth[name] != w.AuthHash {
				diff = append([][2]string{{"auth-user", w.AuthUser}, {"auth-pass", w.AuthPass}}, diff...)
			}
			if len(diff) > 0 {
				p.Actions = append(p.Actions, Action{Kind: Set, Sentinel: s.Pod, Addr: s.Addr, Name: name,
					Pairs: diff, AuthHash: w.AuthHash, Reason: "settings differ"})
			}
		}
	}
	// monitors on our Sentinels that nothing wants any more
	for _, s := range o.Sentinels {
		if !s.Reachable {
			continue
		}
		gone := make([]string, 0)
		for name := range s.Monitors {
			if _, ok := wanted[name]; !ok {
				gone = append(gone, name)
			}
		}
		sort.Strings(gone)
		for _, name := range gone {
			m := s.Monitors[name]
			if why, ok := o.Keep[name]; ok {
				p.Held[name] = "kept, the instance could not be resolved: " + why
				continue
			}
			if o.HoldRemovals != "" {
				p.Held[name] = "not removed: " + o.HoldRemovals
				continue
			}
			if !m.Healthy() {
				p.Held[name] = "not removed while its primary is down or failing over"
				continue
			}
			p.Actions = append(p.Actions, Action{Kind: Remove, Sentinel: s.Pod, Addr: s.Addr, Name: name,
				Reason: "instance no longer selected"})
		}
	}
	return p
}

// AgreedPrimary returns the address most of the reachable Sentinels name for a monitor (internal/vote: hosts
// normalised, ties broken by address), and false when none knows it, or when any of them names a primary
// that is not one of nodes (spec.OwnNode; issue 25): then the Sentinels' view is not a source of truth, and
// the caller observes the nodes instead.
func AgreedPrimary(sentinels []SentinelState, name string, nodes []string) (host string, port int, ok bool) {
	claims := make([]vote.Claim, len(sentinels))
	for i, s := range sentinels {
		m, has := s.Monitors[name]
		if s.Reachable && has && !spec.OwnNode(nodes, m.Host, m.Port) {
			return "", 0, false
		}
		claims[i] = vote.Claim{Answered: s.Reachable, Found: has, Host: m.Host, Port: m.Port}
	}
	t := vote.Count(claims)
	return t.Host, t.Port, t.Leader()
}

// ForeignPrimaries returns, per Sentinel pod, the foreign primary ("host:port") it names for monitor name:
// one that is not one of nodes (spec.OwnNode; issue 25).
func ForeignPrimaries(sentinels []SentinelState, name string, nodes []string) map[string]string {
	out := map[string]string{}
	for _, s := range sentinels {
		if m, has := s.Monitors[name]; s.Reachable && has && !spec.OwnNode(nodes, m.Host, m.Port) {
			out[s.Pod] = net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
		}
	}
	return out
}
