package bootstrap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/firstsync"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Config is what the bootstrap of one node needs; the chart passes the paths as flags (docs/contract.md).
type Config struct {
	Instance      spec.Instance
	NodeIndex     int
	SentinelsFile string
	SecretsDir    string
	DataDir       string
	// ConfigTemplate is the server config from the ConfigMap; ConfigOut is the writable copy the server runs.
	ConfigTemplate string
	ConfigOut      string
	// Retry is the pause between observations while waiting (default 2 s); WaitLimit bounds the whole wait
	// (default 10 min) after which Run returns an error and the container restarts.
	Retry     time.Duration
	WaitLimit time.Duration
	// FailoverRetry is the pause before asking Sentinel for a failover again (default 15 s); it doubles after
	// each refused or failed request, up to 8 times its value.
	FailoverRetry time.Duration
	// FailoverGrace is how long the Sentinels must have seen this empty node down, with no failover running,
	// before it asks for one (default: the monitor's down-after-milliseconds; see holdFailoverRequest).
	FailoverGrace time.Duration
	// DialTimeout bounds each connection to a peer or Sentinel (default 1 s).
	DialTimeout time.Duration
	// TLSCAFile verifies TLS-only peers and Sentinels (default valkey.DefaultCAFile).
	TLSCAFile string
	// SentinelAuthDir holds file "password", the quorum's _instance password (Secret S-auth-instance, mounted
	// optional: absent while the quorum has not generated it, or with Sentinel auth off). It is read at every
	// observation and sent only to a sentinels.json that names the descriptor's sentinelRelease (and, with
	// ClusterDomain, that quorum's pods: spec.SentinelInfo.CheckCanonical); otherwise the Sentinels are
	// asked nothing and count as not answering.
	SentinelAuthDir string
	// ClusterDomain, when set, is the domain of the canonical Sentinel hosts (see SentinelAuthDir).
	ClusterDomain string
	// GuardPassword, when set, is the password of the node-local acl.FirstSync user, which WriteConfig adds
	// to the runtime ACL file of a guarded replica (Decision.Guard) for its first-sync guard. The caller
	// generates it and hands it to the guard only; it is never written to a file.
	GuardPassword string
	// Migrate, when set, makes this a migrating instance (planMigrate): node 0 follows that source.
	Migrate *MigrateFrom
}

// sentinelOptions are the options towards the quorum's Sentinels: the _instance user when its password is
// mounted (docs/contract.md), none otherwise.
func (cfg Config) sentinelOptions(tls bool) valkey.Options {
	o := valkey.Options{DialTimeout: cfg.DialTimeout}.WithTLS(tls, cfg.TLSCAFile)
	if pw := readSecret(cfg.SentinelAuthDir, "password"); pw != "" {
		o.Username, o.Password = acl.SentinelInstance, pw
	}
	return o
}

// credentialScope is where the mounted quorum credential may go: the namespace and release files of a copy
// in F-quorum-auth (a quorum of another namespace wrote them), the instance's own namespace otherwise
// (spec.CredentialScope).
func (cfg Config) credentialScope() spec.CredentialScope {
	return spec.ScopeOf(func(k string) string { return readSecret(cfg.SentinelAuthDir, k) })
}

