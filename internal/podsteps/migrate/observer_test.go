package migrate

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestObserverKeepsOneConnection (issue 28.3): observing a migration every pass must not dial the source (another
// team's primary) every pass. Twenty observations with Observe (the function) open twenty connections on the
// source; with an Observer, one. A kept connection the source closed is replaced at once (the observation
// still succeeds); a source refusing the password is dialled again only after the backoff, and at once with
// new credentials; once node 0 is a primary the source is not asked at all.
func TestObserverKeepsOneConnection(t *testing.T) {
	m := startMigration(t, valkeytest.Valkey91, valkeytest.Valkey91, sourceRights)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := m.source.Client(valkey.Options{Password: m.appPassword})
	require.NoError(t, admin.Ping(ctx))
	conns := func() int {
		info, err := admin.Info(ctx, "stats")
		require.NoError(t, err)
		n, err := strconv.Atoi(info["total_connections_received"])
		require.NoError(t, err)
		return n
	}
	valkeytest.Eventually(t, 20*time.Second, 20*time.Millisecond, "node 0 migrating", func() error {
		if d := Plan(Observe(ctx, m.cfg, false)); d.State != Migrating {
			return assert.AnError
		}
		return nil
	})

	before := conns()
	for i := 0; i < 20; i++ {
		Observe(ctx, m.cfg, false)
	}
	perPass := conns() - before

	ob := NewObserver()
	defer ob.Close()
	before = conns()
	for i := 0; i < 20; i++ {
		require.Equal(t, Migrating, Plan(ob.Observe(ctx, m.cfg, false)).State)
	}
	kept := conns() - before
	t.Logf("source connections for 20 observations: %d with Observe, %d with an Observer", perPass, kept)
	assert.Equal(t, 20, perPass)
	assert.Equal(t, 1, kept)

	// the source closes our connection: the next observation re-dials once and succeeds
	_, err := admin.Command(ctx, "CLIENT", "KILL", "USER", "migrator", "TYPE", "normal") // not node 0's replication link
	require.NoError(t, err)
	require.Equal(t, Migrating, Plan(ob.Observe(ctx, m.cfg, false)).State, "a broken kept connection is replaced at once")
	assert.Equal(t, 2, ob.SourceDials())

	// refused credentials: one dial, then the backoff; new credentials are tried at once
	wrong := m.cfg
	wrong.Source.Password = "not-the-password"
	before = conns()
	for i := 0; i < 10; i++ {
		d := Plan(ob.Observe(ctx, wrong, false))
		require.Equal(t, Refused, d.State)
		assert.Contains(t, d.Message, "WRONGPASS")
	}
	assert.Equal(t, 1, conns()-before, "a refused password is tried once per backoff (%s), not per observation", MinSourceBackoff)
	require.Equal(t, Migrating, Plan(ob.Observe(ctx, m.cfg, false)).State, "the right password is tried at once")

	// switched: the source is not asked any more
	require.NoError(t, m.node0.Client(valkey.Options{}).PromoteToPrimary(ctx))
	before = conns()
	for i := 0; i < 5; i++ {
		require.Equal(t, Switched, Plan(ob.Observe(ctx, m.cfg, false)).State)
	}
	assert.Zero(t, conns()-before, "no connection to the source after the switch")
}
