package valkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	vk "github.com/valkey-io/valkey-go"
)

// The commands of a planned primary handoff (internal/podsteps/handoff). Each has its typed method here so that no
// caller builds them by hand.

// Errors SentinelFailover wraps for the two refusals a caller must act on (Sentinel docs, "SENTINEL
// FAILOVER"; the reply texts are "-INPROG Failover already in progress" and "-NOGOODSLAVE No suitable replica
// to promote").
var (
	// ErrFailoverInProgress: this Sentinel runs a failover of the monitor already. A caller must not ask
	// another Sentinel then: that would start a second failover in a new epoch.
	ErrFailoverInProgress = errors.New("a failover of this monitor is already in progress")
	// ErrNoGoodReplica: no replica qualifies for promotion (replica-priority 0, down, disconnected, or
	// without recent INFO).
	ErrNoGoodReplica = errors.New("no replica can be promoted")
)

// IsServerError reports whether err carries an error reply of the server: the command arrived and was
// refused. Any other error (connection refused or lost, timeout) leaves open whether the command ran.
func IsServerError(err error) bool {
	var ve *vk.ValkeyError
	return errors.As(err, &ve) && !ve.IsNil()
}

// IsWrongPass reports whether err carries the server's WRONGPASS reply to AUTH or HELLO AUTH: the user is unknown
// to the server, disabled, or the password is not one of its own (Valkey docs, "AUTH").
func IsWrongPass(err error) bool {
	var ve *vk.ValkeyError
	return errors.As(err, &ve) && !ve.IsNil() && strings.HasPrefix(ve.Error(), "WRONGPASS")
}

// ClientPauseWrite runs CLIENT PAUSE <ms> WRITE (Valkey docs, "CLIENT PAUSE"): commands that may write,
// PUBLISH and expiry included, wait until CLIENT UNPAUSE or until d has passed; reads go on. While paused the
// primary sends its replicas nothing, not even PINGs, so its master_repl_offset stays put. d is rounded down
// to milliseconds and must be at least 1 ms.
func (c *Client) ClientPauseWrite(ctx context.Context, d time.Duration) error {
	ms := d.Milliseconds()
	if ms < 1 {
		return c.wrap("CLIENT PAUSE", errors.New("pause shorter than 1 ms"))
	}
	return c.ok(ctx, "CLIENT PAUSE", "CLIENT", "PAUSE", strconv.FormatInt(ms, 10), "WRITE")
}

// ClientUnpause runs CLIENT UNPAUSE: paused clients go on at once.
func (c *Client) ClientUnpause(ctx context.Context) error {
	return c.ok(ctx, "CLIENT UNPAUSE", "CLIENT", "UNPAUSE")
}

// ClientKillPubSub runs CLIENT KILL TYPE pubsub and returns how many connections were closed: clients
// subscribed to this server (on a Sentinel: to its event channels) reconnect and ask again.
func (c *Client) ClientKillPubSub(ctx context.Context) (int64, error) {
	n, err := c.do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").AsInt64()
	return n, c.wrap("CLIENT KILL TYPE pubsub", err)
}

// ClientKillUsers closes the normal connections of every user that CLIENT LIST TYPE normal shows and keep
// does not keep, one CLIENT KILL USER <name> TYPE normal SKIPME yes per user (Valkey docs, "CLIENT KILL";
// the USER and TYPE filters exist since Redis 6.0, so in every supported engine). Replication links
// (TYPE master/replica) and Pub/Sub connections are never touched, nor this connection. Killing by user,
// not by id, also closes a connection of that user that arrived after the list. It returns how many
// connections were closed and the users whose connections were closed; the first error ends it (what was
// closed before stays closed).
func (c *Client) ClientKillUsers(ctx context.Context, keep func(user string) bool) (int64, []string, error) {
	list, err := c.ClientList(ctx, "normal")
	if err != nil {
		return 0, nil, err
	}
	seen := map[string]bool{}
	var users []string
	for _, e := range list {
		if seen[e.User] || keep(e.User) {
			continue
		}
		seen[e.User] = true
		users = append(users, e.User)
	}
	var total int64
	for i, u := range users {
		n, err := c.do(ctx, "CLIENT", "KILL", "USER", u, "TYPE", "normal", "SKIPME", "yes").AsInt64()
		if err != nil {
			return total, users[:i], c.wrap("CLIENT KILL USER "+u+" TYPE normal", err)
		}
		total += n
	}
	return total, users, nil
}

// FailoverTo runs FAILOVER TO host port TIMEOUT <ms> on a primary (Valkey docs, "FAILOVER"): the primary
// pauses writes, waits until host:port has its offset, demotes itself and has the target promote itself;
// when the target does not catch up within timeout the failover is aborted and writes go on. It returns
// once the failover has started; INFO replication's master_failover_state tells its progress.
func (c *Client) FailoverTo(ctx context.Context, host string, port int, timeout time.Duration) error {
	return c.ok(ctx, "FAILOVER TO "+host, "FAILOVER", "TO", host, strconv.Itoa(port),
		"TIMEOUT", strconv.FormatInt(timeout.Milliseconds(), 10))
}

// classifyFailoverError wraps the typed errors for SENTINEL FAILOVER's refusals.
func classifyFailoverError(err error) error {
	if err == nil || !IsServerError(err) {
		return err
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "INPROG"):
		return fmt.Errorf("%w: %w", ErrFailoverInProgress, err)
	case strings.Contains(msg, "NOGOODSLAVE"):
		return fmt.Errorf("%w: %w", ErrNoGoodReplica, err)
	}
	return err
}
