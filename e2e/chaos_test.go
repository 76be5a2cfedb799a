//go:build e2e && chaos

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// The multi-node scenarios (make chaos-cluster: NODES=3 hack/cluster.sh up, then go test -tags 'e2e chaos'
// -run TestChaos). Each installs 1 primary + 2 replicas and 3 Sentinels spread over the three nodes (one data
// pod and one Sentinel per node: the charts' default anti-affinity), writes through a valkey-go Sentinel client
// (one distinct key every 10 ms) and probes every data node directly (WriteProbe), injects a node-level fault,
// heals it, waits until the deployment converged and reports one ChaosResult line:
//
//	failovers           +switch-master per Sentinel (the most any Sentinel logged)
//	single primary      from the fault to the first probe round after which exactly one node took writes
//	no primary          the longest time no node took probe writes (a primary change or loss)
//	write outage        longest gap between two writes the Sentinel-aware writer got acknowledged
//	lost                acknowledged writes missing on the final primary
//	two primaries       time two nodes acknowledged probe writes in the same round
//	controller actions  Repaired/RepairFailed/MonitorRemoved/MonitorRegistered/SentinelReset events after the
//	                    install (a controller that fights Sentinel shows up here; MonitorRegistered is expected
//	                    for a Sentinel pod that was replaced, it starts without monitors)
//
// E2E_CHAOS_RESULTS=FILE appends every result as one JSON line (RELIABILITY.md is made from them).

const (
	chaosUsers      = `users: [{name: app, access: full, keys: ["*"]}]`
	chaosWriteEvery = 10 * time.Millisecond
)

// chaos is one scenario in progress.
type chaos struct {
	t     *testing.T
	name  string
	d     *Deployment
	in    *Instance
	pw    string
	w     *SentinelWriter
	probe *WriteProbe
	t0    time.Time // writer and probe running
	fault time.Time // the fault that the result is measured from
	notes []string
	// slow is how long the failovers that outlasted failoverBound took; finish accepts them only when the
	// Sentinels logged a split vote (one retry, splitVoteRetry)
	slow []time.Duration
}

const (
	// failoverBound is how long a failover may take after its fault: down-after + failover-timeout + 10 s.
	failoverBound = downAfter + failoverTimeout + 10*time.Second
	// splitVoteRetry is what one split vote adds: Sentinels that start the election at the same moment each
	// vote for themselves (-failover-abort-not-elected), and a Sentinel tries again only twice failover-timeout
	// after its last try (Sentinel docs, failover-timeout), plus up to 1 s of its desync and slack.
	splitVoteRetry = 2*failoverTimeout + 2*time.Second
)

// waitFailover waits for a new primary after the fault at since (up to failoverBound + splitVoteRetry) and
// returns it; a failover past failoverBound is recorded for finish to hold against the Sentinels' logs.
func (c *chaos) waitFailover(old int, since time.Time) int {
	c.t.Helper()
	p := c.waitNewPrimary(old, time.Until(since.Add(failoverBound+splitVoteRetry)))
	c.holdFailoverBound(time.Since(since))
	return p
}

// holdFailoverBound records a failover that took longer than failoverBound.
func (c *chaos) holdFailoverBound(took time.Duration) {
	if took > failoverBound {
		c.slow = append(c.slow, took)
	}
}

// ChaosResult is one row of RELIABILITY.md.
type ChaosResult struct {
	Scenario          string   `json:"scenario"`
	Failovers         int      `json:"failovers"`
	FailoverAttempts  int      `json:"failover_attempts"`
	SinglePrimaryS    float64  `json:"single_primary_after_s"` // -1: never settled
	NoPrimaryS        float64  `json:"no_writable_primary_s"`  // longest probe gap without a writable node
	WriteOutageS      float64  `json:"write_outage_s"`
	Acked             int      `json:"acked"`
	Failed            int      `json:"failed"`
	Lost              int      `json:"lost"`
	TwoPrimariesS     float64  `json:"two_primaries_s"`
	OldPrimaryWritesS float64  `json:"old_primary_took_writes_s"` // after the fault, on a node that is not the final primary
	ControllerActions []string `json:"controller_actions"`
	Notes             []string `json:"notes"`
}

