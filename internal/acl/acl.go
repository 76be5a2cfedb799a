// Package acl holds the system users as data, renders ACL rule lines (Valkey docs, "ACL rules") and builds
// the arguments of ACL SETUSER for live sync. Every rendered definition starts from a clean slate
// (resetpass resetkeys resetchannels nocommands), so applying it twice is harmless and applying it again fully
// replaces the user (seed 003, "Two classes of configuration"). Passwords appear only as SHA-256 hashes.
package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// System user names. Customers can never use these names (the chart schema refuses them).
const (
	Operator    = "_operator"
	Replication = "_replication"
	Sentinel    = "_sentinel"
	Probe       = "_probe"
	Exporter    = "_exporter"
	Default     = "default"
)

// Permission is one rule of a system user with the reason it is needed.
type Permission struct {
	Rule string
	Why  string
}

// SystemUser is a user the charts create for the project's own components. Its password is generated once,
// kept across upgrades and never rotated with customer users.
type SystemUser struct {
	Name  string
	Perms []Permission
}

// Rules returns the rules of the user, in table order.
func (u SystemUser) Rules() []string {
	out := make([]string, len(u.Perms))
	for i, p := range u.Perms {
		out[i] = p.Rule
	}
	return out
}

// SystemUsers is the least-privilege table for Valkey 8.0 (and Redis 7.0). charts/valkey renders the same
// rules; templates-tests compares the two. Sources: Valkey docs "Replication" (masteruser) and Sentinel docs
// "ACL authentication" / "Sentinel and replicas" for what Sentinel sends.
var SystemUsers = []SystemUser{
	{Name: Operator, Perms: []Permission{
		{"~__valkey-ha:*", "the helm test writes and reads back one marker key under this prefix"},
		{"+hello", "valkey-go opens connections with HELLO 3 AUTH"},
		{"+client|setname", "names its connections for CLIENT LIST"},
		{"+client|list", "counts clients before repairing an orphan primary"},
		{"+ping", "liveness of its connections"},
		{"+info", "INFO replication / server: the observation"},
		{"+role", "ROLE: cheap role check"},
		{"+replicaof", "repair: point an orphan primary at the real one; promote when unmonitored"},
		{"+failover", "planned roll of an unmonitored primary: FAILOVER TO the best replica (coordinated, no lost writes)"},
		{"+client|pause", "planned roll of a monitored primary: pause writes until replicas caught up, then SENTINEL FAILOVER"},
		{"+client|unpause", "lifts that pause once the primary moved or the handoff timed out"},
		{"+config|get", "reads masteruser/masterauth and announce settings in checks"},
		{"+config|rewrite", "persists a repaired replicaof into the writable config"},
		{"+acl|setuser", "live ACL sync"},
		{"+acl|deluser", "live ACL sync removes users no longer wanted"},
		{"+acl|users", "live ACL sync lists users"},
		{"+acl|whoami", "checks its own identity in tests"},
		{"+acl|log", "reports denied commands in status"},
		{"+get", "helm test reads the marker key back"},
		{"+set", "helm test writes the marker key"},
		{"+del", "helm test removes the marker key"},
		{"+wait", "helm test waits for replicas to acknowledge the marker"},
		{"+dbsize", "bootstrap guard: is a node's dataset empty"},
	}},
	{Name: Replication, Perms: []Permission{
		{"+psync", "replicas request the stream"},
		{"+replconf", "replicas report offsets and capabilities"},
		{"+ping", "replication link keepalive"},
	}},
	{Name: Sentinel, Perms: []Permission{
		{"&__sentinel__:hello", "Sentinels discover each other over this channel (case S15); nothing else"},
		{"+multi", "reconfiguration is sent as MULTI ... EXEC"},
		{"+exec", "reconfiguration is sent as MULTI ... EXEC"},
		{"+ping", "failure detection"},
		{"+info", "discovers replicas and roles from INFO"},
		{"+role", "role checks"},
		{"+replicaof", "promotes and repoints nodes"},
		{"+slaveof", "older Sentinels send SLAVEOF"},
		{"+config|rewrite", "persists the new role on the node"},
		{"+client|setname", "names its connections"},
		{"+client|kill", "drops clients of a demoted primary"},
		{"+script|kill", "stops a busy script that blocks a failover"},
		{"+publish", "hello messages"},
		{"+subscribe", "hello messages"},
		{"+failover", "SENTINEL FAILOVER on Valkey 9 (valkey-io/valkey #2779)"},
	}},
	{Name: Probe, Perms: []Permission{
		{"+ping", "readiness: authenticated PING must answer PONG"},
		{"+info", "bootstrap reads INFO replication of peers"},
	}},
	{Name: Exporter, Perms: []Permission{
		{"+hello", "client connection setup"},
		{"+ping", "scrape health"},
		{"+info", "server statistics"},
		{"+config|get", "maxmemory and similar gauges"},
		{"+client|list", "client gauges"},
		{"+slowlog|get", "slow log metrics"},
		{"+slowlog|len", "slow log metrics"},
		{"+latency|latest", "latency metrics"},
	}},
}

