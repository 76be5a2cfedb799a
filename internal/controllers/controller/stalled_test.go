package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// TestStalledFailoverIsReported: the Sentinels' links to one another are cut and the monitor's quorum is 1, so
// when the primary is killed each Sentinel holds it o_down on its own, starts an election, votes for itself
// and, with no peer to vote for it, aborts (-failover-abort-not-elected) after failover-timeout; none tries
// again before 2 x failover-timeout. The instance controller reports that stall once, as a FailoverStalled
// Warning and valkey_ha_failover_stalls_total (0 before it), and only after the Sentinels logged the abort
// (never while the election could still end). Once the links heal, Sentinel's own retry fails over; every
// further count has its own Event.
func TestStalledFailoverIsReported(t *testing.T) {
	e, m := labelledInstance(t, valkeytest.TopologyConfig{Quorum: 1, FaultLinks: true, DownAfterMs: 1000, FailoverTimeoutMs: 5000},
		300*time.Millisecond)
	old := e.Top.Nodes[0]
	stalls := func() float64 { return testutil.ToFloat64(m.FailoverStalls.WithLabelValues(inst)) }
	assert.Equal(t, 0.0, stalls(), "the counter exists at 0 before the first stall")
	testenv.DrainEvents(e.Rec, "")

	peerLinks(e.Top, (*valkeytest.Link).Cut)
	killed := time.Now()
	old.Kill()
	var evs []string
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "FailoverStalled reported", func() error {
		evs = append(evs, testenv.DrainEvents(e.Rec, "FailoverStalled")...)
		if len(evs) == 0 {
			return fmt.Errorf("no FailoverStalled yet; Sentinel aborts so far: %d", e.Top.SplitVotes())
		}
		return nil
	})
	reported := time.Since(killed)
	aborts := e.Top.SplitVotes()
	t.Logf("reported %s after the kill, %d Sentinel(s) had aborted: %s", reported.Round(time.Millisecond), aborts, evs[0])
	require.Positive(t, aborts, "the stall is reported only once an election was aborted")
	assert.Contains(t, evs[0], "3 of 3")
	assert.Contains(t, evs[0], fmt.Sprintf("%s:%d", valkeytest.Host, old.Port), "it names the primary held down")
	assert.Contains(t, evs[0], "10s", "it says when Sentinel tries again (2 x failover-timeout)")
	assert.Equal(t, 1.0, stalls())

	peerLinks(e.Top, (*valkeytest.Link).Heal)
	moved := e.Top.WaitPrimaryMoved(old.Port, 30*time.Second)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels follow", func() error { return e.LabelsMatchExcept(moved, "vk-0-0") })
	evs = append(evs, testenv.DrainEvents(e.Rec, "FailoverStalled")...)
	t.Logf("failed over to %d %s after the kill; FailoverStalled events %d, Sentinel aborts %d", moved,
		time.Since(killed).Round(time.Millisecond), len(evs), e.Top.SplitVotes())
	assert.Equal(t, float64(len(evs)), stalls(), "one count per Event: %s", strings.Join(evs, "; "))
}

// TestSentinelNotWatchingIsReported: one Sentinel's link to the primary is cut while the controller still
// reaches the primary. Once that Sentinel's last INFO of the primary is older than 30 s (it reads INFO every
// 10 s), the instance controller says so once (a SentinelNotWatching Warning naming it as cut off: it flags
// the primary down) and valkey_ha_instance_sentinels_not_watching reads 1; 0 before, and 0 again once the
// link heals. No failover: the other two Sentinels see the primary.
func TestSentinelNotWatchingIsReported(t *testing.T) {
	e, m := labelledInstance(t, valkeytest.TopologyConfig{FaultLinks: true}, 500*time.Millisecond)
	primary := e.Top.Nodes[0]
	notWatching := func() float64 { return testutil.ToFloat64(m.InstanceSentinelsNotWatching.WithLabelValues(inst)) }
	assert.Equal(t, 0.0, notWatching())
	testenv.DrainEvents(e.Rec, "")

	cutOff := e.Top.Sentinels[1]
	link := e.Top.Link(cutOff, primary)
	link.Cut()
	cut := time.Now()
	var evs []string
	valkeytest.Eventually(t, 60*time.Second, 200*time.Millisecond, "SentinelNotWatching reported", func() error {
		evs = append(evs, testenv.DrainEvents(e.Rec, "SentinelNotWatching")...)
		if len(evs) == 0 {
			return fmt.Errorf("not yet (gauge %v)", notWatching())
		}
		return nil
	})
	t.Logf("reported %s after the cut: %s", time.Since(cut).Round(time.Millisecond), evs[0])
	// its last INFO came up to one 10 s period before the cut
	assert.GreaterOrEqual(t, time.Since(cut), 20*time.Second, "not before 30 s without INFO")
	assert.Contains(t, evs[0], cutOff.Addr())
	assert.Contains(t, evs[0], "cut off")
	assert.Equal(t, 1.0, notWatching())
	assert.Len(t, evs, 1, "once")

	link.Heal()
	valkeytest.Eventually(t, 30*time.Second, 200*time.Millisecond, "the gauge back at 0", func() error {
		if v := notWatching(); v != 0 {
			return fmt.Errorf("gauge %v", v)
		}
		return nil
	})
	port, err := e.Top.SentinelPrimary()
	require.NoError(t, err)
	assert.Equal(t, primary.Port, port, "no failover")
}

// inst is the instance key of newEnv's instance (the metrics' valkey_instance label).
const inst = ns + "/vk"

// labelledInstance starts a topology (cfg), publishes its Sentinels and an instance controller with resync,
// and waits until the role labels name node 0, the primary.
func labelledInstance(t *testing.T, cfg valkeytest.TopologyConfig, resync time.Duration) (*env, *metrics.Metrics) {
	e := newEnv(t, cfg)
	e.PublishSentinels()
	m := e.startInstanceController(InstanceOptions{Resync: resync})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })
	return e, m
}

// peerLinks calls fn on every Sentinel-to-Sentinel link of top (TopologyConfig.FaultLinks).
func peerLinks(top *valkeytest.Topology, fn func(*valkeytest.Link)) {
	for _, from := range top.Sentinels {
		for _, to := range top.Sentinels {
			if from != to {
				fn(top.Link(from, to))
			}
		}
	}
}
