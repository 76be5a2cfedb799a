package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// ClientOptions are the flags of `client`.
type ClientOptions struct {
	// Addr is one node or Service ("host:port"); Sentinels and Master reach the primary through Sentinel instead.
	Addr      string
	Sentinels []string
	Master    string
	User      string
	// PasswordEnv and SentinelPasswordEnv name environment variables: a password never goes on a command line.
	PasswordEnv         string
	SentinelUser        string
	SentinelPasswordEnv string
	TLS                 bool
	CAFile              string
	Timeout             time.Duration
}

// Validate checks the options.
func (o *ClientOptions) Validate(args []string) error {
	switch {
	case len(args) == 0:
		return errors.New("no command: valkey-sentinel-ctl client [flags] -- COMMAND [ARGS...]")
	case (o.Addr == "") == (len(o.Sentinels) == 0):
		return errors.New("give either --addr (one node or Service) or --sentinel with --master (Sentinel-aware)")
	case len(o.Sentinels) > 0 && o.Master == "":
		return errors.New("--sentinel needs --master, the monitor name (the instance's sentinel.monitorName, by default its fullname)")
	case o.Timeout <= 0:
		return errors.New("--timeout must be > 0")
	}
	return nil
}

func newClientCmd() *cobra.Command {
	o := &ClientOptions{}
	cmd := &cobra.Command{
		Use:   "client [flags] -- COMMAND [ARGS...]",
		Short: "Run one command on an instance's primary, found through Sentinel as Sentinel-aware clients do (or on one address)",
		Long: `client runs one command and prints the reply. With --sentinel and --master it is a Sentinel-aware client
(valkey-go's Sentinel mode): it asks the Sentinels for the primary of the monitor, connects there, checks ROLE
and follows a failover, as applications should connect. With --addr it talks to that address only (for
example the <F>-primary Service). Passwords come from environment variables (--password-env, default
VALKEY_PASSWORD; --sentinel-password-env, default SENTINEL_PASSWORD, used when Sentinel auth is on), never
from the command line. make demo uses it to write and read a key both ways.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(args); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.Timeout)
			defer cancel()
			node := valkey.Options{Username: o.User, Password: os.Getenv(o.PasswordEnv), TLS: o.TLS, CAFile: o.CAFile}
			var (
				c   *valkey.Client
				err error
			)
			if o.Addr != "" {
				c, err = valkey.Dial(ctx, o.Addr, node)
			} else {
				sentinel := valkey.Options{Username: o.SentinelUser, Password: os.Getenv(o.SentinelPasswordEnv)}
				c, err = valkey.DialPrimary(ctx, o.Sentinels, o.Master, node, sentinel)
			}
			if err != nil {
				return err
			}
			defer c.Close()
			reply, err := c.Command(ctx, args...)
			if err != nil && !valkey.IsNil(err) {
				return err
			}
			printReply(cmd.OutOrStdout(), reply, err)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", "", "host:port of one node or Service (not Sentinel-aware)")
	f.StringSliceVar(&o.Sentinels, "sentinel", nil, "host:port of the Sentinels (comma-separated or repeated), e.g. the Sentinel Service <S>:26379")
	f.StringVar(&o.Master, "master", "", "monitor name of the instance (sentinel.monitorName; default its fullname)")
	f.StringVar(&o.User, "user", "", "ACL user on the data nodes")
	f.StringVar(&o.PasswordEnv, "password-env", "VALKEY_PASSWORD", "environment variable holding the user's password")
	f.StringVar(&o.SentinelUser, "sentinel-user", "", "user on the Sentinels (charts/valkey-sentinel: _client, Secret <S>-auth-client)")
	f.StringVar(&o.SentinelPasswordEnv, "sentinel-password-env", "SENTINEL_PASSWORD", "environment variable holding the Sentinel user's password")
	f.BoolVar(&o.TLS, "tls", false, "TLS to the data nodes and Sentinels")
	f.StringVar(&o.CAFile, "ca-file", valkey.DefaultCAFile, "CA bundle that verifies the servers (with --tls)")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// printReply writes a reply the way valkey-cli does for people: strings and numbers as they are, nil as
// (nil), arrays one element per line.
func printReply(w io.Writer, reply any, err error) {
	if valkey.IsNil(err) || reply == nil {
		fmt.Fprintln(w, "(nil)")
		return
	}
	switch v := reply.(type) {
	case []any:
		for _, e := range v {
			printReply(w, e, nil)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			fmt.Fprintf(w, "%s: ", k)
			printReply(w, v[k], nil)
		}
	case string:
		fmt.Fprintln(w, strings.TrimPrefix(v, "txt:"))
	default:
		fmt.Fprintln(w, v)
	}
}
