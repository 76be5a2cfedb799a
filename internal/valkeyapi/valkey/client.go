package valkey

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	vk "github.com/valkey-io/valkey-go"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// Options configure one connection to a data node or a Sentinel.
type Options struct {
	// Username and Password authenticate (ACL user; an empty Username means the default user).
	Username string
	Password string
	// TLS enables TLS; CAFile is a PEM bundle to verify the server, ServerName the name to verify
	// (defaults to the host part of the address).
	TLS        bool
	CAFile     string
	ServerName string
	// RESP2 authenticates with AUTH instead of HELLO 3, for users without +hello (the _probe user).
	RESP2 bool
	// DialTimeout bounds connecting (default 2 s). CommandTimeout bounds each command (default 5 s).
	DialTimeout    time.Duration
	CommandTimeout time.Duration
	// ClientName, when set, names the connection (CLIENT SETNAME on connect), as CLIENT LIST shows it.
	ClientName string
	// ResetOnClose closes the connection with a TCP reset (SO_LINGER 0): bytes the peer has not
	// acknowledged yet are discarded instead of retransmitted after Close, so a request sent into a
	// partition is never delivered once the partition heals. Bytes the peer's kernel already acknowledged
	// still reach the server: Linux delivers them to a stopped process that resumes after the reset
	// (measured: a SET sent to a SIGSTOPped valkey-server, reset, then SIGCONT, was applied).
	ResetOnClose bool
}

// DefaultCAFile is where the charts mount the CA of the instance's TLS Secret.
const DefaultCAFile = contract.MountTLS + "/ca.crt"

// WithTLS returns o with TLS on and the CA file set when enabled; unchanged otherwise.
func (o Options) WithTLS(enabled bool, caFile string) Options {
	if enabled {
		o.TLS = true
		if caFile != "" {
			o.CAFile = caFile
		}
	}
	return o
}

// Client talks to one address. It is safe for concurrent use. Every method wraps errors with the command name
// and the address.
type Client struct {
	addr    string
	c       vk.Client
	timeout time.Duration
}

// Dial connects to addr ("host:port"). It returns an error when the address cannot be reached or the
// credentials are refused within DialTimeout.
func Dial(ctx context.Context, addr string, o Options) (*Client, error) {
	opt, o, err := clientOption(addr, o)
	if err != nil {
		return nil, err
	}
	opt.InitAddress = []string{addr}
	return connect(ctx, addr, opt, o.CommandTimeout)
}

// clientOption is the valkey-go option of one connection as o describes it (defaults filled in); TLS verifies
// the host of addr unless o.ServerName is set. InitAddress is the caller's.
func clientOption(addr string, o Options) (vk.ClientOption, Options, error) {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 5 * time.Second
	}
	opt := vk.ClientOption{
		Username:          o.Username,
		Password:          o.Password,
		DisableCache:      true,
		DisableRetry:      true,
		ForceSingleClient: true,
		ClientSetInfo:     vk.DisableClientSetInfo,
		Dialer:            net.Dialer{Timeout: o.DialTimeout, Control: lingerControl(o.ResetOnClose)},
		ConnWriteTimeout:  o.CommandTimeout,
		AlwaysRESP2:       o.RESP2,
		ClientName:        o.ClientName,
		// small buffers and a short pipeline ring: the controllers hold one connection per node of every
		// instance they watch, and valkey-go's defaults (0.5 MiB per direction, a ring of 2^10 slots) would
		// make memory grow by ~1 MiB per node. Measured with 600 connections (a shared controller's fleet):
		// ring 2^10 and 32 KiB buffers 246 MiB of heap, ring 2^8 94 MiB, ring 2^6 54 MiB, ring 2^4 45 MiB (the
		// buffers' 38 MiB). A longer reply (SENTINEL MASTERS of hundreds of monitors) is read through the small
		// buffer all the same; 32 commands in flight per connection are plenty: a pass sends a few per node,
		// and the Sentinel connections a shared controller uses for all its instances queue the rest.
		ReadBufferEachConn:  1 << 13,
		WriteBufferEachConn: 1 << 13,
		RingScaleEachConn:   5,
	}
	if o.TLS {
		tc, err := buildTLS(addr, o)
		if err != nil {
			return vk.ClientOption{}, o, err
		}
		opt.TLSConfig = tc
	}
	return opt, o, nil
}

// lingerControl returns a net.Dialer Control that sets SO_LINGER 0 on the socket before it connects (reset
// set), or nil.
func lingerControl(reset bool) func(network, address string, c syscall.RawConn) error {
	if !reset {
		return nil
	}
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptLinger(int(fd), syscall.SOL_SOCKET, syscall.SO_LINGER, &syscall.Linger{Onoff: 1, Linger: 0})
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("set SO_LINGER 0: %w", serr)
		}
		return nil
	}
}

