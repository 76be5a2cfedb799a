package cli

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/dnscache"
)

// DNSCacheOptions are the flags of `dns-cache`.
type DNSCacheOptions struct {
	Listen     string
	Upstream   string
	ResolvConf string
	TryEvery   time.Duration
	StaleAfter time.Duration
	Deadline   time.Duration
	MaxTTL     time.Duration
	MaxStale   time.Duration
}

// Config returns the dnscache configuration of the flags, validated. Without --upstream the upstream is the
// first non-loopback nameserver of --resolv-conf (the cache container's own resolv.conf, which the kubelet wrote:
// the cluster DNS Service with dnsPolicy ClusterFirst).
func (o *DNSCacheOptions) Config() (dnscache.Config, error) {
	var up string
	var err error
	if o.Upstream != "" {
		if up, err = dnscache.ParseUpstream(o.Upstream); err != nil {
			return dnscache.Config{}, fmt.Errorf("--upstream: %w (give an IP address, e.g. --upstream 10.96.0.10, or leave it out to use the first nameserver of --resolv-conf)", err)
		}
	} else {
		rc, err := dnscache.ReadResolvConf(o.ResolvConf)
		if err != nil {
			return dnscache.Config{}, fmt.Errorf("--resolv-conf: %w", err)
		}
		if up, err = rc.Upstream(); err != nil {
			return dnscache.Config{}, fmt.Errorf("--resolv-conf %s: %w (give --upstream)", o.ResolvConf, err)
		}
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
		Long: `dns-cache serves DNS on --listen (127.0.0.1:53, the first nameserver of the server's resolv.conf, see
"dns-cache resolv-conf") and forwards to --upstream, by default the first nameserver of its own --resolv-conf
(the cluster DNS Service). valkey-sentinel and valkey-server resolve names with blocking lookups on their only
thread; a lookup that reaches a dead CoreDNS replica through the Service would block them for timeout x
attempts. The cache answers fresh entries at once, asks the upstream again on a new socket every --try-every
(the Service picks a backend per socket), serves an expired answer after --stale-after when the upstream is
silent and answers SERVFAIL after --deadline when nothing is cached. See internal/podsteps/dnscache.`,
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
	f.StringVar(&o.Upstream, "upstream", "", "the DNS server to forward to: IP or IP:port (default: the first non-loopback nameserver of --resolv-conf)")
	f.StringVar(&o.ResolvConf, "resolv-conf", "/etc/resolv.conf", "resolv.conf whose first non-loopback nameserver is the upstream when --upstream is not given")
	f.DurationVar(&o.TryEvery, "try-every", 100*time.Millisecond, "ask the upstream again on a new socket after this long without a reply")
	f.DurationVar(&o.StaleAfter, "stale-after", 50*time.Millisecond, "serve an expired cached answer when the upstream has not answered after this long")
	f.DurationVar(&o.Deadline, "deadline", 900*time.Millisecond, "SERVFAIL after this long when nothing is cached")
	f.DurationVar(&o.MaxTTL, "max-ttl", 30*time.Second, "cache answers at most this long")
	f.DurationVar(&o.MaxStale, "max-stale", 10*time.Minute, "serve an expired answer at most this long after its expiry")
	cmd.AddCommand(newDNSResolvConfCmd())
	return cmd
}

// DNSResolvConfOptions are the flags of `dns-cache resolv-conf`.
type DNSResolvConfOptions struct {
	In    string
	Out   string
	Cache string
}

func newDNSResolvConfCmd() *cobra.Command {
	o := &DNSResolvConfOptions{}
	cmd := &cobra.Command{
		Use:   "resolv-conf",
		Short: "Write the pod's resolv.conf with the DNS cache as first nameserver (an init container)",
		Long: `resolv-conf reads --in (the pod's resolv.conf, which the kubelet wrote) and writes --out: --cache as the
first nameserver, then the nameservers of --in (at most 3 in all), then every other line of --in as it is (search
list, ndots, timeout, attempts). The charts run it as an init container and mount --out over /etc/resolv.conf of
the server and Sentinel containers only; the cache container and the init containers keep the kubelet's file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cache, err := netip.ParseAddr(o.Cache)
			if err != nil {
				return fmt.Errorf("--cache %q: want the IP address the cache listens on (127.0.0.1): %w", o.Cache, err)
			}
			if o.Out == "" {
				return fmt.Errorf("--out: required (the file to write, e.g. /etc/valkey-ha/dns/resolv.conf)")
			}
			rc, dropped, err := dnscache.WriteResolvConf(o.In, o.Out, cache)
			if err != nil {
				return err
			}
			up, _ := rc.Upstream()
			slog.Info("dns-cache: resolv.conf written", "in", o.In, "out", o.Out, "nameservers", fmt.Sprint(rc.Nameservers), "upstream", up)
			if len(dropped) > 0 {
				slog.Warn("dns-cache: nameservers left out (a resolver reads 3)", "dropped", fmt.Sprint(dropped))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.In, "in", "/etc/resolv.conf", "the pod's resolv.conf (written by the kubelet)")
	f.StringVar(&o.Out, "out", "", "the resolv.conf to write (required)")
	f.StringVar(&o.Cache, "cache", "127.0.0.1", "the address the cache listens on (port 53), put first")
	return cmd
}
