package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
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
	// DialTimeout bounds each connection to a peer or Sentinel (default 1 s).
	DialTimeout time.Duration
	// TLSCAFile verifies TLS-only peers and Sentinels (default valkey.DefaultCAFile).
	TLSCAFile string
}

// Run observes, plans and acts until the node's role is decided, then writes ConfigOut. It returns the
// decision. It never decides StartPrimary on its own while a peer holds data.
func Run(ctx context.Context, cfg Config, log *slog.Logger) (Decision, error) {
	if cfg.Retry <= 0 {
		cfg.Retry = 2 * time.Second
	}
	if cfg.WaitLimit <= 0 {
		cfg.WaitLimit = 10 * time.Minute
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
	failoverRequested := time.Time{}
	for attempt := 1; ; attempt++ {
		obs := Observe(ctx, cfg)
		obs.FailoverRequested = !failoverRequested.IsZero()
		d := PlanBoot(obs)
		log.Info("bootstrap decision", "attempt", attempt, "decision", d.Kind, "primary", d.PrimaryHost, "reason", d.Reason)
		switch d.Kind {
		case StartPrimary, StartReplica:
			if err := WriteConfig(cfg, d); err != nil {
				return d, err
			}
			return d, nil
		case RequestFailover:
			// one request per failover-timeout-ish window; Sentinel refuses a second while one runs
			if time.Since(failoverRequested) > 15*time.Second {
				if err := requestFailover(ctx, cfg, obs); err != nil {
					log.Warn("SENTINEL FAILOVER request failed; will look again", "error", err)
				} else {
					failoverRequested = time.Now()
					log.Info("asked Sentinel to fail over away from this empty node")
				}
			}
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("no role decided within %s: last decision %s (%s)", cfg.WaitLimit, d.Kind, d.Reason)
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(cfg.Retry):
		}
	}
}

// Observe asks every Sentinel named in the sentinels file (if mounted) and every peer, in parallel. Failures
// are recorded per target, never fatal.
func Observe(ctx context.Context, cfg Config) Observation {
	in := cfg.Instance
	self := in.Nodes[cfg.NodeIndex]
	o := Observation{Self: self, Port: in.Port, LocalData: LocalData(cfg.DataDir, in.Persistence)}
	probePW := readSecret(cfg.SecretsDir, acl.Probe)
	var mu sync.Mutex
	var wg sync.WaitGroup
	if si, err := readSentinelInfo(cfg.SentinelsFile); err == nil && si.MonitorName == in.MonitorName {
		for _, addr := range si.Addrs() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := askSentinel(ctx, addr, in.MonitorName, valkey.Options{DialTimeout: cfg.DialTimeout, CommandTimeout: cfg.DialTimeout}.WithTLS(si.TLS, cfg.TLSCAFile))
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
	b, err := os.ReadFile(filepath.Join(dir, name))
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
		a.Err = err
		return a
	}
	defer c.Close()
	a.Host, a.Port, a.Found, a.Err = c.SentinelPrimaryAddr(ctx, monitor)
	if a.Err == nil && a.Found {
		a.Replicas, a.ReplicasErr = c.SentinelReplicas(ctx, monitor)
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
	r, err := c.InfoReplication(ctx)
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

// LocalData reports whether persistence is on and the data directory holds an RDB file or an AOF directory
// with content.
func LocalData(dir string, persistence bool) bool {
	if !persistence || dir == "" {
		return false
	}
	if fi, err := os.Stat(filepath.Join(dir, "dump.rdb")); err == nil && fi.Size() > 0 {
		return true
	}
	entries, err := os.ReadDir(filepath.Join(dir, "appendonlydir"))
	if err != nil {
		return false
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Size() > 0 && !strings.HasSuffix(e.Name(), ".manifest") {
			return true
		}
	}
	return false
}

func requestFailover(ctx context.Context, cfg Config, obs Observation) error {
	var errs []error
	for _, a := range obs.Sentinels {
		if a.Err != nil || !a.Found {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 3*cfg.DialTimeout)
		c, err := valkey.Dial(ctx, a.Addr, valkey.Options{DialTimeout: cfg.DialTimeout}.WithTLS(a.TLS, cfg.TLSCAFile))
		if err == nil {
			err = c.SentinelFailover(ctx, cfg.Instance.MonitorName)
			c.Close()
		}
		cancel()
		if err == nil || strings.Contains(err.Error(), "INPROG") {
			return nil
		}
		errs = append(errs, err)
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
	return b.String()
}

// quoteConf quotes a config value the way the server's config parser reads double-quoted strings.
func quoteConf(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// WriteConfig renders the config for the decision and writes it to cfg.ConfigOut (mode 0600, atomically).
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
	tmp := cfg.ConfigOut + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, cfg.ConfigOut); err != nil {
		return fmt.Errorf("rename %s: %w", cfg.ConfigOut, err)
	}
	return nil
}
