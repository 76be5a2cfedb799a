package cli

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/firstsync"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// BootstrapOptions are the flags of `bootstrap` (docs/contract.md, "Data pod").
type BootstrapOptions struct {
	NodeIndex      int
	InstanceFile   string
	SentinelsFile  string
	SecretsDir     string
	ConfigTemplate string
	ConfigOut      string
	DataDir        string
	Exec           string
	WaitLimit      time.Duration
	Retry          time.Duration
	// ClusterDomain, unless empty, makes the boot step refuse a descriptor that does not describe this pod with
	// the chart's canonical names and FQDNs (bootstrap.CheckIdentity); the chart always sets it.
	ClusterDomain string
	// SentinelAuthDir holds the quorum's _instance password (bootstrap.Config.SentinelAuthDir).
	SentinelAuthDir string
	// TerminationLog is where a refused start (bootstrap.ErrStartRefused) writes its message: the
	// container's terminationMessagePath, /dev/termination-log by default.
	TerminationLog string
	// MigrateFrom ("host:port"), MigrateUser and MigratePasswordFile make a migrating instance
	// (bootstrap.MigrateFrom; charts/valkey migrateFrom): node 0 follows that primary outside the chart.
	MigrateFrom         string
	MigrateUser         string
	MigratePasswordFile string
}

// migrate returns the --migrate-from source, nil without one.
func (o *BootstrapOptions) migrate() (*bootstrap.MigrateFrom, error) {
	if o.MigrateFrom == "" {
		return nil, nil
	}
	pwFile := o.MigratePasswordFile
	if o.NodeIndex != 0 {
		pwFile = "-" // only node 0 talks to the source
	}
	host, port, err := parseMigrateFrom(o.MigrateFrom, pwFile)
	if err != nil {
		return nil, err
	}
	return &bootstrap.MigrateFrom{Host: host, Port: port, User: o.MigrateUser, PasswordFile: o.MigratePasswordFile}, nil
}

// parseMigrateFrom checks --migrate-from (host:port) and that --migrate-password-file is set (node 0 of the
// boot step and the controller: they talk to the source).
func parseMigrateFrom(addr, passwordFile string) (string, int, error) {
	host, portS, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(portS)
	if err != nil || perr != nil || host == "" || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("--migrate-from %q: want host:port", addr)
	}
	if passwordFile == "" {
		return "", 0, errors.New("--migrate-password-file is required with --migrate-from")
	}
	return host, port, nil
}

// Validate checks the options.
func (o *BootstrapOptions) Validate() error {
	if o.NodeIndex < 0 {
		return errors.New("--node-index must be >= 0")
	}
	if _, err := o.migrate(); err != nil {
		return err
	}
	for flag, v := range map[string]string{"--instance-file": o.InstanceFile, "--secrets-dir": o.SecretsDir,
		"--config-template": o.ConfigTemplate, "--config-out": o.ConfigOut} {
		if v == "" {
			return fmt.Errorf("%s is required", flag)
		}
	}
	return nil
}

