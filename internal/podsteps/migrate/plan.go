// Package migrate moves the data and the writes of a primary outside this chart (another chart's release: the
// source) onto a new instance without losing an acknowledged write (README "Migration").
//
// While migrating, node 0 of the new instance is a replica of the source and the other nodes are replicas of
// node 0 (a chain: the source serves one extra replica, whatever the instance's size, and the switch has one
// node to wait for). The switch, on command:
//
//  1. Observe the source and node 0 and Plan (pure): refused unless the source answers with the password, is
//     a primary, writes an RDB version node 0's engine reads, and node 0 follows it with its link up, at most
//     Config.MaxLag bytes behind.
//  2. CLIENT PAUSE WRITE on the source (for Config.PauseBudget plus a second, so the server resumes by itself
//     if this process dies), then read its master_repl_offset O: while paused, the primary sends nothing to its
//     replicas, so O stays put.
//  3. Catch-up: poll node 0 until it follows the source's history (master_replid) at an offset of at least O.
//     Not within the budget: CLIENT UNPAUSE, Error with Reason NotCaughtUp; nothing else changed.
//  4. Fence the source (its min-replicas settings read first): CONFIG SET min-replicas-to-write 2147483647
//     min-replicas-max-lag 10. From now on every write to the source is refused with NOREPLICAS, also the
//     writes the pause holds: a paused command is processed from the start when the pause ends. An
//     application still writing there gets an error, never an acknowledgement that the new instance does not
//     have. Then read its offset again: if the pause ended before the fence (this process or its connection
//     stalled past the server-side pause), the source acknowledged writes meanwhile; wait (PauseBudget) for
//     node 0 to have them too. Not in time: the fence is lifted (the settings read before), CLIENT UNPAUSE,
//     Error with Reason NotCaughtUp: the source is still the primary.
//  5. REPLICAOF NO ONE on node 0 (its replicas keep following it: the promotion keeps the history as
//     master_replid2), then, when Config.Node0MasterAuth is given, its own replication credentials, so that it
//     can follow its own peers after a later failover. In a data pod its first-sync guard does that instead
//     (the controller's _operator has no CONFIG SET; internal/podsteps/firstsync Config.MasterAuth).
//  6. CLIENT UNPAUSE on the source. The held writes are refused (step 4).
//
// A death of this process between the steps loses no write: before step 4 the pause ends by itself and the
// source goes on as the primary; after it, the source refuses writes and Switch can be run again (node 0 is
// caught up, step 5 is the rest). Node 0 is promoted only at an offset read while the source was fenced, so
// a pause that ended early (a stall longer than the pause's extra second) loses nothing either
// (TestSwitchUnderFaults).
//
// The source's user needs SourceRights (Switch authenticates with AUTH, RESP2, so +hello is not needed).
package migrate

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// SourceRights are the ACL rights the source's migrateFrom user needs: replication (+psync +replconf +ping), node
// 0's boot step (+info +config|get: is the source a primary, is it fenced) and the switch (+info +client|pause
// +client|unpause +config|set).
const SourceRights = "+psync +replconf +ping +info +config|get +client|pause +client|unpause +config|set"

// DefaultMaxLag is how far behind the source (bytes) node 0 may be when a switch is asked: the switch then
// waits for the rest with writes paused, so this bounds the write outage (1 MiB, as a data roll's replicas).
const DefaultMaxLag int64 = 1 << 20

// SourceView is what the source answered: INFO replication and INFO server, or why not.
type SourceView struct {
	// Err is set when the source could not be reached or asked; WrongPass when it refused the credentials.
	Err       error
	WrongPass bool
	// Refused is set with Err when the source answered with an error reply (e.g. NOPERM: its user lacks a right).
	Refused bool
	Repl    valkey.Replication
	// Engine is "valkey" or "redis" (INFO server server_name, redis when absent); Version its version
	// (valkey_version, else redis_version).
	Engine  string
	Version string
}

// NodeView is what node 0 of the new instance answered.
type NodeView struct {
	Err  error
	Repl valkey.Replication
	// Engine and Version as in SourceView: node 0's engine decides which RDB versions it can load.
	Engine  string
	Version string
}

// Observation is everything Plan decides from.
type Observation struct {
	// SourceHost and SourcePort are where migrateFrom points.
	SourceHost string
	SourcePort int
	Source     SourceView
	Node0      NodeView
	// SwitchAsked is true when the switch was asked (migrateFrom.switch).
	SwitchAsked bool
	// MaxLag is the most bytes behind at which a switch may start (DefaultMaxLag when 0).
	MaxLag int64
}

// State is where a migration stands.
type State string

// The states.
const (
	// Refused: the migration cannot go on; Decision.Message says why and what to fix.
	Refused State = "Refused"
	// Unknown: node 0 could not be observed; nothing is decided.
	Unknown State = "Unknown"
	// Syncing: node 0 does not follow the source with its link up yet (connecting, full sync).
	Syncing State = "Syncing"
	// Migrating: node 0 follows the source, Decision.Behind bytes behind; the switch waits to be asked.
	Migrating State = "Migrating"
	// Ready: the switch was asked and node 0 is caught up: run it (Switch).
	Ready State = "Ready"
	// Switched: node 0 is a primary: the migration is over (the source no longer matters).
	Switched State = "Switched"
)

// Decision is the result of Plan.
type Decision struct {
	State State
	// Behind is the source's master_repl_offset minus node 0's processed offset (bytes), when both were read
	// and node 0 follows the source's history; -1 otherwise.
	Behind int64
	// Message is the sentence for the status and the Event, e.g. "migrating: 120 bytes behind ...".
	Message string
}

