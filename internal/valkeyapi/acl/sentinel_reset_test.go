package acl_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestSecurityInstanceUserResetCannotSplitAnInstance (h7-attack's finding, closed by h11-reset; valkey 9.1, 8.0
// and redis 7.0 Sentinels with the users of acl.SentinelUsers): a holder of _instance (every data pod of every
// instance the quorum monitors mounts it, their helm tests read it) sends SENTINEL RESET * to every Sentinel
// 0.3, 0.7 and 1.5 s after a SENTINEL FAILOVER. Each RESET is refused (NOPERM), the failover ends with one
// primary that every Sentinel names within 30 s (11.3-11.5 s measured), and no second primary appears in the 5 s after. Before the fix
// (_instance held +sentinel|reset) every engine accepted the nine RESETs and still had two nodes reporting role
// master at the end (h7-attack's run: 3 of 3 on valkey 9.1, two primaries 15 s later).
// The instance controller's own RESET goes through acl.SentinelController, which may RESET and nothing that
// moves a primary (checked here too).
func TestSecurityInstanceUserResetCannotSplitAnInstance(t *testing.T) {
	valkeytest.ForEachEngine(t, func(t *testing.T, e valkeytest.Engine) {
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, Replicas: 2, Sentinels: 3, SentinelAuth: true})
		ctx := context.Background()
		as := func(s *valkeytest.Proc, user string) *valkey.Client { return s.Client(top.SentinelOptionsAs(user)) }
		require.NoError(t, as(top.Sentinels[0], acl.SentinelInstance).SentinelFailover(ctx, top.Cfg.MonitorName))
		start := time.Now()
		for _, delay := range []time.Duration{300 * time.Millisecond, 700 * time.Millisecond, 1500 * time.Millisecond} {
			time.Sleep(time.Until(start.Add(delay)))
			for _, s := range top.Sentinels {
				n, err := as(s, acl.SentinelInstance).SentinelReset(ctx, "*")
				if err == nil || !strings.Contains(err.Error(), "NOPERM") {
					t.Errorf("SENTINEL RESET * as %s on %s %s after FAILOVER: reset %d monitors, error %v (want NOPERM)",
						acl.SentinelInstance, s.Addr(), delay, n, err)
				}
			}
		}
		// the failover itself has two nodes report role master for a while (the old primary is demoted once a
		// Sentinel's INFO sees it); it must end with one primary that every Sentinel names, and stay so
		state := func() (primaries, named []string) {
			for _, n := range top.Nodes {
				if r, err := n.Client(top.Options(acl.Operator)).Role(ctx); err == nil && r.Role == valkey.RolePrimary {
					primaries = append(primaries, fmt.Sprint(n.Port))
				}
			}
			for _, s := range top.Sentinels {
				_, port, _, _ := as(s, acl.SentinelInstance).SentinelPrimaryAddr(ctx, top.Cfg.MonitorName)
				named = append(named, fmt.Sprint(port))
			}
			return primaries, named
		}
		one := func(primaries, named []string) error {
			if len(primaries) != 1 || strings.Count(strings.Join(named, ","), primaries[0]) != len(named) {
				return fmt.Errorf("primaries %s, Sentinels name %s", strings.Join(primaries, ","), strings.Join(named, ","))
			}
			return nil
		}
		valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "one primary after the failover", func() error { return one(state()) })
		t.Logf("%s: one primary, named by every Sentinel, %s after FAILOVER", e, time.Since(start).Round(100*time.Millisecond))
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if err := one(state()); err != nil {
				t.Fatalf("a holder of %s split the instance: %v", acl.SentinelInstance, err)
			}
		}

		// the controllers' user may RESET (the scale-in step, in steady state), and may not fail over
		top.WaitSentinelsConverged(30*time.Second, 2, 2)
		c := as(top.Sentinels[0], acl.SentinelController)
		n, err := c.SentinelReset(ctx, top.Cfg.MonitorName)
		require.NoError(t, err, "SENTINEL RESET as %s", acl.SentinelController)
		assert.EqualValues(t, 1, n)
		err = c.SentinelFailover(ctx, top.Cfg.MonitorName)
		assert.ErrorContains(t, err, "NOPERM", "%s may not fail over", acl.SentinelController)
	})
}
