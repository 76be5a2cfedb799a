package valkeytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TopologyConfig describes a replicated instance with its Sentinels.
type TopologyConfig struct {
	// Engine defaults to Default.
	Engine Engine
	// Replicas is the number of replicas besides the primary (default 2).
	Replicas int
	// Sentinels is the number of Sentinels (default 3; 0 = none).
	Sentinels int
	// MonitorName defaults to "vk".
	MonitorName string
	// Quorum defaults to Sentinels/2+1.
	Quorum int
	// DownAfterMs and FailoverTimeoutMs are Sentinel timings in milliseconds (defaults 1000 and 5000).
	DownAfterMs       int
	FailoverTimeoutMs int
	// NoACL runs the servers with the default user open and no system users.
	NoACL bool
	// ExtraServerLines are appended to every data node's config.
	ExtraServerLines []string
	// SkipMonitor starts the Sentinels without registering the monitor.
	SkipMonitor bool
	// TLS runs every node and Sentinel with TLS only (case S18).
	TLS *TLSFiles
	// FaultLinks runs every node and Sentinel under its own uid and sends every connection from a node to
	// another node (replication), from a Sentinel to a node and from a Sentinel to another Sentinel through a
	// Link (see fault.go), set up before the first such connection opens: Topology.Link and DelayReplication
	// switch faults on. Needs root and iptables (RequireFaults); not with TLS.
	FaultLinks bool
	// ACL, when set, is the ACL file every node loads instead of RenderSystemACL (e.g. the users.acl a chart
	// rendered); Passwords then must hold the plaintext of every system user it names.
	ACL       string
	Passwords map[string]string
	// SentinelAuth runs the Sentinels with the users charts/valkey-sentinel gives them (acl.SentinelUsers:
	// default off, _admin between the Sentinels as sentinel-user); SentinelOptions then authenticates as
	// _admin and SentinelOptionsAs as any of them (passwords in Topology.SentinelPasswords).
	SentinelAuth bool
	// SentinelAuthLines, with SentinelAuth, replace what SentinelAuthLines renders (e.g. the user lines and
	// sentinel-user/sentinel-pass that charts/valkey-sentinel's start step wrote); SentinelPasswords then
	// holds the plaintext of every Sentinel user they name.
	SentinelAuthLines []string
	SentinelPasswords map[string]string
}

// Topology is a running replicated instance: Nodes[0] starts as the primary.
type Topology struct {
	t         testing.TB
	Cfg       TopologyConfig
	Nodes     []*Proc
	Sentinels []*Proc
	// Passwords of the system users, by name.
	Passwords map[string]string
	// SentinelPasswords of the Sentinels' users (acl.SentinelUsers) with SentinelAuth, by name.
	SentinelPasswords map[string]string

	links map[[2]*Proc]*Link
}

// RandomPassword returns 32 random hex characters.
func RandomPassword(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random: %v", err)
	}
	return hex.EncodeToString(b)
}

// RenderSystemACL returns an ACL file with the default user off and every system user with its password hash,
// exactly the rules of acl.SystemUsers.
func RenderSystemACL(passwords map[string]string) string {
	lines := []string{acl.RenderLine(acl.Default, acl.DefaultOffRules)}
	for _, u := range acl.SystemUsers {
		rules, err := acl.BuildRules([]string{acl.HashPassword(passwords[u.Name])}, u.Rules())
		if err != nil {
			panic(err)
		}
		lines = append(lines, acl.RenderLine(u.Name, rules))
	}
	return strings.Join(lines, "\n") + "\n"
}