// startChaos deploys the scenario's instance (extra values merged over chaosUsers), checks the spread, starts
// the probe and the writer and waits for 100 acknowledged writes.
func startChaos(t *testing.T, name, dataExtra string) *chaos {
	t.Helper()
	RequireNodes(t, 3)
	RequireLocalFaults(t)
	d := Deploy(t, "chaos", DeployOpts{DataExtra: chaosUsers + "\n" + dataExtra})
	c := &chaos{t: t, name: name, d: d, in: d.I()}
	c.requireSpread()
	c.pw = waitSecretKey(t, d, c.in.F+"-user-app", "password")
	c.probe = c.in.StartWriteProbe(t, "app", c.pw, 200*time.Millisecond)
	c.w = c.in.StartSentinelWriter(t, "app", c.pw, "chaos:", chaosWriteEvery)
	c.waitAcked(100, time.Minute)
	c.t0 = time.Now()
	return c
}

// requireSpread fails unless the data pods and the Sentinels each sit on three different nodes.
func (c *chaos) requireSpread() {
	c.t.Helper()
	ctx := context.Background()
	for _, sel := range []string{c.in.DataSelector(), c.d.SentinelSelector()} {
		m, err := PodsByNode(ctx, c.d.NS, sel)
		if err != nil {
			c.t.Fatal(err)
		}
		if len(m) < 3 {
			c.t.Fatalf("pods %s share nodes: %v (the charts' anti-affinity should spread them over 3 nodes)", sel, m)
		}
		c.t.Logf("spread %s: %v", sel, m)
	}
}

func (c *chaos) waitAcked(n int, timeout time.Duration) {
	c.t.Helper()
	base := c.w.Acked()
	Eventually(c.t, timeout, 100*time.Millisecond, fmt.Sprintf("the writer is acknowledged %d more times", n), func(context.Context) (bool, error) {
		if got := c.w.Acked() - base; got < n {
			return false, fmt.Errorf("%d acknowledged; %s", got, c.w.Stats())
		}
		return true, nil
	})
}

