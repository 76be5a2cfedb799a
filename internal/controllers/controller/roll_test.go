package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/kubefault"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// lost returns the acknowledged keys the node does not have (testenv.Missing).
func lost(t *testing.T, c *valkey.Client, keys []string) []string {
	t.Helper()
	missing, err := testenv.Missing(context.Background(), c, keys)
	require.NoError(t, err)
	return missing
}

// TestPlannedDataRollLosesNoAckedWrite: a full roll of 1 primary + 2 replicas under a Sentinel-aware writer:
// replicas first, the primary handed over with SENTINEL FAILOVER (writes paused until the replicas caught up)
// and replaced last; no acknowledged write is lost.
func TestPlannedDataRollLosesNoAckedWrite(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	e.PublishSentinels()
	k, pods := e.staleThreeNodes()
	w := testenv.StartWriter(t, e.Top, testenv.WriterOptions{PerWrite: true})
	w.WaitAckedSince(t, time.Time{}, 10*time.Second) // the writer has found the primary
	start := time.Now()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	valkeytest.Eventually(t, 90*time.Second, 200*time.Millisecond, "every pod rolled", func() error { return e.AllAtRevision(pods, "r2") })
	e.Top.WaitReplicationUp(30 * time.Second)
	rollTime := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	w.Finish()
	r := w.Result()
	acked, failures, longest := r.Acked, r.Failed, r.Longest

	newPrimary := e.checkPrimaryRolledLast(t, k)
	require.NotEmpty(t, acked)
	missing := lost(t, e.Top.NodeByPort(newPrimary).Client(e.Top.Options(acl.Operator)), acked)
	assert.Empty(t, missing, "every acknowledged write survives the roll (%d of %d lost)", len(missing), len(acked))
	t.Logf("planned roll of 3 nodes: %s; writes acked %d, failed %d, longest error window %s", rollTime.Round(time.Millisecond), len(acked), failures, longest.Round(time.Millisecond))
}

// staleThreeNodes marks the three data pods vk-<i>-0 stale (revision r2 wanted) and starts a kubelet that
// replaces each deleted pod with the same node's process at r2; it returns the kubelet and the pod names.
func (e *env) staleThreeNodes() (*testenv.Kubelet, []string) {
	pods := []string{"vk-0-0", "vk-1-0", "vk-2-0"}
	e.MarkStale([]string{"vk-0", "vk-1", "vk-2"}, pods, map[string]string{contract.LabelInstance: "vk"})
	procs := map[string]*valkeytest.Proc{}
	for i, p := range pods {
		procs[p] = e.Top.Nodes[i]
	}
	return e.RunKubelet(procs, "r2", nil), pods
}

// rollThreeNodes marks the three data pods stale (staleThreeNodes), runs the instance controller
// until every pod rolled (the primary last, after its handoff) and the labels name the new primary; it returns
// the new primary's port.
func (e *env) rollThreeNodes(t *testing.T) int {
	t.Helper()
	k, pods := e.staleThreeNodes()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	valkeytest.Eventually(t, 90*time.Second, 200*time.Millisecond, "every pod rolled", func() error { return e.AllAtRevision(pods, "r2") })
	newPrimary := e.checkPrimaryRolledLast(t, k)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels on the new primary", func() error { return e.LabelsMatch(newPrimary) })
	return newPrimary
}

