package acl

import (
	"fmt"
	"strings"
)

// Users of the Sentinels themselves (charts/valkey-sentinel, auth.enabled, on by default). They are not the
// data nodes' users above: a Sentinel is its own server with its own ACL, defined by `user` lines the Sentinel
// pod's start step writes into sentinel.conf with the SHA-256 of each password; `default` is off, so a client
// that has not authenticated may run nothing (SENTINEL FAILOVER, REMOVE, SET, MONITOR, DEBUG included).
//
// Why users and not requirepass: requirepass gives the one `default` user every command, and the widest
// audience of a Sentinel password is every application pod with a Sentinel-aware client. With users, those
// clients get discovery only (SentinelClient), the instance releases' components also failover
// (SentinelInstance), the instance controllers alone reset (SentinelController), and only the quorum's own
// controller and peers may register, change or remove monitors (SentinelAdmin). Nobody may SENTINEL DEBUG,
// SIMULATE-FAILURE or CONFIG (CONFIG SET could change sentinel-user/sentinel-pass and the announced addresses),
// ACL, or SHUTDOWN. Sources: Sentinel docs, "Configuring Sentinel instances with authentication" and "Sentinel
// commands"; Valkey docs "ACL rules".
//
// Valkey 8.0 and 9.1 and Redis 7.0 Sentinels all load `user` lines with subcommand rules from sentinel.conf
// (tested against each, internal/valkeyapi/valkey integration tests and templates-tests); the rules that name
// subcommands Redis 7.0 lacks (the primary spellings, CLIENT SETINFO) are Valkey-only (SentinelRules).
const (
	// SentinelAdmin is the quorum's own user: the sentinel controller (MONITOR, SET, REMOVE, RESET) and the
	// Sentinels among themselves (`sentinel sentinel-user`). Secret S-auth-admin.
	SentinelAdmin = "_admin"
	// SentinelInstance is the user of the instance releases a quorum monitors: data pods (bootstrap, preStop
	// hook), the instance controller and the instance's helm test. Secret S-auth-instance.
	SentinelInstance = "_instance"
	// SentinelClient is the user of Sentinel-aware application clients (discovery and events only), the
	// Sentinels' readiness probe and exporter, and the quorum's helm test. Secret S-auth-client.
	SentinelClient = "_client"
	// SentinelController is the user of the instance controllers alone: SENTINEL RESET (forget a removed
	// replica after a scale-in). Secret S-auth-controller, which no data pod, application or helm test reads.
	SentinelController = "_controller"
)

// SentinelPermission is one rule of a Sentinel user with the reason it is needed. ValkeyOnly rules name
// subcommands that Redis 7.0 does not have (a `user` line naming one would stop a Redis Sentinel at start).
type SentinelPermission struct {
	Rule       string
	Why        string
	ValkeyOnly bool
}

func perm(rule, why string) SentinelPermission { return SentinelPermission{Rule: rule, Why: why} }

func valkeyOnly(rule, why string) SentinelPermission {
	return SentinelPermission{Rule: rule, Why: why, ValkeyOnly: true}
}

// SentinelUser is one user of the Sentinels' ACL.
type SentinelUser struct {
	Name  string
	Perms []SentinelPermission
}

// discovery is what every authenticated Sentinel client may do: find the primary, replicas and Sentinels,
// follow the event channels, check the quorum. PUBLISH is never in it: a Sentinel handles a PUBLISH on
// __sentinel__:hello as a peer's hello, so a forged one could move its primary.
var discovery = []SentinelPermission{
	perm("&*", "event channels (+switch-master, +sdown, ...; some clients PSUBSCRIBE *): a Sentinel publishes only its "+
		"events to subscribers, hellos it receives are not forwarded; publishing is not granted"),
	perm("+hello", "HELLO 3 AUTH (valkey-go)"),
	perm("+auth", "AUTH user password (valkey-cli, RESP2 clients)"),
	perm("+ping", "connection health, the Sentinels' readiness probe"),
	perm("+client|setname", "clients name their connections"),
	valkeyOnly("+client|setinfo", "clients report their library (valkey-go, redis-py); Valkey only"),
	perm("+info", "INFO sentinel (handoff, exporter)"),
	perm("+role", "some clients ask a Sentinel for its ROLE"),
	perm("+subscribe", "follow +switch-master and the other events"),
	perm("+psubscribe", "follow events by pattern"),
	perm("+unsubscribe", "clients drop their subscriptions on reconnect"),
	perm("+punsubscribe", "clients drop their subscriptions on reconnect"),
	perm("+sentinel|get-master-addr-by-name", "find the primary (every client)"),
	valkeyOnly("+sentinel|get-primary-addr-by-name", "the same, Valkey's spelling"),
	perm("+sentinel|master", "the monitor's state (bootstrap, handoff, clients that check flags)"),
	valkeyOnly("+sentinel|primary", "the same, Valkey's spelling"),
	perm("+sentinel|masters", "every monitor's state (redis-py discovers the primary with it; exporter; helm test)"),
	valkeyOnly("+sentinel|primaries", "the same, Valkey's spelling"),
	perm("+sentinel|replicas", "replica discovery (read-from-replica clients, bootstrap, handoff)"),
	perm("+sentinel|slaves", "the same, older spelling some clients send"),
	perm("+sentinel|sentinels", "discover the other Sentinels (valkey-go, helm test)"),
	perm("+sentinel|ckquorum", "read-only quorum check (helm test, exporter, preStop hook)"),
}

