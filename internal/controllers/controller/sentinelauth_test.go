package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// TestSentinelAuthControllers: with Sentinel auth on (the charts' default), the sentinel controller registers
// the monitor as _admin and the instance controller reads the quorum as _instance with the password of Secret
// q-auth-instance, which it gets by name. Before that Secret exists the Sentinels refuse the instance
// controller (SentinelQuorumHealthy is not True); once it exists the condition turns True and the role labels
// follow a failover; a rewritten q-sentinels that names another quorum gets no password (the condition falls
// back).
func TestSentinelAuthControllers(t *testing.T) {
	t.Parallel() // timer-bound: runs beside the other long tests (make unit time)
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, SentinelAuth: true})
	ctx := context.Background()
	e.In.SentinelRelease = "q"
	b, _ := json.Marshal(e.In)
	e.Desc.Data[contract.KeyInstance] = string(b)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Update(ctx, e.Desc, metav1.UpdateOptions{})
	require.NoError(t, err)

	sel, err := labels.Parse("tier=cache")
	require.NoError(t, err)
	testenv.PublishQuorum(t, e.CS, ns, "q", testenv.SentinelAddrs(e.Top), false)
	sc := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: "q",
		Selector: sel, Resync: 300 * time.Millisecond,
		AuthPassword: e.Top.SentinelPasswords[acl.SentinelAdmin]}, metrics.New(), e.Rec, quietLog())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = sc.Run(runCtx, nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.Top.WaitSentinelsConverged(30*time.Second, 2, 2)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "sentinel info published", func() error {
		_, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
		return err
	})

	e.startInstanceController(InstanceOptions{Resync: 300 * time.Millisecond})
	healthy := func(want string) func() error {
		return func() error {
			if got := e.Condition(status.SentinelQuorumHealthy); got != want {
				return fmt.Errorf("%s is %q, want %q", status.SentinelQuorumHealthy, got, want)
			}
			return nil
		}
	}
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "no quorum credential: refused", healthy(string(status.False)))

	_, err = e.CS.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "q-auth-instance", Namespace: ns},
		Data: map[string][]byte{"username": []byte(acl.SentinelInstance), "password": []byte(e.Top.SentinelPasswords[acl.SentinelInstance])}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "credential read: quorum healthy", healthy(string(status.True)))
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels", func() error { return e.LabelsMatch(e.Top.Nodes[0].Port) })

	require.NoError(t, e.Top.Sentinels[0].Client(e.Top.SentinelOptionsAs(acl.SentinelInstance)).SentinelFailover(ctx, e.In.MonitorName))
	moved := e.Top.WaitPrimaryMoved(e.Top.Nodes[0].Port, 30*time.Second)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "labels follow the failover", func() error { return e.LabelsMatch(moved) })

	// someone who may write ConfigMaps points q-sentinels at another quorum: no password is sent any more
	cancel()
	<-done // the sentinel controller would rewrite it
	cm, err := e.CS.CoreV1().ConfigMaps(ns).Get(ctx, "vk-sentinels", metav1.GetOptions{})
	require.NoError(t, err)
	si, err := spec.ParseSentinelInfo([]byte(cm.Data[contract.KeySentinels]))
	require.NoError(t, err)
	si.SentinelRelease = "other"
	nb, _ := json.Marshal(si)
	cm.Data[contract.KeySentinels] = string(nb)
	_, err = e.CS.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "another quorum's sentinels.json: no credential", healthy(string(status.False)))
	m, found, err := e.Top.Sentinels[0].Client(e.Top.SentinelOptions()).SentinelMaster(ctx, e.In.MonitorName)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, moved, m.Port, "nothing else changed")
}
