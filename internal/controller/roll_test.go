package controller

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vk "github.com/valkey-io/valkey-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/valkey-ha/valkey-ha/internal/acl"
	"github.com/valkey-ha/valkey-ha/internal/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testenv"
	"github.com/valkey-ha/valkey-ha/internal/valkey"
	"github.com/valkey-ha/valkey-ha/internal/valkeytest"
)

// writer is a Sentinel-aware client (valkey-go's Sentinel mode) that SETs an increasing counter every 10 ms
// and records what was acknowledged and how long writes failed.
type writer struct {
	mu        sync.Mutex
	acked     int64
	ackedKeys []string
	failures  int
	failStart time.Time
	longest   time.Duration
	stop      chan struct{}
	done      chan struct{}
}

const counterKey = "__valkey-ha:counter"

func startWriter(t *testing.T, top *valkeytest.Topology) *writer {
	var addrs []string
	for _, s := range top.Sentinels {
		addrs = append(addrs, s.Addr())
	}
	c, err := vk.NewClient(vk.ClientOption{InitAddress: addrs, Sentinel: vk.SentinelOption{MasterSet: top.Cfg.MonitorName},
		Username: acl.Operator, Password: top.Passwords[acl.Operator], DisableCache: true, ClientSetInfo: vk.DisableClientSetInfo,
		ConnWriteTimeout: 2 * time.Second})
	require.NoError(t, err)
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer c.Close()
		for n := int64(1); ; n++ {
			select {
			case <-w.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			key := counterKey + ":" + strconv.FormatInt(n, 10)
			err := c.Do(ctx, c.B().Set().Key(key).Value("1").Build()).Error()
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked = n
				w.ackedKeys = append(w.ackedKeys, key)
				if !w.failStart.IsZero() {
					if d := time.Since(w.failStart); d > w.longest {
						w.longest = d
					}
					w.failStart = time.Time{}
				}
			} else {
				w.failures++
				if w.failStart.IsZero() {
					w.failStart = time.Now()
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *writer) finish() (acked []string, failures int, longest time.Duration) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ackedKeys, w.failures, w.longest
}

// lost returns the acknowledged keys the node does not have.
func lost(t *testing.T, c *valkey.Client, keys []string) []string {
	var missing []string
	for _, k := range keys {
		v, err := c.Do(context.Background(), "GET", k)
		if err != nil && !valkey.IsNil(err) {
			t.Fatalf("GET %s: %v", k, err)
		}
		if v != "1" {
			missing = append(missing, k)
		}
	}
	return missing
}

// kubelet stands in for the kubelet and the StatefulSet controller: when the controller deletes a pod, it
// stops the process (SIGTERM), recreates the pod at the update revision and starts the process again with
// fresh(cfg) (nil keeps the rewritten config).
type kubelet struct {
	mu      sync.Mutex
	deleted []string
}

func runKubelet(t *testing.T, e *env, procs map[string]*valkeytest.Proc, rev string, fresh func(pod string, p *valkeytest.Proc)) *kubelet {
	k := &kubelet{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := e.cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Deleted {
				continue
			}
			pod := ev.Object.(*corev1.Pod)
			p, ok := procs[pod.Name]
			if !ok {
				continue
			}
			k.mu.Lock()
			k.deleted = append(k.deleted, pod.Name)
			k.mu.Unlock()
			p.Stop()
			if fresh != nil {
				fresh(pod.Name, p)
			}
			p.Start()
			np := pod.DeepCopy()
			np.ResourceVersion, np.UID = "", ""
			np.Labels[revisionLabel] = rev
			_, _ = e.cs.CoreV1().Pods(ns).Create(ctx, np, metav1.CreateOptions{})
		}
	}()
	return k
}

func (k *kubelet) order() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string{}, k.deleted...)
}

func markStale(t *testing.T, e *env, sts []string, pods []string, extra map[string]string) {
	ctx := context.Background()
	for _, name := range sts {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: partOf(extra)},
			Status: appsv1.StatefulSetStatus{UpdateRevision: "r2", CurrentRevision: "r1"}}
		_, err := e.cs.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range pods {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			p = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: partOf(extra)},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
			p.Labels[revisionLabel] = "r1"
			_, err = e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
			continue
		}
		p.Labels[revisionLabel] = "r1"
		_, err = e.cs.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

