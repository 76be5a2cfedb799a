package templatestests

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// minReplicasLines returns the min-replicas-* directives of the valkey.conf the chart renders for values.
func minReplicasLines(t *testing.T, values string) []string {
	t.Helper()
	conf := decode(t, mustRender(t, "valkey", values)).configMap(t, valkeyF+"-config").Data["valkey.conf"]
	var out []string
	for _, l := range strings.Split(conf, "\n") {
		if strings.HasPrefix(l, "min-replicas-") {
			out = append(out, l)
		}
	}
	return out
}

// writeLog is a writer's record: every write's end and whether it was acknowledged, and by which port.
type writeLog struct {
	mu      sync.Mutex
	writes  []write
	lastErr error
}

type write struct {
	at   time.Time
	port int
	ok   bool
}

// lastAckBy returns the time of the last write port acknowledged.
func (l *writeLog) lastAckBy(port int) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, w := range l.writes {
		if w.ok && w.port == port {
			last = w.at
		}
	}
	return last
}

// longestOutage returns the longest time between two acknowledged writes within [from, to].
func (l *writeLog) longestOutage(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var longest time.Duration
	prev := from
	for _, w := range l.writes {
		if !w.ok || w.at.Before(from) || w.at.After(to) {
			continue
		}
		longest = max(longest, w.at.Sub(prev))
		prev = w.at
	}
	return max(longest, to.Sub(prev))
}

// failedBetween counts the writes that failed within [from, to].
func (l *writeLog) failedBetween(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, w := range l.writes {
		if !w.ok && !w.at.Before(from) && !w.at.After(to) {
			n++
		}
	}
	return n
}

// writeTo writes one key every 20 ms to the node at *port (read under mu) until ctx ends.
func writeTo(ctx context.Context, top *valkeytest.Topology, mu *sync.Mutex, port *int, l *writeLog) {
	clients := map[int]*valkey.Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := 0; ctx.Err() == nil; i++ {
		mu.Lock()
		p := *port
		mu.Unlock()
		c := clients[p]
		if c == nil {
			c = top.NodeByPort(p).Client(top.Options(acl.Operator))
			clients[p] = c
		}
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Set(wctx, fmt.Sprintf("__valkey-ha:partition:%d", i), "v", 0) // the operator user writes __valkey-ha:* keys
		cancel()
		l.mu.Lock()
		l.writes = append(l.writes, write{at: time.Now(), port: p, ok: err == nil})
		if err != nil {
			l.lastErr = err
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDefaultsStopAPartitionedPrimary (issue 24, part 4): with the chart's default values, a primary cut off
// from its replicas (both stopped with their connections open, as across a partition: no acknowledgement
// arrives) stops acknowledging writes within min-replicas-max-lag plus 2 s: the writes a client on its side
// sends are refused (NOREPLICAS) instead of acknowledged and then discarded when a failover on the other side
// demotes it (RELIABILITY.md, partition rows). Before the default changed (minReplicasToWrite 0) the cut-off
// primary acknowledged writes for the whole partition. It also logs what the default costs: the write outage
// of a planned failover (SENTINEL FAILOVER, as a roll's handoff ends: the new primary refuses writes until a
// replica acknowledged its stream), and the writes refused while each replica is restarted in turn (a roll: a
// full resync each, no persistence) and while both are at once.
func TestDefaultsStopAPartitionedPrimary(t *testing.T) {
	valkeytest.RequireFaults(t)
	lines := minReplicasLines(t, "")
	t.Logf("the chart's default renders %q", lines)
	const (
		downAfter = 2 * time.Second
		partition = 15 * time.Second
	)
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{FaultLinks: true, DownAfterMs: int(downAfter / time.Millisecond),
		FailoverTimeoutMs: 6000, ExtraServerLines: lines})
	top.WaitReplicationUp(30 * time.Second)
	top.WaitSentinelsConverged(30*time.Second, 2, 2)
	old := top.Nodes[0]

	var mu sync.Mutex
	port := old.Port
	var l writeLog
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { writeTo(ctx, top, &mu, &port, &l); close(done) }()
	defer func() { cancel(); <-done }()
	valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "a write acknowledged", func() error {
		if l.lastAckBy(old.Port).IsZero() {
			l.mu.Lock()
			defer l.mu.Unlock()
			return fmt.Errorf("no write acknowledged by %d yet (%d writes, last error %v)", old.Port, len(l.writes), l.lastErr)
		}
		return nil
	})

	// the cost in a planned handoff: SENTINEL FAILOVER, the writer follows the Sentinels' answer
	s := top.Sentinels[0].Client(top.SentinelOptions())
	defer s.Close()
	from := time.Now()
	_, err := s.Command(ctx, "SENTINEL", "FAILOVER", top.Cfg.MonitorName)
	require.NoError(t, err)
	p := top.WaitPrimaryMoved(old.Port, 30*time.Second)
	mu.Lock()
	port = p
	mu.Unlock()
	valkeytest.Eventually(t, 20*time.Second, 50*time.Millisecond, "the new primary acknowledges writes", func() error {
		if l.lastAckBy(p).IsZero() {
			return fmt.Errorf("no write acknowledged by %d yet", p)
		}
		return nil
	})
	firstAck := time.Now()
	t.Logf("planned failover: longest write outage %s (the new primary %d acknowledged its first write %s after the request)",
		l.longestOutage(from, firstAck).Round(time.Millisecond), p, firstAck.Sub(from).Round(time.Millisecond))
	top.WaitReplicationUp(30 * time.Second)
	top.WaitSentinelsConverged(30*time.Second, 2, 2)

	// the primary cut off from its replicas: both stop (SIGSTOP), their connections stay open and no
	// acknowledgement arrives, as across a partition
	cut := top.NodeByPort(p)
	var replicas []*valkeytest.Proc
	for _, n := range top.Nodes {
		if n != cut {
			replicas = append(replicas, n)
		}
	}
	start := time.Now()
	for _, n := range replicas {
		n.Pause()
	}
	time.Sleep(time.Until(start.Add(partition)))
	last := l.lastAckBy(cut.Port)
	for _, n := range replicas {
		n.Resume()
	}
	took := last.Sub(start)

	// the cost in a roll: each replica restarted in turn (a full resync: no persistence), then both at once
	top.WaitReplicationUp(30 * time.Second)
	restart := func(ns ...*valkeytest.Proc) (time.Duration, int) {
		from := time.Now()
		for _, n := range ns {
			n.Kill()
		}
		for _, n := range ns {
			n.Start()
		}
		top.WaitReplicationUp(30 * time.Second)
		to := time.Now()
		return l.longestOutage(from, to), l.failedBetween(from, to)
	}
	for _, n := range replicas {
		gap, failed := restart(n)
		t.Logf("replica %d restarted (full resync) while the other replica was up: longest write gap %s, %d writes refused",
			n.Port, gap.Round(time.Millisecond), failed)
	}
	gap, failed := restart(replicas...)
	t.Logf("both replicas restarted at once: longest write gap %s, %d writes refused", gap.Round(time.Millisecond), failed)
	t.Logf("the cut-off primary %d acknowledged writes for %s of the %s partition", cut.Port, took.Round(time.Millisecond), partition)
	bound := 10 * time.Second // no min-replicas-max-lag: the whole partition
	for _, line := range lines {
		var lag int
		if _, err := fmt.Sscanf(line, "min-replicas-max-lag %d", &lag); err == nil {
			bound = time.Duration(lag)*time.Second + 2*time.Second
		}
	}
	assert.Less(t, took, bound, "the cut-off primary stops acknowledging writes within min-replicas-max-lag + 2 s (%q)", lines)
}
