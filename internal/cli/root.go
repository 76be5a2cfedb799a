// Package cli holds the cobra commands of valkey-sentinel-ctl, one file per subcommand. Each command has an
// Options struct that is validated before it runs; there are no flag globals.
package cli

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/valkey-ha/valkey-ha/internal/cli.Version=...".
var Version = "0.1.0-dev"

// NewRoot returns the root command with every subcommand attached.
func NewRoot() *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:           "valkey-sentinel-ctl",
		Short:         "Controller for Valkey primary/replicas with Sentinel on Kubernetes",
		Long:          "valkey-sentinel-ctl registers Sentinel monitors, repairs orphan primaries, keeps valkey.io/role pod\nlabels true, rolls pods safely and applies ACL users live. Failover itself stays Sentinel's job.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
		},
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "debug logging")
	root.AddCommand(newVersionCmd(), newBootstrapCmd(), newInstallCmd(), newInstanceCmd(), newSentinelCmd(), newTestCmd(), newStatusCmd(), newPreStopCmd(), newCredentialsCmd(), newSentinelCredentialsCmd(), newClientCmd(), newFirstSyncGuardCmd(), newDNSCacheCmd(), newBackupCmd(), newRestoreCmd(), newMigrateCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run: func(cmd *cobra.Command, _ []string) {
			cmd.Println(Version)
		},
	}
}
