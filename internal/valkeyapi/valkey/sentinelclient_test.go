package valkey_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestDialPrimaryFollowsFailover (real processes, Sentinel auth on as the charts run it): DialPrimary finds
// the primary through the Sentinels as _client, writes and reads there; after the primary is killed and Sentinel
// failed over, the same client reads the key from the new primary. Wrong Sentinel credentials are refused.
func TestDialPrimaryFollowsFailover(t *testing.T) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{SentinelAuth: true})
	ctx := context.Background()
	var sentinels []string
	for _, s := range top.Sentinels {
		sentinels = append(sentinels, s.Addr())
	}
	c, err := valkey.DialPrimary(ctx, sentinels, top.Cfg.MonitorName, top.Options(acl.Operator), top.SentinelOptionsAs(acl.SentinelClient))
	require.NoError(t, err)
	defer c.Close()
	err = c.Set(ctx, "__valkey-ha:demo", "hello", 0)
	require.NoError(t, err)
	role, err := c.Role(ctx)
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, role.Role, "routed to the primary")

	old := top.Nodes[0]
	old.Kill()
	moved := top.WaitPrimaryMoved(old.Port, 30*time.Second)
	var got string
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "the key read through the new primary", func() error {
		got, _, err = c.Get(ctx, "__valkey-ha:demo")
		return err
	})
	assert.Equal(t, "hello", got)
	primary := top.NodeByPort(moved)
	require.NotNil(t, primary)
	t.Logf("failover from :%d to :%d; the Sentinel-aware client followed", old.Port, moved)

	bad := top.SentinelOptionsAs(acl.SentinelClient)
	bad.Password = "wrong"
	_, err = valkey.DialPrimary(ctx, sentinels, top.Cfg.MonitorName, top.Options(acl.Operator), bad)
	assert.Error(t, err, "wrong Sentinel credentials")
}
