package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/cli"
	"github.com/valkey-ha/valkey-ha/internal/controllers/controller"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// TestChaos runs rounds of random faults (issue 12, "A chaos test on loopback"). Each round is a subtest with
// a fresh world, so its processes, fault links, iptables rules and uids are released when it ends:
//
//   - 1 primary + 2 replicas and 3 Sentinels (valkeytest.Default, valkey 9.1), every replication and
//     Sentinel-to-node connection through a fault link (TopologyConfig.FaultLinks); Sentinel
//     down-after-milliseconds 2000 ms (failover-timeout 6000 ms) or the charts' 5000 ms (15000 ms), drawn
//     per round: with 2000 ms a paused primary outlives down-after and Sentinel fails over on its own;
//   - both controllers in process on a fake clientset with the API server's bookkeeping (kubefault.Strict),
//     at their production resync periods; the sentinel controller registers the monitor itself;
//   - a fake kubelet that runs the data pods' real boot step (internal/podsteps/bootstrap) before it restarts a
//     deleted node, as the chart's init container does;
//   - three Sentinel-aware writers (one subscribed to each Sentinel), one key per write;
//   - a probe: every 100 ms, ROLE and a probe write on every node.
//
// A round has two phases. Steady state (10 s): nothing is asked of the controllers. Planned roll: every
// node's StatefulSet gets a new revision, the instance controller rolls the pods (replicas first, the
// primary handed off last) while the fake kubelet restarts them. In each phase: replication-link latency
// of 0-500 ms on each node-to-node link (in three phases of four), and 2-4 faults at random times: the
// primary, a replica or a Sentinel paused 0.5-3 s (SIGSTOP); a Sentinel killed (SIGKILL) or replaced with
// empty state (its config from before the monitor was registered: no monitor, no known peers) and started
// 0.5-3 s later; the primary killed and, down-after + 1-5 s later, its pod deleted (the fake kubelet restarts
// it through the boot step); the Lease renewals of the leading instance controller failing for 11-16 s (two replicas run under leader
// election, cli.RunLeading: the leader loses the Lease mid-work, a handoff in a roll, and the standby takes
// over); or reads of Secrets, ConfigMaps or pods failing with 503 for 0.5-3 s or Forbidden for 1-5 s. Then
// every fault heals and the round settles.
//
// Counted per phase: writes acknowledged, failed and lost (acknowledged but missing on the final primary),
// windows in which two nodes acknowledged probe writes, and from the Sentinels' own logs SENTINEL REMOVE,
// RESET, MONITOR and FAILOVER commands, +switch-master and +odown. A Sentinel that flags the primary +odown
// has decided on its own that it is gone (a paused primary outlived down-after): an unplanned failover, in
// which asynchronous replication loses writes by design (the ones the primary acknowledged but had not
// replicated when it stopped, and the ones it takes when it resumes, until it is demoted). What falls into
// such a failover's span (unplannedSpans) is counted separately, never dropped. The test fails on a lost
// write or a two-writable-primary window outside those spans, on any SENTINEL REMOVE (except one the same
// Sentinel follows at once with MONITOR: the sentinel controller's realignment of a Sentinel stuck on a stale
// primary, counted as "realigned"), on a SENTINEL RESET
// in steady state, and on a primary kill with no +switch-master within down-after + failover-timeout + 10 s.
//
// CHAOS_ROUNDS (default 3) rounds; CHAOS_SEED seeds the first round, each later round's seed is derived
// from it and printed, and CHAOS_SEED=<a round's seed> CHAOS_ROUNDS=1 replays that round's faults (their
// kinds, targets, times and lengths; the processes' own timing varies). CHAOS_UPDATE=1 writes the summary
// into RELIABILITY.md. CHAOS_DUMP=<dir> keeps the logs of failed rounds.
func TestChaos(t *testing.T) {
	valkeytest.Require(t, valkeytest.Default)
	valkeytest.RequireFaults(t)
	rounds := envInt(t, "CHAOS_ROUNDS", 3)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("chaos: %d rounds, CHAOS_SEED=%d, engine %s", rounds, seed, valkeytest.Default)
	start := time.Now()
	var results []phaseResult
	var failed []string
	for i := 0; i < rounds; i++ {
		rs := roundSeed(seed, i)
		plan := drawRound(rs)
		var got []phaseResult
		var uids []int
		ok := t.Run(fmt.Sprintf("round%02d", i+1), func(t *testing.T) {
			t.Logf("replay: CHAOS_SEED=%d CHAOS_ROUNDS=1; plan: %s", rs, plan)
			got, uids = runRound(t, i+1, plan)
		})
		if !ok {
			failed = append(failed, fmt.Sprintf("round %d (CHAOS_SEED=%d CHAOS_ROUNDS=1)", i+1, rs))
		}
		results = append(results, got...)
		if left := rulesLeft(uids); left != "" {
			t.Errorf("round %d left iptables rules behind: %s", i+1, left)
		}
	}
	took := time.Since(start)
	s := summarize(results, rounds, seed, took)
	fmt.Print(s.text())
	if len(failed) > 0 {
		t.Logf("failed rounds: %s", strings.Join(failed, ", "))
	}
	if os.Getenv("CHAOS_UPDATE") == "1" {
		path := filepath.Join("..", "RELIABILITY.md")
		if err := spliceSection(path, s.markdown(failed)); err != nil {
			t.Errorf("update %s: %v", path, err)
		} else {
			t.Logf("wrote the loopback chaos section of %s", path)
		}
	}
}

func envInt(t *testing.T, k string, def int) int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", k, v)
	}
	return n
}

// roundSeed returns round i's seed: the run's seed for the first round, so that CHAOS_SEED=<seed>
// CHAOS_ROUNDS=1 replays any round printed with its seed.
func roundSeed(seed uint64, i int) uint64 {
	s := seed
	for ; i > 0; i-- {
		// splitmix64
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		s = z ^ (z >> 31)
	}
	return s
}

// ---- the plan -------------------------------------------------------------------------------------------

type faultKind string