// TestPlannedRollTakesThePrimaryServiceOffWhilePaused (issue 30): in the planned roll of the primary the
// controller removes the old primary's role label while the handoff holds its writes, before any Sentinel names
// the new primary, so the primary Service's only change after the switch is the new primary's endpoint
// (kube-proxy applies a change at most once per minSyncPeriod, and a second change right after the first waited
// that long). Before, the label left the old primary in the pass after the switch. The roll completes and the
// labels end on the new primary.
func TestPlannedRollTakesThePrimaryServiceOffWhilePaused(t *testing.T) {
	cs := fake.NewClientset()
	e := newEnvOn(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000}, cs)
	e.PublishSentinels()
	old := e.Top.Nodes[0]
	var mu sync.Mutex
	var removals []string // "<pod>: Sentinels named <ports>" for every removal of a role label
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if !strings.Contains(string(p.GetPatch()), `"`+contract.LabelRole+`":null`) {
			return false, nil, nil
		}
		var named []string
		for _, s := range e.Top.Sentinels {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, port, _, err := s.Client(e.Top.SentinelOptions()).SentinelPrimaryAddr(ctx, e.Top.Cfg.MonitorName)
			cancel()
			named = append(named, fmt.Sprintf("%d%s", port, map[bool]string{true: " (" + fmt.Sprint(err) + ")"}[err != nil]))
		}
		mu.Lock()
		removals = append(removals, p.GetName()+": Sentinels named "+strings.Join(named, ","))
		mu.Unlock()
		return false, nil, nil
	})
	e.rollThreeNodes(t)

	mu.Lock()
	defer mu.Unlock()
	var first string
	for _, r := range removals {
		if strings.HasPrefix(r, "vk-0-0: ") {
			first = r
			break
		}
	}
	require.NotEmpty(t, first, "the old primary's label was removed: %v", removals)
	all := strconv.Itoa(old.Port)
	want := "vk-0-0: Sentinels named " + strings.Repeat(all+",", len(e.Top.Sentinels)-1) + all
	assert.Equal(t, want, first, "every Sentinel still named the old primary when its label left (writes paused, before the switch); all removals: %v", removals)
}

// TestPausedPrimaryLabelUnderFaults: the label removal taken while a handoff holds the writes
// (TestPlannedRollTakesThePrimaryServiceOffWhilePaused) under two faults. The API server refuses that patch
// (503): the handoff goes on, the roll completes with one failover and the labels end on the new primary. The
// handoff aborts after the pause (the only replica trails the primary through a 4 s link, past the catch-up
// bound): the old primary, still Sentinel's primary, gets its label back within the next passes.
func TestPausedPrimaryLabelUnderFaults(t *testing.T) {
	removal := `"` + contract.LabelRole + `":null`
	t.Run("patch-refused", func(t *testing.T) {
		cs := fake.NewClientset()
		e := newEnvOn(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000}, cs)
		e.PublishSentinels()
		var refused atomic.Int32
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.PatchAction)
			if p.GetName() == "vk-0-0" && strings.Contains(string(p.GetPatch()), removal) && refused.Add(1) == 1 {
				return true, nil, kubefault.Unavailable("pods", p.GetName())
			}
			return false, nil, nil
		})
		e.rollThreeNodes(t)
		assert.GreaterOrEqual(t, refused.Load(), int32(1), "the pause-time removal was attempted and refused")
		assert.Equal(t, 1, e.failovers(t), "one failover despite the refused patch")
	})
	t.Run("handoff-aborted", func(t *testing.T) {
		cs := fake.NewClientset()
		e := newEnvOn(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 5000, FailoverTimeoutMs: 15000, FaultLinks: true}, cs)
		e.PublishSentinels()
		old := e.Top.Nodes[0]
		removed := make(chan time.Time, 16)
		cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.PatchAction)
			if p.GetName() == "vk-0-0" && strings.Contains(string(p.GetPatch()), removal) {
				removed <- time.Now()
			}
			return false, nil, nil
		})
		e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
		valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(old.Port) })
		e.Top.DelayReplication(4 * time.Second)
		w := testenv.StartWriter(t, e.Top, testenv.WriterOptions{PerWrite: true})
		w.WaitAckedSince(t, time.Time{}, 10*time.Second) // writes flow, so the replica trails by the 4 s link
		e.MarkStale([]string{"vk-0"}, []string{"vk-0-0"}, map[string]string{contract.LabelInstance: "vk"})
		var at time.Time
		select {
		case at = <-removed:
		case <-time.After(30 * time.Second):
			t.Fatal("the handoff never paused the primary (no label removal seen)")
		}
		role := func() string {
			p, err := cs.CoreV1().Pods(ns).Get(t.Context(), "vk-0-0", metav1.GetOptions{})
			require.NoError(t, err)
			return p.Labels[contract.LabelRole]
		}
		valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "the paused primary's label removed", func() error {
			if r := role(); r == contract.RolePrimary {
				return fmt.Errorf("role %q", r)
			}
			return nil
		})
		valkeytest.Eventually(t, 10*time.Second, 50*time.Millisecond, "the old primary labelled primary again", func() error { return e.LabelsMatch(old.Port) })
		t.Logf("the primary Service had no endpoint for %s (pause, aborted handoff, next pass)", time.Since(at).Round(10*time.Millisecond))
		host, port, _, err := e.Top.Sentinels[0].Client(e.Top.SentinelOptions()).SentinelPrimaryAddr(t.Context(), e.Top.Cfg.MonitorName)
		require.NoError(t, err)
		assert.Equal(t, old.Port, port, "the handoff aborted: Sentinel still names the old primary (%s)", host)
		w.Finish()
		assert.Zero(t, e.failovers(t), "no failover")
	})
}

