//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Disruptions Kubernetes announces (issue 14): the primary's pod is deleted or evicted and its preStop hook
// hands the role off before the server stops.

// appUsers is the customer user the Sentinel-aware writers log in as (access full: valkey-go's Sentinel
// client checks the node it is sent to with ROLE, which readwrite may not run).
const appUsers = `users: [{name: app, access: full, keys: ["*"]}]`

// EvictPod asks the Eviction API to evict a pod (what kubectl drain does); it returns the API's error, e.g.
// 429 TooManyRequests when a PodDisruptionBudget refuses it.
func EvictPod(ctx context.Context, ns, name string) error {
	return kube.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
}

// PodLogFollower streams one container's log until the container ends (or Stop), so what a pod printed
// while it terminated can be read after the pod is gone.
type PodLogFollower struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	buf    bytes.Buffer
	err    error
}

// FollowLogs starts following pod's container log from now on.
func FollowLogs(t testing.TB, ns, pod, container string) *PodLogFollower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &PodLogFollower{cancel: cancel, done: make(chan struct{})}
	since := int64(1)
	rc, err := kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true, SinceSeconds: &since}).Stream(ctx)
	if err != nil {
		cancel()
		t.Fatalf("follow the log of %s/%s: %v", pod, container, err)
	}
	go func() {
		defer close(f.done)
		defer rc.Close()
		var b [4096]byte
		for {
			n, err := rc.Read(b[:])
			f.mu.Lock()
			f.buf.Write(b[:n])
			if err != nil && err != io.EOF && ctx.Err() == nil {
				f.err = err
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(f.Stop)
	return f
}

// Wait waits until the log ended (the container stopped) or timeout, then returns what was read.
func (f *PodLogFollower) Wait(timeout time.Duration) string {
	select {
	case <-f.done:
	case <-time.After(timeout):
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}

// Stop ends the stream.
func (f *PodLogFollower) Stop() { f.cancel(); <-f.done }

// configEpoch is the monitor's config-epoch on Sentinel j. A promotion sets it to the epoch the failover
// started in, and every failover attempt takes a new epoch (valkey src/sentinel.c, sentinelStartFailover), so
// it rises by one per promotion plus one per attempt that ended without one (aborted, not elected).
func (d *Deployment) configEpoch(t testing.TB, j int, name string) int {
	t.Helper()
	m, found, err := d.SentinelMaster(context.Background(), j, name)
	if err != nil || !found {
		t.Fatalf("SENTINEL MASTER %s on %s: found %v, %v", name, d.SentinelPod(j), found, err)
	}
	n, err := strconv.Atoi(m["config-epoch"])
	if err != nil {
		t.Fatalf("config-epoch %q: %v", m["config-epoch"], err)
	}
	return n
}

// waitNewPrimary waits until the Sentinels name a primary other than old that reports master itself and
// returns it and when that was first seen.
func (in *Instance) waitNewPrimary(t testing.TB, old int, timeout time.Duration) (int, time.Time) {
	t.Helper()
	p := -1
	Eventually(t, timeout, 100*time.Millisecond, "the Sentinels name a new primary", func(ctx context.Context) (bool, error) {
		i, err := in.SentinelPrimary(ctx)
		if err != nil {
			return false, err
		}
		if i == old {
			return false, fmt.Errorf("the Sentinels still name %s", in.Pod(old))
		}
		r, err := in.ReplRole(ctx, i)
		if err != nil || r.Role != "master" {
			return false, fmt.Errorf("%s named primary but reports %+v (%v)", in.Pod(i), r, err)
		}
		p = i
		return true, nil
	})
	return p, time.Now()
}

// disruptionRound is one primary-pod deletion or eviction as a Sentinel-aware writer saw it.
type disruptionRound struct {
	name      string
	failover  time.Duration // from the request until the Sentinels named a new primary that reports master
	rejoined  time.Duration // until the replaced pod was Ready and the deployment converged
	failovers int           // promotions: the most +switch-master any Sentinel logged
	epochs    int           // config-epoch increase: promotions plus attempts that ended without one
	stats     WriteStats
	lost      int
	hookLog   string
}

func (r disruptionRound) String() string {
	return fmt.Sprintf("%-36s new primary after %6s, converged after %6s, failovers %d (epochs %d), writer: longest gap between acks %6s, %d acknowledged, %d failed, lost %d",
		r.name, r.failover.Round(10*time.Millisecond), r.rejoined.Round(100*time.Millisecond), r.failovers, r.epochs,
		r.stats.LongestAckGap.Round(10*time.Millisecond), r.stats.Acked, r.stats.Failed, r.lost)
}

// disruptPrimary deletes (grace: nil = the pod's own grace period, 0 = forced) or evicts the primary's pod
// under a Sentinel-aware writer, waits for the new primary and for the deployment to converge with the
// replaced pod back as a replica, and measures what the writer saw. whileDisrupted, when set, runs right
// after the request was accepted.
func (d *Deployment) disruptPrimary(t *testing.T, name, appPW string, evict bool, grace *int64, ctl bool, whileDisrupted func(primary int)) disruptionRound {
	t.Helper()
	in := d.I()
	ctx := context.Background()
	d.WaitConverged(t, 3*time.Minute, ctl)
	old, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	epoch := d.configEpoch(t, 0, in.F)
	w := in.StartSentinelWriter(t, "app", appPW, fmt.Sprintf("d%d:", time.Now().UnixNano()), 10*time.Millisecond)
	Eventually(t, 30*time.Second, 50*time.Millisecond, "the writer is acknowledged 100 times", func(context.Context) (bool, error) {
		if n := w.Acked(); n < 100 {
			return false, fmt.Errorf("%d acknowledged; %s", n, w.Stats())
		}
		return true, nil
	})
	logs := FollowLogs(t, d.NS, in.Pod(old), "valkey")
	p, err := kube.CoreV1().Pods(d.NS).Get(ctx, in.Pod(old), metavGet)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if evict {
		if err := EvictPod(ctx, d.NS, in.Pod(old)); err != nil {
			t.Fatalf("evict %s: %v", in.Pod(old), err)
		}
		t.Logf("evicted %s", in.Pod(old))
	} else {
		DeletePod(t, d.NS, in.Pod(old), grace)
	}
	if whileDisrupted != nil {
		whileDisrupted(old)
	}
	newPrimary, at := in.waitNewPrimary(t, old, downAfter+failoverTimeout+10*time.Second)
	r := disruptionRound{name: name, failover: at.Sub(t0)}
	Eventually(t, 3*time.Minute, time.Second, "the replaced pod is back as a replica and the deployment converged", func(ctx context.Context) (bool, error) {
		if _, _, err := ReplacedPod(ctx, d.NS, in.Pod(old), string(p.UID)); err != nil {
			return false, err
		}
		if _, err := in.Converged(ctx, ctl); err != nil {
			return false, err
		}
		return true, nil
	})
	r.rejoined = time.Since(t0)
	acked := w.Acked()
	Eventually(t, 30*time.Second, 50*time.Millisecond, "the writer is acknowledged 100 more times", func(context.Context) (bool, error) {
		if n := w.Acked(); n < acked+100 {
			return false, fmt.Errorf("%d more acknowledged; %s", n-acked, w.Stats())
		}
		return true, nil
	})
	w.Stop()
	r.stats = w.Stats()
	primary, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if primary != newPrimary {
		t.Errorf("the primary moved again: %s, then %s", in.Pod(newPrimary), in.Pod(primary))
	}
	missing, err := w.MissingOn(ctx, net.JoinHostPort(in.FQDN(primary), strconv.Itoa(valkeyPort)), "app", appPW)
	if err != nil {
		t.Fatal(err)
	}
	r.lost = len(missing)
	r.epochs = d.configEpoch(t, 0, in.F) - epoch
	evs, err := d.SentinelLogEvents(ctx, in.F, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		switch ev.Event {
		case "+switch-master", "+try-failover", "-failover-abort-no-good-slave", "-failover-abort-not-elected", "+failover-end-for-timeout", "+failover-end":
			if ev.Master {
				t.Logf("sentinel %s: %s", ev.Pod, ev.Line)
			}
		}
	}
	r.failovers = countFailovers(evs).Promotions
	if r.stats.LongestAckGap >= downAfter {
		// where the writer's writes went, what the Sentinels, the servers' replication and the controllers did
		// meanwhile (a replica resyncing in full leaves a primary with min-replicas-to-write refusing writes)
		from, to := r.stats.AckGapStart.Add(-time.Second), r.stats.AckGapStart.Add(r.stats.LongestAckGap+time.Second)
		t.Logf("writer from %s to %s:%s", clock(from), clock(to), w.Timeline(from, to))
		for _, ev := range evs {
			t.Logf("sentinel %s: %s", ev.Pod, ev.Line)
		}
		if ctl {
			t.Logf("controllers:%s", controllerLogs(ctx, d.NS, t0.Add(-2*time.Second), to))
		}
		t.Logf("old primary %s: %s", in.Pod(old), replLines(logs.Wait(5*time.Second)))
		st := metav1.NewTime(t0.Add(-time.Second))
		for i := 0; i < in.Nodes(); i++ {
			if i == old {
				continue
			}
			raw, err := kube.CoreV1().Pods(d.NS).GetLogs(in.Pod(i), &corev1.PodLogOptions{Container: "valkey", SinceTime: &st}).DoRaw(ctx)
			t.Logf("%s (%v): %s", in.Pod(i), err, replLines(string(raw)))
		}
	}
	r.hookLog = logs.Wait(5 * time.Second)
	t.Log(r)
	t.Logf("writer: %s", r.stats) // its errors and when the longest gap began
	t.Logf("hook log: %s", strings.Join(preStopLines(r.hookLog), " | "))
	return r
}

// controllerLogs returns the controller pods' log lines (JSON, with "time") from since to until.
func controllerLogs(ctx context.Context, ns string, since, until time.Time) string {
	l, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
	if err != nil {
		return " " + err.Error()
	}
	var b strings.Builder
	st := metav1.NewTime(since)
	for _, p := range l.Items {
		raw, err := kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{SinceTime: &st, Timestamps: true}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", p.Name, err)
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			ts, rest, ok := strings.Cut(line, " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if !ok || err != nil || at.After(until) {
				continue
			}
			fmt.Fprintf(&b, "\n  %s %s %s", clock(at), p.Name, rest)
		}
	}
	return b.String()
}

// replLines returns a server log's replication lines.
func replLines(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"prestop: `) || strings.Contains(l, `"msg"`) {
			continue
		}
		low := strings.ToLower(l)
		for _, k := range []string{"sync", "replica", "primary", "replication", "backlog", "pause", "shutdown", "ready to accept", "signal"} {
			if strings.Contains(low, k) {
				b.WriteString("\n  " + l)
				break
			}
		}
	}
	return b.String()
}

