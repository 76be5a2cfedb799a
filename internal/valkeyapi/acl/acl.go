// Package acl holds the system users as data, renders ACL rule lines (Valkey docs, "ACL rules") and builds
// the arguments of ACL SETUSER for live sync. Every rendered definition starts from a clean slate
// (resetpass resetkeys resetchannels nocommands), so applying it twice is harmless and applying it again fully
// replaces the user (docs/design.md, "Access"). Passwords appear only as SHA-256 hashes.
package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// System user names. Customers can never use these names (the chart schema refuses them).
const (
	Operator    = "_operator"
	Replication = "_replication"
	Sentinel    = "_sentinel"
	Probe       = "_probe"
	Exporter    = "_exporter"
	// Backup is the user of the backup CronJob (internal/podsteps/backup); its password lives in Secret F-backup-auth.
	Backup  = "_backup"
	Default = "default"
	// PreStop is the node-local user of a data pod's preStop hook (PreStopUser).
	PreStop = "_prestop"
)

// PreStopUser is the one user that is not in the system Secret: the bootstrap of each data pod gives it a
// fresh random password, kept in the pod's runtime directory and in the runtime ACL file of that node only.
// The preStop hook (valkey-sentinel-ctl prestop) uses it to hand the primary role off its own server. It
// exists only on the node whose bootstrap created it, so a compromised data container gains nothing on its
// peers (the _operator password never reaches a data pod). Reads of the peers go through _probe.
var PreStopUser = SystemUser{Name: PreStop, Perms: []Permission{
	{"+hello", "valkey-go opens connections with HELLO 3 AUTH"},
	{"+ping", "liveness of its connections"},
	{"+info", "INFO replication: role and offset of its own server"},
	{"+role", "cheap role check"},
	{"+client|setname", "names its handoff connection: the handoff lock (internal/podsteps/handoff)"},
	{"+client|list", "sees whether another handoff (the controller's roll) holds the lock"},
	{"+client|pause", "pauses writes until a replica caught up"},
	{"+client|unpause", "lifts that pause"},
	{"+replicaof", "demotes its own server to a replica of the promoted one"},
	{"+failover", "unmonitored instances: FAILOVER TO a replica"},
	{"+client|kill", "closes the application connections of its demoted server (CLIENT KILL USER ... TYPE normal)"},
	{"+config|set", "CONFIG SET repl-ping-replica-period: holds its replication PINGs while writes are paused (handoff.Config.HoldPings); " +
		"no more than the data container already has over its own server (its config file, its process)"},
}}

// FirstSync is the node-local user of a replica's first-sync guard (FirstSyncUser).
const FirstSync = "_firstsync"

