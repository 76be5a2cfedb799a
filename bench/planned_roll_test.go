//go:build bench

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// Figure 2: planned roll of 1 primary + 2 replicas under the Sentinel-aware writer.
//   - ours:  the real instance controller rolls every node (StatefulSets at update revision r2, pods at r1):
//     replicas first, then CLIENT PAUSE WRITE until the replicas caught up, SENTINEL FAILOVER, and the old
//     primary replaced last. A fake kubelet replaces a deleted pod by SIGTERM + start of its process.
//   - naive: what a RollingUpdate StatefulSet does without a handoff: SIGTERM + start of node 0, 1, 2 in
//     ordinal order, each after the previous one is back in sync; no controller.
// Both use the chart's Sentinel settings (down-after 5000 ms, failover-timeout 15000 ms) and its default
// (starter) data settings: no persistence. Every replication link runs through a fault-injection link with
// a delay (replDelay), so the replicas trail the primary as they do over a real network and "0 lost" does
// not rest on loopback's microsecond lag.

// replDelay is the one-way delay of every node-to-node link in figure 2 (BENCH_REPL_DELAY_MS, default 200;
// 0 turns it off).
func replDelay() time.Duration {
	ms := 200
	if v, err := strconv.Atoi(os.Getenv("BENCH_REPL_DELAY_MS")); err == nil && v >= 0 {
		ms = v
	}
	return time.Duration(ms) * time.Millisecond
}

// startFig2Topo starts figure 2's topology with its replication links delayed.
func startFig2Topo(t *testing.T) *valkeytest.Topology {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: true})
	top.DelayReplication(replDelay())
	return top
}

type rollResult struct {
	took           time.Duration
	stalled        time.Duration // total time without an acknowledged write (gaps > 100 ms), failed or blocked
	longest        time.Duration
	failedTime     time.Duration // total of failure windows (first failed write to first acknowledged one)
	ok, failed     int
	lost           int
	stallsDetected int
}

func measureRoll(t *testing.T, w *testenv.Writer, from, to time.Time) rollResult {
	evs := w.Events()
	for _, e := range evs {
		if !e.OK || e.Lost > 0 || e.End.Sub(e.Start) > 50*time.Millisecond {
			debugf(t, "write %d at +%s took %s ok=%v lost=%d", e.N, e.Start.Sub(from).Round(time.Millisecond), e.End.Sub(e.Start).Round(time.Millisecond), e.OK, e.Lost)
		}
	}
	st := testenv.Stalls(evs, from, to, 100*time.Millisecond)
	r := rollResult{took: to.Sub(from), stalled: testenv.Total(st), stallsDetected: len(st)}
	for _, s := range st {
		if s.D() > r.longest {
			r.longest = s.D()
		}
	}
	var in []testenv.WriteEvent
	for _, e := range evs {
		if !e.Start.Before(from) && e.Start.Before(to) {
			in = append(in, e)
		}
	}
	r.failedTime = testenv.Total(testenv.FailWindows(in, from))
	r.ok, r.failed, r.lost = testenv.CountWrites(evs, from, to)
	return r
}

// measureRolls measures every writer over [from, to] (one result per writer) and sets took.
func measureRolls(t *testing.T, ws []*testenv.Writer, from, to time.Time, took time.Duration) []rollResult {
	var out []rollResult
	for _, w := range ws {
		w.Finish()
		r := measureRoll(t, w, from, to)
		r.took = took
		out = append(out, r)
	}
	return out
}

func rollOurs(t *testing.T) []rollResult {
	top := startFig2Topo(t)
	defer testenv.StopTopology(top)
	e := newKEnv(t, top)
	e.MarkNodesStale()
	e.RunKubelet(e.NodeProcs(), "r2", nil)
	ws := startWriters(t, top)
	time.Sleep(500 * time.Millisecond) // the writers have found the primary
	from := time.Now()
	stop := startInstanceController(e, controller.InstanceOptions{}) // defaults: Resync 2 s
	valkeytest.Eventually(t, 120*time.Second, 50*time.Millisecond, "every pod rolled", func() error { return e.AllAtRevision(e.NodePods(), "r2") })
	top.WaitReplicationUp(30 * time.Second)
	to := time.Now()
	time.Sleep(300 * time.Millisecond)
	rs := measureRolls(t, ws, from, to.Add(300*time.Millisecond), to.Sub(from))
	stop()
	return rs
}

func rollNaive(t *testing.T) []rollResult {
	top := startFig2Topo(t)
	defer testenv.StopTopology(top)
	ws := startWriters(t, top)
	time.Sleep(500 * time.Millisecond)
	from := time.Now()
	for _, n := range top.Nodes {
		n.Stop()
		n.Start()
		top.WaitReplicationUp(30 * time.Second) // RollingUpdate waits for the pod to be Ready again
	}
	to := time.Now()
	time.Sleep(300 * time.Millisecond)
	return measureRolls(t, ws, from, to.Add(300*time.Millisecond), to.Sub(from))
}