func newBootstrapCmd() *cobra.Command {
	o := &BootstrapOptions{}
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Decide a data node's role before its server starts, write its config, then exec the server",
		Long: `bootstrap runs as the entry point of every data container. It asks the Sentinels named in the
sentinels file for the current primary, else the peers (INFO replication). A node that Sentinel still names
primary but that starts empty asks Sentinel to fail over instead while Sentinel lists replicas (case S08),
and never starts as primary after asking. On a cold start without persistence node 0 leads; with
persistence the node whose disk holds the newest dataset leads (booting nodes answer INFO on their port with
what their disk holds) and a silent peer makes the others wait. It writes the writable server config
(template + own announce address + replication credentials + replicaof) and, with --exec, replaces itself
with the server. Waiting ends after --wait-limit with exit 1 (the container restarts).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			b, err := os.ReadFile(o.InstanceFile)
			if err != nil {
				return fmt.Errorf("read descriptor: %w", err)
			}
			in, err := spec.ParseInstance(b)
			if err != nil {
				return err
			}
			if o.ClusterDomain != "" {
				host, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("host name: %w", err)
				}
				if err := bootstrap.CheckIdentity(in, o.NodeIndex, host, o.ClusterDomain); err != nil {
					return err
				}
			}
			log := slog.Default().With("instance", in.Name, "node", o.NodeIndex)
			mf, _ := o.migrate() // checked by Validate
			guardPW, err := randomHex(24)
			if err != nil {
				return err
			}
			d, err := bootstrap.Run(cmd.Context(), bootstrap.Config{
				Instance: in, NodeIndex: o.NodeIndex, SentinelsFile: o.SentinelsFile, SecretsDir: o.SecretsDir,
				DataDir: o.DataDir, ConfigTemplate: o.ConfigTemplate, ConfigOut: o.ConfigOut,
				WaitLimit: o.WaitLimit, Retry: o.Retry, SentinelAuthDir: o.SentinelAuthDir, ClusterDomain: o.ClusterDomain,
				GuardPassword: guardPW, Migrate: mf,
			}, log)
			if errors.Is(err, bootstrap.ErrStartRefused) {
				// the pod's termination message, where kubectl describe and the instance controller read it
				// (best effort: outside a pod the path may not exist)
				_ = os.WriteFile(o.TerminationLog, []byte(contract.StartRefusedPrefix+err.Error()), 0o644)
			}
			if err != nil {
				return err
			}
			log.Info("starting server", "role", d.Kind, "primary", d.PrimaryHost, "config", o.ConfigOut, "firstSyncGuard", d.Guard)
			if o.Exec == "" {
				return nil
			}
			bin, err := exec.LookPath(o.Exec)
			if err != nil {
				return fmt.Errorf("--exec %s: %w", o.Exec, err)
			}
			if d.Guard {
				if err := o.startGuard(guardPW, d.Migrating); err != nil {
					return err
				}
			}
			return syscall.Exec(bin, []string{o.Exec, o.ConfigOut}, os.Environ())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.NodeIndex, "node-index", -1, "index of this node in the descriptor's nodes")
	f.StringVar(&o.InstanceFile, "instance-file", defaultInstanceFile, "instance descriptor")
	f.StringVar(&o.SentinelsFile, "sentinels-file", defaultSentinelsFile, "Sentinel info (absent = not monitored)")
	f.StringVar(&o.SecretsDir, "secrets-dir", contract.MountSystem, "directory with one file per system user password")
	f.StringVar(&o.ConfigTemplate, "config-template", defaultConfigTemplate, "server config from the ConfigMap")
	f.StringVar(&o.ConfigOut, "config-out", defaultConfigOut, "writable server config to write")
	f.StringVar(&o.TerminationLog, "termination-log", "/dev/termination-log", "file a refused start writes its reason to (the container's terminationMessagePath)")
	f.StringVar(&o.DataDir, "data-dir", "/data", "data directory (checked for persisted data)")
	f.StringVar(&o.Exec, "exec", "", "server binary to exec with the written config (valkey-server or redis-server)")
	f.DurationVar(&o.WaitLimit, "wait-limit", 10*time.Minute, "give up (exit 1, the container restarts) after waiting this long for a primary")
	f.DurationVar(&o.Retry, "retry", 2*time.Second, "pause between observations while waiting")
	f.StringVar(&o.MigrateFrom, "migrate-from", "", "host:port of a primary outside the chart to migrate from (node 0 follows it until the switch; README \"Migration\")")
	f.StringVar(&o.MigrateUser, "migrate-user", "", "the source's ACL user (empty: default)")
	f.StringVar(&o.MigratePasswordFile, "migrate-password-file", "", "file holding the source user's password (node 0 only)")
	f.StringVar(&o.SentinelAuthDir, "sentinel-auth-dir", "", "directory with the quorum's _instance password (file password, Secret <S>-auth-instance; empty or missing: no Sentinel credentials)")
	clusterDomainFlag(f, &o.ClusterDomain)
	return cmd
}

// startGuard starts `first-sync-guard` next to the server this process is about to become: a replica that
// starts without data runs with replica-priority 0 until the guard saw its first sync complete
// (internal/podsteps/firstsync). The guard's password reaches it through a pipe on its stdin only; its log goes to the
// container's stdout and stderr. It outlives this process's exec (its parent becomes the server).
func (o *BootstrapOptions) startGuard(password string, migrating bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("first-sync guard: locate own binary: %w", err)
	}
	tpl, err := os.ReadFile(o.ConfigTemplate)
	if err != nil {
		return fmt.Errorf("first-sync guard: read config template: %w", err)
	}
	c := exec.Command(self, "first-sync-guard", "--node-index", strconv.Itoa(o.NodeIndex), "--instance-file", o.InstanceFile,
		"--priority", strconv.FormatInt(firstsync.Priority(string(tpl)), 10))
	if migrating {
		// node 0 of a migration: once the switch promoted it, its own replication credentials again
		c.Args = append(c.Args, "--masterauth-file", filepath.Join(o.SecretsDir, acl.Replication))
	}
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	in, err := c.StdinPipe()
	if err != nil {
		return fmt.Errorf("first-sync guard: %w", err)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("first-sync guard: start: %w", err)
	}
	_, werr := io.WriteString(in, password+"\n")
	if err := errors.Join(werr, in.Close()); err != nil {
		return fmt.Errorf("first-sync guard: hand over the password: %w", err)
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// newFirstSyncGuardCmd is the guard the bootstrap starts next to a replica that starts without data
// (internal/podsteps/firstsync); not for people.
func newFirstSyncGuardCmd() *cobra.Command {
	var (
		nodeIndex    int
		instanceFile string
		priority     int64
		caFile       string
		authFile     string
	)
	cmd := &cobra.Command{
		Use:    "first-sync-guard",
		Short:  "Restore a replica's replica-priority once its first sync completed (started by bootstrap)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if err != nil && pw == "" {
				return fmt.Errorf("first-sync guard: read the password from stdin: %w", err)
			}
			b, err := os.ReadFile(instanceFile)
			if err != nil {
				return fmt.Errorf("first-sync guard: read descriptor: %w", err)
			}
			in, err := spec.ParseInstance(b)
			if err != nil {
				return err
			}
			if nodeIndex < 0 || nodeIndex >= len(in.Nodes) {
				return fmt.Errorf("first-sync guard: node index %d: the descriptor has %d nodes", nodeIndex, len(in.Nodes))
			}
			addr := in.Addr(in.Nodes[nodeIndex])
			opts := valkey.Options{Username: acl.FirstSync, Password: strings.TrimSpace(pw), DialTimeout: time.Second,
				CommandTimeout: time.Second}.WithTLS(in.TLS.Enabled, caFile)
			cfg := firstsync.Config{Addr: addr, Options: opts, Priority: priority, Nodes: in.NodeAddrs(),
				Log: slog.Default().With("instance", in.Name, "node", nodeIndex)}
			if authFile != "" {
				b, err := os.ReadFile(authFile)
				if err != nil {
					return fmt.Errorf("first-sync guard: --masterauth-file: %w", err)
				}
				cfg.MasterAuth.User, cfg.MasterAuth.Password = acl.Replication, strings.TrimSpace(string(b))
			}
			return firstsync.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.IntVar(&nodeIndex, "node-index", -1, "index of this node in the descriptor's nodes")
	f.StringVar(&instanceFile, "instance-file", defaultInstanceFile, "instance descriptor")
	f.Int64Var(&priority, "priority", firstsync.DefaultPriority, "replica-priority to restore")
	f.StringVar(&caFile, "tls-ca-file", valkey.DefaultCAFile, "CA of the server's certificate (TLS instances)")
	f.StringVar(&authFile, "masterauth-file", "", "the _replication password, set as masterauth once the server is primary (node 0 of a migration)")
	return cmd
}

func newInstallCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Copy this static binary into a directory (init container of data pods)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to is required")
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("locate own binary: %w", err)
			}
			src, err := os.Open(self)
			if err != nil {
				return fmt.Errorf("open %s: %w", self, err)
			}
			defer src.Close()
			dst := filepath.Join(to, "valkey-sentinel-ctl")
			out, err := os.OpenFile(dst+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
			if err != nil {
				return fmt.Errorf("create %s: %w", dst, err)
			}
			if _, err := io.Copy(out, src); err != nil {
				out.Close()
				return fmt.Errorf("copy to %s: %w", dst, err)
			}
			if err := out.Close(); err != nil {
				return fmt.Errorf("close %s: %w", dst, err)
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				return fmt.Errorf("rename %s: %w", dst, err)
			}
			cmd.Printf("installed %s\n", dst)
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "target directory")
	return cmd
}
