// Package registration holds the sentinel controller's pure decisions about monitors (docs/design.md, "The
// sentinel controller's pass"): which Sentinel lacks which monitor, which per-monitor keys
// differ, and which monitors no longer match the selector. It never resets or removes a monitor whose primary
// is down or being failed over (case S10), nor one whose instance is still selected but could not be
// resolved (F3): a monitor goes only when its instance is positively gone, deselected or in
// failover mode None.
package registration

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/vote"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
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
	// PrimaryLoading names a node that reports role master but is still loading its data set (INFO
	// persistence loading:1, e.g. a restore or a restart with a large RDB): never a registration target while
	// it loads, because a Sentinel that then saw it fail would promote a replica without the data. Empty: none.
	PrimaryLoading string
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
	// left as they are, never removed (F3).
	Keep map[string]string
	// HoldRemovals, when not empty, says why no monitor may be removed this pass: a selected descriptor
	// could not be read far enough to know which monitor it owns.
	HoldRemovals string
	Sentinels    []SentinelState
	// Now is the time of the pass; StuckSince maps StuckKey(pod, monitor) to when that Sentinel was first
	// seen stuck on a stale primary (controller memory, from Plan.Stuck of earlier passes).
	Now        time.Time
	StuckSince map[string]time.Time
}

// ActionKind names a registration change.
type ActionKind string

// The actions.
const (
	Monitor ActionKind = "monitor" // SENTINEL MONITOR name host port quorum, then SET of Pairs
	Set     ActionKind = "set"     // SENTINEL SET name Pairs...
	Remove  ActionKind = "remove"  // SENTINEL REMOVE name
	// Restore is SENTINEL REMOVE name, MONITOR name host port quorum and SET of Pairs on a Sentinel that names,
	// in From, a primary that is not a node of the instance (a forged hello on a shared quorum).
	Restore ActionKind = "restore"
	// Realign is SENTINEL REMOVE name, MONITOR name host port quorum and SET of Pairs on a Sentinel stuck on
	// a stale primary (Stuck): it names, in From, another node of the instance than the strict majority of
	// the Sentinels, with a config epoch no newer than theirs, and Sentinel's own hellos will never move it
	// (RELIABILITY.md "Found" 4).
	Realign ActionKind = "realign"
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
	// Stuck lists the StuckKey of every Sentinel monitor seen stuck on a stale primary this pass (the
	// controller remembers when each was first seen, Observation.StuckSince).
	Stuck []string
}

// StuckKey names one Sentinel's monitor in Observation.StuckSince and Plan.Stuck.
func StuckKey(pod, monitor string) string { return pod + "/" + monitor }

