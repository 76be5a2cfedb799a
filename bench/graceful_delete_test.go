//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/prestop"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/prestoptest"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// Figure 7 (issue 14): the primary's pod is deleted gracefully (what kubectl delete pod, an eviction and a
// drain do: the preStop hook runs, then SIGTERM), 1 primary + 2 replicas + 3 Sentinels with the chart's
// Sentinel timings (down-after 5000 ms, failover-timeout 15000 ms), the three Sentinel-aware writers,
// every replication link delayed by each of BENCH_PRESTOP_LAG_MS (default 100 and 300 ms each way, so the
// replicas trail the primary), on each engine of BENCH_PRESTOP_ENGINES (default valkey-9.1,valkey-8.0), three ways alternated
// round by round so each sees the same conditions:
//   - (a) ours: the data container's preStop hook (valkey-sentinel-ctl prestop, internal/podsteps/prestop: CLIENT PAUSE
//     WRITE, wait until the replicas hold the paused primary's offset, SENTINEL FAILOVER, demote as soon as the
//     asked Sentinel names the promoted replica, close its Pub/Sub clients, unpause), then SIGTERM;
//   - (b) no hook: SIGTERM (valkey-server waits up to shutdown-timeout for lagging replicas, then exits) and
//     Sentinel's own failover after down-after-milliseconds;
//   - (c) the peers' hook (Bitnami, redis-ha, valkey-helm 1.0): CLIENT PAUSE WRITE, SENTINEL FAILOVER, wait
//     until that Sentinel names the new primary, then SIGTERM; no check that a replica caught up.
// The stopped server is not restarted: the replacement pod's return is not part of the outage.

type fig7Way struct {
	name string
	run  func(t *testing.T, top *valkeytest.Topology) error
}