// StartTopology starts 1 primary + Replicas replicas (replicating by hostname, authenticating as _replication
// unless NoACL) and Sentinels Sentinels, registers the monitor by hostname with the _sentinel user, and waits
// until every replica's link is up and every Sentinel sees all replicas and peers.
func StartTopology(t testing.TB, cfg TopologyConfig) *Topology {
	t.Helper()
	if cfg.Engine.Name == "" {
		cfg.Engine = Default
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 2
	}
	if cfg.Replicas < 0 {
		cfg.Replicas = 0
	}
	if cfg.Sentinels == 0 {
		cfg.Sentinels = 3
	}
	if cfg.Sentinels < 0 {
		cfg.Sentinels = 0
	}
	if cfg.MonitorName == "" {
		cfg.MonitorName = "vk"
	}
	if cfg.Quorum == 0 {
		cfg.Quorum = cfg.Sentinels/2 + 1
	}
	if cfg.DownAfterMs == 0 {
		cfg.DownAfterMs = 1000
	}
	if cfg.FailoverTimeoutMs == 0 {
		cfg.FailoverTimeoutMs = 5000
	}
	Require(t, cfg.Engine)
	if cfg.FaultLinks {
		RequireFaults(t)
	}
	top := &Topology{t: t, Cfg: cfg, Passwords: map[string]string{}, links: map[[2]*Proc]*Link{}}
	for _, u := range acl.SystemUsers {
		top.Passwords[u.Name] = RandomPassword(t)
		if pw, ok := cfg.Passwords[u.Name]; ok {
			top.Passwords[u.Name] = pw
		}
	}
	aclText := RenderSystemACL(top.Passwords)
	if cfg.ACL != "" {
		aclText = cfg.ACL
	}
	var primaryAddr string
	for i := 0; i <= cfg.Replicas; i++ {
		lines := append([]string{}, cfg.ExtraServerLines...)
		uid := 0
		if cfg.FaultLinks {
			uid = AllocUID(t)
		}
		if !cfg.NoACL {
			aclPath := filepath.Join(t.TempDir(), "users.acl")
			writeFile(t, aclPath, aclText)
			if uid != 0 {
				GrantTo(t, uid, aclPath)
			}
			lines = append(lines, "aclfile "+aclPath, "masteruser "+acl.Replication,
				"masterauth "+top.Passwords[acl.Replication])
		}
		sc := ServerConfig{Lines: lines, TLS: cfg.TLS, UID: uid}
		var toPrimary *Link
		if i > 0 {
			sc.ReplicaOf = primaryAddr
			if uid != 0 { // the replica's first connection to the primary already goes through its link
				toPrimary = Redirect(t, uid, top.Nodes[0].Port)
			}
		}
		n := StartServer(t, cfg.Engine, sc)
		if i == 0 {
			primaryAddr = n.Addr()
		}
		if toPrimary != nil {
			top.links[[2]*Proc{n, top.Nodes[0]}] = toPrimary
		}
		top.Nodes = append(top.Nodes, n)
	}
	if cfg.FaultLinks {
		for _, from := range top.Nodes {
			for _, to := range top.Nodes {
				if from != to && top.links[[2]*Proc{from, to}] == nil {
					top.links[[2]*Proc{from, to}] = Redirect(t, from.UID, to.Port)
				}
			}
		}
	}
	top.WaitReplicationUp(20 * time.Second)
	var sentinelLines []string
	if cfg.SentinelAuth {
		top.SentinelPasswords = map[string]string{}
		for _, u := range acl.SentinelUsers {
			top.SentinelPasswords[u.Name] = RandomPassword(t)
			if pw, ok := cfg.SentinelPasswords[u.Name]; ok {
				top.SentinelPasswords[u.Name] = pw
			}
		}
		sentinelLines = SentinelAuthLines(t, cfg.Engine, top.SentinelPasswords)
		if cfg.SentinelAuthLines != nil {
			sentinelLines = cfg.SentinelAuthLines
		}
	}
	for i := 0; i < cfg.Sentinels; i++ {
		sc := SentinelConfig{TLS: cfg.TLS, Lines: sentinelLines}
		if cfg.FaultLinks {
			sc.UID = AllocUID(t)
		}
		s := StartSentinel(t, cfg.Engine, sc)
		if cfg.FaultLinks {
			for _, to := range top.Nodes {
				top.links[[2]*Proc{s, to}] = Redirect(t, s.UID, to.Port)
			}
		}
		top.Sentinels = append(top.Sentinels, s)
	}
	if cfg.FaultLinks { // Sentinels find each other only after the monitor is registered: links first
		for _, from := range top.Sentinels {
			for _, to := range top.Sentinels {
				if from != to {
					top.links[[2]*Proc{from, to}] = Redirect(t, from.UID, to.Port)
				}
			}
		}
	}
	t.Cleanup(top.logTailsOnFailure)
	if cfg.Sentinels > 0 && !cfg.SkipMonitor {
		ctx := context.Background()
		for _, s := range top.Sentinels {
			top.Register(ctx, s, top.Nodes[0])
		}
		top.WaitSentinelsConverged(30*time.Second, cfg.Replicas, cfg.Sentinels-1)
	}
	return top
}

