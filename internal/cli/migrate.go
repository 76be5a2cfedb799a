package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/migrate"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// MigrateOptions are the flags of `migrate`.
type MigrateOptions struct {
	// Source is the other chart's primary ("host:port"); SourceUser its ACL user (empty: default) and
	// SourcePasswordFile the file holding that user's password.
	Source             string
	SourceUser         string
	SourcePasswordFile string
	// Node0 is node 0 of the new instance ("host:port"), reached as Node0User with Node0PasswordFile.
	Node0             string
	Node0User         string
	Node0PasswordFile string
	// Switch runs the switch; without it, migrate only observes and prints where the migration stands.
	Switch      bool
	PauseBudget time.Duration
	MaxLag      int64
}

// Validate checks the options.
func (o *MigrateOptions) Validate() error {
	for flag, addr := range map[string]string{"--source": o.Source, "--node0": o.Node0} {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return fmt.Errorf("%s %q: want host:port", flag, addr)
		}
	}
	if o.SourcePasswordFile == "" {
		return errors.New("--source-password-file is required (the source user's password, e.g. the other chart's Secret mounted)")
	}
	if o.PauseBudget <= 0 || o.MaxLag <= 0 {
		return errors.New("--pause-budget and --max-lag must be > 0")
	}
	return nil
}

func newMigrateCmd() *cobra.Command {
	o := &MigrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "observe a migration from a primary outside the chart, and switch it over with --switch (README \"Migration\")",
		Long: `migrate observes the source (the other chart's primary) and node 0 of the new instance, which replicates from
it, and prints where the migration stands: refused (and why), syncing, "migrating: N bytes behind", or switched.
With --switch it switches: CLIENT PAUSE WRITE on the source, node 0 catches up to the paused offset, the source is
fenced (CONFIG SET min-replicas-to-write 2147483647: every later write gets NOREPLICAS, never a silent
acknowledgement), node 0 is promoted (REPLICAOF NO ONE), the source is unpaused. Exit 1 when refused or the switch
did not happen; the source is then still the primary (or fenced, when the promotion failed: run it again).
The source user needs ` + migrate.SourceRights + `. See internal/podsteps/migrate.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Source, "source", "", "the source primary, host:port")
	f.StringVar(&o.SourceUser, "source-user", "", "the source's ACL user (empty: the default user)")
	f.StringVar(&o.SourcePasswordFile, "source-password-file", "", "file holding the source user's password")
	f.StringVar(&o.Node0, "node0", "", "node 0 of the new instance, host:port")
	f.StringVar(&o.Node0User, "node0-user", "_operator", "node 0's ACL user (INFO, REPLICAOF, CONFIG SET)")
	f.StringVar(&o.Node0PasswordFile, "node0-password-file", "", "file holding node 0's user's password (empty: no AUTH)")
	f.BoolVar(&o.Switch, "switch", false, "switch over (without it: observe and print only)")
	f.DurationVar(&o.PauseBudget, "pause-budget", 5*time.Second, "longest time the source's writes stay paused for node 0 to catch up")
	f.Int64Var(&o.MaxLag, "max-lag", migrate.DefaultMaxLag, "most bytes behind at which a switch may start")
	return cmd
}

func (o *MigrateOptions) run(cmd *cobra.Command) error {
	host, portS, _ := net.SplitHostPort(o.Source)
	port, err := strconv.Atoi(portS)
	if err != nil {
		return fmt.Errorf("--source %q: port: %w", o.Source, err)
	}
	srcPW, err := os.ReadFile(o.SourcePasswordFile)
	if err != nil {
		return fmt.Errorf("read --source-password-file: %w", err)
	}
	cfg := migrate.Config{SourceHost: host, SourcePort: port, Node0Addr: o.Node0, MaxLag: o.MaxLag, PauseBudget: o.PauseBudget,
		Source: valkey.Options{Username: o.SourceUser, Password: strings.TrimSpace(string(srcPW))}}
	if o.Node0PasswordFile != "" {
		pw, err := os.ReadFile(o.Node0PasswordFile)
		if err != nil {
			return fmt.Errorf("read --node0-password-file: %w", err)
		}
		cfg.Node0 = valkey.Options{Username: o.Node0User, Password: strings.TrimSpace(string(pw))}
	}
	ctx := cmd.Context()
	d := migrate.Plan(migrate.Observe(ctx, cfg, o.Switch))
	fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", d.State, d.Message)
	if !o.Switch {
		if d.State == migrate.Refused {
			return errors.New(d.Message)
		}
		return nil
	}
	res, err := migrate.Switch(ctx, cfg, slog.Default())
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "switched: node 0 is the primary at offset %d; the source's writes were paused %s and "+
		"are refused from now on (NOREPLICAS)\n", res.Offset, res.Paused.Round(time.Millisecond))
	return nil
}
