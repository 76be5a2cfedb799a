package plan

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/planners/registration"
	"github.com/valkey-ha/valkey-ha/internal/planners/roll"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// MonitoredInstance is one selected instance descriptor as the sentinel controller's gather resolved it.
type MonitoredInstance struct {
	// Descriptor is the descriptor ConfigMap's name (<F>-instance); Namespace its namespace when it is not the
	// quorum's ("" = the quorum's: a cross-namespace quorum, docs/fleet.md).
	Descriptor string
	Namespace  string
	Instance   spec.Instance
	// Refused says why the instance is not registered or changed (another quorum claims it, TLS mismatch,
	// a descriptor that does not parse or is not canonical); Unresolved why this pass could not resolve it
	// (its _sentinel Secret could not be read). Either way its monitor, if any, is kept (F3).
	Refused    string
	Unresolved string
	// AwaitingSecret: Unresolved because the instance's _sentinel Secret does not exist (yet); the instance's
	// credentials Job creates it at install, so a new instance's first passes report it as waited for.
	AwaitingSecret bool
	// Want is the resolved registration (when neither Refused nor Unresolved).
	Want registration.Wanted
	// Collision: refused because another selected instance (of another namespace) has the same monitor name;
	// that monitor is the other's, so this one neither wants nor keeps it.
	Collision bool
	// KeepMonitor is the monitor the instance is registered under when its descriptor now names another
	// (a changed sentinel.monitorName, refused: clients ask Sentinel by name); that monitor is kept.
	KeepMonitor string
}

// Key identifies the instance's descriptor in this quorum: its name, with its namespace in front when that
// is not the quorum's (the keys of the descriptors the gather returns).
func (i MonitoredInstance) Key() string { return NamespacedName(i.Namespace, i.Descriptor) }

// SentinelInfoKey is the Sentinel info ConfigMap of the instance as Key names the descriptor (what
// SentinelWorld.Published and SentinelDecision.Withdraw hold).
func (i MonitoredInstance) SentinelInfoKey() string {
	return NamespacedName(i.Namespace, i.SentinelInfoName())
}

// NamespacedName is name, or "<namespace>/<name>" when namespace is not empty.
func NamespacedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Resolved reports whether the instance resolved: its monitor is wanted.
func (i MonitoredInstance) Resolved() bool { return i.Refused == "" && i.Unresolved == "" }

// SentinelInfoName is the name of the Sentinel info ConfigMap of the instance (<F>-sentinels,
// docs/contract.md), derived from the descriptor's name so it does not need the descriptor to parse.
func (i MonitoredInstance) SentinelInfoName() string {
	f, _ := contract.InstanceOf(i.Descriptor)
	return contract.SentinelInfo(f)
}

// Refusal is a step the policy refused, with the reason.
type Refusal struct {
	Step Step
	Why  string
}

// Publish is one <F>-sentinels document the applier writes (owned by the instance's descriptor).
type Publish struct {
	// Descriptor is the owner (its MonitoredInstance.Key), Instance the instance's name F.
	Descriptor string
	Instance   string
	Info       spec.SentinelInfo
}

// SentinelDecision is the sentinel controller's plan for one pass.
type SentinelDecision struct {
	// Registration holds the MONITOR/SET/REMOVE actions (REMOVEs the policy refused are dropped and listed
	// in Refused), the monitors whose change waits, and configuration warnings.
	Registration registration.Plan
	Refused      []Refusal
	// Publish are the Sentinel info documents of every resolved instance; Withdraw the names (namespace/name
	// for another namespace than the quorum's) of those this quorum published for instances it no longer
	// selects.
	Publish  []Publish
	Withdraw []string
	// Roll is the Sentinel pod to replace (DeleteSentinelPod), only in a pass that changes no registration;
	// RollPlanned is true when the roll was considered; RollWait why it waits.
	Roll        *Step
	RollPlanned bool
	RollWait    string
	// Warnings are reported in the status (unknown descriptor fields, quorum pins out of range).
	Warnings []string
	// RollHeldSince is the controller's memory for the next pass: when the roll started waiting.
	RollHeldSince time.Time
	// Copies are the credential copies to keep (PlanCopies), in order.
	Copies []CopyStep
}

