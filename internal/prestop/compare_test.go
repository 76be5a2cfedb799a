package prestop

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/testenv"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

// longestAckGap is the longest time between two consecutive acknowledged writes (blocked writes count: a
// client waiting on a paused primary sees the same outage as one whose writes fail).
func longestAckGap(evs []testenv.WriteEvent) time.Duration {
	var last time.Time
	var gap time.Duration
	for _, e := range evs {
		if !e.OK {
			continue
		}
		if !last.IsZero() {
			gap = max(gap, e.End.Sub(last))
		}
		last = e.End
	}
	return gap
}

// TestPreStopCompare (issue 14, Measure; run with PRESTOP_COMPARE=1): the primary of 1 primary + 2
// replicas + 3 Sentinels (down-after 5000, failover-timeout 15000, the chart's defaults) stops under a
// Sentinel-aware writer with 300 ms replication-link delay, three ways: (a) this hook, then SIGTERM; (b) no
// hook: SIGTERM, Sentinel detects and fails over; (c) the peers' hook: CLIENT PAUSE WRITE, SENTINEL
// FAILOVER, wait until Sentinel names the new primary, then SIGTERM (no replica catch-up check). Prints
// the outage (longest gap between acknowledgements) and the acknowledged writes missing on the new primary.
func TestPreStopCompare(t *testing.T) {
	if os.Getenv("PRESTOP_COMPARE") == "" {
		t.Skip("a measurement (about 1 min): PRESTOP_COMPARE=1")
	}
	valkeytest.RequireFaults(t)
	rounds := 1
	fmt.Sscan(os.Getenv("PRESTOP_COMPARE"), &rounds)
	var rows []string
	for _, way := range []string{"a-hook", "b-no-hook", "c-pause-failover"} {
		for r := 0; r < rounds; r++ {
			t.Run(fmt.Sprintf("%s-%d", way, r), func(t *testing.T) {
				top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: true})
				cfg := hookFor(t, top, 0)
				top.DelayReplication(300 * time.Millisecond)
				w := testenv.StartWriter(t, top, testenv.WriterOptions{Key: "__valkey-ha:cmp", PerWrite: true})
				valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "writes acknowledged", func() error {
					if r := w.Result(); r.OK < 100 {
						return fmt.Errorf("%d acknowledged", r.OK)
					}
					return nil
				})
				ctx := context.Background()
				switch way {
				case "a-hook":
					out := Run(ctx, cfg)
					require.Equal(t, HandedOff, out.Action, "%+v", out)
				case "c-pause-failover":
					pc := top.Nodes[0].Client(top.Options(acl.Operator))
					require.NoError(t, pc.ClientPauseWrite(ctx, 10*time.Second))
					require.NoError(t, top.Sentinels[2].Client(top.SentinelOptions()).SentinelFailover(ctx, top.Cfg.MonitorName))
					top.WaitPrimaryMoved(top.Nodes[0].Port, 30*time.Second)
				}
				top.Nodes[0].Stop()
				moved := top.WaitPrimaryMoved(top.Nodes[0].Port, 60*time.Second)
				acked := w.Result().OK
				valkeytest.Eventually(t, 60*time.Second, 20*time.Millisecond, "writes acknowledged on the new primary", func() error {
					if n := w.Result().OK; n < acked+100 {
						return fmt.Errorf("%d more acknowledged", n-acked)
					}
					return nil
				})
				w.Finish()
				res := w.Result()
				missing, err := testenv.Missing(ctx, top.NodeByPort(moved).Client(top.Options(acl.Operator)), res.Acked)
				require.NoError(t, err)
				row := fmt.Sprintf("%-17s outage %6s  lost %4d of %5d acknowledged", way, longestAckGap(w.Events()).Round(10*time.Millisecond), len(missing), res.OK)
				t.Log(row)
				rows = append(rows, row)
			})
		}
	}
	t.Logf("primary stopped under a Sentinel-aware writer, 300 ms replication delay, down-after 5000 ms:\n%s", strings.Join(rows, "\n"))
}