// connect runs valkey-go's NewClient (which dials and authenticates) within ctx; name is what errors call it.
func connect(ctx context.Context, name string, opt vk.ClientOption, timeout time.Duration) (*Client, error) {
	type result struct {
		c   vk.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := vk.NewClient(opt)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("connect %s: %w", name, r.err)
		}
		return &Client{addr: name, c: r.c, timeout: timeout}, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("connect %s: %w", name, ctx.Err())
	}
}

func buildTLS(addr string, o Options) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if o.ServerName != "" {
		tc.ServerName = o.ServerName
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA %s: %w", o.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA %s: no certificate found", o.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// Addr returns the address the client was dialled with.
func (c *Client) Addr() string { return c.addr }

// Close releases the connection.
func (c *Client) Close() { c.c.Close() }

func (c *Client) do(ctx context.Context, args ...string) vk.ValkeyResult {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.c.Do(ctx, c.c.B().Arbitrary(args...).Build())
}

func (c *Client) wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s on %s: %w", name, c.addr, err)
}

func (c *Client) str(ctx context.Context, name string, args ...string) (string, error) {
	s, err := c.do(ctx, args...).ToString()
	// RESP3 verbatim strings (INFO, CLIENT LIST) arrive with their "txt:" format prefix
	return strings.TrimPrefix(s, "txt:"), c.wrap(name, err)
}

func (c *Client) ok(ctx context.Context, name string, args ...string) error {
	return c.wrap(name, c.do(ctx, args...).Error())
}

func (c *Client) anyReply(ctx context.Context, name string, args ...string) (any, error) {
	v, err := c.do(ctx, args...).ToAny()
	return v, c.wrap(name, err)
}

// IsNil reports whether err is, or wraps, valkey-go's nil reply (every method here wraps its errors).
func IsNil(err error) bool { return errors.Is(err, vk.Nil) }

// Ping sends PING and expects PONG.
func (c *Client) Ping(ctx context.Context) error {
	s, err := c.str(ctx, "PING", "PING")
	if err != nil {
		return err
	}
	if s != "PONG" {
		return c.wrap("PING", malformed("reply %q", truncate(s)))
	}
	return nil
}

// Info runs INFO <section> and returns its fields (see ParseInfo).
func (c *Client) Info(ctx context.Context, section string) (map[string]string, error) {
	name := "INFO " + section
	s, err := c.str(ctx, name, "INFO", section)
	if err != nil {
		return nil, err
	}
	f, err := ParseInfo(s)
	return f, c.wrap(name, err)
}

// Keys returns the number of keys over all databases from INFO keyspace ("db0:keys=N,expires=..,...").
func (c *Client) Keys(ctx context.Context) (int64, error) {
	f, err := c.Info(ctx, "keyspace")
	if err != nil {
		return 0, err
	}
	n, err := ParseKeyspace(f)
	return n, c.wrap("INFO keyspace", err)
}

// InfoReplication runs INFO replication (see ParseReplication).
func (c *Client) InfoReplication(ctx context.Context) (Replication, error) {
	f, err := c.Info(ctx, "replication")
	if err != nil {
		return Replication{}, err
	}
	r, err := ParseReplication(f)
	return r, c.wrap("INFO replication", err)
}

// ServerVersion returns valkey_version (or redis_version for the redis engine) from INFO server.
func (c *Client) ServerVersion(ctx context.Context) (string, error) {
	f, err := c.Info(ctx, "server")
	if err != nil {
		return "", err
	}
	if v := f["valkey_version"]; v != "" {
		return v, nil
	}
	return f["redis_version"], nil
}

// Role runs ROLE (see ParseRole).
func (c *Client) Role(ctx context.Context) (RoleInfo, error) {
	v, err := c.anyReply(ctx, "ROLE", "ROLE")
	if err != nil {
		return RoleInfo{}, err
	}
	arr, ok := v.([]any)
	if !ok {
		return RoleInfo{}, c.wrap("ROLE", malformed("reply is %T", v))
	}
	ri, err := ParseRole(arr)
	return ri, c.wrap("ROLE", err)
}

// ReplicaOf runs REPLICAOF host port, making the node a replica of host:port.
func (c *Client) ReplicaOf(ctx context.Context, host string, port int) error {
	return c.ok(ctx, "REPLICAOF "+host, "REPLICAOF", host, strconv.Itoa(port))
}

// PromoteToPrimary runs REPLICAOF NO ONE.
func (c *Client) PromoteToPrimary(ctx context.Context) error {
	return c.ok(ctx, "REPLICAOF NO ONE", "REPLICAOF", "NO", "ONE")
}

