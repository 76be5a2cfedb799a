package plan

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/planners/roll"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// SentinelWorld is what one pass of the sentinel controller observed of its quorum and of the instances it
// selects (docs/design.md, "The sentinel controller's pass"), and all that its planner, policy and status
// read.
type SentinelWorld struct {
	Release, Namespace string
	Now                time.Time
	// StatefulSet is the Sentinels' StatefulSet (nil: not observed).
	StatefulSet *StatefulSet
	// Sentinels has one entry per Sentinel pod ordinal: pod readiness, SENTINEL MASTERS; CKQuorum, per
	// ordinal, SENTINEL CKQUORUM of each selected monitor that Sentinel answered for (same round trip).
	Sentinels []registration.SentinelState
	CKQuorum  []map[string]valkey.Quorum
	// Pods are the Sentinel pods observed in the cache, by name.
	Pods map[string]PodRef
	// Hosts are the Sentinel addresses to publish in <F>-sentinels (index = ordinal), Port and TLS theirs.
	Hosts []string
	Port  int
	TLS   bool
	// DescriptorsErr is why the instance descriptors could not be listed ("" = listed).
	DescriptorsErr string
	// Instances are the selected descriptors, sorted by namespace and name, as resolved this pass.
	Instances []MonitoredInstance
	// Published names the <F>-sentinels ConfigMaps this quorum has published (namespace/name for another
	// namespace than the quorum's, as MonitoredInstance.SentinelInfoKey).
	Published []string
	// Warnings are what the gather found odd but could work with (reported in the status).
	Warnings []string
	// Wanted are the monitors of the selected instances that resolved this pass; Keep maps the monitors of
	// selected instances that did not resolve to the reason; Unowned, when not empty, says why the monitor
	// of some selected descriptor is unknown (it could not be read). The gather derives them from Instances.
	Wanted  map[string]bool
	Keep    map[string]string
	Unowned string
	// QuorumOK is SENTINEL CKQUORUM OK on every Sentinel, by wanted monitor (derived from CKQuorum).
	QuorumOK map[string]bool
	// StuckSince is the controller's memory of when each Sentinel monitor was first seen stuck on a stale
	// primary (registration.StuckKey; registration.Stuck).
	StuckSince map[string]time.Time
	// Namespaces is what the gather could read of the namespaces the quorum serves (the zero value: all).
	Namespaces NamespaceReadability
	// Revoked maps the monitor name of a selected descriptor whose instance grants another quorum (or, in
	// another namespace, none) to why: it is treated like a deselected instance, and the Event of its
	// monitor's removal says why.
	Revoked map[string]string
	// Credential is what the gather read for the credential copies (PlanCopies); nil when the controller
	// copies no credential.
	Credential *CredentialWorld
}

// PodRef identifies a pod object observed (UID and resourceVersion: a delete carries them as preconditions).
type PodRef struct {
	UID, Version string
	Stale        bool
}

// CheckSentinelStep returns why step s must not be applied in SentinelWorld w, or "" when it may.
func CheckSentinelStep(w SentinelWorld, s Step) string {
	switch s.Kind {
	case Remove:
		return checkRemove(w, s)
	case DeleteSentinelPod:
		return checkDeleteSentinelPod(w, s)
	case RestoreMonitor:
		return checkRestore(w, s)
	case RealignMonitor:
		return checkRealign(w, s)
	}
	return fmt.Sprintf("%s is not a step of the sentinel controller", s.Kind)
}