func (e *env) allAtRevision(pods []string, rev string) error {
	for _, name := range pods {
		p, err := e.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels[revisionLabel] != rev {
			return fmt.Errorf("%s at %q", name, p.Labels[revisionLabel])
		}
	}
	return nil
}

// TestPlannedDataRollLosesNoAckedWrite: a full roll of 1 primary + 2 replicas under a Sentinel-aware writer:
// replicas first, the primary handed over with SENTINEL FAILOVER (writes paused until the replicas caught up)
// and replaced last; no acknowledged write is lost.
func TestPlannedDataRollLosesNoAckedWrite(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	e.publishSentinels()
	pods := []string{"vk-0-0", "vk-1-0", "vk-2-0"}
	markStale(t, e, []string{"vk-0", "vk-1", "vk-2"}, pods, map[string]string{contract.LabelInstance: "vk"})
	procs := map[string]*valkeytest.Proc{}
	for i, p := range pods {
		procs[p] = e.top.Nodes[i]
	}
	k := runKubelet(t, e, procs, "r2", nil)
	w := startWriter(t, e.top)
	time.Sleep(300 * time.Millisecond) // the writer has found the primary
	start := time.Now()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	valkeytest.Eventually(t, 90*time.Second, 200*time.Millisecond, "every pod rolled", func() error { return e.allAtRevision(pods, "r2") })
	e.top.WaitReplicationUp(30 * time.Second)
	rollTime := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	acked, failures, longest := w.finish()

	newPrimary := e.checkPrimaryRolledLast(t, k)
	require.NotEmpty(t, acked)
	missing := lost(t, e.top.NodeByPort(newPrimary).Client(e.top.Options(acl.Operator)), acked)
	assert.Empty(t, missing, "every acknowledged write survives the roll (%d of %d lost)", len(missing), len(acked))
	t.Logf("planned roll of 3 nodes: %s; writes acked %d, failed %d, longest error window %s", rollTime.Round(time.Millisecond), len(acked), failures, longest.Round(time.Millisecond))
}

// TestPlannedRollWaitsForAHalfAppliedUpgrade: Helm updates the per-node StatefulSets one by one; while only
// the primary's carries the new release revision (its pod is the only stale one) the controller neither
// hands the primary off nor replaces anything. Once every StatefulSet carries the new revision the roll runs
// replicas first and hands the primary off exactly once.
func TestPlannedRollWaitsForAHalfAppliedUpgrade(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{DownAfterMs: 5000, FailoverTimeoutMs: 15000})
	e.publishSentinels()
	pods := []string{"vk-0-0", "vk-1-0", "vk-2-0"}
	stss := []string{"vk-0", "vk-1", "vk-2"}
	markStale(t, e, stss, pods, map[string]string{contract.LabelInstance: "vk"})
	ctx := context.Background()
	setSTS := func(name, releaseRev, updateRev string) {
		s, err := e.cs.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		s.Annotations = map[string]string{contract.AnnotationReleaseRevision: releaseRev}
		s.Status.UpdateRevision = updateRev
		_, err = e.cs.AppsV1().StatefulSets(ns).Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	// Helm got as far as the primary's StatefulSet: only vk-0 is at revision 3 with a new update revision.
	setSTS("vk-0", "3", "r2")
	setSTS("vk-1", "2", "r1")
	setSTS("vk-2", "2", "r1")
	procs := map[string]*valkeytest.Proc{}
	for i, p := range pods {
		procs[p] = e.top.Nodes[i]
	}
	k := runKubelet(t, e, procs, "r2", nil)
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "the roll waits for the upgrade to be applied", func() error {
		doc := e.statusDoc()
		if doc == nil || doc["roll"] != "the StatefulSets carry release revisions 2, 3: an upgrade is being applied" {
			return fmt.Errorf("roll: %v (last %v)", doc["roll"], doc["lastAction"])
		}
		return nil
	})
	// several more passes: still nothing (the status is rewritten every pass)
	time.Sleep(2 * time.Second)
	assert.Empty(t, k.order(), "no pod replaced while the upgrade is half applied")
	p, err := e.top.SentinelPrimary()
	require.NoError(t, err)
	require.Equal(t, e.top.Nodes[0].Port, p, "no handoff while the upgrade is half applied")

	setSTS("vk-1", "3", "r2")
	setSTS("vk-2", "3", "r2")
	valkeytest.Eventually(t, 90*time.Second, 200*time.Millisecond, "every pod rolled", func() error { return e.allAtRevision(pods, "r2") })
	e.checkPrimaryRolledLast(t, k)
}

