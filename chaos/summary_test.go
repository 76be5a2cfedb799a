package chaos

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// row sums up the phases of one category.
type row struct {
	name                                  string
	phases                                int
	acked, failed, lost                   int
	windows                               []testenv.Window
	unplanned, lostUnplanned              int
	windowsUnplanned                      []testenv.Window
	remove, reset, monitor, failoverCmd   int
	switches, rolled, rolls               int
	handedOff, repaired, sentinelResetEvt int
	deferred                              map[string]int
	kills, noFailover                     int
	leaseLost, leaseLostInHandoff         int
}

func (r *row) add(p phaseResult) {
	r.phases++
	r.acked += p.acked
	r.failed += p.failed
	r.lost += p.lost
	r.windows = append(r.windows, p.windows...)
	r.unplanned += p.unplanned
	r.lostUnplanned += p.lostUnplanned
	r.windowsUnplanned = append(r.windowsUnplanned, p.windowsUnplanned...)
	r.remove += p.remove
	r.reset += p.reset
	r.monitor += p.monitor
	r.failoverCmd += p.failoverCmd
	r.switches += p.switches
	if p.name == "roll" {
		r.rolls++
		if p.rolled {
			r.rolled++
		}
	}
	r.kills += p.kills
	r.noFailover += p.noFailover
	r.leaseLost += p.leaseLost
	r.leaseLostInHandoff += p.leaseLostInHandoff
	r.handedOff += p.ctl["PrimaryHandedOff"]
	r.repaired += p.ctl["Repaired"]
	r.sentinelResetEvt += p.ctl["SentinelReset"]
	if r.deferred == nil {
		r.deferred = map[string]int{}
	}
	for _, d := range p.deferred {
		r.deferred[d]++
	}
}

func windowText(ws []testenv.Window) string {
	if len(ws) == 0 {
		return "0"
	}
	var longest time.Duration
	for _, w := range ws {
		longest = max(longest, w.D())
	}
	return fmt.Sprintf("%d (%.1f s in all, longest %.1f s)", len(ws), testenv.Total(ws).Seconds(), longest.Seconds())
}