// ClientCounts runs CLIENT LIST (see ParseClientList).
func (c *Client) ClientCounts(ctx context.Context) (ClientCounts, error) {
	s, err := c.str(ctx, "CLIENT LIST", "CLIENT", "LIST")
	if err != nil {
		return ClientCounts{}, err
	}
	cc, err := ParseClientList(s)
	return cc, c.wrap("CLIENT LIST", err)
}

// ConfigGet runs CONFIG GET pattern and returns the parameters by name.
func (c *Client) ConfigGet(ctx context.Context, pattern string) (map[string]string, error) {
	v, err := c.anyReply(ctx, "CONFIG GET", "CONFIG", "GET", pattern)
	if err != nil {
		return nil, err
	}
	m, err := PairsToMap(v)
	return m, c.wrap("CONFIG GET", err)
}

// ConfigRewrite runs CONFIG REWRITE.
func (c *Client) ConfigRewrite(ctx context.Context) error {
	return c.ok(ctx, "CONFIG REWRITE", "CONFIG", "REWRITE")
}

// DBSize runs DBSIZE and returns the number of keys.
func (c *Client) DBSize(ctx context.Context) (int64, error) {
	n, err := c.do(ctx, "DBSIZE").AsInt64()
	return n, c.wrap("DBSIZE", err)
}

// Command runs an arbitrary command and returns the reply as produced by valkey-go's ToAny. It is for the
// `client` subcommand (which sends what its user types) and for negative tests (commands that must be
// refused); everything else uses the typed methods.
func (c *Client) Command(ctx context.Context, args ...string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("no command")
	}
	return c.anyReply(ctx, strings.ToUpper(args[0]), args...)
}

// ACLSetUser runs ACL SETUSER name rules... (Valkey docs, "ACL SETUSER"). Rules are passed as separate
// arguments, so a rule never smuggles another one.
func (c *Client) ACLSetUser(ctx context.Context, name string, rules ...string) error {
	return c.ok(ctx, "ACL SETUSER "+name, append([]string{"ACL", "SETUSER", name}, rules...)...)
}

// ACLDelUser runs ACL DELUSER names... and returns how many users were deleted.
func (c *Client) ACLDelUser(ctx context.Context, names ...string) (int64, error) {
	n, err := c.do(ctx, append([]string{"ACL", "DELUSER"}, names...)...).AsInt64()
	return n, c.wrap("ACL DELUSER", err)
}

// ACLUsers runs ACL USERS.
func (c *Client) ACLUsers(ctx context.Context) ([]string, error) {
	v, err := c.do(ctx, "ACL", "USERS").AsStrSlice()
	return v, c.wrap("ACL USERS", err)
}

// ACLPasswordHashes runs ACL GETUSER for each name in one pipeline and returns the password hashes each user
// accepts (see ParseACLGetUserPasswords). Every name must exist.
func (c *Client) ACLPasswordHashes(ctx context.Context, names ...string) (map[string][]string, error) {
	out := make(map[string][]string, len(names))
	if len(names) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmds := make(vk.Commands, len(names))
	for i, n := range names {
		cmds[i] = c.c.B().Arbitrary("ACL", "GETUSER", n).Build()
	}
	for i, r := range c.c.DoMulti(ctx, cmds...) {
		v, err := r.ToAny()
		if err != nil && !vk.IsValkeyNil(err) {
			return nil, c.wrap("ACL GETUSER "+names[i], err)
		}
		hashes, err := ParseACLGetUserPasswords(v)
		if err != nil {
			return nil, c.wrap("ACL GETUSER "+names[i], err)
		}
		out[names[i]] = hashes
	}
	return out, nil
}

// ClientKillUser runs CLIENT KILL USER name and returns how many connections were closed.
func (c *Client) ClientKillUser(ctx context.Context, name string) (int64, error) {
	n, err := c.do(ctx, "CLIENT", "KILL", "USER", name).AsInt64()
	return n, c.wrap("CLIENT KILL USER "+name, err)
}

// ACLWhoAmI runs ACL WHOAMI.
func (c *Client) ACLWhoAmI(ctx context.Context) (string, error) {
	return c.str(ctx, "ACL WHOAMI", "ACL", "WHOAMI")
}

// ACLLog runs ACL LOG count (see ParseACLLog).
func (c *Client) ACLLog(ctx context.Context, count int) ([]ACLLogEntry, error) {
	v, err := c.anyReply(ctx, "ACL LOG", "ACL", "LOG", strconv.Itoa(count))
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, c.wrap("ACL LOG", malformed("reply is %T", v))
	}
	e, err := ParseACLLog(arr)
	return e, c.wrap("ACL LOG", err)
}

// ACLLogReset runs ACL LOG RESET.
func (c *Client) ACLLogReset(ctx context.Context) error {
	return c.ok(ctx, "ACL LOG RESET", "ACL", "LOG", "RESET")
}