// PlanSentinels is the sentinel controller's planner (pure): the registration plan (internal/planners/registration) with
// every SENTINEL REMOVE vetted by CheckSentinelStep, the Sentinel info to publish and withdraw, and, in a pass that
// changes no registration, at most one Sentinel pod to replace (roll.PlanSentinel, vetted by CheckSentinelStep).
// heldSince is when the roll started waiting (memory).
func PlanSentinels(w SentinelWorld, heldSince time.Time) SentinelDecision {
	d := SentinelDecision{RollHeldSince: heldSince, Warnings: append(append([]string(nil), w.Warnings...), NamespaceWarnings(w)...),
		Copies: PlanCopies(w)}
	var wanted []registration.Wanted
	for _, qi := range w.Instances {
		if len(qi.Instance.Unknown) > 0 {
			d.Warnings = append(d.Warnings, UnknownFieldsWarning(qi))
		}
		if !qi.Resolved() {
			continue
		}
		if qi.Instance.Quorum > len(w.Sentinels) {
			d.Warnings = append(d.Warnings, qi.Instance.MonitorName+": "+QuorumAboveMessage(qi.Instance, w.Release, len(w.Sentinels)))
		} else if qi.Instance.Quorum > 0 {
			if msg := registration.QuorumWarning(qi.Instance.MonitorName, qi.Instance.Quorum, len(w.Sentinels)); msg != "" {
				d.Warnings = append(d.Warnings, msg)
			}
		}
		wanted = append(wanted, qi.Want)
		info := spec.SentinelInfo{MonitorName: qi.Instance.MonitorName, SentinelRelease: w.Release, Port: w.Port, TLS: w.TLS, Hosts: w.Hosts}
		if qi.Namespace != "" && qi.Namespace != w.Namespace {
			info.SentinelNamespace = w.Namespace
		}
		d.Publish = append(d.Publish, Publish{Descriptor: qi.Key(), Instance: qi.Instance.Name, Info: info})
	}
	reg := registration.Build(registration.Observation{Wanted: wanted, Keep: w.Keep, HoldRemovals: w.Unowned, Sentinels: w.Sentinels,
		Now: w.Now, StuckSince: w.StuckSince})
	d.Warnings = append(d.Warnings, reg.Warnings...)
	d.Registration = reg
	d.Registration.Actions = nil
	for _, a := range reg.Actions {
		if a.Kind == registration.Remove {
			if why := CheckSentinelStep(w, Step{Kind: Remove, Pod: a.Sentinel, Monitor: a.Name, Reason: a.Reason}); why != "" {
				d.Refused = append(d.Refused, Refusal{Step: Step{Kind: Remove, Pod: a.Sentinel, Monitor: a.Name}, Why: why})
				continue
			}
		}
		if a.Kind == registration.Restore {
			s := Step{Kind: RestoreMonitor, Pod: a.Sentinel, Monitor: a.Name, Sentinel: net.JoinHostPort(a.Host, strconv.Itoa(a.Port)), Reason: a.Reason}
			if why := CheckSentinelStep(w, s); why != "" {
				d.Refused = append(d.Refused, Refusal{Step: s, Why: why})
				continue
			}
		}
		if a.Kind == registration.Realign {
			s := Step{Kind: RealignMonitor, Pod: a.Sentinel, Monitor: a.Name, Sentinel: net.JoinHostPort(a.Host, strconv.Itoa(a.Port)), Reason: a.Reason}
			if why := CheckSentinelStep(w, s); why != "" {
				d.Refused = append(d.Refused, Refusal{Step: s, Why: why})
				continue
			}
		}
		d.Registration.Actions = append(d.Registration.Actions, a)
	}
	keep := map[string]bool{}
	for _, qi := range w.Instances {
		keep[qi.SentinelInfoKey()] = true
	}
	for _, name := range w.Published {
		if !keep[name] {
			d.Withdraw = append(d.Withdraw, name)
		}
	}
	if len(reg.Actions) == 0 {
		d.RollPlanned = true
		d.Roll, d.RollWait = planSentinelRoll(w, &d)
		if d.RollWait == "" {
			d.RollHeldSince = time.Time{}
		} else if d.RollHeldSince.IsZero() {
			d.RollHeldSince = w.Now
		}
	}
	return d
}