func checkRemove(w SentinelWorld, s Step) string {
	switch {
	case w.DescriptorsErr != "":
		return refuse(s, "the instance descriptors could not be listed (%s)", w.DescriptorsErr)
	case w.Unowned != "":
		return refuse(s, "%s", w.Unowned)
	case w.Wanted[s.Monitor]:
		return refuse(s, "monitor %s belongs to a selected instance", s.Monitor)
	}
	if why, ok := w.Keep[s.Monitor]; ok {
		return refuse(s, "monitor %s belongs to a selected instance that did not resolve (%s)", s.Monitor, why)
	}
	var on *registration.SentinelState
	for i := range w.Sentinels {
		if w.Sentinels[i].Pod == s.Pod {
			on = &w.Sentinels[i]
		}
	}
	if on == nil || !on.Reachable {
		return refuse(s, "Sentinel %s was not observed", s.Pod)
	}
	m, ok := on.Monitors[s.Monitor]
	if !ok {
		return refuse(s, "Sentinel %s does not list monitor %s", s.Pod, s.Monitor)
	}
	if !m.Healthy() {
		return refuse(s, "Sentinel %s reports monitor %s's primary down or failing over (flags %v)", s.Pod, s.Monitor, m.Flags)
	}
	for _, st := range w.Sentinels {
		if mm, ok := st.Monitors[s.Monitor]; ok && st.Reachable && mm.FailoverInProgress() {
			return refuse(s, "Sentinel %s is failing monitor %s over", st.Pod, s.Monitor)
		}
	}
	return ""
}

// monitoredInstance returns the selected, resolved instance whose monitor step s acts on, or nil and the
// refusal: the descriptors could not be listed, or no such instance.
func monitoredInstance(w SentinelWorld, s Step) (*MonitoredInstance, string) {
	if w.DescriptorsErr != "" {
		return nil, refuse(s, "the instance descriptors could not be listed (%s)", w.DescriptorsErr)
	}
	for i := range w.Instances {
		if w.Instances[i].Resolved() && w.Instances[i].Instance.MonitorName == s.Monitor {
			return &w.Instances[i], ""
		}
	}
	return nil, refuse(s, "monitor %s belongs to no selected instance that resolved", s.Monitor)
}

// checkRestore vets a SENTINEL REMOVE + MONITOR that replaces a foreign primary (a forged hello): the monitor is a
// selected, resolved instance's; its target is one of the instance's nodes and was observed this pass as
// primary with connected replicas (never guessed from the Sentinels); the Sentinel was observed naming an
// address that is not a node; and no Sentinel runs a failover of the monitor (Sentinel may be moving the
// primary back to a node itself: its failover goes first).
func checkRestore(w SentinelWorld, s Step) string {
	qi, why := monitoredInstance(w, s)
	if qi == nil {
		return why
	}
	own := qi.Instance.NodeAddrs()
	host, portStr, err := net.SplitHostPort(s.Sentinel)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || !spec.OwnNode(own, host, port) {
		return refuse(s, "the target %s is not a node of instance %s", s.Sentinel, qi.Key())
	}
	if !qi.Want.PrimaryObserved || !spec.OwnNode([]string{s.Sentinel}, qi.Want.PrimaryHost, qi.Want.PrimaryPort) {
		return refuse(s, "%s was not observed as the primary (role master with connected replicas) this pass", s.Sentinel)
	}
	var on *registration.SentinelState
	for i := range w.Sentinels {
		if w.Sentinels[i].Pod == s.Pod {
			on = &w.Sentinels[i]
		}
	}
	if on == nil || !on.Reachable {
		return refuse(s, "Sentinel %s was not observed", s.Pod)
	}
	m, ok := on.Monitors[s.Monitor]
	if !ok {
		return refuse(s, "Sentinel %s does not list monitor %s", s.Pod, s.Monitor)
	}
	if spec.OwnNode(own, m.Host, m.Port) {
		return refuse(s, "Sentinel %s names a node of the instance: nothing to restore", s.Pod)
	}
	for _, st := range w.Sentinels {
		if mm, ok := st.Monitors[s.Monitor]; ok && st.Reachable && mm.FailoverInProgress() {
			return refuse(s, "Sentinel %s is failing monitor %s over", st.Pod, s.Monitor)
		}
	}
	return ""
}