func fig2(t *testing.T) *figure {
	n := envInt("BENCH_ROLLS", 3)
	var ours, naive []rollResult // one per roll and writer
	var raw []string
	for i := 0; i < n; i++ { // alternated, so both see the same conditions
		// each roll in its own subtest, so its processes, fault links and iptables rules go when it ends
		var o, nv []rollResult
		t.Run(fmt.Sprintf("ours-%d", i+1), func(t *testing.T) { o = rollOurs(t) })
		t.Run(fmt.Sprintf("naive-%d", i+1), func(t *testing.T) { nv = rollNaive(t) })
		ours, naive = append(ours, o...), append(naive, nv...)
		var os, ns []string
		for j := range o {
			os = append(os, fmt.Sprintf("%.2f s (lost %d, failed %d)", o[j].stalled.Seconds(), o[j].lost, o[j].failed))
		}
		for j := range nv {
			ns = append(ns, fmt.Sprintf("%.2f s (lost %d, failed %d)", nv[j].stalled.Seconds(), nv[j].lost, nv[j].failed))
		}
		raw = append(raw, fmt.Sprintf("roll %d: ours, writers 0-2: %s; naive: %s", i+1, strings.Join(os, ", "), strings.Join(ns, ", ")))
	}
	f := &figure{N: 2, Title: fmt.Sprintf("Planned roll of 1 primary + 2 replicas, replication links delayed %s each way, %d rolls each, 3 writers (one per Sentinel): ours (replicas first, SENTINEL FAILOVER handoff) vs naive (ordinal order, no handoff)", replDelay(), n),
		Header: []string{"roll", "write outage per roll and writer (no ack > 100 ms, total): median (max)", "longest gap (max)", "failed-write time median",
			"failed writes", "lost acked writes", "acked writes", "roll duration median"}}
	type agg struct {
		stalled, longest, failedTime, took []time.Duration
		failed, lost, ok                   int
	}
	sum := func(rs []rollResult) agg {
		var a agg
		for _, r := range rs {
			a.stalled, a.longest = append(a.stalled, r.stalled), append(a.longest, r.longest)
			a.failedTime, a.took = append(a.failedTime, r.failedTime), append(a.took, r.took)
			a.failed, a.lost, a.ok = a.failed+r.failed, a.lost+r.lost, a.ok+r.ok
		}
		return a
	}
	o, nv := sum(ours), sum(naive)
	for _, r := range []struct {
		name string
		a    agg
	}{{"ours", o}, {"naive", nv}} {
		f.Rows = append(f.Rows, []string{r.name, fmt.Sprintf("%s (%s)", secs(median(r.a.stalled)), secs(maxOf(r.a.stalled))), ms(maxOf(r.a.longest)),
			ms(median(r.a.failedTime)), fmt.Sprint(r.a.failed), fmt.Sprint(r.a.lost), fmt.Sprint(r.a.ok), secs(median(r.a.took))})
	}
	rt := ratio(median(o.stalled), median(nv.stalled))
	f.Rows = append(f.Rows, []string{"ours / naive", fmt.Sprintf("%.2f", rt), "", "", "", "", "", ""})
	f.Targets = []target{
		{Name: "planned-roll outage <= 1 s in total (every roll)", Measured: fmt.Sprintf("%s worst, %s median", secs(maxOf(o.stalled)), secs(median(o.stalled))),
			Pass: maxOf(o.stalled) <= time.Second},
		{Name: "0 lost acknowledged writes (ours, all rolls)", Measured: fmt.Sprintf("%d of %d", o.lost, o.ok), Pass: o.lost == 0},
		{Name: "outage ours / naive <= 0.1 (medians)", Measured: fmt.Sprintf("%.2f", rt), Pass: rt <= 0.1},
	}
	f.Raw = append(f.Raw, raw...)
	f.Notes = append(f.Notes, fmt.Sprintf("Every node-to-node link (replication, in whichever direction a failover leaves it) delays each byte by %s "+
		"(internal/testsupport/valkeytest fault links: a toxiproxy link per pair of nodes, reached through a uid-matched iptables redirect), so the replicas trail the primary "+
		"by that much and the handoff has to wait for them; Sentinel and client links are not delayed.", replDelay()),
		"Both rolls replace a pod by SIGTERM and an immediate restart of its process (about 0.1 s here); "+
			"a real pod replacement takes seconds, which lengthens the naive roll's outage and leaves ours unchanged (it never restarts the primary while it is primary).",
		"The naive roll restarts the primary with an empty dataset (no persistence, the chart's default starter plan) and its replicas resync from it: "+
			"it loses every write acknowledged before that restart.")
	return f
}