func (r row) deferredText() string {
	if len(r.deferred) == 0 {
		return "-"
	}
	var l []string
	for k, n := range r.deferred {
		l = append(l, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

type summary struct {
	rounds int
	seed   uint64
	took   time.Duration
	rows   []*row // steady, roll, settle
	faults map[string]int
	// latencyPhases counts phases with replication-link latency.
	latencyPhases, phases int
	downAfter2s           int
	failedRounds          []string
}

func summarize(results []phaseResult, rounds int, seed uint64, took time.Duration) summary {
	s := summary{rounds: rounds, seed: seed, took: took, faults: map[string]int{}}
	byName := map[string]*row{}
	for _, n := range []string{"steady", "roll", "settle"} {
		r := &row{name: map[string]string{"steady": "steady state", "roll": "planned roll", "settle": "settle (faults healed)"}[n]}
		byName[n] = r
		s.rows = append(s.rows, r)
	}
	seen := map[uint64]bool{}
	for _, p := range results {
		if !seen[p.seed] {
			seen[p.seed] = true
			if drawRound(p.seed).downAfterMs == 2000 {
				s.downAfter2s++
			}
		}
		byName[p.name].add(p)
		if p.name != "settle" {
			s.phases++
			if p.latency > 0 {
				s.latencyPhases++
			}
		}
		for _, f := range p.faults {
			k := f[:strings.Index(f, " at +")]
			if i := strings.Index(k, " #"); i > 0 {
				k = k[:i]
			}
			for _, sk := range []faultKind{pauseSentinel, killSentinel, replaceSentinel} {
				if strings.HasPrefix(k, string(sk)) {
					k = string(sk)
				}
			}
			s.faults[k]++
		}
	}
	return s
}

func (s summary) total() *row {
	r := &row{}
	for _, x := range s.rows {
		r.acked += x.acked
		r.lost += x.lost
		r.windows = append(r.windows, x.windows...)
		r.unplanned += x.unplanned
		r.lostUnplanned += x.lostUnplanned
		r.windowsUnplanned = append(r.windowsUnplanned, x.windowsUnplanned...)
		r.remove += x.remove
		r.kills += x.kills
		r.noFailover += x.noFailover
		r.leaseLost += x.leaseLost
		r.leaseLostInHandoff += x.leaseLostInHandoff
	}
	return r
}

func (s summary) faultText() string {
	var l []string
	for k, n := range s.faults {
		l = append(l, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

func (s summary) targets() []string {
	p := s.total()
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "MISS"
	}
	return []string{
		fmt.Sprintf("%s  0 lost acknowledged writes outside unplanned failovers: %d of %d lost (in the %d unplanned failovers: %d)",
			verdict(p.lost == 0), p.lost, p.acked, p.unplanned, p.lostUnplanned),
		fmt.Sprintf("%s  0 SENTINEL REMOVE and 0 RESET in steady state: REMOVE %d, RESET %d (REMOVE anywhere: %d)",
			verdict(s.rows[0].remove == 0 && s.rows[0].reset == 0 && p.remove == 0), s.rows[0].remove, s.rows[0].reset, p.remove),
		fmt.Sprintf("%s  0 windows with two writable primaries outside unplanned failovers: %s (in unplanned failovers: %s)",
			verdict(len(p.windows) == 0), windowText(p.windows), windowText(p.windowsUnplanned)),
		fmt.Sprintf("%s  a failover within down-after + failover-timeout + 10 s of every primary kill: %d of %d without one",
			verdict(p.noFailover == 0), p.noFailover, p.kills),
	}
}

func (s summary) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nLoopback chaos: %d rounds (CHAOS_SEED=%d), %s, wall time %s\n", s.rounds, s.seed, valkeytest.Default, s.took.Round(time.Second))
	fmt.Fprintf(&b, "  faults: %s; replication latency 0-500 ms in %d of %d phases; down-after 2000 ms in %d rounds, 5000 ms in %d\n",
		s.faultText(), s.latencyPhases, s.phases, s.downAfter2s, s.rounds-s.downAfter2s)
	for _, r := range s.rows {
		fmt.Fprintf(&b, "  %-24s phases %3d  writes acked %6d failed %5d LOST %4d  two writable primaries %s  unplanned failovers %d (lost in them %d, two writable primaries %s)  REMOVE %d RESET %d MONITOR %d  FAILOVER commands %d, failovers %d",
			r.name, r.phases, r.acked, r.failed, r.lost, windowText(r.windows), r.unplanned, r.lostUnplanned, windowText(r.windowsUnplanned),
			r.remove, r.reset, r.monitor, r.failoverCmd, r.switches)
		if r.rolls > 0 {
			fmt.Fprintf(&b, "  rolls completed %d/%d, handoffs %d, deferred: %s", r.rolled, r.rolls, r.handedOff, r.deferredText())
		}
		fmt.Fprintf(&b, "  primary kills %d (no failover %d)  Leases lost %d (during a handoff %d)", r.kills, r.noFailover, r.leaseLost, r.leaseLostInHandoff)
		b.WriteString("\n")
	}
	for _, l := range s.targets() {
		fmt.Fprintf(&b, "  target %s\n", l)
	}
	return b.String()
}

const (
	sectionBegin = "<!-- loopback-chaos:begin (written by `make chaos`, chaos/chaos_test.go; do not edit by hand) -->"
	sectionEnd   = "<!-- loopback-chaos:end -->"
)

func (s summary) markdown(failed []string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("%s\n## Loopback chaos: random faults under both controllers (`make chaos`)\n\n", sectionBegin)
	w("`make chaos` (chaos/chaos_test.go, `TestChaos`) runs rounds of random faults against real valkey-server and\n")
	w("valkey-sentinel processes on loopback (%s): 1 primary + 2 replicas and 3 Sentinels, both controllers in process\n", valkeytest.Default)
	w("on a fake clientset at their production resync periods (the sentinel controller registers the monitor), a fake\n")
	w("kubelet that runs the data pods' real boot step before it restarts a node, three Sentinel-aware writers (one key\n")
	w("per write, 100 writes/s each) and a probe that every 100 ms asks each node for ROLE and writes to every node that\n")
	w("says master. Each round draws from its seed: Sentinel down-after-milliseconds 2000 ms or the charts' 5000 ms; a\n")
	w("steady phase (10 s, no operation) and a planned roll (every StatefulSet gets a new revision: replicas first, the\n")
	w("primary handed off last); in each, replication-link latency of 0-500 ms per link (three phases in four) and 2-4\n")
	w("faults at random times: the primary, a replica or a Sentinel paused 0.5-3 s (SIGSTOP); a Sentinel killed\n")
	w("(SIGKILL) or replaced with empty state (no monitor, no known peers, as a replaced pod) and started 0.5-3 s later;\n")
	w("the primary killed and, down-after + 1-5 s later, its pod deleted (the fake kubelet restarts it through the boot\n")
	w("step); the Lease renewals of the leading instance controller failing for 11-16 s (two replicas run under leader\n")
	w("election; the leader loses the Lease whatever it is doing and the standby takes over); or reads of Secrets,\n")
	w("ConfigMaps or pods\n")
	w("failing with 503 for 0.5-3 s or Forbidden for 1-5 s. Then every fault heals and the round settles. A primary\n")
	w("kill with no `+switch-master` within down-after + failover-timeout + 10 s fails the round.\n\n")
	w("**Lost** = acknowledged writes missing on the final primary, by the phase in which they were acknowledged. **Two\n")
	w("writable primaries** = probe rounds in which two nodes acknowledged a probe write. REMOVE, RESET, MONITOR and\n")
	w("FAILOVER are the commands the Sentinels logged (`-monitor`, `+reset-master`, `+monitor` after the registration,\n")
	w("`Executing user requested FAILOVER`); failovers = `+switch-master` (the most one Sentinel logged). An **unplanned\n")
	w("failover** is one a Sentinel decided on its own (`+odown`: a paused primary outlived down-after); asynchronous\n")
	w("replication loses writes there by design (those the primary acknowledged but had not replicated when it stopped,\n")
	w("and those it takes after it resumes, until it is demoted). Lost writes and two-writable windows from down-after + 2 s\n")
	w("before its `+odown` to 2 s after its `+failover-end` are counted in their own column, never dropped.\n\n")
	w("Run of %s: %d rounds (`CHAOS_SEED=%d`), wall time %s on the shared 2-core VM. Faults: %s; replication latency in\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), s.rounds, s.seed, s.took.Round(time.Second), s.faultText())
	w("%d of %d phases; down-after 2000 ms in %d rounds, 5000 ms in %d.\n\n", s.latencyPhases, s.phases, s.downAfter2s, s.rounds-s.downAfter2s)
	w("| phases | count | writes acked | failed | **lost** | two writable primaries (windows) | unplanned failovers: lost in them, two writable primaries | REMOVE | RESET | MONITOR | FAILOVER commands | failovers | primary kills: **without a failover** | Leases lost (in a handoff) | roll |\n")
	w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.rows {
		roll := "-"
		if r.rolls > 0 {
			roll = fmt.Sprintf("%d of %d completed, %d handoffs, deferred: %s", r.rolled, r.rolls, r.handedOff, r.deferredText())
		}
		w("| %s | %d | %d | %d | **%d** | %s | %d: %d lost, %s | %d | %d | %d | %d | %d | %d: **%d** | %d (%d) | %s |\n", r.name, r.phases, r.acked, r.failed, r.lost,
			windowText(r.windows), r.unplanned, r.lostUnplanned, windowText(r.windowsUnplanned), r.remove, r.reset, r.monitor, r.failoverCmd, r.switches,
			r.kills, r.noFailover, r.leaseLost, r.leaseLostInHandoff, roll)
	}
	w("\nTargets (issue 12):\n\n")
	for _, l := range s.targets() {
		w("- %s\n", l)
	}
	if len(failed) > 0 {
		w("\nRounds that failed an assertion (replay with the seed): %s.\n", strings.Join(failed, ", "))
	}
	w("\nWhat the chaos test found and what was fixed (each with a test in its package that failed first):\n\n")
	w("- A Sentinel stopped for more than 2 s enters TILT mode for 30 s: it still accepts SENTINEL FAILOVER but runs\n")
	w("  none of it. The planned handoff asked such a Sentinel, demoted the old primary when its pause budget ran out,\n")
	w("  and nothing was promoted for 23 s (6855 failed writes in one roll). The handoff now skips a Sentinel in TILT\n")
	w("  mode (`internal/podsteps/handoff` TestRunSkipsASentinelInTilt: FailoverTimeout after 20 s before, done in 1.05 s after).\n")
	w("- A Sentinel stopped right as it receives the request held the handoff until its command timeout, past the\n")
	w("  server-side write pause: the old primary acknowledged writes while a failover request that would demote it\n")
	w("  was pending. Its reply is now awaited no longer than the pause budget (TestRunAskedSentinelStallsAfterTheRequest:\n")
	w("  150 writes acknowledged by the old primary before, none after). Left: that Sentinel resumes in TILT mode and\n")
	w("  runs the failover only when TILT ends, so writes fail for up to 30 s (none is lost).\n")
	w("\n%s\n", sectionEnd)
	return b.String()
}

// spliceSection replaces the loopback chaos section of the file at path (between sectionBegin and
// sectionEnd), or appends it.
func spliceSection(path, section string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	old := string(b)
	var out string
	i := strings.Index(old, "<!-- loopback-chaos:begin")
	j := strings.Index(old, sectionEnd)
	if i >= 0 && j > i {
		out = old[:i] + section + strings.TrimPrefix(old[j+len(sectionEnd):], "\n")
	} else {
		out = strings.TrimRight(old, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(out), 0o644)
}