// UnknownFieldsWarning reports the descriptor fields of a newer charts/valkey this controller ignores.
func UnknownFieldsWarning(qi MonitoredInstance) string {
	return fmt.Sprintf("%s: descriptor fields this controller does not know (kept, ignored; a newer charts/valkey wrote them): %s",
		qi.Descriptor, strings.Join(qi.Instance.Unknown, ", "))
}

// planSentinelRoll returns the Sentinel pod to replace (vetted by CheckSentinelStep) or why the roll waits:
// nothing is replaced while a kept monitor is registered or a selected descriptor's monitor is unknown (a
// replaced Sentinel comes back empty and could not be given that monitor again), and roll.PlanSentinel
// decides the rest (docs/design.md, "Planned operations"; case S22).
func planSentinelRoll(w SentinelWorld, d *SentinelDecision) (*Step, string) {
	if held := heldMonitors(w); held != "" {
		return nil, held
	}
	if w.StatefulSet == nil {
		return nil, "" // no StatefulSet (yet): nothing to roll
	}
	in := roll.SentinelInput{Monitors: MonitorGates(w)}
	for _, s := range w.Sentinels {
		p, ok := w.Pods[s.Pod]
		if !ok {
			in.Pods = append(in.Pods, roll.SentinelPod{Pod: s.Pod})
			continue
		}
		knows := map[string]bool{}
		if s.Reachable {
			for name := range s.Monitors {
				knows[name] = true
			}
		}
		in.Pods = append(in.Pods, roll.SentinelPod{Pod: s.Pod, Stale: p.Stale, Ready: s.Ready && s.Reachable, Knows: knows})
	}
	target, why, notes := roll.PlanSentinel(in)
	if why != "" {
		notes = append(notes, why)
	}
	if target == "" {
		return nil, strings.Join(notes, "; ")
	}
	s := Step{Kind: DeleteSentinelPod, Pod: target, Reason: "stale; CKQUORUM OK on every monitor, no failover in flight, every pod ready"}
	if len(notes) > 0 {
		s.Reason += "; " + strings.Join(notes, "; ")
	}
	if why := CheckSentinelStep(w, s); why != "" {
		d.Refused = append(d.Refused, Refusal{Step: s, Why: why})
		return nil, why
	}
	return &s, ""
}

// heldMonitors says why no Sentinel pod may be replaced while a kept monitor (its instance selected but not
// resolved) is registered on one of the Sentinels, or while the owner of a monitor is unknown.
func heldMonitors(w SentinelWorld) string {
	if w.Unowned != "" {
		return "no Sentinel replaced: " + w.Unowned
	}
	names := make([]string, 0, len(w.Keep))
	for name := range w.Keep {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, s := range w.Sentinels {
			if _, ok := s.Monitors[name]; ok {
				return fmt.Sprintf("no Sentinel replaced while monitor %s cannot be resolved (%s): its replacement could not be given the monitor again", name, w.Keep[name])
			}
		}
	}
	return ""
}

// MonitorStatuses is, per selected instance in order, its monitor in the quorum status: how many Sentinels
// know it, where they see its primary, and CKQUORUM on every Sentinel (a resolved instance), or why it was
// refused or not resolved.
func MonitorStatuses(w SentinelWorld) []status.MonitorStatus {
	var out []status.MonitorStatus
	for _, qi := range w.Instances {
		name := qi.Instance.MonitorName
		switch {
		case qi.Refused != "":
			out = append(out, status.MonitorStatus{Name: name, Instance: qi.Key(), Refused: qi.Refused})
			continue
		case qi.Unresolved != "":
			out = append(out, status.MonitorStatus{Name: name, Instance: qi.Key(), Unresolved: qi.Unresolved})
			continue
		}
		ms := status.MonitorStatus{Name: name, Instance: NamespacedName(qi.Namespace, qi.Instance.Name), Quorum: qi.Want.Quorum, QuorumOK: true}
		for i, st := range w.Sentinels {
			m, ok := st.Monitors[name]
			if !ok || !st.Reachable {
				ms.QuorumOK = false
				continue
			}
			ms.Registered++
			ms.PrimaryAddress = net.JoinHostPort(m.Host, strconv.Itoa(m.Port))
			ms.Replicas = int(m.NumReplicas)
			if q, ok := w.quorumOf(i, name); !ok || !q.OK {
				ms.QuorumOK = false
			}
		}
		out = append(out, ms)
	}
	return out
}