// Plan decides what a migration does next, from one Observation. Node 0 reporting primary means the switch
// happened (Switched), whatever the source says: it may be fenced or gone. Otherwise, in this order: node 0
// not observed (Unknown); the source unreachable, refusing the password, itself a replica, or of an engine
// whose RDB version node 0 cannot load (Refused, with the fix); node 0 not linked to the source or not on
// its history (Syncing); then Migrating, or Ready when asked and at most MaxLag bytes behind. A switch
// asked while further behind is Refused (it would hold the source's writes for as long as the catch-up
// takes); the next observation looks again.
func Plan(o Observation) Decision {
	src := net.JoinHostPort(o.SourceHost, strconv.Itoa(o.SourcePort))
	maxLag := o.MaxLag
	if maxLag <= 0 {
		maxLag = DefaultMaxLag
	}
	if o.Node0.Err != nil {
		return Decision{State: Unknown, Behind: -1, Message: fmt.Sprintf("migrating from %s: node 0 not observed: %v", src, o.Node0.Err)}
	}
	if o.Node0.Repl.Role == valkey.RolePrimary {
		return Decision{State: Switched, Behind: -1, Message: fmt.Sprintf("migrated from %s: node 0 is the primary", src)}
	}
	switch {
	case o.Source.WrongPass:
		return refused(src, "the source refused the password (WRONGPASS): check migrateFrom.existingSecret, "+
			"migrateFrom.secretKey and migrateFrom.username")
	case o.Source.Err != nil && o.Source.Refused:
		return refused(src, fmt.Sprintf("the source refused us (%v): the migrateFrom user needs %s", o.Source.Err, SourceRights))
	case o.Source.Err != nil:
		return refused(src, fmt.Sprintf("the source does not answer (%v): check migrateFrom.host and migrateFrom.port "+
			"and that this namespace may reach it", o.Source.Err))
	case o.Source.Repl.Role != valkey.RolePrimary:
		return refused(src, fmt.Sprintf("the source is a %s of %s:%d, not a primary: point migrateFrom at the "+
			"primary (another chart's Sentinel names it; with Bitnami's chart, the -headless pod Sentinel reports "+
			"as master)", roleWord(o.Source.Repl.Role), o.Source.Repl.PrimaryHost, o.Source.Repl.PrimaryPort))
	}
	srcRDB, okSrc := RDBVersion(o.Source.Engine, o.Source.Version)
	maxRDB, okOurs := RDBVersion(o.Node0.Engine, o.Node0.Version)
	if okSrc && okOurs && !valkey.LoadsRDB(maxRDB, srcRDB) {
		return refused(src, fmt.Sprintf("the source runs %s %s, which writes RDB version %d; node 0 runs %s %s, which "+
			"loads up to %d: pick an engine at least as new as the source's (image.tag / engine)",
			o.Source.Engine, o.Source.Version, srcRDB, o.Node0.Engine, o.Node0.Version, maxRDB))
	}
	n := o.Node0.Repl
	if !sameHost(n.PrimaryHost, o.SourceHost) || n.PrimaryPort != o.SourcePort {
		return Decision{State: Syncing, Behind: -1, Message: fmt.Sprintf("migrating from %s: node 0 follows %s:%d, "+
			"not the source (its boot step points it at the source)", src, n.PrimaryHost, n.PrimaryPort)}
	}
	if !n.LinkUp || n.ReplID != o.Source.Repl.ReplID {
		return Decision{State: Syncing, Behind: -1, Message: fmt.Sprintf("migrating from %s: node 0 is syncing "+
			"(link %s, sync in progress %t)", src, linkWord(n.LinkUp), n.SyncInProgress)}
	}
	behind := o.Source.Repl.MasterReplOffset - n.ReplicaReplOffset
	if behind < 0 {
		behind = 0
	}
	msg := fmt.Sprintf("migrating from %s: %d bytes behind", src, behind)
	if !o.SwitchAsked {
		return Decision{State: Migrating, Behind: behind, Message: msg + "; set migrateFrom.switch: true to switch"}
	}
	if behind > maxLag {
		return Decision{State: Refused, Behind: behind, Message: fmt.Sprintf("%s: switch refused while more than "+
			"%d bytes behind (the source's writes would stay paused for the catch-up); it starts once caught up", msg, maxLag)}
	}
	return Decision{State: Ready, Behind: behind, Message: msg + ": switching"}
}

func refused(src, why string) Decision {
	return Decision{State: Refused, Behind: -1, Message: fmt.Sprintf("migrateFrom %s refused: %s", src, why)}
}

func roleWord(r valkey.Role) string {
	if r == valkey.RoleReplica {
		return "replica"
	}
	if r == "" {
		return "server of unknown role"
	}
	return string(r)
}

func linkWord(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

// sameHost compares host names as the servers report them: case-insensitive, without a trailing dot.
func sameHost(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// RDBVersion returns the RDB format version that an engine ("valkey" or "redis") of the given version
// ("9.1.2") writes, which is also the newest it loads (valkey.RDBVersionOf). ok is false for a version it does
// not know: the server then decides alone.
func RDBVersion(engine, version string) (int, bool) {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return valkey.RDBVersionOf(engine, major, minor)
}

// EngineOf returns the engine and version of an INFO server reply: "valkey" and valkey_version when it has
// them (Valkey also reports redis_version 7.2.4 for compatibility), else "redis" and redis_version.
func EngineOf(info map[string]string) (engine, version string) {
	if v := info["valkey_version"]; v != "" {
		return "valkey", v
	}
	if info["server_name"] == "valkey" {
		return "valkey", info["redis_version"]
	}
	return "redis", info["redis_version"]
}