// failureTailLines is how many of each process's last log lines a failed test prints.
const failureTailLines = 40

// logTailsOnFailure prints, when the test failed, the last failureTailLines lines of every node's and
// Sentinel's log (runs as a cleanup before the processes are killed).
func (top *Topology) logTailsOnFailure() {
	if !top.t.Failed() {
		return
	}
	for _, group := range []struct {
		kind  string
		procs []*Proc
	}{{"node", top.Nodes}, {"sentinel", top.Sentinels}} {
		for i, p := range group.procs {
			lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
			lines = lines[max(0, len(lines)-failureTailLines):]
			top.t.Logf("%s %d (port %d), last %d log lines:\n%s", group.kind, i, p.Port, len(lines), strings.Join(lines, "\n"))
		}
	}
}

// Link returns the Link that carries from's connections to to (a node or Sentinel to a node, a Sentinel to
// a Sentinel), or nil when the topology was started without FaultLinks.
func (top *Topology) Link(from, to *Proc) *Link { return top.links[[2]*Proc{from, to}] }

// DelayReplication sets the delay of every node-to-node link (see Link.Delay; 0 removes it), so whichever
// node is primary, its replicas trail it by d. It needs FaultLinks.
func (top *Topology) DelayReplication(d time.Duration) {
	top.t.Helper()
	if !top.Cfg.FaultLinks {
		top.t.Fatal("DelayReplication needs TopologyConfig.FaultLinks")
	}
	for k, l := range top.links {
		if !k[0].Sentinel {
			l.Delay(d)
		}
	}
}

// Register runs SENTINEL MONITOR on s for node (by hostname) and SENTINEL SET for the credentials and timings.
func (top *Topology) Register(ctx context.Context, s, node *Proc) {
	top.t.Helper()
	if err := top.TryRegister(ctx, s, node); err != nil {
		top.t.Fatalf("register: %v", err)
	}
}

// TryRegister is Register that returns the error (SENTINEL MONITOR's or SENTINEL SET's reply, for example
// "Duplicate master name" when the Sentinel already holds the monitor) instead of failing the test.
func (top *Topology) TryRegister(ctx context.Context, s, node *Proc) error {
	c := s.Client(top.SentinelOptions())
	cfg := top.Cfg
	if err := c.SentinelMonitor(ctx, cfg.MonitorName, Host, node.Port, cfg.Quorum); err != nil {
		return err
	}
	kv := []string{"down-after-milliseconds", strconv.Itoa(cfg.DownAfterMs),
		"failover-timeout", strconv.Itoa(cfg.FailoverTimeoutMs)}
	if !cfg.NoACL {
		kv = append(kv, "auth-user", acl.Sentinel, "auth-pass", top.Passwords[acl.Sentinel])
	}
	return c.SentinelSet(ctx, cfg.MonitorName, kv...)
}