// checkRealign vets a SENTINEL REMOVE + MONITOR on a Sentinel stuck on a stale primary (RELIABILITY.md "Found" 4):
// the monitor is a selected, resolved instance's; its target was observed this pass as primary with connected
// replicas and is what a strict majority of the Sentinels name; and the Sentinel is still stuck
// (registration.Stuck: no Sentinel fails the monitor over, the majority healthy at one config epoch, the
// Sentinel's own epoch no newer).
func checkRealign(w SentinelWorld, s Step) string {
	qi, why := monitoredInstance(w, s)
	if qi == nil {
		return why
	}
	if !qi.Want.PrimaryObserved || !spec.OwnNode([]string{s.Sentinel}, qi.Want.PrimaryHost, qi.Want.PrimaryPort) {
		return refuse(s, "%s was not observed as the primary (role master with connected replicas) this pass", s.Sentinel)
	}
	for _, st := range w.Sentinels {
		if st.Pod != s.Pod {
			continue
		}
		if _, stuck := registration.Stuck(qi.Want, st, w.Sentinels); !stuck {
			return refuse(s, "Sentinel %s is not stuck on a stale primary of %s (it agrees, runs a failover, has a newer config epoch, "+
				"or no healthy majority names %s)", s.Pod, s.Monitor, s.Sentinel)
		}
		return ""
	}
	return refuse(s, "Sentinel %s was not observed", s.Pod)
}

// MonitorGates builds the Sentinel roll's gate of every wanted monitor from every reachable Sentinel's
// SENTINEL MASTERS (roll.MonitorGate), sorted by name: failing over on any, down on any and for how long at
// most, its failover-timeout, and CKQUORUM OK on every Sentinel.
func MonitorGates(w SentinelWorld) []roll.MonitorGate {
	names := make([]string, 0, len(w.Wanted))
	for name := range w.Wanted {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []roll.MonitorGate
	for _, name := range names {
		g := roll.MonitorGate{Name: name, QuorumOK: w.QuorumOK[name]}
		for _, s := range w.Sentinels {
			m, ok := s.Monitors[name]
			if !ok || !s.Reachable {
				continue
			}
			g.FailingOver = g.FailingOver || m.FailoverInProgress()
			g.Down = g.Down || m.SubjectivelyDown() || m.ObjectivelyDown()
			if ms, err := strconv.ParseInt(m.Fields["s-down-time"], 10, 64); err == nil && time.Duration(ms)*time.Millisecond > g.DownFor {
				g.DownFor = time.Duration(ms) * time.Millisecond
			}
			if ft := time.Duration(m.FailoverTimeoutMs) * time.Millisecond; ft > g.FailoverTimeout {
				g.FailoverTimeout = ft
			}
		}
		out = append(out, g)
	}
	return out
}

func checkDeleteSentinelPod(w SentinelWorld, s Step) string {
	if w.StatefulSet == nil {
		return refuse(s, "the Sentinel StatefulSet was not observed")
	}
	if _, ok := w.Pods[s.Pod]; !ok {
		return refuse(s, "pod %s was not observed", s.Pod)
	}
	switch {
	case w.DescriptorsErr != "":
		return refuse(s, "the instance descriptors could not be listed (%s)", w.DescriptorsErr)
	case w.Unowned != "":
		return refuse(s, "%s", w.Unowned)
	}
	keep := make([]string, 0, len(w.Keep))
	for name := range w.Keep {
		keep = append(keep, name)
	}
	sort.Strings(keep)
	for _, st := range w.Sentinels {
		if !st.Ready || !st.Reachable {
			return refuse(s, "Sentinel %s was not observed ready", st.Pod)
		}
		for _, name := range keep {
			if _, ok := st.Monitors[name]; ok {
				return refuse(s, "monitor %s did not resolve (%s): a replacement could not be given it again", name, w.Keep[name])
			}
		}
	}
	for _, g := range MonitorGates(w) {
		switch {
		case g.FailingOver:
			return refuse(s, "monitor %s is failing over", g.Name)
		case g.LongDown():
			continue // Sentinel gave up on it: no failover to protect (roll.MonitorGate.LongDown)
		case g.Down:
			return refuse(s, "monitor %s's primary is down (%s): its failover may follow", g.Name, g.DownFor.Round(time.Millisecond))
		case !g.QuorumOK:
			return refuse(s, "SENTINEL CKQUORUM was not observed OK for monitor %s on every Sentinel", g.Name)
		}
	}
	return ""
}