// primaryNode returns the index of the primary and the node its pod runs on.
func (c *chaos) primaryNode() (int, string) {
	c.t.Helper()
	ctx := context.Background()
	p, err := c.in.SentinelPrimary(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	node, err := NodeOf(ctx, c.d.NS, c.in.Pod(p))
	if err != nil {
		c.t.Fatal(err)
	}
	return p, node
}

// nodeOfPod is NodeOf that fails the test.
func (c *chaos) nodeOfPod(pod string) string {
	c.t.Helper()
	n, err := NodeOf(context.Background(), c.d.NS, pod)
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *chaos) note(format string, args ...interface{}) {
	s := fmt.Sprintf(format, args...)
	c.notes = append(c.notes, s)
	c.t.Log(s)
}

// majorityPrimary asks every Sentinel directly from the host (not through exec: the kubelet of a dead or cut-off
// node cannot run one; and at its pod IP, not through the cluster DNS, whose pods a fault may take down) for the
// primary's address and returns the node index a majority of all Sentinels names.
func (c *chaos) majorityPrimary(ctx context.Context) (int, error) {
	votes := map[int]int{}
	var answers []string
	for j := 0; j < c.d.Sentinels; j++ {
		pod, err := kube.CoreV1().Pods(c.d.NS).Get(ctx, c.d.SentinelPod(j), metav1.GetOptions{})
		if err != nil || pod.Status.PodIP == "" {
			answers = append(answers, fmt.Sprintf("%s: no pod IP (%v)", c.d.SentinelPod(j), err))
			continue
		}
		user, pw, err := c.d.SentinelCredential(ctx, acl.SentinelClient)
		if err != nil {
			answers = append(answers, fmt.Sprintf("%s: %v", c.d.SentinelPod(j), err))
			continue
		}
		opt := valkey.ClientOption{InitAddress: []string{net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(sentinelPort))},
			Username: user, Password: pw, DisableCache: true, ForceSingleClient: true, Dialer: net.Dialer{Timeout: time.Second}}
		cl, err := valkey.NewClient(opt)
		if err != nil {
			answers = append(answers, fmt.Sprintf("%s: %v", c.d.SentinelPod(j), err))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		addr, err := cl.Do(cctx, cl.B().SentinelGetMasterAddrByName().Master(c.in.F).Build()).AsStrSlice()
		cancel()
		cl.Close()
		if err != nil || len(addr) != 2 {
			answers = append(answers, fmt.Sprintf("%s: %v %v", c.d.SentinelPod(j), addr, err))
			continue
		}
		answers = append(answers, fmt.Sprintf("%s: %s", c.d.SentinelPod(j), addr[0]))
		if i := c.in.IndexOfHost(addr[0]); i >= 0 {
			votes[i]++
		}
	}
	for i, n := range votes {
		if n > c.d.Sentinels/2 {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no majority: %s", strings.Join(answers, "; "))
}

// waitNewPrimary waits until a majority of the Sentinels names a primary other than old and that node takes
// writes (the probe saw it writable).
func (c *chaos) waitNewPrimary(old int, timeout time.Duration) int {
	c.t.Helper()
	p := -1
	var named time.Time
	Eventually(c.t, timeout, 250*time.Millisecond, "a majority of the Sentinels names a new primary", func(ctx context.Context) (bool, error) {
		i, err := c.majorityPrimary(ctx)
		if err != nil {
			return false, err
		}
		if i == old {
			return false, fmt.Errorf("the Sentinels still name %s", c.in.Pod(old))
		}
		if named.IsZero() {
			named = time.Now()
		}
		rs := c.probe.Rounds()
		if len(rs) == 0 || !rs[len(rs)-1].Writable[i] {
			return false, fmt.Errorf("%s is named but did not take the last probe write", c.in.Pod(i))
		}
		p = i
		return true, nil
	})
	c.note("new primary %s %s after the fault (a majority of the Sentinels named it after %s)", c.in.Pod(p),
		time.Since(c.fault).Round(time.Millisecond), named.Sub(c.fault).Round(time.Millisecond))
	return p
}

// finish waits for convergence and more writes, stops the clients, measures and reports.
func (c *chaos) finish() ChaosResult {
	t := c.t
	t.Helper()
	ctx := context.Background()
	if c.fault.IsZero() {
		c.fault = c.t0
	}
	c.d.WaitConverged(t, 5*time.Minute, true)
	c.waitAcked(100, time.Minute)
	c.w.Stop()
	c.probe.Stop()
	stats := c.w.Stats()
	ps := c.probe.Summarize(c.fault)
	t.Logf("writer: %s", stats)
	t.Logf("probe: %s", ps)

	r := ChaosResult{Scenario: c.name, Acked: stats.Acked, Failed: stats.Failed, WriteOutageS: stats.LongestAckGap.Seconds(),
		SinglePrimaryS: -1, NoPrimaryS: ps.NoPrimary.Seconds(), TwoPrimariesS: ps.TwoWritable.Seconds(), Notes: c.notes}
	if ps.SingleWritableAfter >= 0 {
		r.SinglePrimaryS = ps.SingleWritableAfter.Seconds()
	}
	for _, d := range ps.WritableUntil {
		r.OldPrimaryWritesS = max(r.OldPrimaryWritesS, d.Seconds())
	}

	primary, err := c.majorityPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := c.w.MissingOn(ctx, net.JoinHostPort(c.in.FQDN(primary), strconv.Itoa(valkeyPort)), "app", c.pw)
	if err != nil {
		t.Fatal(err)
	}
	r.Lost = len(missing)
	if len(missing) > 0 {
		t.Logf("%d acknowledged writes missing on %s, first %v", len(missing), c.in.Pod(primary), missing[:min(5, len(missing))])
	}

	// Sentinel: failovers (the most +switch-master any Sentinel logged) and attempts
	evs, err := c.d.SentinelLogEvents(ctx, c.in.F, c.t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if !ev.Master {
			continue
		}
		switch ev.Event {
		case "+switch-master", "+try-failover", "+odown", "-failover-abort-no-good-slave", "-failover-abort-not-elected", "+failover-end-for-timeout":
			t.Logf("sentinel %s: %s", ev.Pod, ev.Line)
		}
	}
	fc := countFailovers(evs)
	r.Failovers, r.FailoverAttempts = fc.Promotions, fc.Attempts
	if len(c.slow) > 0 {
		splits := 0
		for _, ev := range evs {
			if ev.Master && ev.Event == "-failover-abort-not-elected" {
				splits++
			}
		}
		if splits == 0 {
			t.Errorf("failover took %v after the fault, more than down-after + failover-timeout + 10 s = %s, and no Sentinel logged a split vote", c.slow, failoverBound)
		} else {
			msg := fmt.Sprintf("%d split vote(s) (-failover-abort-not-elected): failover after %v (bound %s, one retry more allowed)", splits, c.slow, failoverBound)
			t.Log(msg)
			r.Notes = append(r.Notes, msg)
		}
	}

	// the controllers: anything they did against the Sentinels' view shows as one of these events
	for _, reason := range []string{"Repaired", "RepairFailed", "MonitorRemoved", "MonitorRegistered", "SentinelReset"} {
		es, err := FindEvents(ctx, c.d.NS, reason, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			at := e.LastTimestamp.Time
			if at.IsZero() {
				at = e.EventTime.Time
			}
			if at.Before(c.t0.Add(-time.Second)) {
				continue
			}
			r.ControllerActions = append(r.ControllerActions, fmt.Sprintf("%s x%d (last at fault%+.0fs): %s", e.Reason, max(e.Count, 1), at.Sub(c.fault).Seconds(), e.Message))
		}
	}
	sort.Strings(r.ControllerActions)
	line, _ := json.Marshal(r)
	t.Logf("CHAOS-RESULT %s", line)
	if f := os.Getenv("E2E_CHAOS_RESULTS"); f != "" {
		if fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(fh, "%s\n", line)
			fh.Close()
		}
	}
	return r
}

// expect asserts the guarantees a scenario is named for.
func (c *chaos) expect(r ChaosResult, maxFailovers, maxLost int, maxTwoPrimaries time.Duration) {
	c.t.Helper()
	if r.Failovers > maxFailovers {
		c.t.Errorf("%d failovers, want at most %d", r.Failovers, maxFailovers)
	}
	if r.Lost > maxLost {
		c.t.Errorf("%d acknowledged writes lost, want at most %d", r.Lost, maxLost)
	}
	if r.TwoPrimariesS > maxTwoPrimaries.Seconds() {
		c.t.Errorf("two nodes took writes for %.1f s, want at most %s", r.TwoPrimariesS, maxTwoPrimaries)
	}
	if r.SinglePrimaryS < 0 {
		c.t.Errorf("the probe never settled on a single writable primary")
	}
	for _, a := range r.ControllerActions {
		// a MonitorRegistered on a Sentinel pod that was replaced (drain, dead node) is expected: it starts
		// without monitors; removing a monitor never is
		if strings.HasPrefix(a, "MonitorRemoved") {
			c.t.Errorf("the Sentinel controller removed a monitor during the scenario: %s", a)
		}
	}
}

// ---- S24: drains -----------------------------------------------------------------------------------------

// TestChaosS24DrainPrimaryNode: `kubectl drain` of the node holding the primary (and a Sentinel) under load.
// The drain completes (the PDBs allow one data pod and one Sentinel at a time), quorum holds, one failover at
// most, no acknowledged write lost.
func TestChaosS24DrainPrimaryNode(t *testing.T) {
	c := startChaos(t, "drain the primary's node (S24)", "")
	_, node := c.primaryNode()
	c.fault = time.Now()
	r := Drain(t, node, 5*time.Minute)
	if r.Err != nil {
		t.Errorf("drain %s: %v", node, r.Err)
	}
	c.note("drained %s in %s", node, r.End.Sub(r.Start).Round(time.Millisecond))
	Uncordon(t, node)
	c.expect(c.finish(), 1, 0, 0)
}

// TestChaosS24DrainEveryNode: a cluster upgrade: every node drained in turn (waiting for the deployment to
// converge and uncordoning in between). At most one failover per drained primary, nothing lost.
func TestChaosS24DrainEveryNode(t *testing.T) {
	c := startChaos(t, "drain every node in turn (S24)", "")
	nodes, err := Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.fault = time.Now()
	for _, n := range nodes {
		r := Drain(t, n.Name, 5*time.Minute)
		if r.Err != nil {
			t.Errorf("drain %s: %v", n.Name, r.Err)
		}
		c.note("drained %s in %s", n.Name, r.End.Sub(r.Start).Round(time.Millisecond))
		c.d.WaitConverged(t, 5*time.Minute, true)
		Uncordon(t, n.Name)
	}
	c.expect(c.finish(), len(nodes), 0, 0)
}

// ---- node loss ------------------------------------------------------------------------------------------

// TestChaosKillPrimaryNode: the primary's node dies (kubelet, containerd and every pod process killed; the API
// sees it NotReady, its pods stay bound to it). Sentinel fails over within down-after + failover-timeout; the
// node comes back 60 s after the failover (dead about 70 s, past the about 50 s its CoreDNS replica stays in
// the DNS Service) and its pods rejoin as replicas. Writes acknowledged in the last moments before the crash
// that had not reached a replica are lost (asynchronous replication): reported, bounded.
//
// A CoreDNS replica is placed on the primary's node on purpose (placeCoreDNSOn): until Kubernetes drops the dead
// replica from the DNS Service (about 50 s), lookups that reach it get no answer, and Sentinel and the servers
// resolve names with blocking lookups on their only thread (RELIABILITY.md, "Found" 3).
func TestChaosKillPrimaryNode(t *testing.T) {
	c := startChaos(t, "kill the primary's node", "")
	old, node := c.primaryNode()
	c.note("CoreDNS replicas: %s", placeCoreDNSOn(t, node))
	f := KillNode(t, node)
	c.fault = f.At
	// wait long enough to measure a slow failover (see RELIABILITY.md: a dead CoreDNS replica stalls Sentinel's
	// hostname lookups), then hold it to the bound
	c.waitNewPrimary(old, 3*time.Minute)
	c.holdFailoverBound(time.Since(f.At))
	time.Sleep(60 * time.Second) // the node stays dead: NotReady, its pods stuck, its CoreDNS replica dropped
	c.note("%s", c.resolverStalls(node, f.At))
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	c.note("node %s back %s after the crash", node, time.Since(f.At).Round(time.Second))
	c.expect(c.finish(), 1, 50, 0)
}

// resolverStalls counts, in the logs since since of the Sentinels that do not run on node (the dead one's logs
// cannot be read), what a stalled resolver leaves (RELIABILITY.md, "Found" 3): TILT mode entered, names that
// failed to resolve, and the dns-cache container's minutes with stale or failed answers.
func (c *chaos) resolverStalls(node string, since time.Time) string {
	ctx := context.Background()
	st := metav1.NewTime(since.Add(-time.Second))
	var out []string
	for j := 0; j < c.d.Sentinels; j++ {
		pod := c.d.SentinelPod(j)
		if n, err := NodeOf(ctx, c.d.NS, pod); err != nil || n == node {
			continue
		}
		counts := map[string]int{}
		for _, ct := range []struct{ container, what string }{
			{"sentinel", "+tilt"}, {"sentinel", "Failed to resolve hostname"}, {"dns-cache", "did not answer in time"},
		} {
			raw, err := kube.CoreV1().Pods(c.d.NS).GetLogs(pod, &corev1.PodLogOptions{Container: ct.container, SinceTime: &st}).DoRaw(ctx)
			if err != nil {
				counts[ct.what] = -1
				continue
			}
			counts[ct.what] = strings.Count(string(raw), ct.what)
		}
		out = append(out, fmt.Sprintf("%s: %d +tilt, %d 'Failed to resolve hostname', %d dns-cache warnings", pod,
			counts["+tilt"], counts["Failed to resolve hostname"], counts["did not answer in time"]))
	}
	return "surviving Sentinels' logs since the kill: " + strings.Join(out, "; ")
}

// TestChaosKillNodeDuringRoll: a planned roll (server config change) runs, and a node holding a replica and a
// Sentinel (not the primary) dies in the middle of it. The roll must not lose writes or hand the primary to a
// dead node; it finishes once the node is back.
func TestChaosKillNodeDuringRoll(t *testing.T) {
	c := startChaos(t, "kill a replica+Sentinel node during a planned roll", "")
	p, pnode := c.primaryNode()
	victim := ""
	for i := 0; i < c.in.Nodes() && victim == ""; i++ {
		if n := c.nodeOfPod(c.in.Pod(i)); i != p && n != pnode {
			victim = n
		}
	}
	tracker := TrackPods(t, c.d.NS, c.in.DataSelector(), 250*time.Millisecond)
	c.in.Extra = rollChange
	c.d.Helm.Upgrade(c.in.Release, ChartPath("valkey"), c.in.Values(), HelmOpts{NoWait: true})
	Eventually(t, 3*time.Minute, 250*time.Millisecond, "the roll replaced its first pod", func(context.Context) (bool, error) {
		for _, ls := range tracker.Lives() {
			if len(ls) > 1 {
				return true, nil
			}
		}
		return false, fmt.Errorf("no data pod replaced yet")
	})
	f := KillNode(t, victim)
	c.fault = f.At
	time.Sleep(60 * time.Second)
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	c.note("killed %s (replica + Sentinel) during the roll, back after %s", victim, time.Since(f.At).Round(time.Second))
	Eventually(t, 6*time.Minute, time.Second, "every data pod runs the new config", func(ctx context.Context) (bool, error) {
		err := c.rolledConfig(ctx)
		return err == nil, err
	})
	c.expect(c.finish(), 1, 0, 0)
}

// rollChange is the server-config change the roll scenarios apply (tcp-keepalive 120 lands in valkey.conf and
// so in the config hash: every data pod is replaced).
const rollChange = chaosUsers + "\nconfig: {tcp-keepalive: 120}"

// rolledConfig returns nil once every data node runs rollChange.
func (c *chaos) rolledConfig(ctx context.Context) error {
	for i := 0; i < c.in.Nodes(); i++ {
		out, err := c.in.Op(ctx, c.in.Pod(i), "config", "get", "tcp-keepalive")
		if f := strings.Fields(out); err != nil || len(f) != 2 || f[1] != "120" {
			return fmt.Errorf("%s: tcp-keepalive %q (%v)", c.in.Pod(i), out, err)
		}
	}
	return nil
}

// ---- S02: cordoned nodes ----------------------------------------------------------------------------------

// TestChaosS02CordonAllButOneThenRoll: every node but one is cordoned, then a planned roll moves every data
// pod onto the one schedulable node. Then that node is cordoned too and the primary pod is deleted: it stays
// Pending and its name stops resolving; Sentinel must still promote a replica within down-after +
// failover-timeout, without -failover-abort-no-good-slave (S02).
func TestChaosS02CordonAllButOneThenRoll(t *testing.T) {
	c := startChaos(t, "cordon all but one node, roll, then lose the primary to a Pending pod (S02)", "")
	nodes, err := Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	keep := nodes[0].Name
	c.fault = time.Now()
	for _, n := range nodes[1:] {
		Cordon(t, n.Name)
	}
	c.in.Extra = rollChange
	c.d.Helm.Upgrade(c.in.Release, ChartPath("valkey"), c.in.Values(), HelmOpts{NoWait: true})
	Eventually(t, 8*time.Minute, time.Second, "the roll finished on "+keep, func(ctx context.Context) (bool, error) {
		if err := c.rolledConfig(ctx); err != nil {
			return false, err
		}
		_, err := c.in.Converged(ctx, true)
		return err == nil, err
	})
	byNode, _ := PodsByNode(context.Background(), c.d.NS, c.in.DataSelector())
	c.note("after the roll with all but %s cordoned: data pods %v", keep, byNode)

	// S02 proper: nowhere to go
	old, _ := c.primaryNode()
	Cordon(t, keep)
	t1 := time.Now()
	DeletePod(t, c.d.NS, c.in.Pod(old), nil)
	c.waitFailover(old, t1)
	c.note("S02: primary pod deleted with every node cordoned; new primary %s after the deletion", time.Since(t1).Round(time.Millisecond))
	for _, n := range nodes {
		Uncordon(t, n.Name)
	}
	evs, err := c.d.SentinelLogEvents(context.Background(), c.in.F, t1)
	if err != nil {
		t.Fatal(err)
	}
	fix := 0
	for _, ev := range evs {
		switch ev.Event {
		case "-failover-abort-no-good-slave":
			t.Errorf("S02: %s: %s", ev.Pod, ev.Line)
		case "+fix-slave-config":
			fix++
		}
	}
	if fix > 6 {
		t.Errorf("S02: %d +fix-slave-config lines after the primary pod was lost (replicas churned)", fix)
	}
	c.note("S02: %d +fix-slave-config lines", fix)
	c.expect(c.finish(), 2, 0, 0)
}

// ---- partitions -------------------------------------------------------------------------------------------

const partitionFor = 60 * time.Second

// partitionPrimaryNode cuts the primary's node (its pods, kubelet and API access) off from the other two for
// partitionFor, then heals.
func partitionPrimaryNode(t *testing.T, name, extra string) (*chaos, ChaosResult) {
	c := startChaos(t, name, extra)
	_, node := c.primaryNode()
	f := PartitionNodes(t, true, node)
	c.fault = f.At
	time.Sleep(partitionFor)
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	kubelet := "its kubelet too"
	if nodes, err := Nodes(context.Background()); err == nil && len(nodes) > 0 && nodes[0].Name == node {
		kubelet = "its kubelet stays connected: node 1 talks to the API over loopback"
	}
	c.note("%s partitioned for %s: pods cut from the other nodes' pods and from the API server (%s)", node, partitionFor, kubelet)
	return c, c.finish()
}

// TestChaosPartitionPrimaryNode: the primary's node is partitioned from the rest for 60 s with the chart's
// defaults (min-replicas-to-write 1 with 2 replicas, min-replicas-max-lag 5, so a cut-off primary stops; before,
// min-replicas-to-write was off and the old primary acknowledged writes for the whole partition). The majority
// fails over; the old primary acknowledges writes until no replica acknowledged its stream for 5 s, and every
// write it took after the majority moved on is lost. This is measured, not hidden: the test asserts that the
// deployment heals to one primary, and reports the window.
func TestChaosPartitionPrimaryNode(t *testing.T) {
	c, r := partitionPrimaryNode(t, "partition the primary's node (defaults: min-replicas-to-write 1, max-lag 5)", "")
	c.expect(r, 1, r.Lost, partitionFor+30*time.Second)
	if r.OldPrimaryWritesS < partitionFor.Seconds()/2 {
		t.Logf("the old primary stopped taking writes after %.1f s", r.OldPrimaryWritesS)
	}
}

// TestChaosPartitionPrimaryNodeMinReplicas: the same partition with min-replicas-to-write 1 and
// min-replicas-max-lag 5: the old primary refuses writes once no replica acknowledged its stream for 5-6 s, so
// it takes writes for a bounded time, and the Sentinel-aware writer loses only what it wrote in that window.
func TestChaosPartitionPrimaryNodeMinReplicas(t *testing.T) {
	c, r := partitionPrimaryNode(t, "partition the primary's node (min-replicas-to-write 1, max-lag 5)",
		"minReplicasToWrite: 1\nminReplicasMaxLag: 5")
	c.expect(r, 1, r.Lost, 15*time.Second)
	if r.OldPrimaryWritesS > 15 {
		t.Errorf("with min-replicas-max-lag 5 the old primary took writes for %.1f s after the partition", r.OldPrimaryWritesS)
	}
}

// TestChaosS25PartitionOneSentinel: the node of one Sentinel (and of one replica, not the primary) is cut off
// for 60 s while a failover happens among the others (the primary's process crashes 10 s in). Within
// 30 s of the heal the cut-off Sentinel names the same primary as the majority, no Sentinel was restarted by its
// liveness probe, and nothing was lost (S25).
func TestChaosS25PartitionOneSentinel(t *testing.T) {
	c := startChaos(t, "partition one Sentinel (and a replica) during a failover (S25)", "")
	ctx := t.Context()
	p, pnode := c.primaryNode()
	cut, cutSentinel := "", -1
	for j := 0; j < c.d.Sentinels && cut == ""; j++ {
		if n := c.nodeOfPod(c.d.SentinelPod(j)); n != pnode {
			cut, cutSentinel = n, j
		}
	}
	before, err := Snapshot(ctx, c.d.NS, c.d.SentinelSelector())
	if err != nil {
		t.Fatal(err)
	}
	f := PartitionNodes(t, false, cut)
	c.fault = f.At
	time.Sleep(10 * time.Second)
	crashed := time.Now()
	CrashContainer(t, c.d.NS, c.in.Pod(p), "valkey")
	newP := c.waitFailover(p, crashed)
	time.Sleep(partitionFor - time.Since(f.At))
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	Eventually(t, 30*time.Second, 500*time.Millisecond, "S25: the cut-off Sentinel agrees with the majority", func(ctx context.Context) (bool, error) {
		addr, err := c.d.PrimaryAddr(ctx, cutSentinel, c.in.F)
		if err != nil {
			return false, err
		}
		if h, _, _ := net.SplitHostPort(addr); h != c.in.FQDN(newP) {
			return false, fmt.Errorf("%s names %s", c.d.SentinelPod(cutSentinel), addr)
		}
		return true, nil
	})
	c.note("S25: %s (on %s) agreed with the majority %s after the heal", c.d.SentinelPod(cutSentinel), cut, time.Since(healed).Round(time.Millisecond))
	after, err := Snapshot(ctx, c.d.NS, c.d.SentinelSelector())
	if err != nil {
		t.Fatal(err)
	}
	if diff := SnapshotDiff(before, after); diff != "" {
		t.Errorf("S25: Sentinel pods restarted or replaced during the partition: %s", diff)
	}
	c.expect(c.finish(), 1, 0, 0)
}

// TestChaosControllerNodeFromAPI: the node running the instance controller loses the API server for 60 s
// (its pods cannot reach it) while the primary's process crashes. Sentinel fails over on its own; the controller
// cannot move the role labels until the API is back, then catches up without fighting Sentinel.
func TestChaosControllerNodeFromAPI(t *testing.T) {
	c := startChaos(t, "cut the controller's node from the API server during a failover", "")
	ctx := t.Context()
	ctl, err := ListPods(ctx, c.d.NS, "app.kubernetes.io/instance="+c.in.Release+",app.kubernetes.io/component=controller")
	if err != nil || len(ctl) != 1 {
		t.Fatalf("instance controller pod: %d pods, %v", len(ctl), err)
	}
	node := ctl[0].Spec.NodeName
	old, _ := c.primaryNode()
	f := IsolateFromAPI(t, node)
	c.fault = f.At
	time.Sleep(5 * time.Second)
	crashed := time.Now()
	CrashContainer(t, c.d.NS, c.in.Pod(old), "valkey")
	c.waitFailover(old, crashed)
	time.Sleep(partitionFor - time.Since(f.At))
	if err := f.Heal(); err != nil {
		t.Fatal(err)
	}
	c.note("controller %s on %s cut from the API for %s; the primary's process crashed 5 s in", ctl[0].Name, node, partitionFor)
	c.expect(c.finish(), 1, 0, 0)
}

// corednsSelector selects the cluster DNS pods (hack/k8s-local/up.sh: Deployment kube-system/coredns, two
// replicas that never share a node when there are several nodes).
const corednsSelector = "k8s-app=kube-dns"

// placeCoreDNSOn makes one CoreDNS replica run (Ready) on node: when none does, it cordons the node of a replica
// that is not there and deletes that replica, so that the only node left for its replacement is node (the other
// replica's node is excluded by the Deployment's anti-affinity); then it uncordons. Returns "pod@node, ..." of
// the Ready replicas.
func placeCoreDNSOn(t *testing.T, node string) string {
	t.Helper()
	ctx := context.Background()
	where := func() (map[string]string, error) { // Ready replica -> node
		pods, err := ListPods(ctx, "kube-system", corednsSelector)
		if err != nil {
			return nil, fmt.Errorf("list CoreDNS pods: %w", err)
		}
		m := map[string]string{}
		for _, p := range pods {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					m[p.Name] = p.Spec.NodeName
				}
			}
		}
		return m, nil
	}
	m, err := where()
	if err != nil {
		t.Fatal(err)
	}
	onNode := func(m map[string]string) bool {
		for _, n := range m {
			if n == node {
				return true
			}
		}
		return false
	}
	if !onNode(m) {
		victim := ""
		for p := range m {
			victim = p
		}
		if victim == "" {
			t.Fatalf("no Ready CoreDNS pod (%s in kube-system)", corednsSelector)
		}
		vnode := m[victim]
		Cordon(t, vnode)
		DeletePod(t, "kube-system", victim, nil)
		Eventually(t, 2*time.Minute, 250*time.Millisecond, "a CoreDNS replica is Ready on "+node, func(context.Context) (bool, error) {
			m, err = where()
			if err != nil {
				return false, err
			}
			if _, old := m[victim]; old || len(m) < 2 || !onNode(m) {
				return false, fmt.Errorf("Ready CoreDNS replicas: %v", m)
			}
			return true, nil
		})
		Uncordon(t, vnode)
	}
	var out []string
	for p, n := range m {
		out = append(out, p+"@"+n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