// Run observes, plans and acts until the node's role is decided, then writes ConfigOut. It returns the
// decision. It never decides StartPrimary on its own while a peer holds data, nor after it asked Sentinel for a
// failover. While it waits it logs the reason whenever it changes (and every 30 s); it gives up after
// WaitLimit with an error naming the last reason, and the container restarts (the chart's startupProbe allows
// the same 10 minutes).
//
// Failover requests back off: after a refusal (NOGOODSLAVE: Sentinel can promote none of the replicas it
// lists, because each has replica-priority 0, is down or is disconnected) or an error, the next request waits
// twice as long as the last, from FailoverRetry up to 8 times that; the node meanwhile stays down, never
// primary.
func Run(ctx context.Context, cfg Config, log *slog.Logger) (Decision, error) {
	if cfg.Retry <= 0 {
		cfg.Retry = 2 * time.Second
	}
	if cfg.WaitLimit <= 0 {
		cfg.WaitLimit = 10 * time.Minute
	}
	if cfg.FailoverRetry <= 0 {
		cfg.FailoverRetry = 15 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.TLSCAFile == "" {
		cfg.TLSCAFile = valkey.DefaultCAFile
	}
	if cfg.NodeIndex < 0 || cfg.NodeIndex >= len(cfg.Instance.Nodes) {
		return Decision{}, fmt.Errorf("node index %d: the descriptor has %d nodes", cfg.NodeIndex, len(cfg.Instance.Nodes))
	}
	deadline := time.Now().Add(cfg.WaitLimit)
	if cfg.Instance.Persistence {
		local := ReadLocal(cfg)
		log.Info("persisted dataset", "local", local.String(), "engine", local.Engine, "engine_version", local.EngineVersion)
		if err := CheckEngine(cfg.Instance.Engine, local); err != nil {
			return Decision{}, err
		}
		if bs := serveBoot(cfg, local, log); bs != nil {
			defer bs.Close()
		}
	}
	var (
		failoverRequested time.Time // last accepted request
		nextRequest       time.Time // earliest next request
		backoff           = cfg.FailoverRetry
		lastErr           error
		lastLogged        Decision
		loggedAt          time.Time
	)
	for attempt := 1; ; attempt++ {
		obs := Observe(ctx, cfg)
		obs.FailoverRequested = !failoverRequested.IsZero()
		obs.FailoverGrace = cfg.FailoverGrace
		d := PlanBoot(obs)
		if d != lastLogged || time.Since(loggedAt) >= 30*time.Second || d.Kind == StartPrimary || d.Kind == StartReplica {
			log.Info("bootstrap decision", "attempt", attempt, "decision", d.Kind, "primary", d.PrimaryHost,
				"reason", d.Reason, "gives_up_in", time.Until(deadline).Round(time.Second).String())
			lastLogged, loggedAt = d, time.Now()
		}
		switch d.Kind {
		case StartPrimary, StartReplica:
			if err := WriteConfig(cfg, d); err != nil {
				return d, err
			}
			return d, nil
		case RequestFailover:
			if time.Now().Before(nextRequest) {
				break
			}
			err := requestFailover(ctx, cfg, obs)
			switch {
			case err == nil:
				// one request per window: Sentinel refuses a second while one runs (INPROG)
				failoverRequested, nextRequest, backoff, lastErr = time.Now(), time.Now().Add(cfg.FailoverRetry), cfg.FailoverRetry, nil
				log.Info("asked Sentinel to fail over away from this empty node; it will never start as primary on its own now")
			case errors.Is(err, ErrNoGoodReplica):
				lastErr, nextRequest = err, time.Now().Add(backoff)
				log.Warn("Sentinel can promote none of its replicas (NOGOODSLAVE): each has replica-priority 0, is down "+
					"or is disconnected. This node stays down (never an empty primary that would wipe them); give a "+
					"replica a non-zero replica-priority or bring one back", "replicas", describeReplicas(obs),
					"next_request_in", backoff.String(), "error", err)
				backoff = min(2*backoff, 8*cfg.FailoverRetry)
			default:
				lastErr, nextRequest = err, time.Now().Add(backoff)
				log.Warn("SENTINEL FAILOVER request failed; this node stays down and asks again", "next_request_in", backoff.String(), "error", err)
				backoff = min(2*backoff, 8*cfg.FailoverRetry)
			}
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("no role decided within %s: last decision %s (%s)", cfg.WaitLimit, d.Kind, d.Reason)
			if lastErr != nil {
				err = fmt.Errorf("%w; last failover request: %w", err, lastErr)
			}
			return d, err
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(cfg.Retry):
		}
	}
}

// describeReplicas lists the replicas the Sentinels know as "host:port priority=N flags=a,b" for the log.
func describeReplicas(o Observation) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range o.Sentinels {
		for _, r := range a.Replicas {
			s := fmt.Sprintf("%s:%d priority=%d flags=%s", r.Host, r.Port, r.Priority, strings.Join(r.Flags, ","))
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Observe asks every Sentinel named in the sentinels file (if mounted) and every peer, in parallel. Failures
// are recorded per target, never fatal.
func Observe(ctx context.Context, cfg Config) Observation {
	in := cfg.Instance
	self := in.Nodes[cfg.NodeIndex]
	o := Observation{Self: self, Port: in.Port, Persistence: in.Persistence, Local: ReadLocal(cfg)}
	probePW := readSecret(cfg.SecretsDir, acl.Probe)
	var mu sync.Mutex
	var wg sync.WaitGroup
	if si, err := readSentinelInfo(cfg.SentinelsFile); err == nil && si.MonitorName == in.MonitorName {
		so := cfg.sentinelOptions(si.TLS)
		so.CommandTimeout = cfg.DialTimeout
		refused := si.CheckCanonicalFor(in, cfg.credentialScope(), cfg.ClusterDomain)
		for _, addr := range si.Addrs() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := SentinelAnswer{Addr: addr, Err: refused}
				if refused == nil || so.Password == "" {
					a = askSentinel(ctx, addr, in.MonitorName, so)
				}
				a.TLS = si.TLS
				mu.Lock()
				o.Sentinels = append(o.Sentinels, a)
				mu.Unlock()
			}()
		}
	}
	for _, n := range in.Nodes {
		if n.Index == self.Index {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := askPeer(ctx, in.Addr(n), valkey.Options{Username: acl.Probe, Password: probePW, RESP2: true,
				DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.DialTimeout}.WithTLS(in.TLS.Enabled, cfg.TLSCAFile))
			p.Node = n
			mu.Lock()
			o.Peers = append(o.Peers, p)
			mu.Unlock()
		}()
	}
	if cfg.Migrate != nil {
		o.Migrating = true
		o.Source = SourceView{Host: cfg.Migrate.Host, Port: cfg.Migrate.Port}
		if cfg.NodeIndex == 0 {
			o.Source = askSource(ctx, *cfg.Migrate, valkey.Options{Username: cfg.Migrate.User,
				Password: readFile(cfg.Migrate.PasswordFile), RESP2: true, DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.DialTimeout})
		}
	}
	wg.Wait()
	return o
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

func readSecret(dir, name string) string {
	if dir == "" {
		return ""
	}
	return readFile(filepath.Join(dir, name))
}

// readFile returns the trimmed content of a password file, "" when it cannot be read.
func readFile(path string) string {
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func askSentinel(ctx context.Context, addr, monitor string, o valkey.Options) SentinelAnswer {
	a := SentinelAnswer{Addr: addr}
	ctx, cancel := context.WithTimeout(ctx, 2*o.DialTimeout)
	defer cancel()
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		var dns *net.DNSError
		a.Err, a.Absent = err, errors.As(err, &dns) && dns.IsNotFound
		return a
	}
	defer c.Close()
	a.Host, a.Port, a.Found, a.Err = c.SentinelPrimaryAddr(ctx, monitor)
	if a.Err == nil && a.Found {
		a.Replicas, a.ReplicasErr = c.SentinelReplicas(ctx, monitor)
		var found bool
		a.Monitor, found, a.MonitorErr = c.SentinelMaster(ctx, monitor)
		if a.MonitorErr == nil && !found {
			a.MonitorErr = fmt.Errorf("SENTINEL MASTER %s: no such monitor", monitor)
		}
	}
	return a
}

func askPeer(ctx context.Context, addr string, o valkey.Options) Peer {
	var p Peer
	ctx, cancel := context.WithTimeout(ctx, 3*o.DialTimeout)
	defer cancel()
	c, err := valkey.Dial(ctx, addr, o)
	if err != nil {
		return p
	}
	defer c.Close()
	f, err := c.Info(ctx, "replication")
	if err != nil {
		return p
	}
	if persisted, ok := ParseBootInfo(f); ok {
		p.Booting, p.Persisted = true, persisted
		return p
	}
	r, err := valkey.ParseReplication(f)
	if err != nil {
		return p
	}
	keys, err := c.Keys(ctx)
	if err != nil {
		return p
	}
	p.Reachable, p.Repl, p.Keys = true, r, keys
	return p
}

// ReadLocal returns what this node's data directory holds, judged with the persistence settings of the
// config template (ParseServerFiles, ReadPersisted). Without persistence it is empty. A directory or template
// that cannot be read counts as data, with the error in Source: never risk what cannot be seen.
func ReadLocal(cfg Config) Persisted {
	if !cfg.Instance.Persistence || cfg.DataDir == "" {
		return Persisted{Source: "no persistence"}
	}
	tpl, err := os.ReadFile(cfg.ConfigTemplate)
	if err != nil {
		return Persisted{HasData: true, Source: fmt.Sprintf("config template unreadable: %v", err)}
	}
	p, err := ReadPersisted(cfg.DataDir, ParseServerFiles(string(tpl)))
	if err != nil {
		p.HasData, p.Source = true, fmt.Sprintf("%s unreadable: %v", p.Source, err)
	}
	return p
}

// serveBoot starts a BootServer on the node's port (TLS when the instance uses it) so booting peers can read
// what this node's disk holds. It returns nil, after logging why, when the port cannot be served.
func serveBoot(cfg Config, local Persisted, log *slog.Logger) *BootServer {
	in := cfg.Instance
	self := in.Nodes[cfg.NodeIndex]
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(in.PortOf(self))))
	if err != nil {
		log.Warn("cannot serve the persisted position to booting peers; they will wait for this node", "error", err)
		return nil
	}
	if in.TLS.Enabled {
		tpl, _ := os.ReadFile(cfg.ConfigTemplate)
		files := ParseServerFiles(string(tpl))
		cert, err := tls.LoadX509KeyPair(files.TLSCertFile, files.TLSKeyFile)
		if err != nil {
			ln.Close()
			log.Warn("cannot serve the persisted position over TLS; booting peers will wait for this node", "error", err)
			return nil
		}
		ln = tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
	}
	return ServeBoot(ln, readSecret(cfg.SecretsDir, acl.Probe), local)
}