const (
	pausePrimary   faultKind = "pause primary"
	pauseReplica   faultKind = "pause replica"
	pauseSentinel  faultKind = "pause Sentinel"
	apiUnavailable faultKind = "API 503"
	apiForbidden   faultKind = "API Forbidden"
	// killSentinel: SIGKILL, started again with its config after d.
	killSentinel faultKind = "kill Sentinel"
	// replaceSentinel: SIGKILL, started again after d with the config it had before any monitor was
	// registered (its id kept, as the chart's stable myid; no monitor, no known peers): a replaced pod.
	replaceSentinel faultKind = "replace Sentinel"
	// killPrimary: SIGKILL of the primary; d (down-after + 1-5 s) later its pod is deleted and the fake
	// kubelet restarts it through the boot step. A failover must follow within down-after +
	// failover-timeout + 10 s (failoverBound).
	killPrimary faultKind = "kill primary"
	// leaseLoss: the Lease renewals (and the release) of the instance controller that leads fail with 503 for
	// d (longer than the 10 s renew deadline): it loses the Lease, whatever it is doing, and the standby
	// replica takes over. In a roll the failures begin when the first pod is replaced (whatever at says), so
	// that the loss falls near the primary's handoff.
	leaseLoss faultKind = "instance controller Lease renewals fail"
)

var faultKinds = []faultKind{pausePrimary, pauseReplica, pauseSentinel, apiUnavailable, apiForbidden,
	killSentinel, replaceSentinel, killPrimary, leaseLoss}

// instanceLease is the Lease of the two instance controller replicas the chaos test runs under leader
// election (cli.RunLeading, as the chart's Deployment with --leader-elect).
const instanceLease = "chaos-instance-controller"

// failoverBound is how long after a primary died a failover (+switch-master) must have come.
func failoverBound(p roundPlan) time.Duration {
	return time.Duration(p.downAfterMs+p.failoverTimeoutMs)*time.Millisecond + 10*time.Second
}

// apiResources are the reads that fail: every get and list of the resource.
var apiResources = []string{"secrets", "configmaps", "pods"}

type fault struct {
	kind faultKind
	// at is the offset from the start of the phase; d the length.
	at, d time.Duration
	// which picks the replica (0 or 1, by node order) or the Sentinel (index).
	which    int
	resource string
}

func (f fault) String() string {
	what := string(f.kind)
	switch f.kind {
	case pauseReplica:
		what += fmt.Sprintf(" #%d", f.which)
	case pauseSentinel, killSentinel, replaceSentinel:
		what += fmt.Sprintf(" %d", f.which)
	case apiUnavailable, apiForbidden:
		what += " on " + f.resource
	}
	return fmt.Sprintf("%s at +%.1fs for %.1fs", what, f.at.Seconds(), f.d.Seconds())
}

type phasePlan struct {
	name string // "steady" or "roll"
	// delays[i][j] is the one-way delay of node i's connections to node j (0: none).
	delays [][]time.Duration
	faults []fault
}

type roundPlan struct {
	seed                           uint64
	downAfterMs, failoverTimeoutMs int
	phases                         []phasePlan
}

func (p roundPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "down-after %d ms", p.downAfterMs)
	for _, ph := range p.phases {
		fmt.Fprintf(&b, "; %s:", ph.name)
		var ds []string
		for i, row := range ph.delays {
			for j, d := range row {
				if i != j && d > 0 {
					ds = append(ds, fmt.Sprintf("%d->%d %dms", i, j, d.Milliseconds()))
				}
			}
		}
		if len(ds) > 0 {
			fmt.Fprintf(&b, " latency %s;", strings.Join(ds, ","))
		}
		for _, f := range ph.faults {
			fmt.Fprintf(&b, " %s;", f)
		}
	}
	return strings.TrimSuffix(b.String(), ";")
}

const (
	nodes        = 3
	steadyFor    = 10 * time.Second
	steadyFaults = 8 * time.Second  // faults start within this much of the steady phase
	rollFaults   = 20 * time.Second // and of the roll
	rollLimit    = 90 * time.Second
)

// drawRound draws every random choice of a round from its seed, before anything runs.
func drawRound(seed uint64) roundPlan {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	p := roundPlan{seed: seed, downAfterMs: 2000, failoverTimeoutMs: 6000}
	if rng.IntN(2) == 1 {
		p.downAfterMs, p.failoverTimeoutMs = 5000, 15000
	}
	dur := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)))).Round(100 * time.Millisecond)
	}
	for _, ph := range []struct {
		name   string
		window time.Duration
	}{{"steady", steadyFaults}, {"roll", rollFaults}} {
		pp := phasePlan{name: ph.name, delays: make([][]time.Duration, nodes)}
		latency := rng.IntN(4) != 0
		for i := range pp.delays {
			pp.delays[i] = make([]time.Duration, nodes)
			for j := range pp.delays[i] {
				if latency && i != j {
					pp.delays[i][j] = time.Duration(rng.IntN(501)) * time.Millisecond
				}
			}
		}
		for n := 2 + rng.IntN(3); n > 0; n-- {
			f := fault{kind: faultKinds[rng.IntN(len(faultKinds))], at: dur(0, ph.window)}
			switch f.kind {
			case pausePrimary, pauseReplica, pauseSentinel, killSentinel, replaceSentinel:
				f.d = dur(500*time.Millisecond, 3*time.Second)
				f.which = rng.IntN(3)
				if f.kind == pauseReplica {
					f.which %= 2
				}
			case killPrimary:
				// down for longer than down-after (else Sentinel rightly waits for it), then its pod is
				// deleted and the kubelet restarts it through the boot step
				f.d = time.Duration(p.downAfterMs)*time.Millisecond + dur(time.Second, 5*time.Second)
			case leaseLoss:
				f.d = dur(11*time.Second, 16*time.Second)
			case apiUnavailable:
				f.d, f.resource = dur(500*time.Millisecond, 3*time.Second), apiResources[rng.IntN(len(apiResources))]
			case apiForbidden:
				f.d, f.resource = dur(time.Second, 5*time.Second), apiResources[rng.IntN(len(apiResources))]
			}
			pp.faults = append(pp.faults, f)
		}
		sort.Slice(pp.faults, func(a, b int) bool { return pp.faults[a].at < pp.faults[b].at })
		p.phases = append(p.phases, pp)
	}
	return p
}

