// Package status holds what the controllers publish instead of CR status (docs/design.md, "Status"): the JSON documents of
// the <F>-status and <S>-status ConfigMaps, condition bookkeeping and the instance state machine
// (Initializing, Ready, Degraded, Failed; docs/design.md, "Status": Failed after 10 minutes not Ready,
// counted from the last Ready->False transition, and recoverable).
package status

import "time"

// Condition types of an instance (docs/design.md, "Status").
const (
	Ready                 = "Ready"
	PrimaryElected        = "PrimaryElected"
	ReplicationHealthy    = "ReplicationHealthy"
	Monitored             = "Monitored"
	SentinelQuorumHealthy = "SentinelQuorumHealthy"
	AccessConverged       = "AccessConverged"
	// ValuesAccepted is False while a data pod's start step refuses the values (e.g. a changed engine on
	// existing data), naming the pod, the value and the fix; it does not feed Ready by itself.
	ValuesAccepted = "ValuesAccepted"
)

// Condition statuses.
const (
	True    = "True"
	False   = "False"
	Unknown = "Unknown"
)

// States of an instance.
const (
	StateInitializing = "Initializing"
	StateReady        = "Ready"
	StateDegraded     = "Degraded"
	StateFailed       = "Failed"
)

// FailedAfter is how long an instance may be not Ready before its state reads Failed.
const FailedAfter = 10 * time.Minute

// Condition is one condition with the time its status last changed.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// SetCondition returns conds with c set; LastTransitionTime is kept when the status did not change.
func SetCondition(conds []Condition, c Condition, now time.Time) []Condition {
	for i := range conds {
		if conds[i].Type == c.Type {
			if conds[i].Status == c.Status {
				c.LastTransitionTime = conds[i].LastTransitionTime
			} else {
				c.LastTransitionTime = now
			}
			out := append([]Condition{}, conds...)
			out[i] = c
			return out
		}
	}
	c.LastTransitionTime = now
	return append(append([]Condition{}, conds...), c)
}

