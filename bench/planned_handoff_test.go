//go:build bench

package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// Figure 6: one planned Sentinel-led handoff of the primary (1 primary + 2 replicas, 3 Sentinels, the chart's
// Sentinel timings) under the three Sentinel-aware writers, on the engine under test (valkey 9.1 by default),
// path by path, alternated round by round so every path sees the same conditions:
//   - plain:       SENTINEL FAILOVER alone, nothing paused (what a script or an operator without a hook does);
//   - coordinated: SENTINEL FAILOVER <name> COORDINATED (Valkey 9): the Sentinel has the primary run FAILOVER
//     TO the replica it selected, so the primary itself pauses writes, waits for that replica's offset and
//     demotes itself (the _sentinel user needs +failover on the data nodes);
//   - coordinated+nudge: the same, and once the asked Sentinel names the promoted replica, CLIENT KILL TYPE
//     pubsub on it, as the controller's handoff does;
//   - paused (controller): the real instance controller's planned handoff, as a roll of the primary alone
//     (fake clientset; the primary's pod is the only one at an old revision): CLIENT PAUSE WRITE on the primary,
//     wait until the replicas hold its offset, SENTINEL FAILOVER, demote the old primary as soon as the asked
//     Sentinel names the new one, close that Sentinel's Pub/Sub clients, unpause; then its pod is replaced.
// Each once on an idle loopback and once with every replication link delayed by BENCH_LAG_MS (default
// 100 ms each way, so replicas trail the primary by about that much of the write stream).

// handoffRound is one handoff as the writers saw it.
type handoffRound struct {
	path    string
	lag     time.Duration
	longest time.Duration // the longest time any writer went without an acknowledged write
	lost    int           // acknowledged writes lost, all writers
	failed  int           // failed writes, all writers
	ok      int
	// published is the time from the command until every Sentinel names the new primary.
	published time.Duration
	err       error
}

type handoffPath struct {
	name string
	// run hands the primary off and returns once the command was sent (the writers measure the rest).
	run func(ctx context.Context, top *valkeytest.Topology) error
	// controller: run is not used; the real instance controller hands the primary off (see handoffOnce).
	controller bool
}

func handoffPaths() []handoffPath {
	return []handoffPath{
		{name: "paused (controller)", controller: true},
		{name: "coordinated", run: func(ctx context.Context, top *valkeytest.Topology) error {
			return lastSentinel(ctx, top).SentinelFailoverCoordinated(ctx, top.Cfg.MonitorName)
		}},
		{name: "coordinated+nudge", run: handoffCoordinatedNudged},
		{name: "plain", run: func(ctx context.Context, top *valkeytest.Topology) error {
			return lastSentinel(ctx, top).SentinelFailover(ctx, top.Cfg.MonitorName)
		}},
	}
}

// lastSentinel dials the last Sentinel, the one a planned handoff asks (see
// plan.FailoverOrder: the other Sentinels publish +switch-master about 1 s before the leader does).
func lastSentinel(ctx context.Context, top *valkeytest.Topology) *valkey.Client {
	return top.Sentinels[len(top.Sentinels)-1].Client(top.SentinelOptions())
}