// preStopLines returns the hook's log lines (the data container's stdout also carries the server's log).
func preStopLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"prestop: `) {
			out = append(out, l)
		}
	}
	return out
}

// TestPrimaryPodDeleteAndEvictHandOff (issue 14): the primary's pod is deleted (kubectl delete pod) and
// evicted (the Eviction API, what a drain uses), with the controllers running and with them at zero. Each
// time the preStop hook hands the role off: one failover, 0 acknowledged writes lost for a Sentinel-aware
// valkey-go writer, writes wait well under down-after-milliseconds (printed), and the hook's log is in the
// container's log. While the evicted primary is still terminating, evicting a replica is refused by the
// PodDisruptionBudget: a drain never takes the last healthy replica while the primary is disrupted. Last, with
// the Sentinels scaled to zero, the hook cannot hand off: its reason (NoQuorum) is in the container log, and
// the kubelet records a FailedPreStopHook Warning for the pod.
func TestPrimaryPodDeleteAndEvictHandOff(t *testing.T) {
	maybeParallel(t)
	// the data pods at the chart's default CPU (100m, the starter plan), not the suite's lean 50m: the preStop
	// hook runs in the valkey container's cgroup and its own start (the controller binary, about 60 ms of CPU)
	// took over a second of wall time there at 50m; the longest write gap was 5.21 s on 2026-12-04 (bound 5 s)
	d := Deploy(t, "handoff", DeployOpts{DataExtra: appUsers + "\nresources: {limits: {cpu: 100m}}\n"})
	in := d.I()
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	var rows []string
	for _, tc := range []struct {
		name        string
		evict, ctl  bool
		scaleToZero bool
	}{
		{"delete, controllers running", false, true, false},
		{"evict, controllers running", true, true, false},
		{"delete, controllers at zero", false, false, true},
		{"evict, controllers at zero", true, false, false},
	} {
		if tc.scaleToZero {
			d.ScaleControllers(t, 0)
		}
		var pdbRefused error
		checkPDB := func(primary int) {
			replica := (primary + 1) % in.Nodes()
			pdbRefused = EvictPod(context.Background(), d.NS, in.Pod(replica))
			t.Logf("evicting replica %s while the primary terminates: %v", in.Pod(replica), pdbRefused)
		}
		var during func(int)
		if tc.evict {
			during = checkPDB
		}
		since := metav1.Now()
		r := d.disruptPrimary(t, tc.name, appPW, tc.evict, nil, tc.ctl, during)
		rows = append(rows, r.String())
		hook := preStopLines(r.hookLog)
		if r.lost != 0 {
			t.Errorf("%s: %d acknowledged writes lost", tc.name, r.lost)
		}
		if r.failovers != 1 || r.epochs != 1 {
			t.Errorf("%s: %d failovers (+switch-master), config-epoch up by %d, want 1 and 1", tc.name, r.failovers, r.epochs)
		}
		if r.stats.LongestAckGap >= downAfter {
			// the round's log has the writer's timeline, the Sentinels' events, the servers' replication lines
			// and the controllers' log around the gap (disruptPrimary)
			t.Errorf("%s: writes waited %s, not under down-after-milliseconds (%s): no handoff before the stop, or the new primary refused writes",
				tc.name, r.stats.LongestAckGap, downAfter)
		}
		if !strings.Contains(strings.Join(hook, "\n"), `"prestop: done"`) {
			t.Errorf("%s: the hook's log is not in the container log: %q", tc.name, hook)
		}
		if evs, err := FindEvents(context.Background(), d.NS, "FailedPreStopHook", ""); err != nil {
			t.Error(err)
		} else {
			for _, e := range evs {
				if e.LastTimestamp.After(since.Time) || e.EventTime.After(since.Time) {
					t.Errorf("%s: the hook failed: %s", tc.name, e.Message)
				}
			}
		}
		if tc.evict && !apierrors.IsTooManyRequests(pdbRefused) {
			t.Errorf("%s: evicting a replica while the primary terminated was not refused by the PodDisruptionBudget (429): %v", tc.name, pdbRefused)
		}
		if tc.ctl {
			if evs, err := FindEvents(context.Background(), d.NS, "PrimaryHandingOff", ""); err != nil || len(evs) == 0 {
				t.Errorf("%s: no PrimaryHandingOff event from the instance controller (%v)", tc.name, err)
			}
		}
	}
	t.Logf("primary pod deleted / evicted with the preStop hook (down-after %s):\n%s", downAfter, strings.Join(rows, "\n"))

	// a hook that cannot hand off says why: the Sentinels are gone (scaled to zero), so the hook on the
	// primary finds no quorum; its reason is in the container log, and the failed hook is a kubelet Event
	ctx := context.Background()
	sc, err := kube.AppsV1().StatefulSets(d.NS).GetScale(ctx, d.S, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 0
	if _, err := kube.AppsV1().StatefulSets(d.NS).UpdateScale(ctx, d.S, sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 2*time.Minute, time.Second, "no Sentinel pod left", func(ctx context.Context) (bool, error) {
		pods, err := ListPods(ctx, d.NS, d.SentinelSelector())
		return err == nil && len(pods) == 0, err
	})
	primary := -1
	for i := 0; i < in.Nodes(); i++ {
		if r, err := in.ReplRole(ctx, i); err == nil && r.Role == "master" {
			primary = i
		}
	}
	if primary < 0 {
		t.Fatal("no node reports master")
	}
	logs := FollowLogs(t, d.NS, in.Pod(primary), "valkey")
	DeletePod(t, d.NS, in.Pod(primary), nil)
	var ev corev1.Event
	Eventually(t, time.Minute, time.Second, "the kubelet records FailedPreStopHook for the pod", func(ctx context.Context) (bool, error) {
		evs, err := FindEvents(ctx, d.NS, "FailedPreStopHook", "")
		for _, e := range evs {
			if e.InvolvedObject.Name == in.Pod(primary) {
				ev = e
				return true, nil
			}
		}
		return false, err
	})
	// the kubelet keeps the hook's output out of the Event ("PreStopHook failed"): the reason is in the log
	t.Logf("event %s %s: %s", ev.Type, ev.Reason, ev.Message)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("FailedPreStopHook is not a Warning: %+v", ev)
	}
	hook := strings.Join(preStopLines(logs.Wait(30*time.Second)), "\n")
	t.Logf("hook log: %s", hook)
	if !strings.Contains(hook, `"reason":"NoQuorum"`) {
		t.Errorf("the container log does not carry the hook's reason: %s", hook)
	}
}