// TestPlannedRollWaitsForAHalfAppliedUpgrade: Helm updates the per-node StatefulSets one by one; while only
// the primary's carries the new release revision (its pod is the only stale one) the controller neither
// hands the primary off nor replaces anything. Once every StatefulSet carries the new revision the roll runs
// replicas first and hands the primary off exactly once.
func TestPlannedRollWaitsForAHalfAppliedUpgrade(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	e.PublishSentinels()
	pods := []string{"vk-0-0", "vk-1-0", "vk-2-0"}
	stss := []string{"vk-0", "vk-1", "vk-2"}
	e.MarkStale(stss, pods, map[string]string{contract.LabelInstance: "vk"})
	ctx := context.Background()
	setSTS := func(name, releaseRev, updateRev string) {
		s, err := e.CS.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		s.Annotations = map[string]string{contract.AnnotationReleaseRevision: releaseRev}
		s.Status.UpdateRevision = updateRev
		_, err = e.CS.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// Helm got as far as the primary's StatefulSet: only vk-0 is at revision 3 with a new update revision.
	setSTS("vk-0", "3", "r2")
	setSTS("vk-1", "2", "r1")
	setSTS("vk-2", "2", "r1")
	procs := map[string]*valkeytest.Proc{}
	for i, p := range pods {
		procs[p] = e.Top.Nodes[i]
	}
	k := e.RunKubelet(procs, "r2", nil)
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "the roll waits for the upgrade to be applied", func() error {
		doc := e.StatusDoc()
		if doc == nil || doc["roll"] != "the StatefulSets carry release revisions 2, 3: an upgrade is being applied" {
			return fmt.Errorf("roll: %v (last %v)", doc["roll"], doc["lastAction"])
		}
		return nil
	})
	// several more passes: still nothing (the status is rewritten every pass)
	time.Sleep(2 * time.Second)
	assert.Empty(t, k.Order(), "no pod replaced while the upgrade is half applied")
	p, err := e.Top.SentinelPrimary()
	require.NoError(t, err)
	require.Equal(t, e.Top.Nodes[0].Port, p, "no handoff while the upgrade is half applied")

	setSTS("vk-1", "3", "r2")
	setSTS("vk-2", "3", "r2")
	valkeytest.Eventually(t, 90*time.Second, 200*time.Millisecond, "every pod rolled", func() error { return e.AllAtRevision(pods, "r2") })
	e.checkPrimaryRolledLast(t, k)
}

// checkPrimaryRolledLast asserts the end of a full roll of vk-0-0 (the primary), vk-1-0 and vk-2-0: the
// primary's pod was replaced last, after exactly one failover moved the primary elsewhere. It returns the
// new primary's port.
func (e *env) checkPrimaryRolledLast(t *testing.T, k *testenv.Kubelet) int {
	t.Helper()
	order := k.Order()
	require.Len(t, order, 3)
	assert.Equal(t, "vk-0-0", order[2], "the primary is replaced last (order %v)", order)
	newPrimary, err := e.Top.SentinelPrimary()
	require.NoError(t, err)
	assert.NotEqual(t, e.Top.Nodes[0].Port, newPrimary, "the primary was handed over before its replacement")
	assert.Equal(t, 1, e.failovers(t), "exactly one failover for the whole roll")
	return newPrimary
}

