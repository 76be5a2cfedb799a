package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/prestop"
)

// PreStopOptions are the flags of `prestop`.
type PreStopOptions struct {
	NodeIndex     int
	InstanceFile  string
	SentinelsFile string
	SecretsDir    string
	RuntimeDir    string
	// SentinelAuthDir holds the quorum's _instance password (file "password"); ClusterDomain checks the
	// Sentinel hosts before it is sent (prestop.Config).
	SentinelAuthDir string
	ClusterDomain   string
	Timeout         time.Duration
	DialTimeout     time.Duration
	// LogFile receives the log lines instead of stderr: the kubelet discards what an exec hook prints unless
	// the hook fails (and even then keeps it out of the FailedPreStopHook Event), so the chart points it at the
	// container's own stdout, /proc/1/fd/1, where `kubectl logs` shows it.
	LogFile string
}

// Validate checks the options.
func (o *PreStopOptions) Validate() error {
	if o.NodeIndex < 0 {
		return errors.New("--node-index must be >= 0")
	}
	if o.InstanceFile == "" || o.RuntimeDir == "" {
		return errors.New("--instance-file and --runtime-dir are required")
	}
	if o.Timeout <= 0 {
		return errors.New("--timeout must be > 0")
	}
	return nil
}

func newPreStopCmd() *cobra.Command {
	o := &PreStopOptions{}
	cmd := &cobra.Command{
		Use:   "prestop",
		Short: "preStop hook of a data container: hand the primary role off this node before it stops",
		Long: `prestop runs as the data container's preStop hook. When this node is the primary and a replica may be
promoted, it hands off with the planned roll's code (pause writes, wait until the replicas reached the
primary's offset, SENTINEL FAILOVER, wait until the Sentinel names the new primary, demote, unpause), or with
FAILOVER TO when the instance is not monitored. On a replica it returns at once unless a failover runs (then
it waits for its end). It ends within --timeout. When it could not hand off it logs why and exits 1 with a
one-line reason: the kubelet records a FailedPreStopHook Event; the container stops either way. See
internal/podsteps/prestop.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, closeLog := o.logger()
			defer closeLog()
			out, err := o.run(cmd.Context(), log)
			if err != nil {
				log.Error("prestop: not run", "err", err)
				return fmt.Errorf("prestop: not run: %w", err)
			}
			attrs := []any{"action", out.Action, "reason", out.Reason, "detail", out.Detail, "took", out.Took.Round(time.Millisecond).String()}
			if out.Result.NewPrimary != "" {
				attrs = append(attrs, "newPrimary", out.Result.NewPrimary, "paused", out.Result.Paused.Round(time.Millisecond).String(),
					"demotedEarly", out.Result.DemotedEarly)
			}
			if out.Action == prestop.Skipped {
				log.Warn("prestop: no handoff; the shutdown goes on (the server still waits for lagging replicas)", attrs...)
				// a failed hook is what the kubelet reports (Event FailedPreStopHook; the message stays in the
				// kubelet's log); it stops the container all the same
				return fmt.Errorf("prestop: no handoff (%s): %s; the stop goes on (the server waits up to shutdown-timeout for lagging replicas)",
					out.Reason, out.Detail)
			}
			log.Info("prestop: done", attrs...)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.NodeIndex, "node-index", -1, "index of this node in the descriptor's nodes")
	f.StringVar(&o.InstanceFile, "instance-file", defaultInstanceFile, "instance descriptor")
	f.StringVar(&o.SentinelsFile, "sentinels-file", defaultSentinelsFile, "Sentinel info (absent = not monitored)")
	f.StringVar(&o.SecretsDir, "secrets-dir", contract.MountSystem, "directory with the _probe password (reads of the replicas)")
	f.StringVar(&o.RuntimeDir, "runtime-dir", contract.MountRuntime, "runtime directory where the bootstrap wrote the node-local _prestop password")
	f.StringVar(&o.SentinelAuthDir, "sentinel-auth-dir", "", "directory with the quorum's _instance password (file password; empty: no Sentinel credentials)")
	clusterDomainFlag(f, &o.ClusterDomain)
	f.DurationVar(&o.Timeout, "timeout", 20*time.Second, "bound of the whole hook (keep it below terminationGracePeriodSeconds minus the server's shutdown-timeout)")
	f.DurationVar(&o.DialTimeout, "dial-timeout", time.Second, "bound of each connection and command")
	f.StringVar(&o.LogFile, "log-file", "", "also write the log here (the chart: /proc/1/fd/1, the container's stdout)")
	return cmd
}

// logger returns the hook's logger: JSON lines to LogFile when it opens (the container's stdout, so `kubectl
// logs` shows them; the kubelet keeps an exec hook's own output only for a failed hook's Event, which then
// gets just the one-line error), else to stderr.
func (o *PreStopOptions) logger() (*slog.Logger, func()) {
	if o.LogFile != "" {
		if f, err := os.OpenFile(o.LogFile, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			return slog.New(slog.NewJSONHandler(f, nil)), func() { f.Close() }
		}
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, nil)), func() {}
}

// run validates the options, reads the descriptor and runs the hook; an error means it could not run at all.
func (o *PreStopOptions) run(ctx context.Context, log *slog.Logger) (prestop.Outcome, error) {
	if err := o.Validate(); err != nil {
		return prestop.Outcome{}, err
	}
	b, err := os.ReadFile(o.InstanceFile)
	if err != nil {
		return prestop.Outcome{}, fmt.Errorf("read descriptor: %w", err)
	}
	in, err := spec.ParseInstance(b)
	if err != nil {
		return prestop.Outcome{}, err
	}
	log = log.With("instance", in.Name, "node", o.NodeIndex)
	log.Info("prestop: started", "timeout", o.Timeout.String())
	return prestop.Run(ctx, prestop.Config{Instance: in, NodeIndex: o.NodeIndex, SentinelsFile: o.SentinelsFile,
		SentinelAuthDir: o.SentinelAuthDir, ClusterDomain: o.ClusterDomain,
		SecretsDir: o.SecretsDir, PasswordFile: o.RuntimeDir + "/" + bootstrap.PreStopPasswordFile,
		Timeout: o.Timeout, DialTimeout: o.DialTimeout, Log: log,
		// the bootstrap writes the runtime config next to the password (the chart's --config-out)
		ServerConfigFile: o.RuntimeDir + "/" + contract.KeyServerConfig}), nil
}