func fig7Ways() []fig7Way {
	return []fig7Way{
		{"(a) ours: preStop hook", func(t *testing.T, top *valkeytest.Topology) error {
			out := prestop.Run(context.Background(), prestoptest.Hook(t, top, 0, quietLog()))
			top.Nodes[0].Stop()
			if out.Action != prestop.HandedOff {
				return fmt.Errorf("the hook did not hand off: %s %s: %s", out.Action, out.Reason, out.Detail)
			}
			return nil
		}},
		{"(b) no hook", func(t *testing.T, top *valkeytest.Topology) error {
			top.Nodes[0].Stop()
			return nil
		}},
		{"(c) peers: pause + SENTINEL FAILOVER", func(t *testing.T, top *valkeytest.Topology) error {
			ctx := context.Background()
			if err := top.Nodes[0].Client(top.Options(acl.Operator)).ClientPauseWrite(ctx, 15*time.Second); err != nil {
				return fmt.Errorf("CLIENT PAUSE WRITE: %w", err)
			}
			sc := lastSentinel(ctx, top)
			if err := sc.SentinelFailover(ctx, top.Cfg.MonitorName); err != nil {
				return fmt.Errorf("SENTINEL FAILOVER: %w", err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, p, found, err := sc.SentinelPrimaryAddr(ctx, top.Cfg.MonitorName)
				if err == nil && found && p != top.Nodes[0].Port {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("the Sentinel did not name a new primary within 20 s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			top.Nodes[0].Stop()
			return nil
		}},
	}
}

type fig7Round struct {
	engine, way string
	lag         time.Duration
	longest     time.Duration // longest time any writer went without an acknowledged write
	ok, failed  int
	lost        int
	err         error
}

func fig7Engines() []valkeytest.Engine {
	v := os.Getenv("BENCH_PRESTOP_ENGINES")
	if v == "" {
		return []valkeytest.Engine{valkeytest.Valkey91, valkeytest.Valkey80}
	}
	var out []valkeytest.Engine
	for _, name := range strings.Split(v, ",") {
		for _, e := range valkeytest.Engines {
			if e.String() == strings.TrimSpace(name) {
				out = append(out, e)
			}
		}
	}
	return out
}

// fig7Once starts a fresh topology on engine e, lets the writers run with the links delayed, stops the
// primary's "pod" way w and measures what the writers saw until 2 s after every Sentinel names the new
// primary.
func fig7Once(t *testing.T, e valkeytest.Engine, w fig7Way, lag time.Duration) fig7Round {
	r := fig7Round{engine: e.String(), way: w.name, lag: lag}
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Engine: e, DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: lag > 0})
	defer testenv.StopTopology(top)
	old := testenv.WaitSteady(t, top, 30*time.Second)
	if lag > 0 {
		top.DelayReplication(lag)
	}
	sw := testenv.NewSwitchWatcher(t, top)
	ws := startWriters(t, top)
	time.Sleep(time.Second) // the writers found the primary; the replicas trail it by the lag
	from := time.Now()
	r.err = w.run(t, top)
	if r.err == nil {
		_, _, r.err = sw.WaitAll(old, 60*time.Second)
	}
	time.Sleep(2 * time.Second) // writers reconnect and write again
	to := time.Now()
	for _, wr := range ws {
		wr.Finish()
		evs := wr.Events()
		// from the last acknowledgement before the stop: a write blocked by a pause taken right at from starts
		// after it, and the gap must count from the acknowledgement before it
		for _, s := range testenv.Stalls(evs, from.Add(-500*time.Millisecond), to, 0) {
			r.longest = max(r.longest, s.D())
		}
		ok, failed, lost := testenv.CountWrites(evs, from, to)
		r.ok, r.failed, r.lost = r.ok+ok, r.failed+failed, r.lost+lost
	}
	debugf(t, "%s %s: longest %s, lost %d, err %v", r.engine, r.way, r.longest, r.lost, r.err)
	return r
}

func fig7(t *testing.T) *figure {
	n := envInt("BENCH_PRESTOP_ROUNDS", 2)
	var lags []time.Duration
	for _, ms := range envInts("BENCH_PRESTOP_LAG_MS", []int{100, 300}) {
		lags = append(lags, time.Duration(ms)*time.Millisecond)
	}
	engines := fig7Engines()
	ways := fig7Ways()
	var rounds []fig7Round
	var raw []string
	for _, e := range engines {
		valkeytest.Require(t, e)
		for _, lag := range lags {
			for i := 0; i < n; i++ {
				var line []string
				for _, w := range ways {
					var r fig7Round
					// each in its own subtest, so its processes, links and iptables rules go when it ends
					t.Run(fmt.Sprintf("%s-%s-%s-%d", e, lag, w.name[:3], i+1), func(t *testing.T) { r = fig7Once(t, e, w, lag) })
					rounds = append(rounds, r)
					s := fmt.Sprintf("%s %.2f s lost %d", w.name[:3], r.longest.Seconds(), r.lost)
					if r.err != nil {
						s += " (" + r.err.Error() + ")"
					}
					line = append(line, s)
				}
				raw = append(raw, fmt.Sprintf("%s, lag %s, round %d (longest outage, lost acknowledged writes): %s", e, lag, i+1, strings.Join(line, "; ")))
			}
		}
	}
	var lagNames []string
	for _, l := range lags {
		lagNames = append(lagNames, l.String())
	}
	var names []string
	for _, e := range engines {
		names = append(names, e.String())
	}
	f := &figure{N: 7, Title: fmt.Sprintf("Primary pod deleted gracefully (delete, eviction, drain) on %s, replication links delayed %s each way, %d rounds per way and lag, 3 Sentinel-aware writers: "+
		"(a) ours with the preStop hook vs (b) no hook vs (c) the peers' hook (pause + SENTINEL FAILOVER, no catch-up)", strings.Join(names, " and "), strings.Join(lagNames, " and "), n),
		Header: []string{"engine", "replication lag", "way", "write outage, longest per round: median (max)", "lost acked writes (all rounds)", "failed writes", "acked writes", "rounds failed"}}
	for _, e := range engines {
		agg := map[string][]time.Duration{}
		lostBy, errsBy := map[string]int{}, map[string]int{}
		for _, lag := range lags {
			for _, w := range ways {
				var outs []time.Duration
				lost, failed, ok, errs := 0, 0, 0, 0
				for _, r := range rounds {
					if r.engine != e.String() || r.way != w.name || r.lag != lag {
						continue
					}
					if r.err != nil {
						errs++
						continue
					}
					outs = append(outs, r.longest)
					lost, failed, ok = lost+r.lost, failed+r.failed, ok+r.ok
				}
				agg[w.name] = append(agg[w.name], outs...)
				lostBy[w.name], errsBy[w.name] = lostBy[w.name]+lost, errsBy[w.name]+errs
				f.Rows = append(f.Rows, []string{e.String(), lag.String(), w.name, fmt.Sprintf("%s (%s)", secs(median(outs)), secs(maxOf(outs))),
					fmt.Sprint(lost), fmt.Sprint(failed), fmt.Sprint(ok), fmt.Sprint(errs)})
			}
		}
		a, b := agg[ways[0].name], agg[ways[1].name]
		complete := len(a) == n*len(lags) && errsBy[ways[0].name] == 0
		f.Targets = append(f.Targets,
			target{Name: e.String() + ": (a) write outage <= 1.5 s in every round", Measured: "max " + secs(maxOf(a)),
				Pass: complete && maxOf(a) <= 1500*time.Millisecond, Skip: len(a) == 0},
			target{Name: e.String() + ": (a) <= 0.25 x (b) (worst (a) vs median (b))", Measured: fmt.Sprintf("%.2f (%s vs %s)", ratio(maxOf(a), median(b)), secs(maxOf(a)), secs(median(b))),
				Pass: complete && len(b) > 0 && ratio(maxOf(a), median(b)) <= 0.25, Skip: len(a) == 0 || len(b) == 0},
			target{Name: e.String() + ": (a) 0 lost acknowledged writes over every round", Measured: fmt.Sprintf("%d lost over %d rounds", lostBy[ways[0].name], len(a)),
				Pass: complete && lostBy[ways[0].name] == 0, Skip: len(a) == 0})
	}
	f.Raw = raw
	f.Notes = append(f.Notes,
		"Write outage: per round the longest time any of the three writers (counter mode, one subscribed to each Sentinel) went without an acknowledged write, blocked by a pause or failing, from the start of the stop to 2 s after every Sentinel names the new primary. Lost: acknowledged increments a writer later found rolled back.",
		"(a) is `valkey-sentinel-ctl prestop` itself (prestop.Run with the files a data pod has: the node-local _prestop user, _probe, sentinels.json), the code the chart's preStop hook runs.",
		"(b) is what a pod without a hook costs: Sentinel needs down-after-milliseconds to see the primary down, then elects a leader and promotes (BENCHMARKS.md figure 1 measures that floor).",
		"(c) pauses writes, so nothing is written after the pause, but promotes whichever replica Sentinel picks without waiting for it to hold the writes acknowledged just before the pause: when the replication delay is longer than the time from SENTINEL FAILOVER to Sentinel's REPLICAOF NO ONE (about 0.2 s), those are lost.")
	return f
}
