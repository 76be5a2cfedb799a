package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// Outage is what Sentinel-aware writers saw around a disruption (MeasureOutage).
type Outage struct {
	// Longest is the longest time without an acknowledged write: from the first failed write to the
	// acknowledgement of the next successful one (the writer's view of "no writable primary").
	Longest time.Duration
	// FirstOnNew is how long after fn started the first write acknowledged by the new primary was sent
	// (0: none; the primary did not move).
	FirstOnNew time.Duration
	// Acked counts the acknowledged writes; Lost those missing on the final primary or rolled back.
	Acked, Lost int
	// NewPrimary is the port Sentinel names at the end.
	NewPrimary int
}

func (o Outage) String() string {
	return fmt.Sprintf("longest write outage %s, first write on the new primary %s after the start, %d acknowledged, %d lost",
		o.Longest.Round(time.Millisecond), o.FirstOnNew.Round(time.Millisecond), o.Acked, o.Lost)
}

// MeasureOutage runs fn (a handoff, a hook, a failure) under a per-key writer and a counter writer of top
// (both Sentinel-aware), then waits, at most settle, until the writers wrote for 500 ms to the primary the running
// Sentinels name (moved off port from or not), and returns what they saw. Lost counts acknowledged keys missing on
// the final primary plus counter writes rolled back.
func MeasureOutage(t testing.TB, top *valkeytest.Topology, from int, settle time.Duration, fn func()) Outage {
	t.Helper()
	perWrite := StartWriter(t, top, WriterOptions{Key: "__valkey-ha:outage", PerWrite: true})
	counter := StartWriter(t, top, WriterOptions{First: len(top.Sentinels) - 1})
	valkeytest.Eventually(t, 10*time.Second, 20*time.Millisecond, "writes acknowledged before", func() error {
		if r := perWrite.Result(); r.OK < 30 {
			return fmt.Errorf("%d acknowledged", r.OK)
		}
		return nil
	})
	start := time.Now()
	fn()
	// writes resume on whatever primary the Sentinels that run name (the one handed off, when nothing moved)
	moved, since := 0, time.Now()
	valkeytest.Eventually(t, settle, 20*time.Millisecond, "writes acknowledged again for 500 ms", func() error {
		p, err := top.SentinelPrimary()
		if err != nil {
			return err
		}
		moved = p
		if perWrite.LastOK().Before(since.Add(500 * time.Millisecond)) {
			return fmt.Errorf("last acknowledged %s", perWrite.LastOK())
		}
		return nil
	})
	perWrite.Finish()
	counter.Finish()
	res := perWrite.Result()
	pc := top.NodeByPort(moved).Client(top.Options(acl.Operator))
	missing, err := Missing(context.Background(), pc, res.Acked)
	if err != nil {
		t.Fatalf("read the acknowledged keys: %v", err)
	}
	o := Outage{Longest: res.Longest, Acked: res.OK + counter.Result().OK, Lost: len(missing), NewPrimary: moved}
	for _, e := range counter.Events() {
		o.Lost += e.Lost
	}
	// the first acknowledged write on the new primary: the first one after fn started whose key the new
	// primary has but that was sent after the last write the old primary acknowledged
	if moved != from {
		o.FirstOnNew = firstAfterOutage(perWrite.Events(), start)
	}
	return o
}

// firstAfterOutage returns, relative to start, when the first acknowledged write after the last failure
// following start was sent (0 when no write failed after start).
func firstAfterOutage(evs []WriteEvent, start time.Time) time.Duration {
	lastFail := -1
	for i, e := range evs {
		if !e.OK && !e.Start.Before(start) {
			lastFail = i
		}
	}
	if lastFail < 0 {
		return 0
	}
	for _, e := range evs[lastFail+1:] {
		if e.OK {
			return e.End.Sub(start)
		}
	}
	return 0
}