// quorumOf is Sentinel i's CKQUORUM for monitor name, when it answered.
func (w SentinelWorld) quorumOf(i int, name string) (valkey.Quorum, bool) {
	if i >= len(w.CKQuorum) {
		return valkey.Quorum{}, false
	}
	q, ok := w.CKQuorum[i][name]
	return q, ok
}

// SentinelStatus builds the <S>-status document of one pass (pure; docs/design.md, "Status").
func SentinelStatus(w SentinelWorld, d SentinelDecision, lastAction string) status.Quorum {
	st := status.Quorum{Release: w.Release, ObservedAt: w.Now, Warnings: d.Warnings, Held: d.Registration.Held,
		Roll: d.RollWait, LastAction: lastAction, Monitors: MonitorStatuses(w)}
	for _, r := range d.Refused {
		st.Refused = append(st.Refused, r.Why)
	}
	for _, s := range w.Sentinels {
		if s.Ready {
			st.ReadySentinel++
		}
		st.Sentinels = append(st.Sentinels, status.SentinelPod{Pod: s.Pod, Host: s.Addr, Ready: s.Ready, Reachable: s.Reachable, Monitors: len(s.Monitors)})
	}
	return st
}

// SentinelGauges is the quorum's metrics observation (metrics.ObserveQuorum) of one pass (pure).
func SentinelGauges(w SentinelWorld, d SentinelDecision, monitors []status.MonitorStatus) status.QuorumObservation {
	mo := status.QuorumObservation{Reachable: map[string]bool{}}
	for _, s := range w.Sentinels {
		mo.Reachable[s.Pod] = s.Reachable
	}
	for i, qi := range w.Instances {
		if !qi.Resolved() {
			f, _ := contract.InstanceOf(qi.Descriptor)
			ns := qi.Namespace
			if ns == "" {
				ns = w.Namespace
			}
			mo.Refused = append(mo.Refused, ns+"/"+f)
			continue
		}
		mo.Monitors = append(mo.Monitors, status.MonitorObservation{Name: monitors[i].Name, Registered: monitors[i].Registered, QuorumOK: monitors[i].QuorumOK})
	}
	if !d.RollHeldSince.IsZero() {
		mo.RollHeld = w.Now.Sub(d.RollHeldSince)
	}
	return mo
}

// Derive fills the fields of w that follow from Instances, CKQuorum and Namespaces: Wanted, Keep, Unowned
// and QuorumOK (keepUnreadable adds the monitors of namespaces that cannot be read).
func (w *SentinelWorld) Derive() {
	w.Wanted, w.Keep, w.Unowned, w.QuorumOK = map[string]bool{}, map[string]string{}, "", map[string]bool{}
	for _, qi := range w.Instances {
		name := qi.Instance.MonitorName
		switch {
		case qi.Collision:
			// another selected instance's monitor: not this one's to want or keep
		case qi.Resolved():
			w.Wanted[name] = true
		case name != "":
			w.Keep[name] = qi.Refused + qi.Unresolved
			if qi.KeepMonitor != "" {
				w.Keep[qi.KeepMonitor] = qi.Refused
			}
		case w.Unowned == "":
			w.Unowned = fmt.Sprintf("descriptor %s cannot be read (%s), so the monitor it owns is unknown", qi.Descriptor, qi.Refused)
		}
	}
	for _, ms := range MonitorStatuses(*w) {
		if ms.Refused == "" && ms.Unresolved == "" {
			w.QuorumOK[ms.Name] = ms.QuorumOK
		}
	}
	keepUnreadable(w)
}
