// Package firstsync is the first-sync guard of a data pod (RELIABILITY.md, Found 1). A replica that starts
// without data (no persistence, or an empty disk: its pod moved, a drain) holds nothing until its first sync
// from the primary completes, yet its server reports master_link_down_since_seconds -1 ("never connected"),
// which Sentinel's replica selection does not filter (valkey src/sentinel.c, sentinelSelectReplica: only a
// link down for longer than ten times down-after-milliseconds disqualifies). Promoted in that state it would
// be an empty primary, and every other node would full-sync from it: in the drain test 1461 acknowledged
// writes were lost this way. So the bootstrap starts such a replica with replica-priority 0
// (bootstrap.Decision.Guard) and Run, a small process it starts next to the server, restores the priority
// once the first sync completed. It lives in the data pod because it must work with every controller down.
package firstsync

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// DefaultPriority is the server's replica-priority when the config sets none.
const DefaultPriority = 100

// Priority returns the replica-priority the config template asks for (the last replica-priority or
// slave-priority line), DefaultPriority when it sets none: what the guard restores.
func Priority(template string) int64 {
	p := int64(DefaultPriority)
	for _, l := range strings.Split(template, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && (f[0] == "replica-priority" || f[0] == "slave-priority") {
			if n, err := strconv.ParseInt(strings.Trim(f[1], `"`), 10, 64); err == nil && n >= 0 {
				p = n
			}
		}
	}
	return p
}

// Rules are the ACL rules of acl.FirstSync with password pw (clean slate first).
func Rules(pw string) []string {
	return append([]string{"on", "resetpass", "#" + acl.HashPassword(pw), "resetkeys", "resetchannels", "nocommands"}, acl.FirstSyncUser.Rules()...)
}

// Config is what Run needs.
type Config struct {
	// Addr is the node's own server ("host:port").
	Addr string
	// Options connect to it (the acl.FirstSync user in a data pod).
	Options valkey.Options
	// Priority is the replica-priority to restore (Priority of the config template).
	Priority int64
	// Nodes are "host:port" of every node of the instance (spec.Instance.NodeAddrs). When set, a sync from
	// any other primary does not count: a replica a forged hello pointed at a foreign server
	// keeps replica-priority 0, so Sentinel never promotes the foreign data set.
	Nodes []string
	// MasterAuth, when it has a Password, is set as masteruser/masterauth once the server turned primary: node 0
	// of a migration (bootstrap.MigrateFrom) starts with the source's credentials and never completes a first
	// sync from a node of the instance, so its guard waits for the switch to promote it and then gives it the
	// instance's own replication credentials back, for a later demotion to a replica of a peer.
	MasterAuth struct{ User, Password string }
	// Poll is the interval of the checks (default 500 ms).
	Poll time.Duration
	Log  *slog.Logger
}

// Run waits until the server at cfg.Addr, started by the bootstrap as a replica with replica-priority 0
// (bootstrap.Decision.Guard), completed its first sync (INFO replication: master_link_status up, no sync in
// progress), or turned primary (then its data set is the instance's), and then restores its replica-priority
// with CONFIG SET. It retries connection errors (the server may not listen yet) until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("addr", cfg.Addr)
	start := time.Now()
	var lastErr string
	for {
		done, err := once(ctx, cfg)
		switch {
		case err == nil && done:
			log.Info("first-sync guard: the first sync completed; replica-priority restored", "priority", cfg.Priority,
				"after", time.Since(start).Round(time.Millisecond).String())
			return nil
		case err != nil && err.Error() != lastErr:
			lastErr = err.Error()
			log.Info("first-sync guard: own server not readable yet; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("first-sync guard of %s: %w", cfg.Addr, ctx.Err())
		case <-time.After(cfg.Poll):
		}
	}
}

// once checks the server once and restores the priority when its first sync is done.
func once(ctx context.Context, cfg Config) (bool, error) {
	c, err := valkey.Dial(ctx, cfg.Addr, cfg.Options)
	if err != nil {
		return false, err
	}
	defer c.Close()
	r, err := c.InfoReplication(ctx)
	if err != nil {
		return false, err
	}
	synced := r.Role == valkey.RoleReplica && r.LinkUp && !r.SyncInProgress &&
		(len(cfg.Nodes) == 0 || spec.OwnNode(cfg.Nodes, r.PrimaryHost, r.PrimaryPort))
	if !synced && r.Role != valkey.RolePrimary {
		return false, nil
	}
	if a := cfg.MasterAuth; r.Role == valkey.RolePrimary && a.Password != "" {
		if err := c.ConfigSet(ctx, "masteruser", a.User, "masterauth", a.Password); err != nil {
			return false, fmt.Errorf("CONFIG SET masteruser/masterauth on %s: %w", cfg.Addr, err)
		}
	}
	if err := c.ConfigSet(ctx, "replica-priority", strconv.FormatInt(cfg.Priority, 10)); err != nil {
		return false, fmt.Errorf("CONFIG SET replica-priority %d on %s: %w", cfg.Priority, cfg.Addr, err)
	}
	return true, nil
}