func fig6(t *testing.T) *figure {
	n := envInt("BENCH_HANDOFFS", 5)
	lag := time.Duration(envInt("BENCH_LAG_MS", 100)) * time.Millisecond
	paths := handoffPaths()
	var rounds []handoffRound
	var raw []string
	lags := []time.Duration{0, lag}
	for _, l := range lags {
		for i := 0; i < n; i++ {
			var line []string
			for _, p := range paths {
				r := handoffOnce(t, p, l)
				rounds = append(rounds, r)
				if r.err != nil {
					t.Logf("%s, lag %s: %v", p.name, l, r.err)
				}
				s := fmt.Sprintf("%s %.2f s / %.2f s lost %d", p.name, r.longest.Seconds(), r.published.Seconds(), r.lost)
				if r.err != nil {
					s += " (" + r.err.Error() + ")"
				}
				line = append(line, s)
			}
			raw = append(raw, fmt.Sprintf("lag %s, round %d (longest outage / published, lost): %s", l, i+1, strings.Join(line, "; ")))
		}
	}
	f := &figure{N: 6, Title: fmt.Sprintf("Planned Sentinel-led handoff on %s, %d rounds per path and lag, 3 Sentinel-aware writers: "+
		"paused (CLIENT PAUSE WRITE + catch-up + SENTINEL FAILOVER) vs SENTINEL FAILOVER COORDINATED vs plain SENTINEL FAILOVER", valkeytest.Default, n),
		Header: []string{"path", "replication lag", "write outage, longest per round: median (max)", "Sentinels published the new primary: median (max)",
			"lost acked writes", "failed writes", "acked writes", "rounds failed"}}
	best := map[time.Duration]string{}
	bestOutage := map[time.Duration]time.Duration{}
	for _, l := range lags {
		for _, p := range paths {
			var outs, pubs []time.Duration
			lost, failed, ok, errs := 0, 0, 0, 0
			for _, r := range rounds {
				if r.path != p.name || r.lag != l {
					continue
				}
				if r.err != nil {
					errs++
					continue
				}
				outs, pubs = append(outs, r.longest), append(pubs, r.published)
				lost, failed, ok = lost+r.lost, failed+r.failed, ok+r.ok
			}
			f.Rows = append(f.Rows, []string{p.name, lagName(l), fmt.Sprintf("%s (%s)", secs(median(outs)), secs(maxOf(outs))),
				fmt.Sprintf("%s (%s)", secs(median(pubs)), secs(maxOf(pubs))), fmt.Sprint(lost), fmt.Sprint(failed), fmt.Sprint(ok), fmt.Sprint(errs)})
			if lost == 0 && errs == 0 && len(outs) > 0 && (best[l] == "" || maxOf(outs) < bestOutage[l]) {
				best[l], bestOutage[l] = p.name, maxOf(outs)
			}
		}
	}
	// one path for every lag: 0 lost and no failed round at each, the shortest worst-case outage
	worst := map[string]time.Duration{}
	for _, p := range paths {
		ok := true
		for _, r := range rounds {
			if r.path != p.name {
				continue
			}
			if r.err != nil || r.lost > 0 {
				ok = false
			}
			if r.longest > worst[p.name] {
				worst[p.name] = r.longest
			}
		}
		if !ok {
			delete(worst, p.name)
		}
	}
	overall, others := "", []string{}
	for _, p := range paths {
		if w, ok := worst[p.name]; ok && (overall == "" || w < worst[overall]) {
			overall = p.name
		}
	}
	for _, p := range paths {
		if w, ok := worst[p.name]; ok && p.name != overall {
			others = append(others, fmt.Sprintf("%s %s", p.name, secs(w)))
		} else if !ok {
			others = append(others, p.name+" loses writes or fails")
		}
	}
	if overall != "" {
		f.Targets = append(f.Targets, target{Name: "the path for this engine: 0 lost acknowledged writes at every lag, shortest worst-case outage",
			Measured: fmt.Sprintf("%s, worst %s (%s)", overall, secs(worst[overall]), strings.Join(others, ", ")), Pass: true})
	} else {
		f.Targets = append(f.Targets, target{Name: "the path for this engine: 0 lost acknowledged writes at every lag, shortest worst-case outage", Measured: "none"})
	}
	for _, l := range lags {
		m := "none"
		if best[l] != "" {
			m = fmt.Sprintf("%s (longest outage %s)", best[l], secs(bestOutage[l]))
		}
		f.Targets = append(f.Targets, target{Name: "a path with 0 lost acknowledged writes in every round, " + lagName(l), Measured: m, Pass: best[l] != ""})
	}
	f.Raw = raw
	f.Notes = append(f.Notes,
		"Write outage: per round the longest time any of the three writers went without an acknowledged write (blocked by the pause or failing), from the handoff command to 2 s after every Sentinel names the new primary.",
		"Published: from the command until GET-MASTER-ADDR-BY-NAME on every Sentinel names the new primary (polled every 5 ms); for the controller, from the start of the longest stall (its CLIENT PAUSE WRITE).",
		"The shortest outage with 0 lost writes in every round decides the path the controller and the preStop hook should use on this engine (issue 14).")
	return f
}

