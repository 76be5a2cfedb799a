package plan

import (
	"fmt"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
)

// StepKind names a disruptive step: one that changes replication, Sentinel's memory or a pod's life. Every
// one passes the policy (Check, CheckSentinelStep) before it is applied.
type StepKind string

// The disruptive steps of the two controllers.
const (
	// Repoint runs REPLICAOF <Target> on Node (instance controller: an orphan primary or a stray replica).
	Repoint StepKind = "repoint"
	// Promote runs REPLICAOF NO ONE on Node (instance controller: an unmonitored instance without primary).
	Promote StepKind = "promote"
	// HandOff hands the primary Node off before its pod is replaced (SENTINEL FAILOVER when monitored,
	// FAILOVER TO Target otherwise).
	HandOff StepKind = "hand-off"
	// DeletePod deletes data pod Node (a planned roll; its StatefulSet recreates it).
	DeletePod StepKind = "delete-pod"
	// Reset runs SENTINEL RESET <monitor> on the Sentinel at Sentinel, because it lists the replicas in For,
	// which are gone.
	Reset StepKind = "sentinel-reset"
	// Remove runs SENTINEL REMOVE Monitor on Sentinel pod Pod (sentinel controller).
	Remove StepKind = "sentinel-remove"
	// DeleteSentinelPod deletes Sentinel pod Pod (a planned Sentinel roll).
	DeleteSentinelPod StepKind = "delete-sentinel-pod"
	// RestoreMonitor runs SENTINEL REMOVE + MONITOR (+ SET) of Monitor on Sentinel pod Pod, at Target, because
	// that Sentinel names a primary that is not a node of the instance (sentinel controller; a forged hello on
	// a shared quorum).
	RestoreMonitor StepKind = "sentinel-restore-monitor"
	// RealignMonitor runs SENTINEL REMOVE + MONITOR (+ SET) of Monitor on Sentinel pod Pod, at Target, because
	// that Sentinel is stuck on a stale primary that its peers' hellos will never move it from (sentinel
	// controller; registration.Stuck).
	RealignMonitor StepKind = "sentinel-realign-monitor"
)

// Step is one disruptive step and what it acts on.
type Step struct {
	Kind StepKind
	// Node is the data node acted on (Repoint, Promote, HandOff, DeletePod); Target the primary to follow
	// (Repoint) or the replica to promote (HandOff of an unmonitored instance).
	Node   spec.Node
	Target spec.Node
	// Sentinel is the address of the Sentinel to reset (Reset); For the replica addresses (host:port,
	// normalised) it lists that make the reset necessary.
	Sentinel string
	For      []string
	// Pod is the Sentinel pod (Remove, DeleteSentinelPod, RestoreMonitor, RealignMonitor); Monitor the monitor
	// (Remove, RestoreMonitor, RealignMonitor). Their target primary is "host:port" in Sentinel.
	Pod     string
	Monitor string
	Reason  string
}

// String describes the step for logs, events and status.
func (s Step) String() string {
	switch s.Kind {
	case Repoint:
		return fmt.Sprintf("repoint %s to %s (%s)", s.Node.Pod, s.Target.Pod, s.Reason)
	case Promote:
		return fmt.Sprintf("promote %s (%s)", s.Node.Pod, s.Reason)
	case HandOff:
		return fmt.Sprintf("hand the primary off %s (%s)", s.Node.Pod, s.Reason)
	case DeletePod:
		return fmt.Sprintf("replace %s (%s)", s.Node.Pod, s.Reason)
	case Reset:
		return fmt.Sprintf("SENTINEL RESET on %s for %s", s.Sentinel, strings.Join(s.For, ", "))
	case Remove:
		return fmt.Sprintf("SENTINEL REMOVE %s on %s (%s)", s.Monitor, s.Pod, s.Reason)
	case DeleteSentinelPod:
		return fmt.Sprintf("replace Sentinel %s (%s)", s.Pod, s.Reason)
	case RestoreMonitor:
		return fmt.Sprintf("restore monitor %s on %s at %s (%s)", s.Monitor, s.Pod, s.Sentinel, s.Reason)
	case RealignMonitor:
		return fmt.Sprintf("realign monitor %s on %s at %s (%s)", s.Monitor, s.Pod, s.Sentinel, s.Reason)
	}
	return string(s.Kind)
}