// Options returns client options for a system user of the data nodes (no credentials under NoACL).
func (top *Topology) Options(user string) valkey.Options {
	o := top.tlsOptions()
	if !top.Cfg.NoACL {
		o.Username, o.Password = user, top.Passwords[user]
	}
	return o
}

func (top *Topology) tlsOptions() valkey.Options {
	if top.Cfg.TLS != nil {
		return valkey.Options{TLS: true, CAFile: top.Cfg.TLS.CA}
	}
	return valkey.Options{}
}

// SentinelOptions returns client options for a Sentinel: TLS when the topology uses it, and with SentinelAuth
// the _admin user (no credentials otherwise).
func (top *Topology) SentinelOptions() valkey.Options {
	return top.SentinelOptionsAs(acl.SentinelAdmin)
}

// SentinelOptionsAs returns client options for a Sentinel as user (one of acl.SentinelUsers); without
// SentinelAuth there are no users and the options carry no credentials.
func (top *Topology) SentinelOptionsAs(user string) valkey.Options {
	o := top.tlsOptions()
	if top.Cfg.SentinelAuth {
		o.Username, o.Password = user, top.SentinelPasswords[user]
	}
	return o
}

// SentinelAuthLines returns the sentinel.conf lines of Sentinel auth as charts/valkey-sentinel writes them:
// the users of acl.SentinelUsers for engine with the given passwords, and sentinel-user/sentinel-pass _admin
// so the Sentinels authenticate to each other.
func SentinelAuthLines(t testing.TB, e Engine, passwords map[string]string) []string {
	t.Helper()
	users, err := acl.RenderSentinelACL(e.Name, passwords)
	if err != nil {
		t.Fatalf("sentinel users: %v", err)
	}
	return append(strings.Split(strings.TrimSuffix(users, "\n"), "\n"),
		"sentinel sentinel-user "+acl.SentinelAdmin, "sentinel sentinel-pass "+passwords[acl.SentinelAdmin])
}

// NodeByPort returns the data node listening on port, or nil.
func (top *Topology) NodeByPort(port int) *Proc {
	for _, n := range top.Nodes {
		if n.Port == port {
			return n
		}
	}
	return nil
}

// WaitReplicationUp waits until every running node but one reports a replica link that is up, the other
// reports primary, and the primary lists as many replicas online (acknowledging) as there are linked replicas:
// a replica's link is up a moment before the primary counts it, and a primary with min-replicas-to-write
// refuses writes (NOREPLICAS) until it does.
func (top *Topology) WaitReplicationUp(timeout time.Duration) {
	top.t.Helper()
	Eventually(top.t, timeout, 100*time.Millisecond, "replication links up", func() error {
		var primary *valkey.Replication
		linked := 0
		for _, n := range top.Nodes {
			if !n.Running() {
				continue
			}
			r, err := top.replication(n)
			if err != nil {
				return err
			}
			switch {
			case r.Role == valkey.RolePrimary:
				if primary != nil {
					return fmt.Errorf("two primaries")
				}
				primary = &r
			case !r.LinkUp:
				return fmt.Errorf("%s: link to %s:%d down", n.Addr(), r.PrimaryHost, r.PrimaryPort)
			default:
				linked++
			}
		}
		if primary == nil {
			return fmt.Errorf("no primary")
		}
		online := 0
		for _, rep := range primary.Replicas {
			if rep.State == "online" {
				online++
			}
		}
		if online < linked {
			return fmt.Errorf("the primary lists %d of %d linked replicas online", online, linked)
		}
		return nil
	})
}

func (top *Topology) replication(n *Proc) (valkey.Replication, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := valkey.Dial(ctx, n.Addr(), top.Options(acl.Operator))
	if err != nil {
		return valkey.Replication{}, err
	}
	defer c.Close()
	return c.InfoReplication(ctx)
}

// Replication returns INFO replication of n as the _operator user.
func (top *Topology) Replication(n *Proc) (valkey.Replication, error) { return top.replication(n) }