// ---- one round ------------------------------------------------------------------------------------------

// phaseResult is what one phase of one round showed.
type phaseResult struct {
	round int
	seed  uint64
	name  string // steady, roll, settle
	from  time.Time
	to    time.Time
	// unplanned counts the unplanned failovers that began in the phase (see unplannedSpans); lost and
	// windows count what happened outside every unplanned failover's span, lostUnplanned and
	// windowsUnplanned what happened inside one.
	unplanned int
	faults    []string
	// latency: the largest replication-link delay of the phase.
	latency                   time.Duration
	acked, failed             int
	lost, lostUnplanned       int
	lostKeys                  []string
	windows, windowsUnplanned []testenv.Window
	remove, reset             int
	// realign counts the SENTINEL REMOVE + MONITOR pairs of the sentinel controller's realignment of a
	// Sentinel stuck on a stale primary (registration.Stuck; not counted in remove: the monitor is back at once).
	realign              int
	monitor, failoverCmd int
	switches, odown      int
	// ctl counts the controllers' Events by reason; deferred the RollDeferred reasons.
	ctl      map[string]int
	deferred []string
	// rolled: every pod reached the new revision (roll phase).
	rolled bool
	// kills counts the primaries killed in the phase, noFailover those after which no +switch-master came
	// within failoverBound (a failure), noFailoverAt their times.
	kills, noFailover int
	noFailoverAt      []string
	// leaseLost counts the Leases the instance controller lost, leaseLostInHandoff those lost while a
	// handoff was under way (between PrimaryHandingOff and PrimaryHandedOff).
	leaseLost, leaseLostInHandoff int
}

// span is a period of time; end and old, for an unplanned failover's span, when the failover ended and the
// port of the primary it replaced.
type span struct {
	from, to, end time.Time
	old           int
}

func (s span) has(t time.Time) bool { return !t.Before(s.from) && !t.After(s.to) }

func inAny(spans []span, t time.Time) bool {
	for _, s := range spans {
		if s.has(t) {
			return true
		}
	}
	return false
}