// ErrNoGoodReplica is returned (wrapped) when SENTINEL FAILOVER answers NOGOODSLAVE: the Sentinel knows no
// replica it may promote (Sentinel docs, "Replica selection and priority": replica-priority 0, down,
// disconnected, or its link to the primary down too long).
var ErrNoGoodReplica = errors.New("no replica Sentinel can promote (NOGOODSLAVE)")

// requestFailover asks the Sentinels that know the monitor, one at a time, for SENTINEL FAILOVER. A Sentinel
// that answers ends the round: accepted, INPROG (a failover already runs) or NOGOODSLAVE (every Sentinel sees
// the same replicas; asking another one only risks a second failover in a new epoch). Only a Sentinel that
// could not be reached makes it ask the next one.
func requestFailover(ctx context.Context, cfg Config, obs Observation) error {
	var errs []error
	for _, a := range obs.Sentinels {
		if a.Err != nil || !a.Found {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 3*cfg.DialTimeout)
		c, err := valkey.Dial(ctx, a.Addr, cfg.sentinelOptions(a.TLS))
		if err != nil {
			cancel()
			errs = append(errs, err)
			continue
		}
		err = c.SentinelFailover(ctx, cfg.Instance.MonitorName)
		c.Close()
		cancel()
		switch {
		case err == nil || strings.Contains(err.Error(), "INPROG"):
			return nil
		case strings.Contains(err.Error(), "NOGOODSLAVE"):
			return fmt.Errorf("%w: %w", ErrNoGoodReplica, err)
		}
		return err
	}
	if len(errs) == 0 {
		return errors.New("no Sentinel to ask")
	}
	return errors.Join(errs...)
}