// failovers returns the monitor's config-epoch as the first Sentinel reports it (SENTINEL MASTER): it starts
// at 0 and each failover increments it once.
func (e *env) failovers(t *testing.T) int {
	t.Helper()
	m, _, err := e.Top.Sentinels[0].Client(valkey.Options{}).SentinelMaster(context.Background(), e.In.MonitorName)
	require.NoError(t, err)
	n, err := strconv.Atoi(m.Fields["config-epoch"])
	require.NoError(t, err, "config-epoch %q", m.Fields["config-epoch"])
	return n
}

// TestPlannedRollDeferredWithoutQuorum: the primary is the only stale node, but only one of three Sentinels
// is up, so CKQUORUM fails: the handoff is never attempted and the primary stays in place.
func TestPlannedRollDeferredWithoutQuorum(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1})
	e.PublishSentinels()
	e.MarkStale([]string{"vk-0"}, []string{"vk-0-0"}, map[string]string{contract.LabelInstance: "vk"})
	e.Top.Sentinels[1].Kill()
	e.Top.Sentinels[2].Kill()
	survivor := e.Top.Sentinels[0].Client(valkey.Options{})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "the survivor notices it is alone", func() error {
		q, err := survivor.SentinelCKQuorum(context.Background(), e.In.MonitorName)
		if err == nil && q.OK {
			err = fmt.Errorf("still %s", q.Message)
		}
		return err
	})
	e.startInstanceController(InstanceOptions{Resync: 200 * time.Millisecond})
	valkeytest.Eventually(t, 10*time.Second, 200*time.Millisecond, "roll waits for quorum", func() error {
		doc := e.StatusDoc()
		if doc == nil || doc["roll"] != "SENTINEL CKQUORUM fails: no handoff without a quorum" {
			return fmt.Errorf("roll: %v (held %v, last %v)", doc["roll"], doc["held"], doc["lastAction"])
		}
		return nil
	})
	p, err := e.CS.CoreV1().Pods(ns).Get(context.Background(), "vk-0-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "r1", p.Labels[revisionLabel], "the primary's pod was not replaced")
	r, err := e.Top.Replication(e.Top.Nodes[0])
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, r.Role, "no failover was forced")
}

