// Package prestop is the preStop hook of a data container (`valkey-sentinel-ctl prestop`): before
// Kubernetes stops a data pod that is the primary (delete, eviction, drain, rescheduling), it hands the
// primary role to a caught-up replica with the same code as the controller's planned roll
// (internal/podsteps/handoff), then returns so the shutdown goes on. It needs no Kubernetes API and works with every
// controller down.
//
// What it does, by the role of its own server:
//
//   - Primary of a monitored instance: handoff.Run with the Sentinels of the mounted sentinels file (last
//     first, as the controller orders them) after SENTINEL CKQUORUM passed on a majority of them (one
//     Sentinel's NOQUORUM is no veto). Another handoff holding the lock on this primary (the controller's planned roll), or a
//     failover that runs: wait, then look again, until the server is no longer primary or the deadline.
//   - Primary of an unmonitored instance: FAILOVER TO the online replica with the highest offset.
//   - Replica: return at once, unless a Sentinel runs a failover: then wait for its end (bounded).
//
// It never fails the shutdown: every way it cannot hand off safely (no replica that may be promoted, no
// quorum, Sentinels unreachable, replicas lagging) is logged with its reason and the hook returns. The
// server's own shutdown then still waits for lagging replicas (shutdown-timeout), so acknowledged writes
// are not lost by the stop itself. Every step is bounded by Config.Timeout, which the chart keeps below
// terminationGracePeriodSeconds; unreachable Sentinels cost at most their dial timeouts (a namespace being
// deleted must not wait out the grace period of every pod).
//
// Credentials: the node-local acl.PreStop user (password written by the bootstrap into the runtime
// directory) on its own server, _probe to read the replicas, the quorum's acl.SentinelInstance towards the
// Sentinels (as the bootstrap).
package prestop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/handoff"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Config is what the hook of one node needs; the chart passes the paths as flags.
type Config struct {
	Instance  spec.Instance
	NodeIndex int
	// SentinelsFile is the mounted sentinels.json (absent: not monitored, or the quorum is not linked).
	SentinelsFile string
	// SecretsDir holds the _probe password (reads of the replicas).
	SecretsDir string
	// PasswordFile holds the acl.PreStop password the bootstrap wrote.
	PasswordFile string
	// ServerConfigFile is the server's runtime config (the bootstrap's --config-out): its
	// repl-ping-replica-period is what handoff.Config.HoldPings restores (Valkey's default, 10, when the
	// file or the directive is absent).
	ServerConfigFile string
	// Timeout bounds the whole hook (default 20 s).
	Timeout time.Duration
	// DialTimeout bounds each connection and command to a node or Sentinel (default 1 s).
	DialTimeout time.Duration
	// TLSCAFile verifies TLS servers (default valkey.DefaultCAFile).
	TLSCAFile string
	// Poll is the interval of the waits (default 100 ms).
	Poll time.Duration
	// PauseBudget and CatchUpTimeout are passed to handoff.Config (0: its defaults).
	PauseBudget    time.Duration
	CatchUpTimeout time.Duration
	// SentinelAuthDir holds file "password", the quorum's _instance password (as for the bootstrap), sent
	// only to a sentinels.json that spec.SentinelInfo.CheckCanonical accepts with ClusterDomain.
	SentinelAuthDir string
	ClusterDomain   string
	// FailoverWait is handoff.Config.FailoverWait (default 5 s, not the failover-timeout the controller
	// waits): after the pause budget ran out the old primary is already a replica and Sentinel finishes the
	// failover on its own; the longer wait would only hold the stop of a pod whose Sentinels are going away
	// too (a namespace being deleted).
	FailoverWait time.Duration
	Log          *slog.Logger
}

// Action is what the hook did.
type Action string

// The actions.
const (
	// HandedOff: the primary role moved off this node (by this hook or by a handoff or failover it waited for).
	HandedOff Action = "HandedOff"
	// NothingToDo: this node is a replica and no failover runs.
	NothingToDo Action = "NothingToDo"
	// WaitedForFailover: this node is a replica and the hook waited for a running failover to end.
	WaitedForFailover Action = "WaitedForFailover"
	// Skipped: no handoff; Reason says why. The shutdown goes on (the server waits for lagging replicas).
	Skipped Action = "Skipped"
)

// Outcome is the hook's result, logged by the command.
type Outcome struct {
	Action Action
	// Reason is a handoff.Reason or one of the hook's own ("NoQuorum", "NoSentinels", "OwnServer").
	Reason string
	Detail string
	Result handoff.Result
	// Took is how long the hook ran.
	Took time.Duration
}