// WaitSentinelsConverged waits until every running Sentinel knows the monitor with the given numbers of
// replicas and other Sentinels, and CKQUORUM is OK on each.
func (top *Topology) WaitSentinelsConverged(timeout time.Duration, replicas, peers int) {
	top.t.Helper()
	Eventually(top.t, timeout, 200*time.Millisecond, "sentinels converged", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		for _, s := range top.Sentinels {
			if !s.Running() {
				continue
			}
			c, err := valkey.Dial(ctx, s.Addr(), top.SentinelOptions())
			if err != nil {
				return err
			}
			m, found, err := c.SentinelMaster(ctx, top.Cfg.MonitorName)
			if err == nil && !found {
				err = fmt.Errorf("%s does not know %s", s.Addr(), top.Cfg.MonitorName)
			}
			if err == nil && (m.NumReplicas != int64(replicas) || m.NumOtherSentinels != int64(peers)) {
				err = fmt.Errorf("%s: %d replicas, %d peers", s.Addr(), m.NumReplicas, m.NumOtherSentinels)
			}
			if err == nil {
				var q valkey.Quorum
				q, err = c.SentinelCKQuorum(ctx, top.Cfg.MonitorName)
				if err == nil && !q.OK {
					err = fmt.Errorf("%s: %s", s.Addr(), q.Message)
				}
			}
			c.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// SentinelPrimary returns the primary port every running Sentinel agrees on, or an error.
func (top *Topology) SentinelPrimary() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	port := 0
	for _, s := range top.Sentinels {
		if !s.Running() {
			continue
		}
		c, err := valkey.Dial(ctx, s.Addr(), top.SentinelOptions())
		if err != nil {
			return 0, err
		}
		host, p, found, err := c.SentinelPrimaryAddr(ctx, top.Cfg.MonitorName)
		c.Close()
		if err != nil {
			return 0, err
		}
		if !found {
			return 0, fmt.Errorf("%s does not know the monitor", s.Addr())
		}
		if host != Host {
			return 0, fmt.Errorf("%s names host %q, want %q", s.Addr(), host, Host)
		}
		if port != 0 && p != port {
			return 0, fmt.Errorf("sentinels disagree: %d vs %d", port, p)
		}
		port = p
	}
	return port, nil
}

// SplitVotes counts the elections the Sentinels lost for want of votes (-failover-abort-not-elected in their
// logs): Sentinels that start an election at the same moment each vote for themselves, and a Sentinel tries
// the same primary again only twice failover-timeout after its last try (Sentinel docs, the failover-timeout
// option). A failover test may allow that one retry only when this count grew.
func (top *Topology) SplitVotes() int {
	n := 0
	for _, s := range top.Sentinels {
		n += strings.Count(s.Logs(), "-failover-abort-not-elected")
	}
	return n
}

// SplitVoteDelay is what one split vote adds at most to a failover under top's timings: the retry twice
// failover-timeout after the first try, up to 1 s of Sentinel's desync, and the retry's own failover-timeout,
// less the first try's failover-timeout a test's bound already holds; plus 2 s of slack.
func (top *Topology) SplitVoteDelay() time.Duration {
	return time.Duration(2*top.Cfg.FailoverTimeoutMs)*time.Millisecond + 2*time.Second
}

// WaitPrimaryMoved waits until every running Sentinel names a primary other than the node on port, and
// returns the new primary's port; it fails the test after timeout.
func (top *Topology) WaitPrimaryMoved(from int, timeout time.Duration) int {
	top.t.Helper()
	var p int
	Eventually(top.t, timeout, 100*time.Millisecond, "Sentinel names a new primary", func() error {
		var err error
		p, err = top.SentinelPrimary()
		if err == nil && p == from {
			err = fmt.Errorf("primary still on port %d", from)
		}
		return err
	})
	return p
}