// TestCaseS22SentinelRollKeepsQuorum: every Sentinel pod is stale; the controller replaces them one at a time
// (each restarts with an empty config and its stable myid, as with the chart's emptyDir). Sampled every 200 ms,
// a majority of the Sentinels always reports CKQUORUM OK (the replacement itself cannot until it has heard
// its peers, which is why the controller waits for CKQUORUM on all three before the next deletion). No data
// pod is touched and failover works afterwards.
func TestCaseS22SentinelRollKeepsQuorum(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	ctx := context.Background()
	// the Sentinels restart with their stable ids from the start, as the chart configures them
	testenv.RestartWithStableIDs(t, e.Top, ns, "q")
	sentinelPods := []string{"q-0", "q-1", "q-2"}
	e.MarkStale([]string{"q"}, sentinelPods, map[string]string{contract.LabelSentinel: "q"})
	procs := map[string]*valkeytest.Proc{}
	for i, p := range sentinelPods {
		procs[p] = e.Top.Sentinels[i]
	}
	dataUIDs := map[string]string{}
	for _, n := range e.In.Nodes {
		p, _ := e.CS.CoreV1().Pods(ns).Get(ctx, n.Pod, metav1.GetOptions{})
		dataUIDs[n.Pod] = string(p.UID)
	}
	k := e.RunKubelet(procs, "r2", func(pod string, p *valkeytest.Proc) {
		cfg := "port " + strconv.Itoa(p.Port) + "\nbind 127.0.0.1 -::1\ndir " + p.Dir + "\nsentinel resolve-hostnames yes\n" +
			"sentinel announce-hostnames yes\nsentinel announce-ip localhost\nsentinel myid " + testenv.StableMyID(ns, pod) + "\n"
		_ = writeFile(p.ConfPath, cfg)
	})

	var mu sync.Mutex
	var noQuorum []string
	stopSampling := valkeytest.Sample(200*time.Millisecond, func() {
		ok := 0
		var msgs []string
		for _, s := range e.Top.Sentinels {
			c, err := valkey.Dial(ctx, s.Addr(), valkey.Options{DialTimeout: 200 * time.Millisecond})
			if err != nil {
				msgs = append(msgs, s.Addr()+": down")
				continue // the Sentinel being replaced
			}
			q, err := c.SentinelCKQuorum(ctx, e.In.MonitorName)
			c.Close()
			if err == nil && q.OK {
				ok++
			} else if err != nil {
				msgs = append(msgs, s.Addr()+": "+err.Error())
			} else {
				msgs = append(msgs, s.Addr()+": "+q.Message)
			}
		}
		if ok < 2 {
			mu.Lock()
			noQuorum = append(noQuorum, fmt.Sprint(msgs))
			mu.Unlock()
		}
	})

	sel, _ := labels.Parse("tier=cache")
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	valkeytest.Eventually(t, 120*time.Second, 200*time.Millisecond, "every Sentinel rolled", func() error { return e.AllAtRevision(sentinelPods, "r2") })
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	stopSampling()
	assert.Equal(t, []string{"q-0", "q-1", "q-2"}, k.Order(), "one at a time, in order")
	assert.Empty(t, noQuorum, "a majority of Sentinels reported CKQUORUM OK at every sample")
	for _, n := range e.In.Nodes {
		p, err := e.CS.CoreV1().Pods(ns).Get(ctx, n.Pod, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, dataUIDs[n.Pod], string(p.UID), "data pod %s untouched by a Sentinel roll", n.Pod)
	}
	// failover still works after the roll
	e.Top.Nodes[0].Kill()
	e.Top.WaitPrimaryMoved(e.Top.Nodes[0].Port, 30*time.Second)
}

// TestCaseS03ScaleInResetsOneSentinelAtATime: after a node is removed from the instance, every Sentinel stops
// listing it, through SENTINEL RESET issued on one Sentinel at a time (each after the previous one has
// rediscovered its peers and replicas), and never in steady state afterwards.
func TestCaseS03ScaleInResetsOneSentinelAtATime(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	events := scaleInResets(t, e)
	assert.Empty(t, eventsWith(events, "SentinelResetUserFallback"), "no Sentinel auth: nothing to fall back from")
}

// TestScaleInResetAsControllerUserWithSentinelAuth (h11-reset): with Sentinel auth on (the charts' default;
// _instance may not RESET), the scale-in RESET still reaches every Sentinel, one at a time, sent as
// acl.SentinelController with the password of Secret q-auth-controller, without falling back. With the
// controller of before the fix (RESET as _instance, which these Sentinels refuse with NOPERM) no Sentinel stops
// listing the removed replica.
func TestScaleInResetAsControllerUserWithSentinelAuth(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{SentinelAuth: true})
	quorumSecrets(t, e, acl.SentinelInstance, acl.SentinelController)
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	events := scaleInResets(t, e)
	// no fallback, and _instance gets NOPERM for RESET on these Sentinels (internal/valkeyapi/acl): the three RESETs were
	// the controller user's
	assert.Empty(t, eventsWith(events, "SentinelResetUserFallback"), "every Sentinel knows %s", acl.SentinelController)
}

