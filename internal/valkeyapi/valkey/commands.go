package valkey

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The data and admin commands the controllers, the helm-test checks, the boot step and the tests send
// besides replication and Sentinel commands (docs/design.md, "All RESP through internal/valkeyapi/valkey"). Only the
// `client` subcommand, which exists to send whatever its user types, and the negative security tests, which
// try commands that must be refused, go through Command.

// Set runs SET key value, with EX ttl (rounded up to whole seconds) when ttl > 0.
func (c *Client) Set(ctx context.Context, key, value string, ttl time.Duration) error {
	args := []string{"SET", key, value}
	if ttl > 0 {
		args = append(args, "EX", strconv.FormatInt(int64((ttl+time.Second-1)/time.Second), 10))
	}
	return c.ok(ctx, "SET", args...)
}

// Get runs GET key; found is false for a missing key (nil reply).
func (c *Client) Get(ctx context.Context, key string) (value string, found bool, err error) {
	v, err := c.do(ctx, "GET", key).ToString()
	if IsNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, c.wrap("GET", err)
	}
	return v, true, nil
}

// Del runs DEL keys... and returns how many existed.
func (c *Client) Del(ctx context.Context, keys ...string) (int64, error) {
	n, err := c.do(ctx, append([]string{"DEL"}, keys...)...).AsInt64()
	return n, c.wrap("DEL", err)
}

// Wait runs WAIT replicas timeout and returns how many replicas acknowledged this connection's writes.
func (c *Client) Wait(ctx context.Context, replicas int, timeout time.Duration) (int64, error) {
	n, err := c.do(ctx, "WAIT", strconv.Itoa(replicas), strconv.FormatInt(timeout.Milliseconds(), 10)).AsInt64()
	return n, c.wrap("WAIT", err)
}

// ConfigSet runs CONFIG SET key value [key value ...].
func (c *Client) ConfigSet(ctx context.Context, kv ...string) error {
	if len(kv) == 0 || len(kv)%2 != 0 {
		return fmt.Errorf("CONFIG SET: need key/value pairs, got %d arguments", len(kv))
	}
	return c.ok(ctx, "CONFIG SET "+kv[0], append([]string{"CONFIG", "SET"}, kv...)...)
}

// ClientEntry is one connection of CLIENT LIST: its id, name, user and address, and every field by name.
type ClientEntry struct {
	ID     int64
	Name   string
	User   string
	Addr   string
	Fields map[string]string
}

// ClientList runs CLIENT LIST TYPE typ ("normal", "replica", "pubsub"; "" = every connection) and parses
// each line by field name (Valkey docs, "CLIENT LIST").
func (c *Client) ClientList(ctx context.Context, typ string) ([]ClientEntry, error) {
	args := []string{"CLIENT", "LIST"}
	if typ != "" {
		args = append(args, "TYPE", typ)
	}
	text, err := c.str(ctx, "CLIENT LIST", args...)
	if err != nil {
		return nil, err
	}
	out, err := ParseClientEntries(text)
	return out, c.wrap("CLIENT LIST", err)
}

// ParseClientEntries decodes CLIENT LIST text (one "k=v k=v ..." line per connection).
func ParseClientEntries(text string) ([]ClientEntry, error) {
	var out []ClientEntry
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		e := ClientEntry{Fields: map[string]string{}}
		for _, tok := range strings.Fields(line) {
			k, v, ok := strings.Cut(tok, "=")
			if !ok {
				return nil, malformed("CLIENT LIST token %q", truncate(tok))
			}
			e.Fields[k] = v
		}
		id, err := strconv.ParseInt(e.Fields["id"], 10, 64)
		if err != nil {
			return nil, malformed("CLIENT LIST line without id")
		}
		e.ID, e.Name, e.User, e.Addr = id, e.Fields["name"], e.Fields["user"], e.Fields["addr"]
		out = append(out, e)
	}
	return out, nil
}

// SentinelDebug runs SENTINEL DEBUG key value [key value ...] (Sentinel timings; tests speed them up).
func (c *Client) SentinelDebug(ctx context.Context, kv ...string) error {
	if len(kv) == 0 || len(kv)%2 != 0 {
		return fmt.Errorf("SENTINEL DEBUG: need key/value pairs, got %d arguments", len(kv))
	}
	return c.ok(ctx, "SENTINEL DEBUG", append([]string{"SENTINEL", "DEBUG"}, kv...)...)
}

// SentinelConfigGet runs SENTINEL CONFIG GET pattern and returns the Sentinel's global settings by name.
func (c *Client) SentinelConfigGet(ctx context.Context, pattern string) (map[string]string, error) {
	v, err := c.anyReply(ctx, "SENTINEL CONFIG GET", "SENTINEL", "CONFIG", "GET", pattern)
	if err != nil {
		return nil, err
	}
	m, err := PairsToMap(v)
	return m, c.wrap("SENTINEL CONFIG GET", err)
}