// checkPrimaryRolledLast asserts the end of a full roll of vk-0-0 (the primary), vk-1-0 and vk-2-0: the
// primary's pod was replaced last, after exactly one failover moved the primary elsewhere. It returns the
// new primary's port.
func (e *env) checkPrimaryRolledLast(t *testing.T, k *kubelet) int {
	t.Helper()
	order := k.order()
	require.Len(t, order, 3)
	assert.Equal(t, "vk-0-0", order[2], "the primary is replaced last (order %v)", order)
	newPrimary, err := e.top.SentinelPrimary()
	require.NoError(t, err)
	assert.NotEqual(t, e.top.Nodes[0].Port, newPrimary, "the primary was handed over before its replacement")
	assert.Equal(t, 1, e.failovers(t), "exactly one failover for the whole roll")
	return newPrimary
}

// failovers returns the monitor's config-epoch as the first Sentinel reports it (SENTINEL MASTER): it starts
// at 0 and each failover increments it once.
func (e *env) failovers(t *testing.T) int {
	t.Helper()
	v, err := e.top.Sentinels[0].Client(valkey.Options{}).Do(context.Background(), "SENTINEL", "MASTER", e.in.MonitorName)
	require.NoError(t, err)
	m, err := valkey.PairsToMap(v)
	require.NoError(t, err)
	n, err := strconv.Atoi(m["config-epoch"])
	require.NoError(t, err, "config-epoch %q", m["config-epoch"])
	return n
}

// TestPlannedRollDeferredWithoutQuorum: the primary is the only stale node, but only one of three Sentinels
// is up, so CKQUORUM fails: the handoff is never attempted and the primary stays in place.
func TestPlannedRollDeferredWithoutQuorum(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Replicas: 1})
	e.publishSentinels()
	markStale(t, e, []string{"vk-0"}, []string{"vk-0-0"}, map[string]string{contract.LabelInstance: "vk"})
	e.top.Sentinels[1].Kill()
	e.top.Sentinels[2].Kill()
	survivor := e.top.Sentinels[0].Client(valkey.Options{})
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "the survivor notices it is alone", func() error {
		q, err := survivor.SentinelCKQuorum(context.Background(), e.in.MonitorName)
		if err == nil && q.OK {
			err = fmt.Errorf("still %s", q.Message)
		}
		return err
	})
	e.startInstanceController(InstanceOptions{Resync: 200 * time.Millisecond})
	valkeytest.Eventually(t, 10*time.Second, 200*time.Millisecond, "roll waits for quorum", func() error {
		doc := e.statusDoc()
		if doc == nil || doc["roll"] != "SENTINEL CKQUORUM fails: no handoff without a quorum" {
			return fmt.Errorf("roll: %v (held %v, last %v)", doc["roll"], doc["held"], doc["lastAction"])
		}
		return nil
	})
	p, err := e.cs.CoreV1().Pods(ns).Get(context.Background(), "vk-0-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "r1", p.Labels[revisionLabel], "the primary's pod was not replaced")
	r, err := e.top.Replication(e.top.Nodes[0])
	require.NoError(t, err)
	assert.Equal(t, valkey.RolePrimary, r.Role, "no failover was forced")
}

