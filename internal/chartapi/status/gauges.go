package status

import "time"

// The observations one controller pass makes for its Prometheus gauges: the planners compute them (pure, from the
// World and the decision) and internal/controllers/metrics sets the gauges from them. Like the status documents,
// they are what a pass publishes.

// ReplicaLink is one reachable replica as the instance controller saw it in a pass.
type ReplicaLink struct {
	// Pod is the replica's pod name.
	Pod string
	// LinkUp: master_link_status:up and replicating from the instance's primary.
	LinkUp bool
	// LagKnown says LagBytes was measured (the primary is known and answered).
	LagKnown bool
	// LagBytes is the primary's master_repl_offset minus the replica's slave_repl_offset, in bytes.
	LagBytes int64
}

// InstanceObservation is what one instance-controller pass saw of an instance.
type InstanceObservation struct {
	// Nodes is the number of data nodes listed; Reachable answered INFO; Primaries report role master.
	Nodes, Reachable, Primaries int
	// Replicas lists the reachable replicas.
	Replicas []ReplicaLink
	// SentinelFailover says the descriptor asks for Sentinel failover; Monitored says a quorum published
	// its Sentinel info (Sentinels monitor it); QuorumOK is then SENTINEL CKQUORUM's verdict.
	SentinelFailover, Monitored, QuorumOK bool
	// SentinelsNotWatching counts the Sentinels whose last INFO of the primary the controller reaches is
	// older than 30 s (read while Monitored).
	SentinelsNotWatching int
	// RollHeld is how long a planned roll has waited (0: none waits).
	RollHeld time.Duration
}

// MonitorObservation is one monitor the quorum should hold, as one sentinel-controller pass saw it.
type MonitorObservation struct {
	// Name is the monitor name; Registered counts the reachable Sentinels that know it.
	Name       string
	Registered int
	// QuorumOK: every Sentinel knows it and SENTINEL CKQUORUM answered OK on each.
	QuorumOK bool
}

// QuorumObservation is what one sentinel-controller pass saw of its quorum.
type QuorumObservation struct {
	// Reachable is, per Sentinel pod name, whether it answered SENTINEL MASTERS.
	Reachable map[string]bool
	// Monitors are the monitors the quorum should hold (selected, resolved instances).
	Monitors []MonitorObservation
	// Refused names the selected instances (namespace/name) whose monitor was refused or unresolved.
	Refused []string
	// RollHeld is how long a planned Sentinel roll has waited (0: none waits).
	RollHeld time.Duration
}
