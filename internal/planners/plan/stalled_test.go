package plan

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// stalledWorld is steadyWorld with node 0 held objectively down by every Sentinel for downMs milliseconds,
// no failover in progress, failover-timeout 15000 ms (the charts' default).
func stalledWorld(downMs int64) World {
	w := steadyWorld()
	for i := range w.Sentinels {
		m := &w.Sentinels[i].Monitor
		m.Flags = []string{"master", "s_down", "o_down"}
		m.FailoverTimeoutMs = 15000
		m.Fields = map[string]string{"o-down-time": strconv.FormatInt(downMs, 10)}
	}
	return w
}

// TestFailoverStalled: a stall is reported only when a strict majority answered and every answering Sentinel
// holds the same primary o_down past min(10 s, failover-timeout) + slack with no failover in progress.
func TestFailoverStalled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(w *World)
		down   time.Duration // the reported Down when stalled
		retry  time.Duration // the reported Retry when stalled (30 s when 0: 2 x the default 15000 ms)
		stall  bool
	}{
		{name: "every Sentinel o_down 12 s, none failing over", down: 12 * time.Second, stall: true},
		{name: "o_down 11 s: still within the election", mutate: func(w *World) { setDown(w, 11000) }},
		{name: "one Sentinel o_down only 1 s (it just saw it)", mutate: func(w *World) { w.Sentinels[2].Monitor.Fields["o-down-time"] = "1000" }},
		{name: "one Sentinel failing over", mutate: func(w *World) {
			w.Sentinels[1].Monitor.Flags = append(w.Sentinels[1].Monitor.Flags, "failover_in_progress")
		}},
		{name: "one Sentinel reports a failover state", mutate: func(w *World) { w.Sentinels[1].Monitor.FailoverState = "wait_promotion" }},
		{name: "one Sentinel only s_down", mutate: func(w *World) { w.Sentinels[0].Monitor.Flags = []string{"master", "s_down"} }},
		{name: "one Sentinel names another primary", mutate: func(w *World) { w.Sentinels[0].Monitor.Host = w.Instance.Nodes[1].Host }},
		{name: "one Sentinel does not know the monitor", mutate: func(w *World) { w.Sentinels[0].Found = false }},
		{name: "o-down-time missing", mutate: func(w *World) { delete(w.Sentinels[0].Monitor.Fields, "o-down-time") }},
		{name: "o-down-time garbage", mutate: func(w *World) { w.Sentinels[0].Monitor.Fields["o-down-time"] = "soon" }},
		{name: "one of three unreachable: two answered, a majority", mutate: func(w *World) { w.Sentinels[2].Err = "i/o timeout" },
			down: 12 * time.Second, stall: true},
		{name: "two of three unreachable: not a majority", mutate: func(w *World) { w.Sentinels[1].Err = "i/o timeout"; w.Sentinels[2].Err = "i/o timeout" }},
		{name: "short failover-timeout: its own election timeout (3 s + slack)", mutate: func(w *World) {
			setDown(w, 5000)
			for i := range w.Sentinels {
				w.Sentinels[i].Monitor.FailoverTimeoutMs = 3000
			}
		}, down: 5 * time.Second, retry: 6 * time.Second, stall: true},
		{name: "not monitored", mutate: func(w *World) { w.SentinelInfo = nil }},
		{name: "shortest o-down-time reported", mutate: func(w *World) { w.Sentinels[1].Monitor.Fields["o-down-time"] = "11600" },
			down: 11600 * time.Millisecond, stall: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stalledWorld(12000)
			if tc.mutate != nil {
				tc.mutate(&w)
			}
			s, ok := FailoverStalled(w)
			assert.Equal(t, tc.stall, ok)
			if tc.stall {
				assert.Equal(t, addr(w.Instance, 0), s.Primary)
				assert.Equal(t, tc.down, s.Down)
				if tc.retry == 0 {
					tc.retry = 30 * time.Second
				}
				assert.Equal(t, tc.retry, s.Retry, "2 x failover-timeout")
			}
		})
	}
}

func setDown(w *World, ms int64) {
	for i := range w.Sentinels {
		w.Sentinels[i].Monitor.Fields["o-down-time"] = strconv.FormatInt(ms, 10)
	}
}

// TestSentinelsNotWatching: a Sentinel naming the primary the controller reaches, with info-refresh past 30 s,
// is reported (as cut off when it flags the primary down, as possibly stopped when not); nothing when the
// primary is not reached, a failover runs, or the field is missing.
func TestSentinelsNotWatching(t *testing.T) {
	refresh := func(ms string) func(w *World) {
		return func(w *World) { w.Sentinels[1].Monitor.Fields = map[string]string{"info-refresh": ms} }
	}
	for _, tc := range []struct {
		name   string
		mutate func(w *World)
		want   []string // Sentinel addresses reported
		down   bool
	}{
		{name: "healthy: refreshed 4 s ago", mutate: refresh("4000")},
		{name: "30 s: not yet", mutate: refresh("30000")},
		{name: "783 s, no s_down: stopped timers", mutate: refresh("783000"), want: []string{"s1:26379"}},
		{name: "45 s and s_down: cut off", mutate: func(w *World) {
			refresh("45000")(w)
			w.Sentinels[1].Monitor.Flags = []string{"master", "s_down"}
		}, want: []string{"s1:26379"}, down: true},
		{name: "field missing", mutate: func(w *World) { w.Sentinels[1].Monitor.Fields = nil }},
		{name: "field garbage", mutate: refresh("later")},
		{name: "the controller does not reach the primary", mutate: func(w *World) {
			refresh("783000")(w)
			w.Nodes[0].Reachable, w.Nodes[0].Err = false, "EOF"
		}},
		{name: "a failover runs", mutate: func(w *World) {
			refresh("783000")(w)
			w.Sentinels[0].Monitor.Flags = []string{"master", "failover_in_progress"}
		}},
		{name: "not monitored", mutate: func(w *World) { refresh("783000")(w); w.SentinelInfo = nil }},
		{name: "it names another primary", mutate: func(w *World) {
			refresh("783000")(w)
			w.Sentinels[1].Monitor.Host = w.Instance.Nodes[2].Host
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := steadyWorld()
			tc.mutate(&w)
			var got []string
			for _, n := range SentinelsNotWatching(w) {
				got = append(got, n.Sentinel)
				assert.Equal(t, tc.down, n.Down)
				assert.Equal(t, addr(w.Instance, 0), n.Primary)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