// TestScaleInResetFallsBackOnAQuorumNotYetUpgraded (h11-reset, the upgrade): Sentinels still running the ACL of
// the release before _controller existed (_instance with +sentinel|reset, no _controller user) answer the
// controller user's AUTH with WRONGPASS; the instance controller then sends RESET as _instance, which such a
// Sentinel accepts, so a scale-in during the quorum's upgrade still completes, and reports the fallback once
// (one Warning Event for three RESETs).
func TestScaleInResetFallsBackOnAQuorumNotYetUpgraded(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	pws := map[string]string{}
	for _, u := range acl.SentinelUsers {
		pws[u.Name] = valkeytest.RandomPassword(t)
	}
	var old []string
	for _, l := range valkeytest.SentinelAuthLines(t, valkeytest.Default, pws) {
		switch {
		case strings.HasPrefix(l, "user "+acl.SentinelController+" "):
			continue // unknown to the old release
		case strings.HasPrefix(l, "user "+acl.SentinelInstance+" "):
			l += " +sentinel|reset" // the old release's _instance
		}
		old = append(old, l)
	}
	e := newEnv(t, valkeytest.TopologyConfig{SentinelAuth: true, SentinelAuthLines: old, SentinelPasswords: pws})
	quorumSecrets(t, e, acl.SentinelInstance, acl.SentinelController)
	e.PublishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	events := scaleInResets(t, e)
	fallbacks := eventsWith(events, "SentinelResetUserFallback")
	require.Len(t, fallbacks, 1, "reported once: %v", events)
	assert.Contains(t, fallbacks[0], "WRONGPASS")
}

// quorumSecrets names quorum testenv.SentinelRelease in e's descriptor and creates its Secrets of users with the
// topology's Sentinel passwords, as the quorum's credentials Job would.
func quorumSecrets(t *testing.T, e *env, users ...string) {
	t.Helper()
	ctx := context.Background()
	e.In.SentinelRelease = testenv.SentinelRelease
	b, _ := json.Marshal(e.In)
	e.Desc.Data[contract.KeyInstance] = string(b)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Update(ctx, e.Desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, u := range users {
		_, err := e.CS.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: spec.SentinelSecretName(testenv.SentinelRelease, u), Namespace: ns},
			Data: map[string][]byte{contract.KeyPassword: []byte(e.Top.SentinelPasswords[u])}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// eventsWith returns the events of events with reason.
func eventsWith(events []string, reason string) []string {
	var out []string
	for _, ev := range events {
		if testenv.HasReason(ev, reason) {
			out = append(out, ev)
		}
	}
	return out
}

// scaleInResets removes node 2 from e's instance (descriptor, pod, process) and asserts that every Sentinel stops
// listing it within 60 s through one SENTINEL RESET per Sentinel and none in steady state afterwards. It returns
// every event recorded meanwhile.
func scaleInResets(t *testing.T, e *env) []string {
	t.Helper()
	ctx := context.Background()
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })

	// scale in: node 2 leaves the descriptor and stops
	in := e.In
	in.Nodes = in.Nodes[:2]
	b, _ := json.Marshal(in)
	desc, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
	require.NoError(t, err)
	desc.Data[contract.KeyInstance] = string(b)
	_, err = e.CS.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, e.CS.CoreV1().Pods(ns).Delete(ctx, "vk-2-0", metav1.DeleteOptions{}))
	removed := e.Top.Nodes[2]
	removed.Kill()

	var events []string
	valkeytest.Eventually(t, 60*time.Second, 300*time.Millisecond, "no Sentinel lists the removed replica", func() error {
		events = append(events, testenv.DrainEvents(e.Rec, "")...)
		for _, s := range e.Top.Sentinels {
			reps, err := s.Client(e.Top.SentinelOptions()).SentinelReplicas(ctx, e.In.MonitorName)
			if err != nil {
				return err
			}
			if len(reps) != 1 {
				return fmt.Errorf("%s lists %d replicas", s.Addr(), len(reps))
			}
			for _, r := range reps {
				if r.Port == removed.Port || r.HasFlag("s_down") {
					return fmt.Errorf("%s still lists %s:%d %v", s.Addr(), r.Host, r.Port, r.Flags)
				}
			}
		}
		return nil
	})
	e.Top.WaitSentinelsConverged(30*time.Second, 1, 2)
	events = append(events, testenv.DrainEvents(e.Rec, "")...)
	assert.Len(t, eventsWith(events, "SentinelReset"), 3, "one RESET per Sentinel: %v", events)
	time.Sleep(3 * time.Second) // steady state: a few more passes
	assert.Empty(t, testenv.DrainEvents(e.Rec, "SentinelReset"), "no RESET in steady state")
	return events
}