func stableMyID(pod string) string {
	sum := sha1.Sum([]byte(ns + "/" + pod))
	return hex.EncodeToString(sum[:])
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
	for i, s := range e.top.Sentinels {
		s.Kill()
		require.NoError(t, writeFile(s.ConfPath, s.Config()+"sentinel myid "+stableMyID(fmt.Sprintf("q-%d", i))+"\n"))
		s.Start()
	}
	sentinelPods := []string{"q-0", "q-1", "q-2"}
	markStale(t, e, []string{"q"}, sentinelPods, map[string]string{contract.LabelSentinel: "q"})
	procs := map[string]*valkeytest.Proc{}
	for i, p := range sentinelPods {
		procs[p] = e.top.Sentinels[i]
	}
	dataUIDs := map[string]string{}
	for _, n := range e.in.Nodes {
		p, _ := e.cs.CoreV1().Pods(ns).Get(ctx, n.Pod, metav1.GetOptions{})
		dataUIDs[n.Pod] = string(p.UID)
	}
	k := runKubelet(t, e, procs, "r2", func(pod string, p *valkeytest.Proc) {
		cfg := "port " + strconv.Itoa(p.Port) + "\nbind 127.0.0.1 -::1\ndir " + p.Dir + "\nsentinel resolve-hostnames yes\n" +
			"sentinel announce-hostnames yes\nsentinel announce-ip localhost\nsentinel myid " + stableMyID(pod) + "\n"
		_ = writeFile(p.ConfPath, cfg)
	})

	var mu sync.Mutex
	var noQuorum []string
	stopSampling := valkeytest.Sample(200*time.Millisecond, func() {
		ok := 0
		var msgs []string
		for _, s := range e.top.Sentinels {
			c, err := valkey.Dial(ctx, s.Addr(), valkey.Options{DialTimeout: 200 * time.Millisecond})
			if err != nil {
				msgs = append(msgs, s.Addr()+": down")
				continue // the Sentinel being replaced
			}
			q, err := c.SentinelCKQuorum(ctx, e.in.MonitorName)
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
	testenv.PublishQuorum(t, e.cs, ns, "q", e.sentinelAddrs(), false)
	c := NewSentinelController(e.cs, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.rec, quietLog())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	valkeytest.Eventually(t, 120*time.Second, 200*time.Millisecond, "every Sentinel rolled", func() error { return e.allAtRevision(sentinelPods, "r2") })
	e.top.WaitSentinelsConverged(30*time.Second, 2, 2)
	stopSampling()
	assert.Equal(t, []string{"q-0", "q-1", "q-2"}, k.order(), "one at a time, in order")
	assert.Empty(t, noQuorum, "a majority of Sentinels reported CKQUORUM OK at every sample")
	for _, n := range e.in.Nodes {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, n.Pod, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, dataUIDs[n.Pod], string(p.UID), "data pod %s untouched by a Sentinel roll", n.Pod)
	}
	// failover still works after the roll
	e.top.Nodes[0].Kill()
	e.top.WaitPrimaryMoved(e.top.Nodes[0].Port, 30*time.Second)
}

// TestCaseS03ScaleInResetsOneSentinelAtATime: after a node is removed from the instance, every Sentinel stops
// listing it, through SENTINEL RESET issued on one Sentinel at a time (each after the previous one has
// rediscovered its peers and replicas), and never in steady state afterwards.
func TestCaseS03ScaleInResetsOneSentinelAtATime(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	e.publishSentinels()
	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	ctx := context.Background()
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.labelsMatch(e.top.Nodes[0].Port) })

	// scale in: node 2 leaves the descriptor and stops
	in := e.in
	in.Nodes = in.Nodes[:2]
	b, _ := json.Marshal(in)
	desc, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "vk-instance", metav1.GetOptions{})
	require.NoError(t, err)
	desc.Data[contract.KeyInstance] = string(b)
	_, err = e.cs.CoreV1().ConfigMaps(ns).Update(ctx, desc, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, e.cs.CoreV1().Pods(ns).Delete(ctx, "vk-2-0", metav1.DeleteOptions{}))
	removed := e.top.Nodes[2]
	removed.Kill()

	valkeytest.Eventually(t, 60*time.Second, 300*time.Millisecond, "no Sentinel lists the removed replica", func() error {
		for _, s := range e.top.Sentinels {
			reps, err := s.Client(valkey.Options{}).SentinelReplicas(ctx, e.in.MonitorName)
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
	e.top.WaitSentinelsConverged(30*time.Second, 1, 2)
	resets := drainEvents(e.rec, "SentinelReset")
	assert.Len(t, resets, 3, "one RESET per Sentinel: %v", resets)
	time.Sleep(3 * time.Second) // steady state: a few more passes
	assert.Empty(t, drainEvents(e.rec, "SentinelReset"), "no RESET in steady state")
}
