package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/chartjobs/credentials"
	"github.com/valkey-ha/valkey-ha/internal/controllers/kube"
)

// CredentialsOptions are the flags of `credentials`.
type CredentialsOptions struct {
	Kubeconfig string
	Namespace  string
	SpecFile   string
	Timeout    time.Duration
	Interval   time.Duration
}

// Validate checks the options.
func (o *CredentialsOptions) Validate() error {
	if o.Namespace == "" {
		return errors.New("--namespace is required (or set POD_NAMESPACE)")
	}
	if o.SpecFile == "" {
		return errors.New("--spec is required: the spec.json of Secret <instance>-acl-spec")
	}
	if o.Timeout <= 0 || o.Interval <= 0 {
		return errors.New("--timeout and --interval must be > 0")
	}
	return nil
}

func newCredentialsCmd() *cobra.Command {
	o := &CredentialsOptions{}
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Create an instance's password Secrets once, rotate customer passwords, write the hashed ACL (the chart's credentials Job)",
		Long: `credentials reads the spec charts/valkey renders into Secret <F>-acl-spec (users, rules, where each
password lives, the wanted rotation generations) and, in the namespace:
  - creates <F>-system, <F>-sentinel-auth and <F>-user-<name> with random passwords when they do not exist
    (never overwriting one), owned by ConfigMap <F>-instance so helm uninstall removes them;
  - rotates <F>-user-<name> when rotation.generation is above the stored one (the previous password stays
    valid until previousValidUntil, fixed now; only its SHA-256 is kept);
  - writes Secret <F>-acl (users.json, users.acl: SHA-256 hashes only) that the data pods load at boot and the
    instance controller applies live.
It retries until everything the spec names exists (a Secret the values reference may appear later) and exits
0 once nothing is left to write, or 1 after --timeout with the reason. See internal/chartjobs/credentials.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			b, err := os.ReadFile(o.SpecFile)
			if err != nil {
				return fmt.Errorf("read spec: %w", err)
			}
			s, err := credentials.ParseSpec(b)
			if err != nil {
				return err
			}
			cs, err := kube.NewClient(o.Kubeconfig)
			if err != nil {
				return err
			}
			return credentials.Run(cmd.Context(), cs, credentials.RunOptions{Namespace: o.Namespace, Spec: s,
				Timeout: o.Timeout, Interval: o.Interval, Log: slog.Default()})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: in-cluster, or $KUBECONFIG)")
	f.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the instance")
	f.StringVar(&o.SpecFile, "spec", "", "path of spec.json (Secret <F>-acl-spec)")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.DurationVar(&o.Interval, "interval", 2*time.Second, "pause between passes that could not complete")
	return cmd
}
