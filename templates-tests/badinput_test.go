package templatestests

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/valkeytest"
)

// A topology spread constraint without labelSelector counts no pods (a nil selector matches nothing), so it
// would spread nothing: the charts give it the selector of the pods it is written for, and keep one that is set.
func TestSpreadConstraintsGetThePodsSelector(t *testing.T) {
	spread := `
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}
  - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {team: a}}}
controller:
  replicas: 2
  topologySpreadConstraints:
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
`
	check := func(what string, pod corev1.PodTemplateSpec, want int) {
		t.Helper()
		cs := pod.Spec.TopologySpreadConstraints
		require.Len(t, cs, want, what)
		sel, err := metav1.LabelSelectorAsSelector(cs[0].LabelSelector)
		require.NoError(t, err, what)
		assert.False(t, sel.Empty(), "%s: a selector that selects something", what)
		assert.True(t, sel.Matches(labels.Set(pod.Labels)), "%s: the filled-in selector %s matches the pods it spreads", what, sel)
		if want > 1 {
			assert.Equal(t, map[string]string{"team": "a"}, cs[1].LabelSelector.MatchLabels, "%s: a given selector is kept", what)
		}
	}
	objs := decode(t, mustRender(t, "valkey", spread))
	check("data pods", objs.get(t, "StatefulSet", valkeyF+"-0").(*appsv1.StatefulSet).Spec.Template, 2)
	check("instance controller", objs.get(t, "Deployment", valkeyF+"-controller").(*appsv1.Deployment).Spec.Template, 1)
	objs = decode(t, mustRender(t, "valkey-sentinel", spread))
	check("Sentinel pods", sentinelSTS(t, objs).Spec.Template, 2)
	check("sentinel controller", objs.get(t, "Deployment", sentinelRel+"-controller").(*appsv1.Deployment).Spec.Template, 1)
}

// The floor the valkey chart puts on sentinel.config.failover-timeout (1000 ms), against real Sentinels: at
// the floor a failover after the primary is killed completes; far below it (10 ms) Sentinel aborts its
// attempts ("-failover-abort-..."): the promotion is not seen within 10 ms. Measured on an idle loopback while
// choosing the floor: 10 ms aborted 28 of 28 tries in 40 s, 100 ms took 24 s, 500 ms 7.5 s, 1000-2000 ms
// 2.3-2.5 s; under load a 10 ms failover sometimes ends after several aborts, so only the aborts are asserted.
func TestSentinelFailoverTimeoutFloor(t *testing.T) {
	run := func(t *testing.T, failoverTimeoutMs int, wait time.Duration) (moved bool, aborts int) {
		top := valkeytest.StartTopology(t, valkeytest.TopologyConfig{Replicas: 1, DownAfterMs: 1000, FailoverTimeoutMs: failoverTimeoutMs})
		top.Nodes[0].Kill()
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			if p, err := top.SentinelPrimary(); err == nil && p != top.Nodes[0].Port {
				moved = true
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, s := range top.Sentinels {
			aborts += strings.Count(s.Logs(), "-failover-abort")
		}
		return moved, aborts
	}
	t.Run("at the floor", func(t *testing.T) {
		moved, _ := run(t, 1000, 15*time.Second)
		assert.True(t, moved, "failover-timeout 1000: a failover completes")
	})
	t.Run("far below", func(t *testing.T) {
		moved, aborts := run(t, 10, 12*time.Second)
		t.Logf("failover-timeout 10: %d aborted attempts, primary moved: %v", aborts, moved)
		assert.Positive(t, aborts, "failover-timeout 10: Sentinel aborts its attempts")
	})
}

// PriorityClasses are cluster-scoped, so the charts cannot look one up for a namespace-scoped user; the helm
// test pod runs with the pods' priority class instead, so a class that does not exist fails `helm test` at
// once with the API server's message (no PriorityClass with name ... was found).
func TestHelmTestPodRunsWithThePodsPriorityClass(t *testing.T) {
	for _, tc := range []struct{ chart, pod string }{{"valkey", valkeyF + "-test"}, {"valkey-sentinel", sentinelRel + "-test"}} {
		objs := decode(t, mustRender(t, tc.chart, "priorityClassName: ops-high"))
		assert.Equal(t, "ops-high", objs.get(t, "Pod", tc.pod).(*corev1.Pod).Spec.PriorityClassName, tc.chart)
		objs = decode(t, mustRender(t, tc.chart, ""))
		assert.Empty(t, objs.get(t, "Pod", tc.pod).(*corev1.Pod).Spec.PriorityClassName, tc.chart)
	}
}

// Without the sentinel controller nothing sends SENTINEL MONITOR: the release installs, and its NOTES say that
// the Sentinels then fail over nothing.
func TestSentinelNotesWarnWithoutController(t *testing.T) {
	notes := mustRender(t, "valkey-sentinel", "controller: {enabled: false}", renderOpts{withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.Contains(t, notes, "WARNING: controller.enabled is false: nothing registers monitors")
	notes = mustRender(t, "valkey-sentinel", "", renderOpts{withNotes: true})["valkey-sentinel/templates/NOTES.txt"]
	assert.NotContains(t, notes, "controller.enabled is false")
}