// Get returns the condition of that type.
func Get(conds []Condition, t string) (Condition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// DeriveState returns the state from the Ready condition: Ready when True; otherwise Initializing if the
// instance was never Ready, Failed when Ready has been False for FailedAfter, else Degraded.
func DeriveState(ready Condition, everReady bool, now time.Time) string {
	switch {
	case ready.Status == True:
		return StateReady
	case !everReady:
		if !ready.LastTransitionTime.IsZero() && now.Sub(ready.LastTransitionTime) >= FailedAfter {
			return StateFailed
		}
		return StateInitializing
	case now.Sub(ready.LastTransitionTime) >= FailedAfter:
		return StateFailed
	default:
		return StateDegraded
	}
}

// RoleStalePrimary is the Role of a node that reports role master while the primary the instance follows
// (the Sentinels' confirmed choice) is another node: an old primary Sentinel has not demoted yet (it sends
// REPLICAOF once the node's INFO shows the mismatch, seconds after +switch-master) or an orphan the
// controller repairs. Clients of the primary Service are no longer sent to it.
const RoleStalePrimary = "stale-primary"

// NodeStatus is one data node in the instance status.
type NodeStatus struct {
	Pod  string `json:"pod"`
	Host string `json:"host"`
	// Role is what the node reports ("primary" or "replica"), or RoleStalePrimary; empty when unreachable.
	Role      string `json:"role"`
	Reachable bool   `json:"reachable"`
	LinkUp    bool   `json:"linkUp,omitempty"`
	Offset    int64  `json:"offset"`
	// LagBytes is the primary's offset minus this replica's.
	LagBytes int64  `json:"lagBytes,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Monitoring is the Sentinel side as the instance controller sees it.
type Monitoring struct {
	MonitorName string `json:"monitorName"`
	MonitoredBy string `json:"monitoredBy,omitempty"`
	Registered  bool   `json:"registered"`
	// Sentinels is the number of Sentinels that know the monitor; Quorum the quorum they report.
	Sentinels int `json:"sentinels"`
	Quorum    int `json:"quorum,omitempty"`
}

// Backup is one successful backup as its Job's metadata reports it (internal/podsteps/backup.Meta): the snapshot's
// file name, when it finished, its size in bytes, how long the snapshot took and how long its upload to
// S3-compatible storage took in seconds (omitted: not uploaded).
type Backup struct {
	File            string    `json:"file"`
	FinishedAt      time.Time `json:"finishedAt"`
	SizeBytes       int64     `json:"sizeBytes"`
	DurationSeconds float64   `json:"durationSeconds"`
	UploadSeconds   float64   `json:"uploadSeconds,omitempty"`
}

// Instance is the document in <F>-status, key status.json.
type Instance struct {
	Name           string       `json:"name"`
	State          string       `json:"state"`
	Message        string       `json:"message,omitempty"`
	Primary        string       `json:"primary,omitempty"`
	PrimaryAddress string       `json:"primaryAddress,omitempty"`
	Replicas       int          `json:"replicas"`
	ReadyReplicas  int          `json:"readyReplicas"`
	SyncedReplicas int          `json:"syncedReplicas"`
	EverReady      bool         `json:"everReady"`
	Monitoring     Monitoring   `json:"monitoring"`
	Nodes          []NodeStatus `json:"nodes"`
	Conditions     []Condition  `json:"conditions"`
	Held           string       `json:"held,omitempty"`
	LastAction     string       `json:"lastAction,omitempty"`
	// Roll says why a pending planned roll waits ("" when nothing is stale or a step was taken).
	Roll string `json:"roll,omitempty"`
	// Refused says why the policy refused the disruptive step this pass planned (internal/planners/plan.Check).
	Refused string `json:"refused,omitempty"`
	// Migration is where a migration from a primary outside the chart stands (migrateFrom), e.g. "migrating
	// from old-redis-master.apps.svc:6379: 120 bytes behind; ...": "" without one.
	Migration string `json:"migration,omitempty"`
	// LastBackup is the newest successful backup the instance controller saw (backup.*), nil before one.
	LastBackup      *Backup   `json:"lastBackup,omitempty"`
	DesiredAccess   string    `json:"desiredAccessRevision,omitempty"`
	AppliedAccess   string    `json:"appliedAccessRevision,omitempty"`
	ObservedAt      time.Time `json:"observedAt"`
	ControllerBuild string    `json:"controllerVersion,omitempty"`
}

// MonitorStatus is one monitor in the quorum status.
type MonitorStatus struct {
	Name           string `json:"name"`
	Instance       string `json:"instance"`
	PrimaryAddress string `json:"primaryAddress,omitempty"`
	Quorum         int    `json:"quorum"`
	// Registered counts the Sentinels that know the monitor; QuorumOK is CKQUORUM on all of them.
	Registered int    `json:"registered"`
	QuorumOK   bool   `json:"quorumOK"`
	Replicas   int    `json:"replicas"`
	Refused    string `json:"refused,omitempty"`
	// Unresolved says why this pass could not resolve the instance (its _sentinel Secret could not be
	// read, ...); its monitor is kept as it is until the instance resolves again or is positively gone.
	Unresolved string `json:"unresolved,omitempty"`
}

// SentinelPod is one Sentinel in the quorum status.
type SentinelPod struct {
	Pod       string `json:"pod"`
	Host      string `json:"host"`
	Ready     bool   `json:"ready"`
	Reachable bool   `json:"reachable"`
	Monitors  int    `json:"monitors"`
	Error     string `json:"error,omitempty"`
}

// Quorum is the document in <S>-status, key status.json.
type Quorum struct {
	Release       string            `json:"release"`
	Sentinels     []SentinelPod     `json:"sentinels"`
	ReadySentinel int               `json:"readySentinels"`
	Monitors      []MonitorStatus   `json:"monitors"`
	Warnings      []string          `json:"warnings,omitempty"`
	Held          map[string]string `json:"held,omitempty"`
	Roll          string            `json:"roll,omitempty"`
	// Refused says why the policy refused a disruptive step this pass planned (internal/planners/plan.CheckSentinelStep).
	Refused    []string  `json:"refused,omitempty"`
	LastAction string    `json:"lastAction,omitempty"`
	ObservedAt time.Time `json:"observedAt"`
}