// The parts of Bound.
const (
	// ReachSentinels bounds finding a Sentinel that answers when they all do (CKQUORUM until a majority
	// confirmed it, then SENTINEL MASTER, INFO and CKQUORUM on the first usable one; each dial and command is
	// bounded by Config.DialTimeout, 1 s, so a stopped Sentinel costs about 1 s more).
	ReachSentinels = 2 * time.Second
	// DefaultFailoverWait is Config.FailoverWait's default.
	DefaultFailoverWait = 5 * time.Second
	// FinishMargin covers demoting the old primary and lifting the pause.
	FinishMargin = time.Second
	// UnmonitoredBound is the time the hook needs with failover mode None: FAILOVER TO with at least 2 s for
	// the replica to catch up, and 3 s to resume.
	UnmonitoredBound = 5 * time.Second
)

// Bound is how long the hook needs at most to hand a primary off when every part answers: with a monitor
// whose down-after-milliseconds is downAfter, ReachSentinels + the pause budget (half of downAfter, the
// handoff's default) + DefaultFailoverWait (the failover's end, once the budget ran out) + FinishMargin;
// unmonitored (downAfter 0), UnmonitoredBound. charts/valkey's valkey.stop helper computes the same (rounded
// up to whole seconds) and refuses a terminationGracePeriodSeconds that leaves the hook less.
func Bound(downAfter time.Duration) time.Duration {
	if downAfter <= 0 {
		return UnmonitoredBound
	}
	return ReachSentinels + downAfter/2 + DefaultFailoverWait + FinishMargin
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 20 * time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = time.Second
	}
	if c.TLSCAFile == "" {
		c.TLSCAFile = valkey.DefaultCAFile
	}
	if c.Poll <= 0 {
		c.Poll = 100 * time.Millisecond
	}
	if c.FailoverWait <= 0 {
		c.FailoverWait = DefaultFailoverWait
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Run is the hook (see the package doc). It never returns an error: every failure is an Outcome with
// Action Skipped.
func Run(ctx context.Context, cfg Config) Outcome {
	cfg = cfg.withDefaults()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	o := run(ctx, cfg)
	o.Took = time.Since(start)
	return o
}

// defaultPingPeriod is Valkey's repl-ping-replica-period default, in seconds.
const defaultPingPeriod = 10

// pingPeriod returns the repl-ping-replica-period (or its old name repl-ping-slave-period) that the server
// config file path sets, the last one winning as in the server, or defaultPingPeriod when the file cannot
// be read or sets none (a value that is not a positive integer is skipped: the server would refuse it).
func pingPeriod(path string) int {
	period := defaultPingPeriod
	raw, err := os.ReadFile(path)
	if path == "" || err != nil {
		return period
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || (!strings.EqualFold(f[0], "repl-ping-replica-period") && !strings.EqualFold(f[0], "repl-ping-slave-period")) {
			continue
		}
		if n, err := strconv.Atoi(strings.Trim(f[1], `"'`)); err == nil && n > 0 {
			period = n
		}
	}
	return period
}

func skipped(reason, format string, args ...any) Outcome {
	return Outcome{Action: Skipped, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

func run(ctx context.Context, cfg Config) Outcome {
	in := cfg.Instance
	if cfg.NodeIndex < 0 || cfg.NodeIndex >= len(in.Nodes) {
		return skipped("OwnServer", "node index %d: the descriptor has %d nodes", cfg.NodeIndex, len(in.Nodes))
	}
	self := in.Addr(in.Nodes[cfg.NodeIndex])
	pw, err := os.ReadFile(cfg.PasswordFile)
	if err != nil {
		return skipped("OwnServer", "read the %s password: %v", acl.PreStop, err)
	}
	nodeOpts := valkey.Options{Username: acl.PreStop, Password: strings.TrimSpace(string(pw)),
		DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.DialTimeout}.WithTLS(in.TLS.Enabled, cfg.TLSCAFile)
	probeOpts := valkey.Options{Username: acl.Probe, Password: readFile(filepath.Join(cfg.SecretsDir, acl.Probe)), RESP2: true,
		DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.DialTimeout}.WithTLS(in.TLS.Enabled, cfg.TLSCAFile)
	repl, err := ownReplication(ctx, self, nodeOpts)
	if err != nil {
		return skipped(string(handoff.ReasonUnreachable), "own server %s: %v", self, err)
	}
	var si *spec.SentinelInfo
	if in.Monitored() {
		if s, err := readSentinelInfo(cfg.SentinelsFile); err == nil && s.MonitorName == in.MonitorName && len(s.Addrs()) > 0 {
			si = &s
		}
	}
	sentOpts := valkey.Options{DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.DialTimeout}
	if si != nil {
		sentOpts = sentOpts.WithTLS(si.TLS, cfg.TLSCAFile)
		if pw := readFile(filepath.Join(cfg.SentinelAuthDir, "password")); cfg.SentinelAuthDir != "" && pw != "" {
			// the scope of a copy in F-quorum-auth (a quorum of another namespace) is in its namespace and
			// release files (spec.CredentialScope)
			scope := spec.ScopeOf(func(k string) string { return readFile(filepath.Join(cfg.SentinelAuthDir, k)) })
			if err := si.CheckCanonicalFor(in, scope, cfg.ClusterDomain); err != nil {
				cfg.Log.Warn("prestop: no Sentinel credentials sent", "err", err)
			} else {
				sentOpts.Username, sentOpts.Password = acl.SentinelInstance, pw
			}
		}
	}
	if repl.Role != valkey.RolePrimary {
		if si == nil {
			return Outcome{Action: NothingToDo, Detail: fmt.Sprintf("%s is a %s", self, repl.Role)}
		}
		return waitReplica(ctx, cfg, si, sentOpts, self)
	}
	hc := handoff.Config{Primary: self, NodeOptions: nodeOpts, ReplicaOptions: probeOpts, Nodes: in.NodeAddrs(), PauseBudget: cfg.PauseBudget,
		CatchUpTimeout: cfg.CatchUpTimeout, FailoverWait: cfg.FailoverWait, Log: cfg.Log, HoldPings: pingPeriod(cfg.ServerConfigFile)}
	if !in.Monitored() {
		target, ok := bestReplica(repl)
		if !ok {
			return skipped(string(handoff.ReasonNoGoodReplica), "unmonitored primary %s has no online replica", self)
		}
		hc.Target = target
		if dl, ok := ctx.Deadline(); ok && (hc.PauseBudget <= 0 || hc.PauseBudget > time.Until(dl)-3*time.Second) {
			hc.PauseBudget = max(time.Until(dl)-3*time.Second, time.Second)
		}
		return outcome(handoff.Run(ctx, hc))
	}
	if si == nil {
		return skipped("NoSentinels", "monitored instance %s but no sentinels file for monitor %s at %s: nothing to ask for a failover", in.Name, in.MonitorName, cfg.SentinelsFile)
	}
	hc.MonitorName, hc.SentinelOptions = in.MonitorName, sentOpts
	hc.Sentinels = reversed(si.Addrs())
	if why := checkQuorum(ctx, hc.Sentinels, in.MonitorName, sentOpts); why != "" {
		return skipped("NoQuorum", "%s", why)
	}
	waitedForView, waitedForOther := false, false
	for {
		res, err := handoff.Run(ctx, hc)
		r := handoff.ReasonOf(err)
		if r == handoff.ReasonNoGoodReplica {
			// a replica that just completed its first sync (or whose priority was just restored) is
			// promotable before the Sentinels see it: they read a replica's INFO every 10 s
			if who := promotableReplica(ctx, repl, probeOpts); who != "" && roomToWait(ctx, in) {
				if !waitedForView {
					cfg.Log.Info("prestop: the Sentinels see no replica they may promote, but one reports replica-priority > 0 "+
						"with its link up (Sentinel reads a replica's INFO every 10 s); waiting for their view", "replica", who, "detail", err.Error())
					waitedForView = true
				}
				if sleep(ctx, 5*cfg.Poll) {
					continue
				}
			}
		}
		switch {
		case err == nil:
			return Outcome{Action: HandedOff, Result: res, Detail: "handed off to " + res.NewPrimary}
		case r == handoff.ReasonNotPrimary:
			// another handoff or a failover moved the role meanwhile (or this node never was Sentinel's primary)
			return Outcome{Action: HandedOff, Reason: string(r), Detail: err.Error()}
		case r == handoff.ReasonFailoverInFlight && res.NewPrimary != "":
			return Outcome{Action: HandedOff, Reason: string(r), Result: res, Detail: err.Error()}
		case r == handoff.ReasonFailoverInFlight:
			if !waitedForOther {
				cfg.Log.Info("prestop: another handoff or a failover runs; waiting, then looking again", "detail", err.Error())
				waitedForOther = true
			}
			if !sleep(ctx, cfg.Poll) {
				return skipped(string(r), "deadline reached while another handoff or failover ran: %v", err)
			}
		default:
			return skipped(string(r), "%v", err)
		}
	}
}

func outcome(res handoff.Result, err error) Outcome {
	if err != nil {
		return skipped(string(handoff.ReasonOf(err)), "%v", err)
	}
	return Outcome{Action: HandedOff, Result: res, Detail: "handed off to " + res.NewPrimary}
}

func ownReplication(ctx context.Context, addr string, o valkey.Options) (valkey.Replication, error) {
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return valkey.Replication{}, err
	}
	defer c.Close()
	return c.InfoReplication(ctx)
}

// bestReplica returns the online replica with the highest offset the primary reports.
func bestReplica(r valkey.Replication) (string, bool) {
	best, found := valkey.ConnectedReplica{}, false
	for _, c := range r.Replicas {
		if c.State == "online" && (!found || c.Offset > best.Offset) {
			best, found = c, true
		}
	}
	if !found {
		return "", false
	}
	return fmt.Sprintf("%s:%d", best.Host, best.Port), true
}

// promotableReplica returns a replica of the primary's INFO that itself reports its link up and a
// replica-priority above 0 (read as _probe), or "".
func promotableReplica(ctx context.Context, primary valkey.Replication, o valkey.Options) string {
	for _, c := range primary.Replicas {
		if c.State != "online" {
			continue
		}
		addr := fmt.Sprintf("%s:%d", c.Host, c.Port)
		r, err := ownReplication(ctx, addr, o)
		if err == nil && r.Role == valkey.RoleReplica && r.LinkUp && r.ReplicaPriority > 0 {
			return addr
		}
	}
	return ""
}

// roomToWait reports whether the hook's deadline still leaves room for the part of a handoff that must
// not be cut, after one more wait: reaching a Sentinel, the pause budget (half of the instance's
// down-after-milliseconds) and the demotion. The wait for the failover's end after that may be cut by the
// deadline (the old primary is a replica by then; handoff.Run never lifts its pause early).
func roomToWait(ctx context.Context, in spec.Instance) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	downAfter := 30 * time.Second // Sentinel's default
	if ms, err := strconv.Atoi(in.SentinelConfig["down-after-milliseconds"]); err == nil && ms > 0 {
		downAfter = time.Duration(ms) * time.Millisecond
	}
	return time.Until(dl) > ReachSentinels+downAfter/2+FinishMargin+time.Second
}

// checkQuorum asks the Sentinels in order for SENTINEL CKQUORUM until a majority of them (len(addrs)/2+1)
// said OK. One Sentinel's NOQUORUM (cut off from its peers, replaced a moment ago and knowing none yet) or
// unknown monitor is no veto while a majority says yes: the handoff then asks only Sentinels whose own
// CKQUORUM passes (handoff.Run). It returns why there is no majority, or "".
func checkQuorum(ctx context.Context, addrs []string, monitor string, o valkey.Options) string {
	var why []string
	ok, need := 0, len(addrs)/2+1
	for _, a := range addrs {
		c, err := valkey.Dial(ctx, a, o)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		q, err := c.SentinelCKQuorum(ctx, monitor)
		c.Close()
		switch {
		case err != nil:
			why = append(why, err.Error())
		case !q.OK:
			why = append(why, fmt.Sprintf("Sentinel %s: %s", a, q.Message))
		default:
			ok++
		}
		if ok >= need {
			return ""
		}
	}
	return fmt.Sprintf("%d of %d Sentinels confirm the quorum, %d needed: %s", ok, len(addrs), need, strings.Join(why, "; "))
}

// waitReplica waits, bounded by ctx, while any Sentinel that answers runs a failover of the monitor.
func waitReplica(ctx context.Context, cfg Config, si *spec.SentinelInfo, o valkey.Options, self string) Outcome {
	waited := false
	for {
		running := ""
		for _, a := range si.Addrs() {
			c, err := valkey.Dial(ctx, a, o)
			if err != nil {
				continue
			}
			m, found, err := c.SentinelMaster(ctx, cfg.Instance.MonitorName)
			c.Close()
			if err == nil && found && m.FailoverInProgress() {
				running = fmt.Sprintf("Sentinel %s runs a failover (%s)", a, m.FailoverState)
				break
			}
		}
		if running == "" {
			if waited {
				return Outcome{Action: WaitedForFailover, Detail: self + " is a replica; the failover ended"}
			}
			return Outcome{Action: NothingToDo, Detail: self + " is a replica and no failover runs"}
		}
		if !waited {
			cfg.Log.Info("prestop: replica waits for the running failover to end", "detail", running)
		}
		waited = true
		if !sleep(ctx, cfg.Poll) {
			return skipped(string(handoff.ReasonFailoverInFlight), "deadline reached while %s", running)
		}
	}
}

func readSentinelInfo(path string) (spec.SentinelInfo, error) {
	if path == "" {
		return spec.SentinelInfo{}, errors.New("no sentinels file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return spec.SentinelInfo{}, err
	}
	return spec.ParseSentinelInfo(b)
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// reversed returns the Sentinels last first: the order of the controller's planned roll
// (plan.FailoverOrder: most clients subscribe to the first Sentinel, and the asked one, the
// failover's leader, publishes +switch-master last).
func reversed(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for i := len(addrs) - 1; i >= 0; i-- {
		out = append(out, addrs[i])
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