// unplannedSpans returns the spans of the unplanned failovers in the Sentinels' events: a Sentinel flagged
// the primary +odown, i.e. Sentinel decided on its own that the primary is gone. A span runs from
// down-after-milliseconds plus 2 s before the first +odown (the writes a paused primary acknowledged but
// had not replicated when it stopped) to the demotion of the old primary after the failover ended
// (+failover-end or -failover-abort-* on any Sentinel; failover-timeout after the +odown when neither is
// logged), at least 2 s and at most demotionBound after that end: the old primary, resumed, takes writes
// until it is demoted, and clients that still talk to it lose them. demoted(port, t) is when the probe
// first saw the old primary (the node the +odown names) not report master from t on (zero: it never
// reported master from t on). Who demotes it (RELIABILITY.md "Found" 5): the instance controller's repair
// (REPLICAOF to the Sentinels' primary), which its policy refuses while a failover is in flight or the
// Sentinels disagree, so on its first pass after the failover ended: on the leader's +switch-master or one
// Resync (2 s) later, 1.87-2.0 s after the end measured; Sentinel's own +convert-to-slave comes only after
// the old primary has answered as master for 8 s (4 hello periods). Overlapping spans are merged.
func unplannedSpans(evs []testenv.SentinelEvent, downAfter, failoverTimeout time.Duration, demoted func(port int, t time.Time) time.Time) []span {
	var out []span
	for i, ev := range evs {
		if ev.Kind != "+odown" {
			continue
		}
		end := ev.At.Add(failoverTimeout)
		for _, later := range evs[i+1:] {
			if later.At.After(ev.At.Add(2 * failoverTimeout)) {
				break
			}
			if later.Kind == "+failover-end" || strings.HasPrefix(later.Kind, "-failover-abort") {
				end = later.At
				break
			}
		}
		s := span{from: ev.At.Add(-downAfter - 2*time.Second), to: end.Add(2 * time.Second), end: end, old: odownPort(ev)}
		if demoted != nil && s.old != 0 {
			if d := demoted(s.old, end); d.After(s.to) {
				s.to = d
				if limit := end.Add(demotionBound); s.to.After(limit) {
					s.to = limit
				}
			}
		}
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			if s.to.After(out[n-1].to) {
				out[n-1].to = s.to
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// demotionBound is the latest the old primary of an unplanned failover may still take writes after the
// failover ended and count as part of the failover: Sentinel's +convert-to-slave (8 s of the old primary
// answering as master) plus one controller Resync (2 s).
const demotionBound = 10 * time.Second

// odownPort is the port of the primary a +odown event names ("master <name> <host> <port> #quorum ...").
func odownPort(ev testenv.SentinelEvent) int {
	f := strings.Fields(ev.Text)
	if len(f) < 4 {
		return 0
	}
	p, _ := strconv.Atoi(f[3])
	return p
}

// demotedFrom returns demoted for unplannedSpans from the probe's rounds: the start of the first round at
// or after t in which node port does not report master, zero when no round from t on saw it as master.
func demotedFrom(rounds []testenv.ProbeRound, top *valkeytest.Topology) func(port int, t time.Time) time.Time {
	return func(port int, t time.Time) time.Time {
		sawMaster := false
		for _, r := range rounds {
			if r.At.Before(t) {
				continue
			}
			master := false
			for _, n := range r.Primaries {
				if top.Nodes[n].Port == port {
					master = true
				}
			}
			if master {
				sawMaster = true
				continue
			}
			if sawMaster {
				return r.At
			}
			return time.Time{}
		}
		return time.Time{}
	}
}

// world is one round's running system.
type world struct {
	t       *testing.T
	plan    roundPlan
	top     *valkeytest.Topology
	env     *testenv.Env
	events  *testenv.EventLog
	api     map[string]map[faultKind]*kubefault.Fault
	log     *slog.Logger
	logPath string

	// emptyConf is each Sentinel's config before any monitor was registered (replaceSentinel).
	emptyConf map[*valkeytest.Proc]string
	// leaseVictim is the identity whose Lease updates fail (leaseLoss), empty when none.
	leaseVictim atomic.Value

	mu      sync.Mutex
	applied []string // faults as applied, with their targets
	boots   []string // the boot step's decisions
	// kills are the primaries killed (killPrimary): when and which port.
	kills []kill
	// leaseEnds are when an instance controller replica stopped leading, with the error it returned.
	leaseEnds []leaseEnd
	// stamped are the controllers' Events with the time they were seen; seen counts w.events.All() read.
	stamped []stampedEvent
	seen    int
	// phaseFrom is when the current phase began.
	phaseFrom time.Time
}

type kill struct {
	at    time.Time
	port  int
	phase string
}

type leaseEnd struct {
	at       time.Time
	identity string
	err      error
}

func runRound(t *testing.T, round int, plan roundPlan) ([]phaseResult, []int) {
	top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{SkipMonitor: true, FaultLinks: true,
		DownAfterMs: plan.downAfterMs, FailoverTimeoutMs: plan.failoverTimeoutMs})
	var uids []int
	for _, p := range append(append([]*valkeytest.Proc{}, top.Nodes...), top.Sentinels...) {
		uids = append(uids, p.UID)
	}
	w := &world{t: t, plan: plan, top: top, logPath: filepath.Join(t.TempDir(), "controllers.log"), emptyConf: map[*valkeytest.Proc]string{}}
	w.leaseVictim.Store("")
	for _, s := range top.Sentinels {
		w.emptyConf[s] = s.Config()
	}
	lf, err := os.Create(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lf.Close() })
	w.log = slog.New(slog.NewTextHandler(lf, nil))
	if os.Getenv("CHAOS_LOG") != "" {
		w.log = testenv.Log("CHAOS_LOG")
	}
	boot := w.bootFiles()
	w.env = testenv.New(t, top, testenv.Options{Strict: true})
	e := w.env
	w.api = map[string]map[faultKind]*kubefault.Fault{}
	for _, r := range apiResources {
		w.api[r] = map[faultKind]*kubefault.Fault{
			apiUnavailable: kubefault.FailReads(e.CS, r, "", kubefault.Unavailable),
			apiForbidden:   kubefault.FailReads(e.CS, r, "", kubefault.Forbidden),
		}
	}
	e.CS.PrependReactor("update", "leases", w.leaseReactor)
	w.events = testenv.RecordEvents(t, e.Rec)
	t.Cleanup(valkeytest.Sample(100*time.Millisecond, func() {
		all := w.events.All()
		now := time.Now()
		w.mu.Lock()
		for _, ev := range all[w.seen:] {
			w.stamped = append(w.stamped, stampedEvent{at: now, ev: ev})
		}
		w.seen = len(all)
		w.mu.Unlock()
	}))
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("CHAOS_DUMP") != "" {
			w.dump()
		}
	})

	sel, err := labels.Parse("tier=cache")
	if err != nil {
		t.Fatal(err)
	}
	e.PublishQuorum(false)
	sc := controller.NewSentinelController(e.CS, controller.SentinelOptions{Namespace: e.NS, Release: testenv.SentinelRelease, Selector: sel},
		metrics.New(), e.Rec, w.log.With("controller", "sentinel"))
	e.Run(func(ctx context.Context) error { return sc.Run(ctx, nil) })
	// two instance controller replicas under leader election, as the chart's Deployment runs them; one that
	// lost its Lease exits and starts again as a follower
	for _, id := range []string{"instance-a", "instance-b"} {
		e.Run(func(ctx context.Context) error {
			for ctx.Err() == nil {
				ic := controller.NewInstanceController(e.CS, controller.InstanceOptions{Namespace: e.NS, Instance: e.In.Name},
					metrics.New(), e.Rec, w.log.With("controller", "instance", "identity", id))
				err := cli.RunLeading(ctx, e.CS, e.NS, instanceLease, id, func(ctx context.Context) error { return ic.Run(ctx, nil) })
				if ctx.Err() != nil {
					return nil
				}
				w.mu.Lock()
				w.leaseEnds = append(w.leaseEnds, leaseEnd{at: time.Now(), identity: id, err: err})
				w.mu.Unlock()
				select { // the process exits and its container restarts
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			return nil
		})
	}
	top.WaitSentinelsConverged(60*time.Second, nodes-1, len(top.Sentinels)-1)
	valkeytest.Eventually(t, 30*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(top.Nodes[0].Port) })
	if got := testenv.CountEvents(testenv.Audited(testenv.SentinelEvents(top, top.Cfg.MonitorName))); got["+monitor"] != len(top.Sentinels) || len(got) != 1 {
		t.Fatalf("registration: want one SENTINEL MONITOR per Sentinel and nothing else, got %v", got)
	}
	w.events.Take()

	e.AddStatefulSets("r1")
	e.RunKubelet(e.NodeProcs(), "r2", boot)
	writers := testenv.StartWriters(t, top, testenv.WriterOptions{Key: "__valkey-ha:chaos", PerWrite: true})
	probe := testenv.StartProbe(t, top, 100*time.Millisecond, 250*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // the writers found the primary

	var results []phaseResult
	for _, ph := range plan.phases {
		results = append(results, w.runPhase(round, ph))
	}
	settle := phaseResult{round: round, seed: plan.seed, name: "settle", from: time.Now()}
	if err := w.settled(60 * time.Second); err != nil {
		t.Errorf("round %d did not settle within 60 s after the faults healed: %v", round, err)
	}
	time.Sleep(time.Second) // the writers write to the settled primary too
	for _, wr := range writers {
		wr.Finish()
	}
	probe.Stop()
	settle.to = time.Now()
	results = append(results, settle)

	// what the clients saw, by phase
	primaryPort, err := top.SentinelPrimary()
	if err != nil {
		if p, ok := testenv.MajorityPrimary(top); ok {
			primaryPort, err = p, nil
		}
	}
	if err != nil {
		t.Fatalf("no final primary: %v", err)
	}
	final := top.NodeByPort(primaryPort)
	fc := final.Client(top.Options(acl.Operator))
	phaseOf := func(at time.Time) int {
		for i := range results {
			if at.Before(results[i].to) {
				return i
			}
		}
		return len(results) - 1
	}
	sevs := testenv.SentinelEvents(top, top.Cfg.MonitorName)
	spans := unplannedSpans(sevs, time.Duration(plan.downAfterMs)*time.Millisecond, time.Duration(plan.failoverTimeoutMs)*time.Millisecond,
		demotedFrom(probe.Rounds(), top))
	for _, sp := range spans {
		t.Logf("unplanned failover span %s..%s (failover ended %s, old primary %d)", sp.from.Format("15:04:05.000"), sp.to.Format("15:04:05.000"),
			sp.end.Format("15:04:05.000"), sp.old)
	}
	for _, sp := range spans {
		results[phaseOf(sp.from.Add(time.Duration(plan.downAfterMs)*time.Millisecond+2*time.Second))].unplanned++
	}
	for _, wr := range writers {
		evs := wr.Events()
		var acked []string
		ackedAt := map[string]time.Time{}
		for _, ev := range evs {
			i := phaseOf(ev.End)
			if ev.OK {
				results[i].acked++
				acked = append(acked, ev.Key)
				ackedAt[ev.Key] = ev.End
			} else {
				results[i].failed++
			}
		}
		missing, err := testenv.Missing(context.Background(), fc, acked)
		if err != nil {
			t.Fatalf("read back from the final primary %s: %v", final.Addr(), err)
		}
		for _, k := range missing {
			r := &results[phaseOf(ackedAt[k])]
			if inAny(spans, ackedAt[k]) {
				r.lostUnplanned++
				for _, sp := range spans {
					if sp.has(ackedAt[k]) && ackedAt[k].After(sp.end.Add(2*time.Second)) {
						t.Logf("lost in an unplanned failover's span, %s after the failover ended: %s acked %s (%s)",
							ackedAt[k].Sub(sp.end).Round(time.Millisecond), k, ackedAt[k].Format("15:04:05.000"), writableAt(probe.Rounds(), top, ackedAt[k]))
					}
				}
				continue
			}
			r.lost++
			if len(r.lostKeys) < 5 {
				r.lostKeys = append(r.lostKeys, fmt.Sprintf("%s (acked %s; %s)", k, ackedAt[k].Format("15:04:05.000"),
					writableAt(probe.Rounds(), top, ackedAt[k])))
			}
		}
	}
	for _, win := range testenv.MultiWritable(probe.Rounds()) {
		r := &results[phaseOf(win.From)]
		if inAny(spans, win.From) {
			r.windowsUnplanned = append(r.windowsUnplanned, win)
		} else {
			r.windows = append(r.windows, win)
		}
	}
	for i := range results {
		r := &results[i]
		in := testenv.EventsIn(sevs, r.from, r.to)
		c := testenv.CountEvents(in)
		r.remove, r.reset, r.monitor, r.failoverCmd, r.odown = c["-monitor"], c["+reset-master"], c["+monitor"], c[testenv.FailoverRequested], c["+odown"]
		r.realign = realigns(in)
		r.remove -= r.realign
		perSentinel := map[int]int{}
		for _, ev := range in {
			if ev.Kind == "+switch-master" {
				perSentinel[ev.Sentinel]++
			}
		}
		for _, n := range perSentinel {
			r.switches = max(r.switches, n)
		}
	}
	results[len(results)-1].ctl, results[len(results)-1].deferred = countControllerEvents(w.events.Take())
	w.mu.Lock()
	kills, leaseEnds := append([]kill{}, w.kills...), append([]leaseEnd{}, w.leaseEnds...)
	w.mu.Unlock()
	bound := failoverBound(plan)
	for _, k := range kills {
		r := &results[phaseOf(k.at)]
		r.kills++
		if !failoverWithin(sevs, k.at, bound) {
			r.noFailover++
			r.noFailoverAt = append(r.noFailoverAt, fmt.Sprintf("%s primary %d killed at %s", k.phase, k.port, k.at.Format("15:04:05.000")))
		}
	}
	w.mu.Lock()
	handoffs := handoffSpans(w.stamped)
	w.mu.Unlock()
	for _, le := range leaseEnds {
		r := &results[phaseOf(le.at)]
		r.leaseLost++
		// the Lease is lost 10 s (the renew deadline) after the renewals began to fail; the handoff runs
		// on the leader's context, cancelled at that moment
		if inAny(handoffs, le.at) {
			r.leaseLostInHandoff++
		}
		t.Logf("instance controller %s stopped leading at %s: %v", le.identity, le.at.Format("15:04:05.000"), le.err)
	}

	// the verdict
	for _, r := range results {
		t.Logf("%s: %s", r.name, r.line())
		assert.Zero(t, r.lost, "%s: no acknowledged write lost outside an unplanned failover: %v", r.name, r.lostKeys)
		assert.Empty(t, r.windows, "%s: no two writable primaries outside an unplanned failover", r.name)
		assert.Zero(t, r.remove, "%s: no SENTINEL REMOVE", r.name)
		assert.Zero(t, r.noFailover, "%s: a failover within down-after + failover-timeout + 10 s (%s) of every primary kill: %v",
			r.name, bound, r.noFailoverAt)
		if r.name == "steady" {
			assert.Zero(t, r.reset, "%s: no SENTINEL RESET in steady state", r.name)
		}
	}
	w.mu.Lock()
	t.Logf("faults applied: %s", strings.Join(w.applied, "; "))
	t.Logf("boot decisions: %s", strings.Join(w.boots, "; "))
	w.mu.Unlock()
	return results, uids
}

// runPhase runs one phase: latency on, the faults at their times, and for a roll the new revision; it
// returns once the phase's work is done and every fault has healed.
func (w *world) runPhase(round int, ph phasePlan) phaseResult {
	t, top, e := w.t, w.top, w.env
	r := phaseResult{round: round, seed: w.plan.seed, name: ph.name, from: time.Now()}
	w.mu.Lock()
	w.phaseFrom = r.from
	w.mu.Unlock()
	for i, row := range ph.delays {
		for j, d := range row {
			if i != j && d > 0 {
				top.Link(top.Nodes[i], top.Nodes[j]).Delay(d)
				r.latency = max(r.latency, d)
			}
		}
	}
	var wg sync.WaitGroup
	for _, f := range ph.faults {
		r.faults = append(r.faults, f.String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(r.from.Add(f.at)))
			w.apply(ph.name, f)
		}()
	}
	switch ph.name {
	case "steady":
		time.Sleep(time.Until(r.from.Add(steadyFor)))
	case "roll":
		e.Upgrade("2", "r2")
		deadline := time.Now().Add(rollLimit)
		for time.Now().Before(deadline) {
			if e.AllAtRevision(e.NodePods(), "r2") == nil {
				r.rolled = true
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !r.rolled {
			t.Logf("roll: not every pod replaced within %s (status roll: %v)", rollLimit, e.StatusDoc()["roll"])
		}
	}
	wg.Wait()
	for i := range ph.delays {
		for j := range ph.delays[i] {
			if i != j {
				top.Link(top.Nodes[i], top.Nodes[j]).Delay(0)
			}
		}
	}
	r.to = time.Now()
	r.ctl, r.deferred = countControllerEvents(w.events.Take())
	return r
}

// apply applies one fault and returns once it has healed.
func (w *world) apply(phase string, f fault) {
	top := w.top
	var target *valkeytest.Proc
	what := string(f.kind)
	switch f.kind {
	case killPrimary:
		w.killPrimary(phase, f)
		return
	case leaseLoss:
		w.loseLease(phase, f)
		return
	case killSentinel, replaceSentinel:
		s := top.Sentinels[f.which%len(top.Sentinels)]
		w.note(phase, f, fmt.Sprintf("%s %d (port %d)", what, f.which, s.Port))
		s.Kill()
		time.Sleep(f.d)
		if f.kind == replaceSentinel {
			if err := os.WriteFile(s.ConfPath, []byte(w.emptyConf[s]), 0o600); err != nil {
				w.t.Errorf("replace Sentinel %d: %v", f.which, err)
			}
			if s.UID != 0 {
				_ = os.Chown(s.ConfPath, s.UID, s.UID) // it rewrites its config as its own uid
			}
		}
		s.Start()
		return
	case pausePrimary, pauseReplica:
		port, ok := testenv.MajorityPrimary(top)
		if !ok {
			w.note(phase, f, "skipped: no Sentinel majority names a primary")
			return
		}
		var replicas []*valkeytest.Proc
		for _, n := range top.Nodes {
			if n.Port == port {
				if f.kind == pausePrimary {
					target = n
				}
			} else {
				replicas = append(replicas, n)
			}
		}
		if f.kind == pauseReplica && len(replicas) > 0 {
			target = replicas[f.which%len(replicas)]
		}
		if target == nil {
			w.note(phase, f, "skipped: node not found")
			return
		}
		what += fmt.Sprintf(" (port %d)", target.Port)
	case pauseSentinel:
		target = top.Sentinels[f.which%len(top.Sentinels)]
		what += fmt.Sprintf(" %d (port %d)", f.which, target.Port)
	case apiUnavailable, apiForbidden:
		w.api[f.resource][f.kind].For(f.d)
		w.note(phase, f, what+" on "+f.resource)
		time.Sleep(f.d)
		return
	}
	w.note(phase, f, what)
	target.Pause()
	time.Sleep(f.d)
	target.Resume()
}

// killPrimary kills the primary most Sentinels name and, f.d later (longer than down-after), deletes its pod:
// the fake kubelet starts it again through the boot step, as a pod that died with its node comes back.
func (w *world) killPrimary(phase string, f fault) {
	port, ok := testenv.MajorityPrimary(w.top)
	if !ok {
		w.note(phase, f, "skipped: no Sentinel majority names a primary")
		return
	}
	n := w.top.NodeByPort(port)
	var pod string
	for name, p := range w.env.NodeProcs() {
		if p == n {
			pod = name
		}
	}
	at := time.Now()
	n.Kill()
	w.mu.Lock()
	w.kills = append(w.kills, kill{at: at, port: port, phase: phase})
	w.mu.Unlock()
	w.note(phase, f, fmt.Sprintf("%s (port %d, pod %s)", f.kind, port, pod))
	time.Sleep(f.d)
	if pod != "" {
		if err := w.env.CS.CoreV1().Pods(w.env.NS).Delete(context.Background(), pod, metav1.DeleteOptions{}); err != nil {
			w.t.Logf("kill primary: delete pod %s: %v", pod, err)
		}
	}
}

// loseLease makes the Lease renewals of the instance controller replica that holds the Lease fail for f.d.
func (w *world) loseLease(phase string, f fault) {
	l, err := w.env.CS.CoordinationV1().Leases(w.env.NS).Get(context.Background(), instanceLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		w.note(phase, f, fmt.Sprintf("skipped: no holder of Lease %s (%v)", instanceLease, err))
		return
	}
	victim := *l.Spec.HolderIdentity
	if phase == "roll" {
		// the Lease is lost about the 10 s renew deadline after the renewals began to fail: starting at the
		// first pod the roll replaces puts the loss near the primary's handoff, which comes after the replicas
		w.waitEvent("RollingPod", rollLimit)
	}
	w.note(phase, f, fmt.Sprintf("%s (%s)", f.kind, victim))
	w.leaseVictim.Store(victim)
	time.Sleep(f.d)
	w.leaseVictim.Store("")
}

// waitEvent waits until a controller Event with reason was seen since the current phase began (any, when
// none is within timeout).
func (w *world) waitEvent(reason string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		evs, from := w.stamped, w.phaseFrom
		w.mu.Unlock()
		for i := len(evs) - 1; i >= 0 && !evs[i].at.Before(from); i-- {
			if testenv.HasReason(evs[i].ev, reason) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leaseReactor fails the Lease updates of the victim replica: its renewals (the Lease held by it) and its
// release (holder emptied), as when its API requests fail; the standby's takeover goes through.
func (w *world) leaseReactor(a k8stesting.Action) (bool, runtime.Object, error) {
	victim, _ := w.leaseVictim.Load().(string)
	if victim == "" {
		return false, nil, nil
	}
	u, ok := a.(k8stesting.UpdateAction)
	if !ok {
		return false, nil, nil
	}
	l, ok := u.GetObject().(*coordinationv1.Lease)
	if !ok || l.Name != instanceLease {
		return false, nil, nil
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if holder == victim || holder == "" {
		return true, nil, apierrors.NewServiceUnavailable("lease update failed (chaos: " + victim + "'s renewals fail)")
	}
	return false, nil, nil
}

// failoverWithin reports whether a Sentinel logged +switch-master within bound after at.
func failoverWithin(evs []testenv.SentinelEvent, at time.Time, bound time.Duration) bool {
	for _, ev := range evs {
		if ev.Kind == "+switch-master" && !ev.At.Before(at) && !ev.At.After(at.Add(bound)) {
			return true
		}
	}
	return false
}

// stampedEvent is a controller Event ("Type Reason message") with the time the test first saw it (within
// 100 ms of its emission).
type stampedEvent struct {
	at time.Time
	ev string
}

// handoffSpans returns the spans between a PrimaryHandingOff Event and the next PrimaryHandedOff (or 30 s
// when none came).
func handoffSpans(evs []stampedEvent) []span {
	var out []span
	for i, ev := range evs {
		if !testenv.HasReason(ev.ev, "PrimaryHandingOff") {
			continue
		}
		to := ev.at.Add(30 * time.Second)
		for _, later := range evs[i+1:] {
			if testenv.HasReason(later.ev, "PrimaryHandedOff") {
				to = later.at
				break
			}
		}
		out = append(out, span{from: ev.at, to: to})
	}
	return out
}

func (w *world) note(phase string, f fault, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied = append(w.applied, fmt.Sprintf("%s %s %s for %.1fs", time.Now().Format("15:04:05.000"), phase, what, f.d.Seconds()))
}

// settled waits until every Sentinel names one primary, exactly that node reports master, every other
// node replicates from it with its link up, and the role labels say so.
func (w *world) settled(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		last = func() error {
			p, err := w.top.SentinelPrimary()
			if err != nil {
				return err
			}
			for _, n := range w.top.Nodes {
				r, err := w.top.Replication(n)
				if err != nil {
					return fmt.Errorf("%s: %w", n.Addr(), err)
				}
				switch {
				case n.Port == p && r.Role != valkey.RolePrimary:
					return fmt.Errorf("%s is named primary but reports %s", n.Addr(), r.Role)
				case n.Port != p && (r.Role != valkey.RoleReplica || r.PrimaryPort != p || !r.LinkUp):
					return fmt.Errorf("%s: %s of %d, link up %v (primary %d)", n.Addr(), r.Role, r.PrimaryPort, r.LinkUp, p)
				}
			}
			return w.env.LabelsMatch(p)
		}()
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

// bootFiles writes what a data pod's boot step reads (the sentinels file, the secrets directory, each
// node's config template: its first config without replicaof) and returns the fake kubelet's hook that runs
// the real boot step (bootstrap.Run) before a deleted node starts again.
func (w *world) bootFiles() func(pod string, p *valkeytest.Proc) {
	t, top := w.t, w.top
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, pw := range top.Passwords {
		if err := os.WriteFile(filepath.Join(secrets, name), []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(spec.SentinelInfo{MonitorName: top.Cfg.MonitorName, SentinelRelease: testenv.SentinelRelease, Port: 26379,
		Hosts: testenv.SentinelAddrs(top)})
	sentinels := filepath.Join(dir, "sentinels.json")
	if err := os.WriteFile(sentinels, b, 0o600); err != nil {
		t.Fatal(err)
	}
	templates := map[*valkeytest.Proc]string{}
	index := map[*valkeytest.Proc]int{}
	for i, n := range top.Nodes {
		var keep []string
		for _, l := range strings.Split(n.Config(), "\n") {
			if l != "" && !strings.HasPrefix(l, "replicaof ") {
				keep = append(keep, l)
			}
		}
		path := filepath.Join(dir, fmt.Sprintf("template-%d.conf", i))
		if err := os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		templates[n], index[n] = path, i
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	guards := map[string]context.CancelFunc{} // the first-sync guard of each pod's last boot
	return func(pod string, p *valkeytest.Proc) {
		w.mu.Lock()
		if stop := guards[pod]; stop != nil {
			stop()
		}
		w.mu.Unlock()
		cfg := bootstrap.Config{Instance: w.env.In, NodeIndex: index[p], SentinelsFile: sentinels, SecretsDir: secrets,
			DataDir: p.Dir, ConfigTemplate: templates[p], ConfigOut: p.ConfPath, Retry: 500 * time.Millisecond, WaitLimit: time.Minute}
		start := time.Now()
		var d bootstrap.Decision
		for ctx.Err() == nil {
			var err error
			d, err = bootstrap.Run(ctx, cfg, w.log.With("boot", pod))
			w.mu.Lock()
			w.boots = append(w.boots, fmt.Sprintf("%s %s: %s %s:%d after %s (%s)", start.Format("15:04:05.000"), pod, d.Kind,
				d.PrimaryHost, d.PrimaryPort, time.Since(start).Round(time.Millisecond), d.Reason))
			if err != nil {
				w.boots = append(w.boots, fmt.Sprintf("%s: boot step failed, retrying: %v", pod, err))
			}
			w.mu.Unlock()
			if err == nil {
				break
			}
		}
		if p.UID != 0 {
			_ = os.Chown(p.ConfPath, p.UID, p.UID) // the boot step wrote it as root; the server runs as its own uid
		}
		if d.Guard {
			// as in a data pod: the replica started without data runs with replica-priority 0 until its
			// first sync completed
			gctx, stop := context.WithCancel(ctx)
			w.mu.Lock()
			guards[pod] = stop
			w.mu.Unlock()
			testenv.RunFirstSyncGuard(gctx, t, top, p, w.log.With("guard", pod))
		}
	}
}

// dump logs what a failed round's Sentinels and controllers said, and keeps every process's log under
// CHAOS_DUMP (every round's when it is set).
func (w *world) dump() {
	t := w.t
	if t.Failed() {
		for _, ev := range testenv.SentinelEvents(w.top, w.top.Cfg.MonitorName) {
			t.Logf("%s", ev)
		}
		for _, ev := range w.events.All() {
			t.Logf("event: %s", ev)
		}
	}
	dir := os.Getenv("CHAOS_DUMP")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, fmt.Sprintf("seed-%d", w.plan.seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("dump: %v", err)
		return
	}
	b, _ := os.ReadFile(w.logPath)
	_ = os.WriteFile(filepath.Join(dir, "controllers.log"), b, 0o644)
	for i, s := range w.top.Sentinels {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("sentinel-%d-%d.log", i, s.Port)), []byte(s.Logs()), 0o644)
	}
	for i, n := range w.top.Nodes {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("node-%d-%d.log", i, n.Port)), []byte(n.Logs()), 0o644)
	}
	t.Logf("logs kept in %s", dir)
}

// writableAt names the nodes (by port) that the probe rounds just before and after t found primary and
// writable: which node a lost write can have been acknowledged by.
func writableAt(rounds []testenv.ProbeRound, top *valkeytest.Topology, t time.Time) string {
	var parts []string
	for i, r := range rounds {
		if r.At.After(t) || (i+1 < len(rounds) && !rounds[i+1].At.After(t)) {
			continue
		}
		for _, rr := range rounds[i:min(i+2, len(rounds))] {
			var w []string
			for _, n := range rr.Writable {
				w = append(w, strconv.Itoa(top.Nodes[n].Port))
			}
			var p []string
			for _, n := range rr.Primaries {
				p = append(p, strconv.Itoa(top.Nodes[n].Port))
			}
			parts = append(parts, fmt.Sprintf("probe %s: master %v writable %v", rr.At.Format("15:04:05.000"), p, w))
		}
	}
	return strings.Join(parts, ", ")
}

// realigns counts the SENTINEL REMOVE (-monitor) events that the same Sentinel's next event, within 1 s,
// follows with SENTINEL MONITOR (+monitor) of the monitor again: the sentinel controller's realignment of a
// Sentinel stuck on a stale primary (registration.Realign), not a monitor removed.
func realigns(evs []testenv.SentinelEvent) int {
	n := 0
	for i, ev := range evs {
		if ev.Kind != "-monitor" {
			continue
		}
		for _, next := range evs[i+1:] {
			if next.Sentinel != ev.Sentinel {
				continue
			}
			if next.Kind == "+monitor" && next.At.Sub(ev.At) <= time.Second {
				n++
			}
			break
		}
	}
	return n
}

// countControllerEvents counts the controllers' Events by reason and lists the reasons of deferred handoffs.
func countControllerEvents(evs []string) (map[string]int, []string) {
	out := map[string]int{}
	var deferred []string
	for _, ev := range evs {
		f := strings.Fields(ev)
		if len(f) < 2 {
			continue
		}
		out[f[1]]++
		if f[1] == "RollDeferred" {
			if i := strings.Index(ev, "deferred: "); i >= 0 {
				why := ev[i+len("deferred: "):]
				if j := strings.IndexByte(why, ':'); j > 0 {
					why = why[:j]
				}
				deferred = append(deferred, why)
			}
		}
	}
	return out, deferred
}

// rulesLeft returns the nat OUTPUT rules that still carry one of uids' comments (valkeytest redirects).
func rulesLeft(uids []int) string {
	if len(uids) == 0 {
		return ""
	}
	out, err := exec.Command("iptables", "-w", "5", "-t", "nat", "-S", "OUTPUT").Output()
	if err != nil {
		return "cannot list: " + err.Error()
	}
	var left []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, uid := range uids {
			if uid != 0 && regexp.MustCompile(`valkeytest-uid-`+strconv.Itoa(uid)+`\b`).MatchString(line) {
				left = append(left, line)
			}
		}
	}
	return strings.Join(left, "\n")
}

func (r phaseResult) line() string {
	s := fmt.Sprintf("%s..%s latency<=%dms faults=[%s] writes acked %d failed %d LOST %d; two-writable windows %d (%s); "+
		"unplanned failovers %d (lost in them %d, two-writable windows in them %d (%s)); "+
		"REMOVE %d (realigned %d) RESET %d MONITOR %d FAILOVER-cmd %d +switch-master %d +odown %d; controller events %v",
		r.from.Format("15:04:05.000"), r.to.Format("15:04:05.000"), r.latency.Milliseconds(), strings.Join(r.faults, "; "),
		r.acked, r.failed, r.lost, len(r.windows), testenv.Total(r.windows).Round(time.Millisecond),
		r.unplanned, r.lostUnplanned, len(r.windowsUnplanned), testenv.Total(r.windowsUnplanned).Round(time.Millisecond),
		r.remove, r.realign, r.reset, r.monitor, r.failoverCmd, r.switches, r.odown, r.ctl)
	if r.name == "roll" {
		s += fmt.Sprintf("; rolled %v", r.rolled)
	}
	if len(r.deferred) > 0 {
		s += fmt.Sprintf("; handoffs deferred: %v", r.deferred)
	}
	s += fmt.Sprintf("; primary kills %d, without a failover %d %v; Leases lost %d (in a handoff %d)", r.kills, r.noFailover, r.noFailoverAt,
		r.leaseLost, r.leaseLostInHandoff)
	if len(r.lostKeys) > 0 {
		s += fmt.Sprintf("; lost e.g. %v", r.lostKeys)
	}
	return s
}