// SentinelUsers is the least-privilege table of the Sentinels' users. charts/valkey-sentinel renders the same
// rules (templates-tests compares them).
var SentinelUsers = []SentinelUser{
	{Name: SentinelAdmin, Perms: []SentinelPermission{
		perm("&"+SentinelHelloChannel, "the Sentinels PUBLISH their hellos to each other on this channel; nothing else"),
		perm("+hello", "HELLO 3 AUTH (the sentinel controller, valkey-go)"),
		perm("+auth", "the Sentinels authenticate to each other with AUTH (sentinel-user/sentinel-pass)"),
		perm("+ping", "failure detection between Sentinels"),
		perm("+client|setname", "the Sentinels and the controller name their connections"),
		valkeyOnly("+client|setinfo", "client library report; Valkey only"),
		perm("+info", "INFO sentinel"),
		perm("+role", "role check"),
		perm("+publish", "hello messages between Sentinels (channel "+SentinelHelloChannel+" only)"),
		perm("+sentinel", "monitor lifecycle: MONITOR, SET, REMOVE, RESET, FLUSHCONFIG, CKQUORUM, MASTERS; between "+
			"Sentinels IS-MASTER-DOWN-BY-ADDR (the failover vote)"),
		perm("-sentinel|debug", "changes the Sentinel's timers; nobody needs it"),
		perm("-sentinel|simulate-failure", "crashes the Sentinel on purpose; nobody needs it"),
		perm("-sentinel|config", "CONFIG SET would change sentinel-user/sentinel-pass, announce-ip and hostname "+
			"resolution; the chart owns them"),
	}},
	{Name: SentinelInstance, Perms: append(append([]SentinelPermission{}, discovery...),
		perm("+sentinel|failover", "the preStop hook, the planned roll and an empty node's bootstrap ask for a failover"),
	)},
	{Name: SentinelClient, Perms: discovery},
	// RESET is not _instance's: every data pod and helm test holds that password, and a RESET * sent while a
	// failover runs leaves two primaries (h7-attack: 0.3-1.5 s after SENTINEL FAILOVER, 3 of 3 runs). Only the
	// instance controllers hold this user's password, and they send RESET only when internal/planners/plan's policy allows
	// it (no failover in progress, a quiet period). It may connect and RESET, nothing else: the controller reads
	// and fails over as _instance.
	{Name: SentinelController, Perms: []SentinelPermission{
		perm("+hello", "HELLO 3 AUTH (the instance controller, valkey-go)"),
		perm("+auth", "AUTH user password (valkey-cli, RESP2 clients)"),
		perm("+ping", "connection health"),
		perm("+client|setname", "the controller names its connections"),
		valkeyOnly("+client|setinfo", "client library report; Valkey only"),
		perm("+sentinel|reset", "the instance controller forgets a removed replica after a scale-in (plan policy "+
			"checkReset: no failover in progress, quiet period)"),
	}},
}

// SentinelUserByName returns the Sentinel user with that name.
func SentinelUserByName(name string) (SentinelUser, bool) {
	for _, u := range SentinelUsers {
		if u.Name == name {
			return u, true
		}
	}
	return SentinelUser{}, false
}

// SentinelRules returns the rules of u for a Sentinel of engine ("valkey" or "redis"), in table order,
// without the Valkey-only ones on redis.
func SentinelRules(u SentinelUser, engine string) []string {
	out := make([]string, 0, len(u.Perms))
	for _, p := range u.Perms {
		if p.ValkeyOnly && engine != "valkey" {
			continue
		}
		out = append(out, p.Rule)
	}
	return out
}

// RenderSentinelACL returns the `user` lines of sentinel.conf for engine: default off, then every user of
// SentinelUsers with the SHA-256 of its password (passwords by user name; each must be set). The chart's
// start step writes the same lines.
func RenderSentinelACL(engine string, passwords map[string]string) (string, error) {
	lines := []string{RenderLine(Default, DefaultOffRules)}
	for _, u := range SentinelUsers {
		pw := passwords[u.Name]
		if pw == "" || strings.ContainsAny(pw, "\r\n") {
			return "", fmt.Errorf("sentinel user %s: password is empty or holds a line break", u.Name)
		}
		rules, err := BuildRules([]string{HashPassword(pw)}, SentinelRules(u, engine))
		if err != nil {
			return "", fmt.Errorf("sentinel user %s: %w", u.Name, err)
		}
		lines = append(lines, RenderLine(u.Name, rules))
	}
	return strings.Join(lines, "\n") + "\n", nil
}
