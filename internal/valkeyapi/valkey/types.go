// Package valkey is the project's small layer over valkey-go: one Client per node (data node or Sentinel)
// address, typed operations, and pure parsers for every reply. Only the parsers see the protocol's
// master/slave words; everything they return speaks primary/replica.
package valkey

import "slices"

// Role is the replication role of a process.
type Role string

// Roles, translated from the protocol's "master", "slave" and "sentinel".
const (
	RolePrimary  Role = "primary"
	RoleReplica  Role = "replica"
	RoleSentinel Role = "sentinel"
)

// Replication is the parsed INFO replication section (Valkey docs, "INFO", replication section).
type Replication struct {
	Role Role
	// ReplID is master_replid; MasterReplOffset is master_repl_offset (bytes).
	ReplID           string
	MasterReplOffset int64
	// FailoverState is master_failover_state ("no-failover", "waiting-for-sync", "failover-in-progress").
	FailoverState string
	// Replicas lists the connected replicas as the primary sees them (announced host, port, state, offset, lag).
	Replicas []ConnectedReplica

	// The fields below are set for a replica only.
	PrimaryHost string
	PrimaryPort int
	// LinkUp is master_link_status:up.
	LinkUp bool
	// LastIOSecondsAgo is master_last_io_seconds_ago in seconds; -1 when never connected.
	LastIOSecondsAgo int64
	// LinkDownSinceSeconds is master_link_down_since_seconds while the link is down: -1 when this server
	// process never had its link up (it never completed a sync since it started), 0 while the link is up.
	LinkDownSinceSeconds int64
	// SyncInProgress is master_sync_in_progress:1 (a full sync is running).
	SyncInProgress bool
	// ReplicaReplOffset is slave_repl_offset (bytes processed from the primary).
	ReplicaReplOffset int64
	// ReplicaPriority is slave_priority (0 = never promoted by Sentinel).
	ReplicaPriority int64
	ReplicaReadOnly bool
}

// NeverSynced reports whether a replica's server process never completed a sync since it started (link
// down, master_link_down_since_seconds -1): whatever it holds did not come from its primary.
func (r Replication) NeverSynced() bool {
	return r.Role == RoleReplica && !r.LinkUp && r.LinkDownSinceSeconds < 0
}

// Offset is the replication offset that compares nodes for promotion: the replica's processed offset, or the
// primary's own offset.
func (r Replication) Offset() int64 {
	if r.Role == RoleReplica {
		return r.ReplicaReplOffset
	}
	return r.MasterReplOffset
}

// ConnectedReplica is one replica as seen by its primary (INFO "slaveN:" line or ROLE entry).
type ConnectedReplica struct {
	Host string
	Port int
	// State is "online", "wait_bgsave", "send_bulk", ...; empty from ROLE.
	State  string
	Offset int64
	// LagSeconds is seconds since the last REPLCONF ACK.
	LagSeconds int64
}

// RoleInfo is the parsed ROLE reply.
type RoleInfo struct {
	Role        Role
	Offset      int64
	Replicas    []ConnectedReplica
	PrimaryHost string
	PrimaryPort int
	// State is the replica's link state ("connect", "connecting", "sync", "connected", "handshake").
	State string
	// Monitors lists the monitor names of a Sentinel.
	Monitors []string
}

// Monitor is one monitored primary as a Sentinel reports it (SENTINEL MASTERS / MASTER).
type Monitor struct {
	Name  string
	Host  string
	Port  int
	RunID string
	// Flags is the raw flag list: master, s_down, o_down, disconnected, failover_in_progress, ...
	Flags             []string
	Quorum            int
	NumReplicas       int64
	NumOtherSentinels int64
	// DownAfterMs and FailoverTimeoutMs are in milliseconds.
	DownAfterMs       int64
	FailoverTimeoutMs int64
	ParallelSyncs     int64
	ConfigEpoch       int64
	// FailoverState is the "failover-state" field while a failover runs, "none" otherwise.
	FailoverState string
	// Fields keeps every field of the reply, by name.
	Fields map[string]string
}

// HasFlag reports whether the monitor carries the flag.
func (m Monitor) HasFlag(f string) bool { return slices.Contains(m.Flags, f) }

// SubjectivelyDown reports the s_down flag: this Sentinel considers the primary down.
func (m Monitor) SubjectivelyDown() bool { return m.HasFlag("s_down") }

// ObjectivelyDown reports the o_down flag: a quorum agrees the primary is down.
func (m Monitor) ObjectivelyDown() bool { return m.HasFlag("o_down") }

// FailoverInProgress reports whether a failover is running for this monitor.
func (m Monitor) FailoverInProgress() bool {
	return m.HasFlag("failover_in_progress") || (m.FailoverState != "" && m.FailoverState != "none")
}

// Healthy reports that the primary is neither down nor being failed over, the condition under which the
// controller may change topology or reset the monitor (case S10).
func (m Monitor) Healthy() bool {
	return !m.SubjectivelyDown() && !m.ObjectivelyDown() && !m.FailoverInProgress() && !m.HasFlag("disconnected")
}

// SentinelReplica is one replica as a Sentinel knows it (SENTINEL REPLICAS).
type SentinelReplica struct {
	Host  string
	Port  int
	RunID string
	Flags []string
	// PrimaryLinkUp is master-link-status:ok.
	PrimaryLinkUp bool
	PrimaryHost   string
	ReplOffset    int64
	Priority      int64
}

// HasFlag reports whether the replica carries the flag (s_down, disconnected, ...).
func (r SentinelReplica) HasFlag(f string) bool { return slices.Contains(r.Flags, f) }

// SentinelPeer is one other Sentinel (SENTINEL SENTINELS).
type SentinelPeer struct {
	Host  string
	Port  int
	RunID string
	Flags []string
}

// HasFlag reports whether the peer carries the flag.
func (p SentinelPeer) HasFlag(f string) bool { return slices.Contains(p.Flags, f) }

// Quorum is the result of SENTINEL CKQUORUM.
type Quorum struct {
	OK bool
	// Message is the reply text, e.g. "OK 3 usable Sentinels. Quorum and failover authorization can be reached".
	Message string
	// Usable is the number of usable Sentinels the reply names.
	Usable int
}

// SentinelInfo is the parsed INFO sentinel section.
type SentinelInfo struct {
	Masters  int64
	Tilt     bool
	Monitors []MonitorSummary
}

// MonitorSummary is one "masterN:" line of INFO sentinel.
type MonitorSummary struct {
	Name    string
	Status  string // "ok", "sdown" or "odown"
	Address string // host:port
	// Replicas and Sentinels are the counts known to this Sentinel (Sentinels includes itself).
	Replicas  int64
	Sentinels int64
}

// ClientCounts counts connections from CLIENT LIST by kind.
type ClientCounts struct {
	Total        int
	Normal       int
	Replicas     int
	PrimaryLinks int
	PubSub       int
}

// ACLLogEntry is one ACL LOG entry.
type ACLLogEntry struct {
	Count      int64
	Reason     string // "command", "key", "channel", "auth"
	Context    string
	Object     string
	Username   string
	ClientInfo string
}