// TestPrimaryPodDeletedRepeatedly (issue 14, "a lost primary pod must not cost 24 s"): the primary's pod is
// deleted E2E_PRIMARY_DELETIONS times (default 1, forced; `make e2e-deletions` runs 10), alternately
// gracefully (the preStop hook hands off) and forced (grace period 0: Sentinel's own failover; the kubelet
// still starts the hook, which races the kill), the second half with the controllers at zero. Every failover
// completes within down-after + failover-timeout with one promotion, the replaced pod rejoins as a replica,
// and a graceful deletion loses no acknowledged write.
func TestPrimaryPodDeletedRepeatedly(t *testing.T) {
	longTest(t, "TestOutsideClientFollowsFailoverThroughNodePorts and TestCaseS05S01KillPrimaryControllersOff (make e2e: a forced primary deletion, a killed primary) and internal/valkeyapi/valkey TestFailoverOnPrimaryKill (real Sentinels)")
	maybeParallel(t)
	// make e2e-long runs one forced deletion (the graceful ones, controllers running and at zero, are
	// TestPrimaryPodDeleteAndEvictHandOff's); make e2e-deletions runs ten, alternating
	n := 1
	if v, err := strconv.Atoi(envOr("E2E_PRIMARY_DELETIONS", "")); err == nil && v > 0 {
		n = v
	}
	d := Deploy(t, "deletions", DeployOpts{DataExtra: appUsers})
	in := d.I()
	appPW := waitSecretKey(t, d, in.F+"-user-app", "password")
	var rows []string
	ctl := true
	var worst time.Duration
	for i := 0; i < n; i++ {
		forced := i%2 == 1 || n == 1
		if i == (n+1)/2 && ctl {
			d.ScaleControllers(t, 0)
			ctl = false
		}
		name := fmt.Sprintf("%d graceful", i+1)
		var grace *int64
		if forced {
			zero := int64(0)
			grace, name = &zero, fmt.Sprintf("%d forced", i+1)
		}
		if ctl {
			name += ", controllers running"
		} else {
			name += ", controllers at zero"
		}
		r := d.disruptPrimary(t, name, appPW, false, grace, ctl, nil)
		rows = append(rows, r.String())
		worst = max(worst, r.failover)
		if r.failover > downAfter+failoverTimeout {
			t.Errorf("%s: the failover took %s, more than down-after + failover-timeout (%s)", name, r.failover, downAfter+failoverTimeout)
		}
		// a forced deletion still runs the hook, racing the kill (the kubelet gives it 1-2 s): a handoff it
		// began may end without a promotion and cost an epoch, not a second promotion
		if r.failovers != 1 {
			t.Errorf("%s: %d failovers (+switch-master), want 1", name, r.failovers)
		}
		if !forced && r.lost != 0 {
			t.Errorf("%s: %d acknowledged writes lost", name, r.lost)
		}
	}
	t.Logf("%d primary-pod deletions (down-after %s, failover-timeout %s), slowest failover %s:\n%s", n, downAfter, failoverTimeout,
		worst.Round(10*time.Millisecond), strings.Join(rows, "\n"))
}
