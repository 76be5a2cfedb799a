package valkey

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// DialPrimary connects to the primary of monitor master the way a Sentinel-aware application client does
// (valkey-go's Sentinel mode; Sentinel docs, "Guidelines for Redis clients"): it asks the Sentinels at
// sentinels ("host:port") for the primary's address (SENTINEL GET-MASTER-ADDR-BY-NAME), connects there with
// o, checks with ROLE that the node is a primary, and moves to the new primary after +switch-master. sentinel
// authenticates to the Sentinels (empty Username and Password: none). The returned Client's Addr names the
// monitor, not a node: the node behind it changes with failovers.
func DialPrimary(ctx context.Context, sentinels []string, master string, o, sentinel Options) (*Client, error) {
	if len(sentinels) == 0 || master == "" {
		return nil, errors.New("DialPrimary: no Sentinel address or no monitor name")
	}
	name := fmt.Sprintf("primary of %s via %s", master, strings.Join(sentinels, ","))
	opt, o, err := clientOption(sentinels[0], o)
	if err != nil {
		return nil, err
	}
	// the node's certificate carries its own name, not the Sentinel's: verify the name Sentinel hands out
	if opt.TLSConfig != nil && o.ServerName == "" {
		opt.TLSConfig.ServerName = ""
	}
	so, _, err := clientOption(sentinels[0], sentinel.WithTLS(o.TLS, o.CAFile))
	if err != nil {
		return nil, err
	}
	opt.InitAddress = sentinels
	opt.DisableRetry = false // a command issued during a failover waits for the new primary
	opt.ForceSingleClient = false
	opt.Sentinel.MasterSet = master
	opt.Sentinel.Username, opt.Sentinel.Password = sentinel.Username, sentinel.Password
	opt.Sentinel.TLSConfig = so.TLSConfig
	opt.Sentinel.Dialer = so.Dialer
	return connect(ctx, name, opt, o.CommandTimeout)
}
