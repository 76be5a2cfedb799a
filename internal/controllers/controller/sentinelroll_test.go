package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// addSingleNodeInstance describes a second instance, name, to the controllers: one real valkey-server (a
// primary without replicas, sharing the first instance's system passwords), its pod, descriptor (selected by
// tier=cache, Sentinel timings downAfterMs / failoverTimeoutMs) and _sentinel Secret. It returns the server.
func (e *env) addSingleNodeInstance(name string, downAfterMs, failoverTimeoutMs int) *valkeytest.Proc {
	t, ctx := e.T, context.Background()
	aclPath := filepath.Join(t.TempDir(), "users.acl")
	require.NoError(t, writeFile(aclPath, valkeytest.RenderSystemACL(e.Top.Passwords)))
	p := valkeytest.StartServer(t, e.Top.Cfg.Engine, valkeytest.ServerConfig{Lines: []string{"aclfile " + aclPath}})
	in := e.In
	in.Name, in.Release, in.MonitorName = name, name, name
	in.PodSelector = map[string]string{contract.LabelInstance: name}
	in.SentinelConfig = map[string]string{"down-after-milliseconds": strconv.Itoa(downAfterMs), "failover-timeout": strconv.Itoa(failoverTimeoutMs)}
	in.SentinelAuth.SecretName = name + "-sentinel-auth"
	in.ACLSecret = name + "-acl" // the chart's canonical name (spec.Instance.CheckCanonical)
	in.Nodes = []spec.Node{{Index: 0, Pod: name + "-0-0", StatefulSet: name + "-0", Host: valkeytest.Host, Port: p.Port}}
	require.NoError(t, in.Validate())
	b, _ := json.Marshal(in)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-instance", Namespace: ns,
			Labels: testenv.PartOf(map[string]string{contract.LabelComponent: contract.ComponentInstance, "tier": "cache"})},
		Data: map[string]string{contract.KeyInstance: string(b)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.CS.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-sentinel-auth", Namespace: ns},
		Data: map[string][]byte{"password": []byte(e.Top.Passwords[acl.Sentinel])}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.CS.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-0-0", Namespace: ns, Labels: testenv.PartOf(map[string]string{contract.LabelInstance: name})},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return p
}

// TestSentinelRollPassesAPermanentlyDownInstance (issue 12): one quorum monitors two instances; the primary of
// the second one (a single node, no replica to fail over to) is dead for good. Every Sentinel pod is stale.
// The roll must not wait for the dead instance: it replaces the three Sentinels one at a time (each comes
// back empty with its stable myid and gets both monitors again), still gated on the healthy instance's
// CKQUORUM, and reports the dead monitor as not waited for. The healthy instance still fails over afterwards.
func TestSentinelRollPassesAPermanentlyDownInstance(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{})
	ctx := context.Background()
	testenv.RestartWithStableIDs(t, e.Top, ns, "q")
	const failoverTimeout = 3 * time.Second
	dead := e.addSingleNodeInstance("vd", 1000, int(failoverTimeout/time.Millisecond))

	sentinelPods := []string{"q-0", "q-1", "q-2"}
	sel, _ := labels.Parse("tier=cache")
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	c := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond}, metrics.New(), e.Rec, quietLog())
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(cctx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "both instances registered on every Sentinel, which see their peers", func() error {
		for _, s := range e.Top.Sentinels {
			for _, name := range []string{"vk", "vd"} {
				m, found, err := s.Client(valkey.Options{}).SentinelMaster(ctx, name)
				if err != nil || !found || m.NumOtherSentinels != 2 {
					return fmt.Errorf("%s: %s found %v, %d peers (%v)", s.Addr(), name, found, m.NumOtherSentinels, err)
				}
			}
		}
		return nil
	})

	// the second instance dies for good, and stays down longer than its failover-timeout
	dead.Kill()
	valkeytest.Eventually(t, 20*time.Second, 200*time.Millisecond, "vd is o_down on every Sentinel", func() error {
		for _, s := range e.Top.Sentinels {
			m, _, err := s.Client(valkey.Options{}).SentinelMaster(ctx, "vd")
			if err != nil {
				return err
			}
			if !m.ObjectivelyDown() {
				return fmt.Errorf("%s: vd flags %v", s.Addr(), m.Flags)
			}
		}
		return nil
	})

	e.MarkStale([]string{"q"}, sentinelPods, map[string]string{contract.LabelSentinel: "q"})
	procs := map[string]*valkeytest.Proc{}
	for i, p := range sentinelPods {
		procs[p] = e.Top.Sentinels[i]
	}
	k := e.RunKubelet(procs, "r2", func(pod string, p *valkeytest.Proc) {
		cfg := "port " + strconv.Itoa(p.Port) + "\nbind 127.0.0.1 -::1\ndir " + p.Dir + "\nsentinel resolve-hostnames yes\n" +
			"sentinel announce-hostnames yes\nsentinel announce-ip localhost\nsentinel myid " + testenv.StableMyID(ns, pod) + "\n"
		_ = writeFile(p.ConfPath, cfg)
	})
	var lastRoll string
	deadline := time.Now().Add(120 * time.Second)
	for e.AllAtRevision(sentinelPods, "r2") != nil && time.Now().Before(deadline) {
		if cm, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "q-status", metav1.GetOptions{}); err == nil {
			var st struct {
				Roll string `json:"roll"`
			}
			_ = json.Unmarshal([]byte(cm.Data[contract.KeyStatus]), &st)
			if st.Roll != "" {
				lastRoll = st.Roll
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("replaced %v; last roll status %q", k.Order(), lastRoll)
	require.NoError(t, e.AllAtRevision(sentinelPods, "r2"), "every Sentinel rolled despite the dead instance (last roll status %q)", lastRoll)
	assert.Equal(t, sentinelPods, k.Order(), "one at a time, in order")
	assert.True(t, strings.Contains(lastRoll, "vd"), "the dead monitor is reported: %q", lastRoll)
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	e.Top.Nodes[0].Kill()
	e.Top.WaitPrimaryMoved(e.Top.Nodes[0].Port, 30*time.Second)
}
