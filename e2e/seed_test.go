//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReplacedSentinelHoldsTheNextEvictionControllersOff (issue 24, 2): with every controller at zero, a
// Sentinel pod is deleted and comes back empty (emptyDir). It runs and answers, but holds no monitor, so its
// readiness probe refuses it (the probe's reason is in the kubelet's Unhealthy Event) and the Eviction API
// refuses every other Sentinel (429 from the PodDisruptionBudget): a drain cannot take a second Sentinel's
// monitors away. The primary's server is then SIGKILLed: the two Sentinels that know it elect a new primary
// within down-after + failover-timeout. Once the controllers are back, the sentinel controller registers the
// monitor on the unready Sentinel, it turns ready and the next eviction is allowed again (dry run).
func TestReplacedSentinelHoldsTheNextEvictionControllersOff(t *testing.T) {
	maybeParallel(t)
	d := Deploy(t, "seed", DeployOpts{})
	in := d.I()
	ctx := t.Context()
	old, err := in.SentinelPrimary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.ScaleControllers(t, 0)

	const victim = 0
	since := time.Now()
	uid := DeletePod(t, d.NS, d.SentinelPod(victim), nil)
	Eventually(t, 2*time.Minute, time.Second, "the replaced Sentinel runs and holds no monitor", func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(d.NS).Get(ctx, d.SentinelPod(victim), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if string(p.UID) == uid || p.DeletionTimestamp != nil {
			return false, fmt.Errorf("not replaced yet")
		}
		out, err := d.Sentinel(ctx, victim, "info", "sentinel")
		if err != nil {
			return false, err
		}
		if !strings.Contains(out, "sentinel_masters:0") {
			return false, fmt.Errorf("unexpected: %s", out)
		}
		return true, nil
	})
	Eventually(t, time.Minute, time.Second, "its readiness probe refuses it, saying why", func(ctx context.Context) (bool, error) {
		evs, err := FindEvents(ctx, d.NS, "Unhealthy", "")
		if err != nil {
			return false, err
		}
		for _, e := range evs {
			if e.InvolvedObject.Name == d.SentinelPod(victim) && strings.Contains(e.Message, "lacks 1 monitor(s) its peers hold") &&
				(e.LastTimestamp.After(since) || e.EventTime.After(since)) {
				t.Logf("probe: %s", e.Message)
				return true, nil
			}
		}
		return false, fmt.Errorf("no Unhealthy event naming the missing monitor yet")
	})
	p, err := kube.CoreV1().Pods(d.NS).Get(ctx, d.SentinelPod(victim), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if PodReady(p) {
		t.Fatalf("%s is Ready while it holds no monitor", p.Name)
	}
	for j := range 3 {
		if j == victim {
			continue
		}
		err := EvictPod(ctx, d.NS, d.SentinelPod(j))
		t.Logf("evicting %s while %s is empty: %v", d.SentinelPod(j), d.SentinelPod(victim), err)
		if !apierrors.IsTooManyRequests(err) {
			t.Errorf("evicting %s was not refused by the PodDisruptionBudget (429): %v", d.SentinelPod(j), err)
		}
	}

	killed := CrashContainer(t, d.NS, in.Pod(old), "valkey")
	bound := downAfter + failoverTimeout
	newPrimary := -1
	Eventually(t, bound+15*time.Second, 250*time.Millisecond, "a new primary (controllers off, one Sentinel empty)", func(ctx context.Context) (bool, error) {
		for i := range in.Nodes() {
			if i == old {
				continue
			}
			if r, err := in.ReplRole(ctx, i); err == nil && r.Role == "master" {
				newPrimary = i
				return true, nil
			}
		}
		return false, fmt.Errorf("no node reports master")
	})
	took := time.Since(killed)
	t.Logf("new primary %s %s after the kill (bound down-after + failover-timeout %s)", in.Pod(newPrimary), took.Round(100*time.Millisecond), bound)
	if took > bound {
		t.Errorf("new primary after %s, beyond down-after + failover-timeout (%s)", took.Round(100*time.Millisecond), bound)
	}

	d.ScaleControllers(t, 1)
	Eventually(t, 2*time.Minute, time.Second, "the replaced Sentinel is registered again and Ready", func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(d.NS).Get(ctx, d.SentinelPod(victim), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return PodReady(p), nil
	})
	Eventually(t, time.Minute, time.Second, "the next eviction is allowed again (dry run)", func(ctx context.Context) (bool, error) {
		err := kube.CoreV1().Pods(d.NS).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: d.SentinelPod(1), Namespace: d.NS},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
		return err == nil, err
	})
}