// RenderConfig returns the server config: the template followed by the node's own announce address, the
// replication credentials (every node has them, whatever its first role: case S16) and, for a replica, the
// replicaof line.
func RenderConfig(template string, in spec.Instance, self spec.Node, replicationPassword string, d Decision) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(template, "\n"))
	b.WriteString("\n\n# --- written by valkey-sentinel-ctl bootstrap ---\n")
	fmt.Fprintf(&b, "replica-announce-ip %s\n", self.Host)
	fmt.Fprintf(&b, "replica-announce-port %d\n", in.PortOf(self))
	fmt.Fprintf(&b, "masteruser %s\n", acl.Replication)
	fmt.Fprintf(&b, "masterauth %s\n", quoteConf(replicationPassword))
	if d.Kind == StartReplica {
		fmt.Fprintf(&b, "replicaof %s %s\n", d.PrimaryHost, strconv.Itoa(d.PrimaryPort))
	}
	if d.Guard {
		b.WriteString("# started without data: never promoted before its first sync completed (the first-sync guard restores it)\n")
		b.WriteString("replica-priority 0\n")
	}
	return b.String()
}

// quoteConf quotes a config value the way the server's config parser reads double-quoted strings.
func quoteConf(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// WriteConfig renders the config for the decision and writes it to cfg.ConfigOut (mode 0600, atomically).
// When users.json sits next to the template's aclfile, the server loads a runtime copy without the
// passwords that expired (RenderRuntimeACL) instead.
func WriteConfig(cfg Config, d Decision) error {
	tpl, err := os.ReadFile(cfg.ConfigTemplate)
	if err != nil {
		return fmt.Errorf("read config template: %w", err)
	}
	pw := readSecret(cfg.SecretsDir, acl.Replication)
	if pw == "" {
		return fmt.Errorf("replication password %s missing in %s", acl.Replication, cfg.SecretsDir)
	}
	text := RenderConfig(string(tpl), cfg.Instance, cfg.Instance.Nodes[cfg.NodeIndex], pw, d)
	if d.Migrating && cfg.Migrate != nil {
		text = renderMigrateAuth(text, cfg.Migrate.User, readFile(cfg.Migrate.PasswordFile))
	}
	var extra []string
	if d.Guard && cfg.GuardPassword != "" {
		extra = append(extra, acl.RenderLine(acl.FirstSync, firstsync.Rules(cfg.GuardPassword)))
	}
	if text, err = rewriteACLFile(text, cfg.ConfigOut, time.Now(), extra...); err != nil {
		return err
	}
	return writeAtomic(cfg.ConfigOut, text)
}
