package cli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/dnscache"
)

// DNSCacheOptions are the flags of `dns-cache`.
type DNSCacheOptions struct {
	Listen     string
	Upstream   string
	TryEvery   time.Duration
	StaleAfter time.Duration
	Deadline   time.Duration
	MaxTTL     time.Duration
	MaxStale   time.Duration
}

// Config returns the dnscache configuration of the flags, validated.
func (o *DNSCacheOptions) Config() (dnscache.Config, error) {
	up, err := dnscache.ParseUpstream(o.Upstream)
	if err != nil {
		return dnscache.Config{}, fmt.Errorf("--upstream: %w (give the cluster DNS Service's IP, e.g. --upstream 10.96.0.10)", err)
	}
	cfg := dnscache.Config{Listen: o.Listen, Upstream: up, TryEvery: o.TryEvery, StaleAfter: o.StaleAfter,
		Deadline: o.Deadline, MaxTTL: o.MaxTTL, MaxStale: o.MaxStale, Log: slog.Default()}
	return cfg, cfg.Validate()
}

func newDNSCacheCmd() *cobra.Command {
	o := &DNSCacheOptions{}
	cmd := &cobra.Command{
		Use:   "dns-cache",
		Short: "DNS cache for a Sentinel or data pod: bounded lookups while a cluster DNS replica is dead",
		Long: `dns-cache serves DNS on --listen (the pod's only nameserver, 127.0.0.1:53) and forwards to --upstream
(the cluster DNS Service). valkey-sentinel and valkey-server resolve names with blocking lookups on their only
thread; a lookup that reaches a dead CoreDNS replica through the Service would block them for timeout x
attempts. The cache answers fresh entries at once, asks the upstream again on a new socket every --try-every
(the Service picks a backend per socket), serves an expired answer after --stale-after when the upstream is
silent and answers SERVFAIL after --deadline when nothing is cached. See internal/dnscache.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.Config()
			if err != nil {
				return err
			}
			c, err := dnscache.New(cfg)
			if err != nil {
				return err
			}
			return c.Run(cmd.Context(), nil)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "127.0.0.1:53", "address served over UDP and TCP")
	f.StringVar(&o.Upstream, "upstream", "", "the cluster DNS Service: IP or IP:port (required)")
	f.DurationVar(&o.TryEvery, "try-every", 100*time.Millisecond, "ask the upstream again on a new socket after this long without a reply")
	f.DurationVar(&o.StaleAfter, "stale-after", 50*time.Millisecond, "serve an expired cached answer when the upstream has not answered after this long")
	f.DurationVar(&o.Deadline, "deadline", 900*time.Millisecond, "SERVFAIL after this long when nothing is cached")
	f.DurationVar(&o.MaxTTL, "max-ttl", 30*time.Second, "cache answers at most this long")
	f.DurationVar(&o.MaxStale, "max-stale", 10*time.Minute, "serve an expired answer at most this long after its expiry")
	return cmd
}