// FirstSyncUser is the user of the first-sync guard of a data pod (internal/podsteps/firstsync): a replica
// that starts empty runs with replica-priority 0 until its first sync completed, and the guard then restores
// the priority. The bootstrap gives it a random password that only the guard process holds (never written
// to a file; the runtime ACL file has its hash), on its own node only; once the guard exited nobody knows it.
var FirstSyncUser = SystemUser{Name: FirstSync, Perms: []Permission{
	{"+hello", "valkey-go opens connections with HELLO 3 AUTH"},
	{"+ping", "liveness of its connection"},
	{"+info", "INFO replication: the first sync's end (master_link_status up)"},
	{"+config|set", "CONFIG SET replica-priority: restores the priority the bootstrap set to 0; after a migration's switch also masteruser/masterauth"},
}}

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
		{"+acl|getuser", "live ACL sync reads which password hashes a node still accepts"},
		{"+client|kill", "live ACL sync closes the sessions of a revoked password (CLIENT KILL USER)"},
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
		{"+info", "server statistics, maxmemory included (no CONFIG GET: it would also read masterauth, the replication " +
			"password; the exporter runs with --config-command=-)"},
		{"+client|list", "client gauges"},
		{"+slowlog|get", "slow log metrics"},
		{"+slowlog|len", "slow log metrics"},
		{"+latency|latest", "latency metrics"},
	}},
	{Name: Backup, Perms: []Permission{
		{"+ping", "liveness of its connections"},
		{"+info", "INFO replication: finds a replica whose link to the primary is up (never the primary)"},
		{"+replconf", "valkey-cli --rdb sends REPLCONF capa eof and REPLCONF rdb-only 1 (no replication stream follows)"},
		{"+sync", "valkey-cli --rdb: SYNC makes the replica stream its dataset; the whole dataset, like _replication's PSYNC"},
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
	if name == Default || name == PreStop || name == FirstSync {
		return true
	}
	_, ok := SystemUserByName(name)
	return ok
}

// IsSystemConnection reports whether a connection authenticated as user belongs to the project's own
// components: every system user's name starts with '_' (_operator, _replication, _sentinel, _probe,
// _exporter, _backup, _prestop, _firstsync), a prefix the chart's user-name pattern refuses to customers. "default"
// is not one: it is the customer's (or an unauthenticated connection's) user.
func IsSystemConnection(user string) bool { return strings.HasPrefix(user, "_") }

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

// RenderFile returns the ACL file a node loading users at now starts from: the default user off, then one
// clean-slate line per user with only the passwords still valid at now (a user whose every password expired
// is off). The ACL file format has no comments.
func RenderFile(users []DesiredUser, now time.Time) (string, error) {
	plan, err := BuildSync(users, nil, now)
	if err != nil {
		return "", err
	}
	lines := []string{RenderLine(Default, DefaultOffRules)}
	for _, s := range plan.Set {
		lines = append(lines, RenderLine(s.Name, s.Args))
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// Presets are the customer access levels (the chart's `users[].access`), rendered after nocommands. They
// follow the customer rules (docs/design.md, "Access"; README, Security model), adapted to replication: ACL
// rules instead of rename-command, so the system users keep REPLICAOF, CONFIG REWRITE and FAILOVER while
// customers cannot reach them. A user whose
// key patterns are not exactly ["*"] also gets RestrictedKeyRules (CustomerRules adds them).
var Presets = map[string]string{
	// read commands only; -@admin also drops CLIENT KILL/PAUSE that @connection would grant. ROLE (an @admin
	// command that reveals only the replication topology) stays: Sentinel-aware clients such as valkey-go
	// ask every node they are sent to for its ROLE before using it.
	"readonly": "-@all +@read +@connection -@admin +info +role",
	// reads and writes, transactions and pub/sub; nothing administrative or dangerous (FLUSHALL, KEYS, ...);
	// ROLE as for readonly
	// FUNCTION: see NoFunctionRules (FUNCTION LOAD is @write)
	"readwrite": "-@all +@read +@write +@connection +@transaction +@pubsub -@admin -@dangerous +info +role " + NoFunctionRules,
	// everything but @admin, so a customer's user cannot reach credentials or roles: no ACL reads or writes,
	// CONFIG (GET would read masterauth, the replication password; RESETSTAT resets what the exporter reads),
	// CLIENT KILL/PAUSE/LIST/UNBLOCK (the probe's and the controller's connections), replication and failover
	// commands, SHUTDOWN, DEBUG, MODULE, MONITOR, SAVE/BGSAVE, SLOWLOG, LATENCY; ROLE as for readonly.
	// Scripting stays (queues, rate limiters and locks need EVAL): a script that never ends is handled by the
	// liveness probe (README, Security model). FCALL stays, the library commands do not (NoFunctionRules). No
	// RESTORE: a DUMP payload is LZF-compressed, so 3.4 MB (under proto-max-bulk-len) inflated to a 300 MB
	// value in one command, past the starter plan's limit, on 9.1, 8.0 and 7.0; and a corrupt one crashed 8.0
	// and 7.0 without sanitize-dump-payload. DUMP stays.
	"full": "+@all -@admin +role -restore -restore-asking " + NoFunctionRules,
}

// NoFunctionRules are subtracted from every preset: function libraries are server-wide and FCALL
// runs a library's code with the caller's key rights, so a user who may FUNCTION LOAD REPLACE (or DELETE,
// FLUSH, RESTORE) any library runs code of its choosing as every user who FCALLs it, and one who may FUNCTION
// LIST WITHCODE or DUMP reads everyone's code. ACL rules cannot bind a library to a user or forbid REPLACE
// alone, so only a user granted FunctionRules (the chart's `users[].functions: true`) may manage libraries.
// FUNCTION STATS, KILL and HELP, and FCALL/FCALL_RO, stay with the preset.
const NoFunctionRules = "-function|load -function|delete -function|flush -function|restore -function|dump -function|list"

// FunctionRules are added, after every other rule, to a `full` customer whose users[].functions is true: every
// FUNCTION subcommand. It is a trust grant: that user may replace any library, and so runs code with the key
// rights of every user who FCALLs one.
const FunctionRules = "+function"

// RestrictedKeyRules are subtracted from a customer whose key patterns are not exactly ["*"]: commands that
// list, pick or drop keys regardless of the patterns (KEYS, RANDOMKEY, FLUSHALL, FLUSHDB, SWAPDB) and that
// drop the server-wide script and function libraries other users rely on. SCAN stays: clients need it, and
// Valkey cannot filter it by key pattern, so key names (not values) remain visible there.
const RestrictedKeyRules = "-keys -randomkey -flushall -flushdb -swapdb -script|flush -function|flush -function|delete -function|restore"

// SentinelHelloChannel is the channel Sentinels use on every monitored node to discover each other and to
// spread a new configuration (Sentinel docs, "Sentinels and replicas auto discovery"). A forged message on
// it with a newer config epoch makes every Sentinel switch the primary to any address.
const SentinelHelloChannel = "__sentinel__:hello"

// ChannelPatternReachesSentinel reports whether a channel pattern could match a __sentinel__: channel. Valkey
// ACL channel rules only allow (there is no way to subtract a channel), so such a pattern must never reach a
// customer. The test is conservative: the literal prefix of the pattern (up to the first *, ?, [ or \) must
// diverge from "__sentinel__:"; "*", "_*", "?_sentinel..." and "__sentinel__:x" are all refused.
func ChannelPatternReachesSentinel(pattern string) bool {
	lit := pattern
	if i := strings.IndexAny(pattern, "*?[\\"); i >= 0 {
		lit = pattern[:i]
	}
	const p = "__sentinel__:"
	return strings.HasPrefix(lit, p) || strings.HasPrefix(p, lit)
}

var patternRE = regexp.MustCompile(`^[^\s"'\\()]{1,64}$`)

// CustomerRules returns the rules of a customer user after its password hashes, in the order the chart
// renders them: resetkeys ~<key>... resetchannels &<channel>... nocommands <preset> [RestrictedKeyRules]
// [FunctionRules]. It refuses an unknown access level, a pattern with whitespace, quotes, a backslash or a
// parenthesis (docs/design.md, "Access": a pattern must not smuggle a second rule or open an ACL selector), a
// channel pattern that could match a __sentinel__: channel, and functions on an access level other than full.
func CustomerRules(access string, keys, channels []string, functions bool) (string, error) {
	preset, ok := Presets[access]
	if !ok {
		return "", fmt.Errorf("access %q is not readonly, readwrite or full", access)
	}
	rules := []string{"resetkeys"}
	for _, k := range keys {
		if !patternRE.MatchString(k) {
			return "", fmt.Errorf("key pattern %q: 1 to 64 characters without spaces, quotes, backslashes or parentheses", k)
		}
		rules = append(rules, "~"+k)
	}
	rules = append(rules, "resetchannels")
	for _, c := range channels {
		if !patternRE.MatchString(c) {
			return "", fmt.Errorf("channel pattern %q: 1 to 64 characters without spaces, quotes, backslashes or parentheses", c)
		}
		if ChannelPatternReachesSentinel(c) {
			return "", fmt.Errorf("channel pattern %q could match %s (a forged message there moves Sentinel's primary); use a prefix of your own such as app.*", c, SentinelHelloChannel)
		}
		rules = append(rules, "&"+c)
	}
	rules = append(rules, "nocommands", preset)
	if !(len(keys) == 1 && keys[0] == "*") {
		rules = append(rules, RestrictedKeyRules)
	}
	if functions {
		if access != "full" {
			return "", fmt.Errorf("functions: access %q cannot FCALL; only a full user may manage function libraries", access)
		}
		rules = append(rules, FunctionRules)
	}
	return strings.Join(rules, " "), nil
}

// CheckCustomerRules refuses rules (as users.json carries them) that grant a channel pattern which could
// match a __sentinel__: channel, or every channel, or that hold a parenthesis: "(" opens an ACL selector
// (Valkey 7.0+), whose own channel and command rules, such as "(&__sentinel__:hello +publish)", add to the
// user's, and the chart never renders one. The live sync applies nothing such a file asks for,
// whoever wrote it.
func CheckCustomerRules(rules string) error {
	for _, f := range strings.Fields(rules) {
		switch {
		case strings.ContainsAny(f, "()"):
			return fmt.Errorf("rule %q: a parenthesis opens an ACL selector, whose rules add to the user's (%s included); customer rules hold none", f, SentinelHelloChannel)
		case f == "allchannels":
			return fmt.Errorf("rule allchannels would grant %s", SentinelHelloChannel)
		case strings.HasPrefix(f, "&") && ChannelPatternReachesSentinel(f[1:]):
			return fmt.Errorf("channel rule %q could match %s", f, SentinelHelloChannel)
		}
	}
	return nil
}