func lagName(l time.Duration) string {
	if l == 0 {
		return "none (loopback)"
	}
	return fmt.Sprintf("%s each way", l)
}

// handoffOnce starts a fresh topology, lets the writers run, hands the primary off by path p and measures.
func handoffOnce(t *testing.T, p handoffPath, lag time.Duration) handoffRound {
	r := handoffRound{path: p.name, lag: lag}
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: lag > 0})
	defer testenv.StopTopology(top)
	ctx := context.Background()
	// what the charts render for the _sentinel user when the coordinated path is used
	for _, nd := range top.Nodes {
		if out, err := nd.CLI(acl.Operator, top.Passwords[acl.Operator], "ACL", "SETUSER", acl.Sentinel, "+failover", "+client|pause", "+client|unpause"); err != nil || out != "OK" {
			t.Fatalf("ACL SETUSER %s +failover +client|pause +client|unpause: %q %v", acl.Sentinel, out, err)
		}
	}
	old := testenv.WaitSteady(t, top, 30*time.Second)
	if lag > 0 {
		top.DelayReplication(lag)
	}
	sw := testenv.NewSwitchWatcher(t, top)
	ws := startWriters(t, top)
	time.Sleep(time.Second) // the writers found the primary; with lag, the replicas trail it
	from := time.Now()
	var published time.Time
	if p.controller {
		e := newKEnv(t, top)
		e.MarkNodesStale()
		for _, n := range e.In.Nodes[1:] { // only the primary (node 0) is at the old revision
			e.SetRevision(n.Pod, "r2")
		}
		e.RunKubelet(e.NodeProcs(), "r2", nil)
		stop := startInstanceController(e, controller.InstanceOptions{})
		defer stop()
	} else {
		r.err = p.run(ctx, top)
	}
	if r.err == nil {
		published, _, r.err = sw.WaitAll(old, 30*time.Second)
	}
	time.Sleep(2 * time.Second) // writers reconnect and write again
	to := time.Now()
	var longest testenv.Window
	for _, w := range ws {
		w.Finish()
		evs := w.Events()
		for _, s := range testenv.Stalls(evs, from, to, 0) {
			if s.D() > longest.D() {
				longest = s
			}
		}
		ok, failed, lost := testenv.CountWrites(evs, from, to)
		r.ok, r.failed, r.lost = r.ok+ok, r.failed+failed, r.lost+lost
	}
	r.longest = longest.D()
	if r.err == nil {
		// the controller's handoff starts at its own pace: count from the pause, the start of the longest stall
		if p.controller && !longest.From.IsZero() {
			from = longest.From
		}
		r.published = published.Sub(from)
	}
	return r
}

// handoffCoordinatedNudged asks for a coordinated failover and, once the asked Sentinel names the promoted
// replica, closes that Sentinel's Pub/Sub clients (the controller's nudge: the failover leader publishes
// +switch-master only at the end of the failover, about 1 s after the others).
func handoffCoordinatedNudged(ctx context.Context, top *valkeytest.Topology) error {
	old, err := top.SentinelPrimary()
	if err != nil {
		return err
	}
	sc := lastSentinel(ctx, top)
	if err := sc.SentinelFailoverCoordinated(ctx, top.Cfg.MonitorName); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_, p, found, err := sc.SentinelPrimaryAddr(ctx, top.Cfg.MonitorName)
		if err == nil && found && p != old {
			_, err := sc.ClientKillPubSub(ctx)
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("primary did not move")
}
