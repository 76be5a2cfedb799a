package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// TestInstanceMetricsFollowTheTopology: the gauges the PrometheusRule alerts on (primaries, reachable
// nodes, replica links and lag) follow real valkey processes pass by pass: a paused replica leaves the
// reachable count and loses its link series, a replica turned primary makes two primaries, an instance no
// quorum monitors says so (valkey_ha_instance_monitored 0), and a deleted instance releases every series.
func TestInstanceMetricsFollowTheTopology(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{Sentinels: 0})
	m := metrics.New()
	c := NewInstanceController(e.CS, InstanceOptions{Namespace: ns, Instance: "vk"}, m, e.Rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.cache.Start(ctx)
	require.True(t, c.cache.WaitForSync(ctx))
	const inst = ns + "/vk"
	pass := func() {
		t.Helper()
		_, err := c.Reconcile(ctx, types.NamespacedName{Namespace: ns, Name: "vk"})
		require.NoError(t, err)
	}
	pass()
	assert.Equal(t, 3.0, testutil.ToFloat64(m.InstanceNodes.WithLabelValues(inst)))
	assert.Equal(t, 3.0, testutil.ToFloat64(m.InstanceNodesReachable.WithLabelValues(inst)))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.InstancePrimaries.WithLabelValues(inst)))
	for _, pod := range []string{"vk-1-0", "vk-2-0"} {
		valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, pod+" link up", func() error {
			pass()
			if v := testutil.ToFloat64(m.ReplicaLinkUp.WithLabelValues(inst, pod)); v != 1 {
				return fmt.Errorf("valkey_ha_replica_link_up %v", v)
			}
			return nil
		})
		assert.GreaterOrEqual(t, testutil.ToFloat64(m.ReplicaLagBytes.WithLabelValues(inst, pod)), 0.0)
	}
	assert.Equal(t, 2, testutil.CollectAndCount(m.ReplicaLinkUp), "one link series per replica")
	assert.Equal(t, 0, testutil.CollectAndCount(m.InstanceQuorumOK), "no quorum series while not monitored")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.InstanceMonitored.WithLabelValues(inst)),
		"Sentinel failover but no quorum published the Sentinel info: monitored says 0 (ValkeyNotMonitored)")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.InstanceRollHeldSeconds.WithLabelValues(inst)))

	// a paused replica does not answer: one node less, and its link series goes
	e.Top.Nodes[2].Pause()
	pass()
	e.Top.Nodes[2].Resume()
	assert.Equal(t, 2.0, testutil.ToFloat64(m.InstanceNodesReachable.WithLabelValues(inst)))
	assert.Equal(t, 1, testutil.CollectAndCount(m.ReplicaLinkUp), "the paused replica's series is deleted")

	// a replica promoted behind the controller's back: the pass that sees it reports two primaries
	err := e.opClient(e.Top.Nodes[1]).PromoteToPrimary(ctx)
	require.NoError(t, err)
	pass()
	assert.Equal(t, 2.0, testutil.ToFloat64(m.InstancePrimaries.WithLabelValues(inst)), "two primaries observed")

	// the instance goes: every series of it goes
	require.NoError(t, e.CS.CoreV1().ConfigMaps(ns).Delete(ctx, "vk-instance", metav1.DeleteOptions{}))
	valkeytest.Eventually(t, 5*time.Second, 20*time.Millisecond, "series released", func() error {
		if _, err := c.Reconcile(ctx, types.NamespacedName{Namespace: ns, Name: "vk"}); err != nil {
			return err
		}
		n := testutil.CollectAndCount(m.InstanceNodes) + testutil.CollectAndCount(m.InstancePrimaries) +
			testutil.CollectAndCount(m.ReplicaLinkUp) + testutil.CollectAndCount(m.ReplicaLagBytes)
		if n != 0 {
			return fmt.Errorf("%d series left", n)
		}
		return nil
	})
}

// TestSentinelMetricsFollowTheQuorum: the sentinel controller's gauges count the Sentinels that know each
// monitor and CKQUORUM's verdict, stamp each successful pass, and drop when a Sentinel dies.
func TestSentinelMetricsFollowTheQuorum(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, Replicas: 1})
	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	m := metrics.New()
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 200 * time.Millisecond}, m, e.Rec, quietLog())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	const q = ns + "/q"
	mon := e.In.MonitorName
	valkeytest.Eventually(t, 30*time.Second, 100*time.Millisecond, "monitor on every Sentinel, quorum OK", func() error {
		if r := testutil.ToFloat64(m.MonitorRegistered.WithLabelValues(q, mon)); r != 3 {
			return fmt.Errorf("registered on %v Sentinels", r)
		}
		if ok := testutil.ToFloat64(m.MonitorQuorumOK.WithLabelValues(q, mon)); ok != 1 {
			return fmt.Errorf("quorum_ok %v", ok)
		}
		return nil
	})
	assert.Equal(t, 3.0, testutil.ToFloat64(m.Sentinels.WithLabelValues(q)))
	for i := 0; i < 3; i++ {
		assert.Equal(t, 1.0, testutil.ToFloat64(m.SentinelReachable.WithLabelValues(q, fmt.Sprintf("q-%d", i))))
	}
	stamp := testutil.ToFloat64(m.LastReconcileSuccess.WithLabelValues("sentinel", q))
	assert.InDelta(t, float64(time.Now().Unix()), stamp, 30, "last success is a recent Unix time")

	e.Top.Sentinels[2].Kill()
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "a dead Sentinel counts", func() error {
		if v := testutil.ToFloat64(m.SentinelReachable.WithLabelValues(q, "q-2")); v != 0 {
			return fmt.Errorf("q-2 reachable %v", v)
		}
		if r := testutil.ToFloat64(m.MonitorRegistered.WithLabelValues(q, mon)); r != 2 {
			return fmt.Errorf("registered on %v Sentinels", r)
		}
		if ok := testutil.ToFloat64(m.MonitorQuorumOK.WithLabelValues(q, mon)); ok != 0 {
			return fmt.Errorf("quorum_ok %v with a Sentinel down", ok)
		}
		return nil
	})
	valkeytest.Eventually(t, 5*time.Second, 50*time.Millisecond, "passes still succeed", func() error {
		if now := testutil.ToFloat64(m.LastReconcileSuccess.WithLabelValues("sentinel", q)); now <= stamp {
			return fmt.Errorf("no newer successful pass")
		}
		return nil
	})
}
