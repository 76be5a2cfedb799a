package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/status"
	"github.com/valkey-ha/valkey-ha/internal/controllers/metrics"
	"github.com/valkey-ha/valkey-ha/internal/planners/plan"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// updateDescriptor writes e.In back into the descriptor (as a helm upgrade of the instance would).
func (e *env) updateDescriptor(t *testing.T) {
	t.Helper()
	b, _ := json.Marshal(e.In)
	e.Desc.Data[contract.KeyInstance] = string(b)
	_, err := e.CS.CoreV1().ConfigMaps(ns).Update(context.Background(), e.Desc, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// conditionOf returns "Reason: message" of condition typ in the instance status ("" while none).
func (e *env) conditionOf(typ string) string {
	conds, _ := e.StatusDoc()["conditions"].([]any)
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return fmt.Sprintf("%v: %v", m["reason"], m["message"])
		}
	}
	return ""
}

// waitEvent polls the recorder until an Event of reason arrives whose message contains every string of says.
func waitEvent(t *testing.T, e *env, reason string, says ...string) string {
	t.Helper()
	var got []string
	var match string
	valkeytest.Eventually(t, 20*time.Second, 100*time.Millisecond, "Event "+reason, func() error {
		got = append(got, testenv.DrainEvents(e.Rec, reason)...)
		for _, ev := range got {
			ok := true
			for _, s := range says {
				ok = ok && strings.Contains(ev, s)
			}
			if ok {
				match = ev
				return nil
			}
		}
		return fmt.Errorf("events so far: %q", got)
	})
	return match
}

// TestInstanceNamingMissingQuorumIsReported: an instance whose sentinel.release names a quorum that does not
// exist gets a QuorumMissing Event and a Monitored condition naming the missing quorum (before:
// reason NoSentinelSelects naming nothing, and no Event); once the quorum document exists, that reason goes.
func TestInstanceNamingMissingQuorumIsReported(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, Replicas: 1})
	e.In.Release, e.In.SentinelRelease = "cache", "nosuch"
	e.updateDescriptor(t)
	e.startInstanceController(InstanceOptions{})

	ev := waitEvent(t, e, plan.ReasonQuorumMissing, "instance release cache", `"nosuch"`, "nosuch-quorum does not exist", "namespace "+ns)
	t.Logf("event: %s", ev)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "Monitored names the missing quorum", func() error {
		if c := e.conditionOf(status.Monitored); !strings.HasPrefix(c, plan.ReasonQuorumMissing+": ") || !strings.Contains(c, "nosuch-quorum") {
			return fmt.Errorf("Monitored: %s", c)
		}
		return nil
	})
	assert.Equal(t, status.False, e.Condition(status.Ready))

	testenv.PublishQuorum(t, e.CS, ns, "nosuch", testenv.SentinelAddrs(e.Top), false)
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "QuorumMissing gone once the quorum exists", func() error {
		if c := e.conditionOf(status.Monitored); strings.HasPrefix(c, plan.ReasonQuorumMissing) || c == "" {
			return fmt.Errorf("Monitored: %s", c)
		}
		return nil
	})
}

// TestCrossReleaseTLSMismatchNamesBothSides: instance TLS on, quorum plaintext. The sentinel controller refuses
// the monitor with an Event naming both releases and tls.enabled on each; the instance controller, which
// reads the quorum document, says the same in an Event and in its Monitored condition.
func TestCrossReleaseTLSMismatchNamesBothSides(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, Replicas: 1})
	e.In.Release, e.In.SentinelRelease, e.In.TLS.Enabled = "cache", testenv.SentinelRelease, true
	e.updateDescriptor(t)
	testenv.PublishQuorum(t, e.CS, ns, testenv.SentinelRelease, testenv.SentinelAddrs(e.Top), false)

	sel, _ := labels.Parse("tier=cache")
	sc := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: testenv.SentinelRelease, Selector: sel}, metrics.New(), e.Rec, quietLog())
	ctx := context.Background()
	require.NoError(t, startInformers(ctx, t, sc))
	_, err := sc.Reconcile(ctx, sc.key)
	require.NoError(t, err)
	both := []string{"instance release cache", "tls.enabled=true", "Sentinel release " + testenv.SentinelRelease + " (namespace " + ns + ") has tls.enabled=false"}
	t.Logf("sentinel side: %s", waitEvent(t, e, "MonitorRefused", both...))

	e.startInstanceController(InstanceOptions{})
	t.Logf("instance side: %s", waitEvent(t, e, plan.ReasonTLSMismatch, both...))
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "Monitored names both sides", func() error {
		c := e.conditionOf(status.Monitored)
		for _, s := range both {
			if !strings.Contains(c, s) {
				return fmt.Errorf("Monitored: %s", c)
			}
		}
		return nil
	})
}

// TestQuorumAboveSentinelsNamesBothSides: sentinel.quorum 5 on a quorum of 3 Sentinels. Both controllers send
// a QuorumAboveSentinels Event naming both releases and both fields; the status says it too.
func TestQuorumAboveSentinelsNamesBothSides(t *testing.T) {
	e := newEnv(t, valkeytest.TopologyConfig{SkipMonitor: true, Replicas: 1})
	e.In.Release, e.In.SentinelRelease, e.In.Quorum = "cache", testenv.SentinelRelease, 5
	e.updateDescriptor(t)
	testenv.PublishQuorum(t, e.CS, ns, testenv.SentinelRelease, testenv.SentinelAddrs(e.Top), false)

	sel, _ := labels.Parse("tier=cache")
	sc := NewSentinelController(e.CS, SentinelOptions{Namespace: ns, Release: testenv.SentinelRelease, Selector: sel}, metrics.New(), e.Rec, quietLog())
	ctx := context.Background()
	require.NoError(t, startInformers(ctx, t, sc))
	_, err := sc.Reconcile(ctx, sc.key)
	require.NoError(t, err)
	both := []string{"instance release cache", "sentinel.quorum 5", "Sentinel release " + testenv.SentinelRelease + " runs 3 Sentinels"}
	t.Logf("sentinel side: %s", waitEvent(t, e, plan.ReasonQuorumAboveSentinels, both...))

	e.startInstanceController(InstanceOptions{})
	t.Logf("instance side: %s", waitEvent(t, e, plan.ReasonQuorumAboveSentinels, both...))
	valkeytest.Eventually(t, 10*time.Second, 100*time.Millisecond, "SentinelQuorumHealthy names both sides", func() error {
		if c := e.conditionOf(status.SentinelQuorumHealthy); !strings.Contains(c, both[2]) {
			return fmt.Errorf("SentinelQuorumHealthy: %s", c)
		}
		return nil
	})
}
