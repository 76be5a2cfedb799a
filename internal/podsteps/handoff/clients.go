package handoff

import (
	"context"
	"slices"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// CloseTimeout bounds CloseClients: a demoted node that does not answer within it keeps its connections
// (they get READONLY), and the caller reports that instead of waiting.
const CloseTimeout = 2 * time.Second

// Closed is what CloseClients did on one demoted node.
type Closed struct {
	// Conns is the number of connections closed; Users the users whose normal connections were closed.
	Conns int64
	Users []string
	// Err is set when they could not all be closed (the node unreachable, the command refused or timed
	// out): those clients stay on a replica and see READONLY until they reconnect on their own.
	Err error
}

// CloseClients closes every application connection of a node that was just demoted to a replica: the
// normal connections of every user that is not a system user (acl.IsSystemConnection). A client connected
// to the primary Service, or to a cached address, otherwise keeps its connection to the replica and gets
// READONLY on every write until it reconnects; closed, it reconnects at once and the Service, relabelled,
// sends it to the new primary. Sentinel does the same (CLIENT KILL TYPE normal) on a node it reconfigures
// itself, but a node demoted by us (handoff, repair) is already a replica when Sentinel looks. System
// connections (the handoff's own, Sentinel's, the controller's, the probe's and the exporter's), replication
// links and Pub/Sub connections are kept. Called while the old primary's writes are still paused, the
// waiting writes never run: their clients see a closed connection, never a stale acknowledgement.
//
// It never blocks longer than CloseTimeout; on error c may be stuck behind an unanswered command and the
// caller should drop it.
func CloseClients(ctx context.Context, c *valkey.Client) Closed {
	cctx, cancel := context.WithTimeout(ctx, CloseTimeout)
	defer cancel()
	n, users, err := c.ClientKillUsers(cctx, acl.IsSystemConnection)
	return Closed{Conns: n, Users: users, Err: err}
}

// afterDemote closes the application connections of the primary just demoted (CloseClients) and keeps the
// outcome for Result.Clients; a failure is logged and the connection dropped, never waited on.
func (h *handoff) afterDemote(ctx context.Context) {
	cl := CloseClients(ctx, h.pc)
	h.closed.Conns += cl.Conns
	for _, u := range cl.Users {
		if !slices.Contains(h.closed.Users, u) {
			h.closed.Users = append(h.closed.Users, u)
		}
	}
	if cl.Err != nil {
		h.closed.Err = cl.Err
		h.drop(h.cfg.Primary)
		h.log.Warn("handoff: could not close the demoted primary's client connections; they get READONLY until they reconnect", "err", cl.Err)
		return
	}
	h.log.Info("handoff: closed the demoted primary's client connections", "connections", cl.Conns, "users", cl.Users)
}
