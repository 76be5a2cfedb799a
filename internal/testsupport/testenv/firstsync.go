package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/firstsync"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// RunFirstSyncGuard does for node p what a data pod does for a replica its bootstrap started guarded
// (bootstrap.Decision.Guard): once the server answers, it creates the node-local acl.FirstSync user with a
// fresh password (a pod's bootstrap puts it into the runtime ACL file; here the operator's ACL SETUSER does)
// and runs firstsync.Run with it until the priority is restored or ctx or the test ends. The channel gets
// firstsync.Run's result.
func RunFirstSyncGuard(ctx context.Context, t testing.TB, top *valkeytest.Topology, p *valkeytest.Proc, log *slog.Logger) <-chan error {
	t.Helper()
	pw := valkeytest.RandomPassword(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		for {
			cctx, ccancel := context.WithTimeout(ctx, time.Second)
			c, err := valkey.Dial(cctx, p.Addr(), top.Options(acl.Operator))
			if err == nil {
				err = c.ACLSetUser(cctx, acl.FirstSync, firstsync.Rules(pw)...)
				c.Close()
			}
			ccancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				done <- fmt.Errorf("create %s on %s: %w", acl.FirstSync, p.Addr(), ctx.Err())
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		done <- firstsync.Run(ctx, firstsync.Config{Addr: p.Addr(), Options: valkey.Options{Username: acl.FirstSync, Password: pw},
			Priority: firstsync.DefaultPriority, Poll: 200 * time.Millisecond, Log: log})
	}()
	return done
}