// Stuck reports whether Sentinel s is stuck on a stale primary for w's monitor, and the address it names
// ("host:port"). Sentinel moves a monitor to the address of a peer's hello only when the hello carries a
// higher config epoch; a Sentinel that led a failover switches to its own promoted replica only when that
// failover ends, so when the other Sentinels fail over again meanwhile (the promoted replica died) it adopts
// their epoch while it still names the old address, then switches to its own promoted node at that same
// epoch, and no hello ever moves it back (reproduced in the loopback chaos test, RELIABILITY.md "Found" 4).
// Stuck means: the primary w names was observed this pass (role master with connected replicas); a strict
// majority of all Sentinels name it, every one of them healthy (not down, not failing over) at one config
// epoch E; s names another node of the instance with a config epoch of at most E and runs no failover; and
// no Sentinel runs a failover of the monitor.
func Stuck(w Wanted, s SentinelState, all []SentinelState) (string, bool) {
	name := w.Instance.MonitorName
	m, has := s.Monitors[name]
	if !s.Reachable || !has || !w.PrimaryObserved || w.PrimaryHost == "" {
		return "", false
	}
	primary := net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort))
	if !spec.OwnNode(w.Instance.NodeAddrs(), m.Host, m.Port) || spec.OwnNode([]string{primary}, m.Host, m.Port) || m.FailoverInProgress() {
		return "", false
	}
	agree, epoch := 0, int64(-1)
	for _, o := range all {
		om, ok := o.Monitors[name]
		if !o.Reachable || !ok {
			continue
		}
		if om.FailoverInProgress() {
			return "", false
		}
		if !spec.OwnNode([]string{primary}, om.Host, om.Port) {
			continue
		}
		if !om.Healthy() || (epoch >= 0 && om.ConfigEpoch != epoch) {
			return "", false
		}
		epoch = om.ConfigEpoch
		agree++
	}
	if agree < DefaultQuorum(len(all)) || m.ConfigEpoch > epoch {
		return "", false
	}
	return net.JoinHostPort(m.Host, strconv.Itoa(m.Port)), true
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
			// monitors its peers hold (charts/valkey-sentinel vs.readinessScript), so waiting for
			// its readiness would never register them.
			if !s.Reachable {
				continue
			}
			m, has := s.Monitors[name]
			if !has {
				if w.PrimaryHost == "" {
					p.Held[name] = "no primary known yet to register: no data node answered as a primary with its replicas (pods Pending or still starting? kubectl get pods; the instance's own status says more)"
					if w.PrimaryLoading != "" {
						p.Held[name] = fmt.Sprintf("%s reports role master but is still loading its data set: registered once "+
							"loaded (a failover meanwhile would promote a replica without the data)", w.PrimaryLoading)
					}
					continue
				}
				all := append([][2]string{{"auth-user", w.AuthUser}, {"auth-pass", w.AuthPass}}, pairs...)
				p.Actions = append(p.Actions, Action{Kind: Monitor, Sentinel: s.Pod, Addr: s.Addr, Name: name,
					Host: w.PrimaryHost, Port: w.PrimaryPort, Quorum: w.Quorum, Pairs: all, AuthHash: w.AuthHash,
					Reason: "monitor missing on this Sentinel"})
				continue
			}
			if from, stuck := Stuck(w, s, o.Sentinels); stuck {
				key := StuckKey(s.Pod, name)
				p.Stuck = append(p.Stuck, key)
				wait := time.Duration(m.FailoverTimeoutMs) * time.Millisecond
				since, seen := o.StuckSince[key]
				if !seen || o.Now.Sub(since) < wait {
					p.Held[name] = fmt.Sprintf("%s names %s, another node than the %s most Sentinels name, at a config epoch no newer than "+
						"theirs (their hellos will not move it): re-registered if it lasts failover-timeout (%s)", s.Pod, from,
						net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort)), wait)
					continue
				}
				all := append([][2]string{{"auth-user", w.AuthUser}, {"auth-pass", w.AuthPass}}, pairs...)
				p.Actions = append(p.Actions, Action{Kind: Realign, Sentinel: s.Pod, Addr: s.Addr, Name: name,
					Host: w.PrimaryHost, Port: w.PrimaryPort, Quorum: w.Quorum, Pairs: all, AuthHash: w.AuthHash, From: from,
					Reason: fmt.Sprintf("names %s for %s while most Sentinels name the observed primary %s at config epoch %d (its %d): "+
						"Sentinel's hellos never move it", from, o.Now.Sub(since).Round(time.Second),
						net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort)), agreedEpoch(w, o.Sentinels), m.ConfigEpoch)})
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

// agreedEpoch is the config epoch of the Sentinels that name w's primary (for messages).
func agreedEpoch(w Wanted, all []SentinelState) int64 {
	primary := net.JoinHostPort(w.PrimaryHost, strconv.Itoa(w.PrimaryPort))
	for _, o := range all {
		if m, ok := o.Monitors[w.Instance.MonitorName]; o.Reachable && ok && spec.OwnNode([]string{primary}, m.Host, m.Port) {
			return m.ConfigEpoch
		}
	}
	return -1
}

// AgreedPrimary returns the address most of the reachable Sentinels name for a monitor (internal/planners/vote: hosts
// normalised, ties broken by address), and false when none knows it, or when any of them names a primary
// that is not one of nodes (spec.OwnNode; a forged hello can set one): then the Sentinels' view is not a
// source of truth, and the caller observes the nodes instead.
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
// one that is not one of nodes (spec.OwnNode; a forged hello on a shared quorum can set one).
func ForeignPrimaries(sentinels []SentinelState, name string, nodes []string) map[string]string {
	out := map[string]string{}
	for _, s := range sentinels {
		if m, has := s.Monitors[name]; s.Reachable && has && !spec.OwnNode(nodes, m.Host, m.Port) {
			out[s.Pod] = net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
		}
	}
	return out
}
