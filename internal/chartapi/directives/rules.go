package directives

// Rule narrows a Special or String directive to a syntax the charts can check. The generator tries every Good
// example against the binary (it must start) and, for Special directives, every Bad one (it must be refused),
// so a rule that drifts from the engine fails generation.
type Rule struct {
	Format string
	Hint   string
	Good   []string
	Bad    []string
}

const (
	memoryRE  = `[0-9]+([kKmMgG][bB]?|[bB])?`
	cpulistRE = `^[0-9]+(-[0-9]+(:[0-9]+)?)?(,[0-9]+(-[0-9]+(:[0-9]+)?)?)*$`
)

var cpulist = Rule{Format: cpulistRE, Hint: `a CPU list such as 0-3 or 0,2,4-7`, Good: []string{"0", "0-1,3"}}

// Rules by directive name. A Special directive without a rule is refused by the charts (they cannot check it).
var Rules = map[string]Rule{
	"save": {
		Format: `^([0-9]+ [0-9]+( [0-9]+ [0-9]+)*)?$`,
		Hint:   `pairs of "<seconds> <changes>" such as "3600 1 300 100", or "" for no snapshots`,
		Good:   []string{"3600 1 300 100", ""}, Bad: []string{"3600", "abc"},
	},
	"client-output-buffer-limit": {
		Format: `^(normal|replica|slave|pubsub) ` + memoryRE + ` ` + memoryRE + ` [0-9]+( (normal|replica|slave|pubsub) ` + memoryRE + ` ` + memoryRE + ` [0-9]+)*$`,
		Hint:   `groups of "<class> <hard limit> <soft limit> <soft seconds>" such as "pubsub 32mb 8mb 60" (class normal, replica or pubsub)`,
		Good:   []string{"pubsub 32mb 8mb 60", "normal 0 0 0 replica 256mb 64mb 60"}, Bad: []string{"pubsub 32mb", "public 1 1 1"},
	},
	"oom-score-adj-values": {
		Format: `^(-?(2000|1?[0-9]{1,3}))( -?(2000|1?[0-9]{1,3})){2}$`,
		Hint:   `three numbers from -2000 to 2000 (primary, replica, background child) such as "0 200 800"`,
		Good:   []string{"0 200 800", "-2000 0 2000"}, Bad: []string{"0 200", "0 200 3000"},
	},
	"latency-tracking-info-percentiles": {
		Format: `^((100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?)( (100(\.0+)?|[0-9]{1,2}(\.[0-9]+)?))*)?$`,
		Hint:   `percentiles from 0 to 100 separated by spaces, such as "50 99 99.9"`,
		Good:   []string{"50 99 99.9", ""}, Bad: []string{"101", "abc"},
	},
	// notify-keyspace-events: Format is filled from the binary's own list of event classes.
	"notify-keyspace-events": {
		Hint: `event class letters such as "Ex" (see the notify-keyspace-events documentation), or "" for none`,
		Good: []string{"Ex", ""}, Bad: []string{"Ex!"},
	},
	"locale-collate": {
		Format: `^(|C|POSIX|C\.UTF-8)$`,
		Hint:   `C, POSIX, C.UTF-8 or "" (the server images carry no other locale)`,
		Good:   []string{"C", "C.UTF-8", ""}, Bad: []string{"xx_XX.UTF-8"},
	},
	"proc-title-template": {
		Format: `^[^{}]*(\{(title|listen-addr|server-mode|port|tls-port|unixsocket|config-file)\}[^{}]*)*$`,
		Hint:   `text with the variables {title}, {listen-addr}, {server-mode}, {port}, {tls-port}, {unixsocket} or {config-file}`,
		Good:   []string{"{title} {listen-addr} {server-mode}"}, Bad: []string{"{title} {nope}"},
	},
	"tls-protocols": {
		Format: `^TLSv1\.[23]( TLSv1\.[23])?$`,
		Hint:   `TLSv1.2, TLSv1.3 or "TLSv1.2 TLSv1.3" (the controller, the probes and current clients refuse older versions)`,
		Good:   []string{"TLSv1.2 TLSv1.3", "TLSv1.3"},
	},
	"bind-source-addr": {
		Format: `^([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)?$`,
		Hint:   `an IPv4 or IPv6 address of the pod`,
		Good:   []string{"127.0.0.1"},
	},
	"server-cpulist":      cpulist,
	"server_cpulist":      cpulist,
	"bio-cpulist":         cpulist,
	"bio_cpulist":         cpulist,
	"aof-rewrite-cpulist": cpulist,
	"aof_rewrite_cpulist": cpulist,
	"bgsave-cpulist":      cpulist,
	"bgsave_cpulist":      cpulist,
	"ignore-warnings":     {Format: `^[A-Za-z0-9_-]*( [A-Za-z0-9_-]+)*$`, Hint: `warning names such as ARM64-COW-BUG`, Good: []string{"ARM64-COW-BUG"}},
	"availability-zone":   {Format: `^[A-Za-z0-9_.-]*$`, Hint: `a zone name such as eu-west-1a`, Good: []string{"eu-west-1a"}},
	"syslog-ident":        {Format: `^[A-Za-z0-9_.-]+$`, Hint: `a program name such as valkey`, Good: []string{"valkey"}},
	"unixsocketgroup":     {Format: `^[a-z_][a-z0-9_-]*$`, Hint: `a group name`},
}

// Paths are the directives whose value is a file or directory; both charts own every path in the pod.
var Paths = []string{"dir", "dbfilename", "appendfilename", "appenddirname", "logfile", "pidfile", "unixsocket",
	"aclfile", "cluster-config-file", "tls-cert-file", "tls-key-file", "tls-ca-cert-file", "tls-ca-cert-dir",
	"tls-client-cert-file", "tls-client-key-file", "tls-dh-params-file"}

// SentinelCandidates are the `sentinel <name>` statements tried on every Sentinel besides the names SENTINEL
// CONFIG GET * lists (the loader accepts some it does not list).
var SentinelCandidates = []string{"deny-scripts-reconfig", "myid", "current-epoch", "announce-ip", "announce-port",
	"announce-hostnames", "resolve-hostnames", "sentinel-user", "sentinel-pass"}

// SentinelSetCandidates are the SENTINEL SET keys tried on every Sentinel besides the fields SENTINEL MASTER
// returns.
var SentinelSetCandidates = []string{"down-after-milliseconds", "failover-timeout", "parallel-syncs", "quorum",
	"auth-pass", "auth-user", "notification-script", "client-reconfig-script", "rename-command",
	"master-reboot-down-after-period", "primary-reboot-down-after-period"}

// Defaults are the directives whose default value (CONFIG GET on a fresh server) the data records, because a
// chart rule compares them with each other (repl-timeout must exceed the replica ping period; shutdown-timeout
// and the preStop handoff must fit terminationGracePeriodSeconds). Only these:
// the test server sets port, dir, save and others itself, and maxclients follows the machine's file limit.
var Defaults = []string{"repl-timeout", "repl-ping-replica-period", "repl-ping-slave-period", "shutdown-timeout"}