// SystemUserByName returns the system user with that name.
func SystemUserByName(name string) (SystemUser, bool) {
	for _, u := range SystemUsers {
		if u.Name == name {
			return u, true
		}
	}
	return SystemUser{}, false
}

// IsReserved reports whether a user name belongs to the system (default and the system users).
func IsReserved(name string) bool {
	if name == Default {
		return true
	}
	_, ok := SystemUserByName(name)
	return ok
}

// HashPassword returns the hex SHA-256 of a password, the form ACL rules take after '#'.
func HashPassword(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

var hashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// BuildRules returns the full rule list of an enabled user: on resetpass #<hash>... resetkeys resetchannels
// nocommands <rules>. It returns an error if a hash is not 64 lowercase hex characters or a rule is empty or
// contains whitespace (which would smuggle a second rule into a file line).
func BuildRules(hashes []string, rules []string) ([]string, error) {
	out := []string{"on", "resetpass"}
	for _, h := range hashes {
		if !hashRE.MatchString(h) {
			return nil, fmt.Errorf("password hash %q is not a hex SHA-256", h)
		}
		out = append(out, "#"+h)
	}
	out = append(out, "resetkeys", "resetchannels", "nocommands")
	for _, r := range rules {
		if r == "" || strings.ContainsAny(r, " \t\r\n") {
			return nil, fmt.Errorf("rule %q is empty or contains whitespace", r)
		}
		out = append(out, r)
	}
	return out, nil
}

// RenderLine renders one ACL file line: "user <name> <rules...>".
func RenderLine(name string, rules []string) string {
	return "user " + name + " " + strings.Join(rules, " ")
}

// DefaultOffRules are the rules that switch the default user off.
var DefaultOffRules = []string{"off", "resetpass", "resetkeys", "resetchannels", "nocommands"}

// Presets are the customer access levels (the chart's `users[].access`), rendered after nocommands. They
// follow seed 003's customer rules, adapted to replication: ACL rules instead of rename-command, so the
// system users keep REPLICAOF, CONFIG REWRITE and FAILOVER while customers cannot reach them.
var Presets = map[string]string{
	// read commands only; -@admin also drops CLIENT KILL/PAUSE that @connection would grant. ROLE (an @admin
	// command that reveals only the replication topology) stays: Sentinel-aware clients such as valkey-go
	// ask every node they are sent to for its ROLE before using it.
	"readonly": "-@all +@read +@connection -@admin +info +role",
	// reads and writes, transactions and pub/sub; nothing administrative or dangerous (FLUSHALL, KEYS, ...);
	// ROLE as for readonly
	"readwrite": "-@all +@read +@write +@connection +@transaction +@pubsub -@admin -@dangerous +info +role",
	// everything except what could harm the system users or replication (seed 003, "Why there's a separate
	// internal user"): ACL writes and reads of other users, killing or pausing clients (the probe's
	// connection), replication and failover commands, shutdown, debug, modules and config changes
	"full": "+@all -acl|setuser -acl|deluser -acl|load -acl|save -acl|list -acl|getuser -acl|dryrun " +
		"-client|kill -client|pause -client|unpause -replicaof -slaveof -failover -sync -psync -replconf " +
		"-shutdown -debug -module -config|set -config|rewrite -monitor",
}
